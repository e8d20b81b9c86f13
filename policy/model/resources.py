"""Resource vectors: every Kubernetes resource name, in exact integer milli-units.

Quantities are parsed with the official client's ``parse_quantity`` and stored as
integers of 1/1000 of the base unit (cpu in millicores, memory in milli-bytes), so
adding and comparing never loses precision and no resource name is special.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

# Every scheduled pod consumes one unit of a node's ``pods`` allocatable.
PODS = "pods"
# A host port (protocol/port) a pod takes: a node has one of each (policy.model.hostports).
HOST_PORT = "dragonet.io/host-port."
# Bookkeeping keys of fractional GPUs (policy.model.gpushare) that people need not read.
_UNSAID = (
    "dragonet.io/gpu-shared-pods",
    "dragonet.io/gpu-placed-pods",
    "dragonet.io/gpu-on.",
    "dragonet.io/gpu-memory-on.",
)


# Kubernetes keeps a quantity's milli-value in an int64; nothing real is negative or above.
_MAX_MILLI = 2**63 - 1


@lru_cache(maxsize=4096)
def to_milli(quantity: str | int | float) -> int:
    """Parse a Kubernetes quantity into integer milli-units, rounding up like the scheduler.
    A quantity no API server stores (negative, beyond int64) is a ValueError: it would make
    every sum and ratio over it meaningless (or overflow a float)."""
    # Imported here: the client package costs a third of a second, which a CLI that only
    # prints its help or an error must not pay.
    from kubernetes.utils.quantity import parse_quantity

    milli = math.ceil(parse_quantity(quantity) * 1000)
    if not 0 <= milli <= _MAX_MILLI:
        raise ValueError(f"quantity {quantity!r} is out of range")
    return milli


class Resources(Mapping[str, int]):
    """An immutable resource vector (name -> milli-units). Missing names are zero."""

    __slots__ = ("_h", "_v")
    plain = True  # no room beyond the vector (see ``holds``)

    def __init__(self, values: Mapping[str, int] | None = None) -> None:
        self._v: dict[str, int] = {k: v for k, v in (values or {}).items() if v}
        self._h: int | None = None

    @classmethod
    def parse(cls, quantities: Mapping[str, Any] | None) -> Resources:
        """Build from a Kubernetes ResourceList (``{"cpu": "500m", "memory": "1Gi"}``)."""
        return cls({name: to_milli(q) for name, q in (quantities or {}).items()})

    @classmethod
    def total(cls, vectors: Iterable[Resources]) -> Resources:
        acc: dict[str, int] = {}
        for vec in vectors:
            vec.add_to(acc)
        return cls(acc)

    def __getitem__(self, key: str) -> int:
        return self._v.get(key, 0)

    def __iter__(self):
        return iter(self._v)

    def __len__(self) -> int:
        return len(self._v)

    # Mapping's mixins go through ``__getitem__`` key by key; a plan reads vectors by the
    # million (a pool's attained service sums each job's GPUs every sync), so these read
    # the dict directly. The same answers: a missing name is 0, so ``get`` never falls back
    # to its default and ``in`` is always true, as Mapping's own would have it.
    def get(self, key: str, default: Any = None) -> int:  # type: ignore[override]
        return self._v.get(key, 0)

    def __contains__(self, key: object) -> bool:
        return True

    def items(self):  # type: ignore[override]
        return self._v.items()

    def keys(self):  # type: ignore[override]
        return self._v.keys()

    def values(self):  # type: ignore[override]
        return self._v.values()

    def __add__(self, other: Resources) -> Resources:
        return Resources.total((self, other))

    def __sub__(self, other: Resources) -> Resources:
        keys = self._v.keys() | other._v.keys()
        return Resources({k: self[k] - other[k] for k in keys})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resources) and self._v == other._v

    def __hash__(self) -> int:
        if self._h is None:
            self._h = hash(frozenset(self._v.items()))
        return self._h

    def __repr__(self) -> str:
        return f"Resources({self.describe()})"

    def fits_in(self, free: Resources) -> bool:
        """True if this request fits into ``free`` for every resource it asks for (and, on a
        KubeShare node, its fractional pods find devices: ``policy.model.gpushare``)."""
        room = free._v
        for k, v in self._v.items():
            if v > room.get(k, 0):
                return False
        return free.plain or free.holds(self)

    def holds(self, request: Resources) -> bool:
        """Room beyond the vector (a subclass's, e.g. GPU devices); a plain vector has none."""
        return True

    def add_to(self, totals: dict[str, int]) -> None:
        """Add this vector into ``totals`` in place (for sums over many pods)."""
        for k, v in self._v.items():
            totals[k] = totals.get(k, 0) + v

    def times_in(self, free: Resources) -> int:
        """How many of this request fit into ``free`` at once (a large number if it asks
        for nothing)."""
        if not free.plain:
            return free.times(self)  # type: ignore[attr-defined]
        counts = [free._v.get(k, 0) // v for k, v in self._v.items() if v > 0]
        return max(0, min(counts)) if counts else 1 << 30

    def scaled(self, n: int) -> Resources:
        return Resources({k: v * n for k, v in self._v.items()})

    def without(self, *names: str) -> Resources:
        return Resources({k: v for k, v in self._v.items() if k not in names})

    def describe(self) -> str:
        """Human form, e.g. ``4 cpu, 8Gi memory, 1 nvidia.com/gpu``."""
        return ", ".join(
            amount(k, v) for k, v in sorted(self._v.items()) if not k.startswith(_UNSAID)
        )


def amount(name: str, milli: int) -> str:
    """One resource's amount in words: ``4 nvidia.com/gpu``, ``3 x host port TCP/2222``."""
    if name.startswith(HOST_PORT):
        return f"{format_quantity(name, milli)} x host port {name[len(HOST_PORT) :]}"
    return f"{format_quantity(name, milli)} {name}"


def format_quantity(name: str, milli: int) -> str:
    """Render milli-units the way a user wrote them: ``500m``, ``4``, ``8Gi``."""
    if name.endswith("memory") or name.startswith(("ephemeral-storage", "hugepages-")):
        value = milli / 1000
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size and value % size == 0:
                return f"{int(value // size)}{suffix}"
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20)):
            if value >= size:
                return f"{value / size:.1f}{suffix}"
        return f"{value:g}"
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"
