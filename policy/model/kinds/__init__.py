"""The training-job kinds Dragonet runs, one module each: everything a kind differs in is its
``JobKind`` (``policy.model.jobs``), defined in its module with the functions it names.

To add a kind, write its module and list its ``JobKind`` in ``KINDS`` (and its CRD, chart
line and Metacontroller manifest: ``docs/architecture.md``, *To add X, touch Y*).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.model.jobs import JobKind
from policy.model.kinds.mxjob import MXJOB
from policy.model.kinds.pytorchjob import PYTORCHJOB
from policy.model.kinds.tfjob import TFJOB

# Every kind Dragonet runs: one queue for all.
KINDS: tuple[JobKind, ...] = (TFJOB, MXJOB, PYTORCHJOB)
BY_KIND: Mapping[str, JobKind] = {k.kind: k for k in KINDS}
# The names a job's main container has, whatever its kind: where pods of every kind are
# read together (the pool's view), the main container is the one named any of these.
MAIN_CONTAINERS: frozenset[str] = frozenset(k.container for k in KINDS)


def kind_of(obj: Mapping[str, Any]) -> JobKind | None:
    """The kind of a job object (by its ``apiVersion`` and ``kind``), or None for anything
    that is not one of ours."""
    name = obj.get("kind")
    kind = BY_KIND.get(name) if isinstance(name, str) else None
    return kind if kind is not None and obj.get("apiVersion") == kind.api_version else None


def kinds_text(conjunction: str = "or") -> str:
    """``TFJob, MXJob or PyTorchJob``: the kinds, for a message."""
    names = [k.kind for k in KINDS]
    return f"{', '.join(names[:-1])} {conjunction} {names[-1]}" if len(names) > 1 else names[0]


__all__ = [
    "BY_KIND",
    "KINDS",
    "MAIN_CONTAINERS",
    "MXJOB",
    "PYTORCHJOB",
    "TFJOB",
    "kind_of",
    "kinds_text",
]
