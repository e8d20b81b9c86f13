"""The CPU each pod of a node gets, as Linux's CFS gives it: a pure model.

What a pod's manifest implies, as the kubelet turns it into cgroup settings:

* its CPU ``requests`` become ``cpu.shares`` (1024 per core, at least 2): its *weight*
  when the node's CPU is oversubscribed;
* its CPU ``limits`` become the CFS quota: it never runs above them. A pod with a
  container without a limit is unbounded: it may use the whole node.

What a pod *wants* is its program's business (``Claim.want``; ``None``: all it may have,
a busy training loop). When the node has room (everything wanted fits its allocatable
CPU) each pod gets what it wants up to its limit. When it has not, CFS divides the node
in proportion to the weights, and a pod that needs less than its part (its want or
limit is lower) leaves the rest to the others (water-filling): a weighted max-min fair
share. This ignores cores as units (a pod's threads spread over every core) and the
quota's period granularity: both matter only for pods of a few millicores.

What a node's cgroups then show of each pod (``Usage``): the cores it uses
(``cpu.stat usage_usec``), whether its own quota holds it back (``nr_throttled`` grows),
and the share of what it could use that others took (``cpu.pressure``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from policy.model.resources import to_milli

K = TypeVar("K", bound=Hashable)

MIN_SHARES = 2  # the kernel's least cpu.shares: a pod that requests no CPU
_EPSILON = 1e-9


def shares(request_m: int) -> int:
    """``cpu.shares`` for a CPU request in millicores, as the kubelet sets it."""
    return max(request_m * 1024 // 1000, MIN_SHARES)


@dataclass(frozen=True)
class Claim:
    """One pod's CPU as its node's cgroups know it, in millicores."""

    request: int  # cpu.shares come from it
    limit: int | None  # the CFS quota; None: unbounded
    want: int | None = None  # what its program would use alone; None: all it may have

    def cap(self, capacity: int) -> int:
        """The most it can use on a node of ``capacity``: its want, limit and the node."""
        return min(x for x in (self.want, self.limit, capacity) if x is not None)


@dataclass(frozen=True)
class Usage:
    """What a node's cgroups show of one pod."""

    cores: float  # CPU it uses, in cores
    cap: float  # the most it could use (want, limit, node), in cores
    throttled: bool  # its own limit holds it below its want (CFS quota throttling)

    @property
    def speed(self) -> float:
        """Share of what it could use that it gets: 1 when the node has room."""
        return self.cores / self.cap if self.cap > 0 else 1.0

    @property
    def pressure(self) -> float:
        """Share of its runnable time spent waiting for CPU others hold (cpu.pressure)."""
        return 1.0 - self.speed


def claim_of(pod_spec: Mapping[str, Any], want: int | None = None) -> Claim:
    """A pod's claim from its spec: the containers' requests (limits where only a limit is
    given, as the API server defaults them) and limits, plus any pod overhead."""
    request = 0
    limit: int | None = 0
    for c in pod_spec.get("containers") or ():
        res = c.get("resources") or {}
        lim = (res.get("limits") or {}).get("cpu")
        req = (res.get("requests") or {}).get("cpu", lim)
        request += to_milli(req) if req is not None else 0
        limit = None if lim is None or limit is None else limit + to_milli(lim)
    overhead = (pod_spec.get("overhead") or {}).get("cpu")
    if overhead is not None:
        request += to_milli(overhead)
        limit = None if limit is None else limit + to_milli(overhead)
    return Claim(request, limit, want)


def fair_share(claims: Mapping[K, Claim], capacity: int) -> dict[K, Usage]:
    """Each pod's CPU on a node of ``capacity`` millicores (its allocatable)."""
    caps = {k: c.cap(capacity) for k, c in claims.items()}
    got: dict[K, float] = {}
    active = {k for k, cap in caps.items() if cap > 0}
    left = float(capacity)
    while active:
        weight = sum(shares(claims[k].request) for k in active)
        full = {k for k in active if caps[k] <= left * shares(claims[k].request) / weight}
        if not full:  # every remaining pod wants more than its part: CFS splits by weight
            got.update({k: left * shares(claims[k].request) / weight for k in active})
            break
        for k in full:
            got[k] = float(caps[k])
            left -= caps[k]
        active -= full
    out: dict[K, Usage] = {}
    for k, c in claims.items():
        cores = got.get(k, 0.0) / 1000
        want = c.want if c.want is not None else capacity
        throttled = c.limit is not None and c.limit < want and cores >= c.limit / 1000 - _EPSILON
        out[k] = Usage(cores, caps[k] / 1000, throttled)
    return out
