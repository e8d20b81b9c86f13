"""A pod's place in its job, in the two forms the code meets it.

``Slot``: the replica type as the job's spec names it and the index (``Worker``, 1): what
the plan, the Admission and the rendered pod use. ``SlotLabel``: the same pod as its
labels name it, the lower-case type label and the index (``worker``, 1): what an observed
pod says of itself. Two types, so one is never taken for the other (a job's ``slot``
turns a label into a slot).
"""

from __future__ import annotations

from typing import NamedTuple


class Slot(NamedTuple):
    """(replica type, index): ``Slot("Worker", 1)``."""

    rtype: str
    index: int


class SlotLabel(NamedTuple):
    """(replica-type label, index), as a pod's labels say: ``SlotLabel("worker", 1)``."""

    label: str
    index: int
