"""Score and assign phases for one job: where its pods go, given what is free.

``place_gang`` is DRAGON's placement, made deterministic: the whole gang on one node if any
node holds it (tightest fit first), else spill starting from the node that holds the most
of the gang, parameter servers first, then workers. ``place_repairs`` puts the missing
pods of an admitted job next to the pods it already has. Neither mutates its inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from policy.model.admission import Placement, Slot
from policy.model.jobs import Job, Replica
from policy.model.resources import PODS, Resources


@dataclass(frozen=True)
class PodRequest:
    """One pod of a job to place, by replica type and index, with what it requests (what
    the search reads; what it decides is a ``Placement``)."""

    type: str
    index: int
    replica: Replica = field(compare=False, repr=False)

    @property
    def request(self) -> Resources:
        return self.replica.request


Free = Mapping[str, Resources]
Eligible = Mapping[str, frozenset[str]]  # replica type -> names of nodes that accept it
Placed = Mapping[Slot, Placement]  # what a phase decides for one job: slot -> its placement
# A policy's way to place a queued gang (``Rules.place_gang``): its required pods and
# workers, the fewest workers it runs with, free and allocatable capacity, the nodes each
# type may use, and a preferred node; None when it does not fit.
GangPlacer = Callable[
    [
        Sequence["PodRequest"],
        Sequence["PodRequest"],
        int,
        Free,
        Mapping[str, Resources],
        Eligible,
        "str | None",
    ],
    "Assignment | None",
]


def unplaced(requests: Sequence[PodRequest]) -> Placed:
    """Every pod, left to the kube-scheduler (no node)."""
    return {(s.type, s.index): Placement(type=s.type, index=s.index) for s in requests}


@dataclass(frozen=True)
class Assignment:
    """A search's result: the node of each request, and the free capacity left after."""

    nodes: Mapping[PodRequest, str]
    free: Free

    @property
    def placed_workers(self) -> int:
        return sum(1 for s in self.nodes if s.type == "Worker")

    def placed(self) -> Placed:
        return {
            (s.type, s.index): Placement(type=s.type, index=s.index, node=n)
            for s, n in self.nodes.items()
        }


def tightness(free: Resources, allocatable: Resources, request: Resources) -> float:
    """How little would be left (as fractions of the node) after placing ``request``."""
    names = [k for k in request if k != PODS] or [PODS]
    return sum((free[k] - request[k]) / max(allocatable[k], 1) for k in names)


def _runs(slots: Sequence[PodRequest]) -> list[list[PodRequest]]:
    """Consecutive slots of one replica type (one request, one set of eligible nodes)."""
    runs: list[list[PodRequest]] = []
    for slot in slots:
        if runs and runs[-1][0].type == slot.type:
            runs[-1].append(slot)
        else:
            runs.append([slot])
    return runs


def _first_fit(
    slots: Sequence[PodRequest], order: Sequence[str], free: Free, eligible: Eligible
) -> tuple[dict[PodRequest, str], dict[str, Resources], list[PodRequest]]:
    """Each slot on the first node in ``order`` that holds it. Slots of one type share a
    request, so a run of them fills a node as far as it goes, then the next: the same
    placement as one slot at a time, in O(runs x nodes)."""
    left = dict(free)
    placed: dict[PodRequest, str] = {}
    missed: list[PodRequest] = []
    for run in _runs(slots):
        ok = eligible.get(run[0].type, ())
        request = run[0].request
        pending = run
        for node in order:
            if not pending:
                break
            if node not in ok:
                continue
            count = min(len(pending), request.times_in(left[node]))
            if count <= 0:
                continue
            for slot in pending[:count]:
                placed[slot] = node
            left[node] = left[node] - request.scaled(count)
            pending = pending[count:]
        missed.extend(pending)
    return placed, left, missed


def place_gang(
    required: Sequence[PodRequest],
    workers: Sequence[PodRequest],
    min_workers: int,
    free: Free,
    allocatable: Mapping[str, Resources],
    eligible: Eligible,
    preferred: str | None = None,
) -> Assignment | None:
    """All of ``required`` plus at least ``min_workers`` of ``workers`` (as many as fit),
    or None: a gang is never placed partially. ``preferred`` (a job's ``node-preference``)
    takes the whole job when it holds it."""
    everything = [*required, *workers]
    if not _may_fit(required, workers[:min_workers], free, eligible):
        return None
    total = Resources.total(s.request for s in everything)

    # Step A: the whole job on one node, tightest fit first.
    types = {s.type for s in everything}
    anywhere = frozenset.intersection(*(eligible.get(t, frozenset()) for t in types))
    whole = [n for n in sorted(anywhere) if total.fits_in(free[n])]
    if whole:
        best = min(
            whole, key=lambda n: (n != preferred, tightness(free[n], allocatable[n], total), n)
        )
        left = dict(free)
        left[best] = free[best] - total
        return Assignment(nodes={s: best for s in everything}, free=left)

    # Step B: spill, starting from the node that can hold the most of the gang alone. A node
    # that holds none of it takes none of it in the first fit either: it is left out.
    runs = [(run[0].request, eligible.get(run[0].type, ()), len(run)) for run in _runs(everything)]

    last = len(runs) - 1
    known: dict[tuple, int] = {}  # nodes with equal room and eligibility hold alike

    def holds(node: str) -> int:
        left, n = free[node], 0
        where = tuple(node in ok for _, ok, _ in runs)
        key = (left, where)
        if key in known:
            return known[key]
        for i, (request, _, count) in enumerate(runs):
            if where[i]:
                k = min(count, request.times_in(left))
                if k > 0:
                    n += k
                    if i < last:
                        left = left - request.scaled(k)
        known[key] = n
        return n

    candidates = frozenset().union(*(ok for _, ok, _ in runs))
    held = {n: h for n in candidates if n in free and (h := holds(n)) > 0}
    order = sorted(held, key=lambda n: (-held[n], tightness(free[n], allocatable[n], total), n))
    placed, left, missed = _first_fit(required, order, free, eligible)
    if missed:
        return None
    # Workers share one request, so first-fit places a prefix: indices stay contiguous.
    more, left, _ = _first_fit(workers, order, left, eligible)
    if len(more) < min_workers:
        return None
    return Assignment(nodes={**placed, **more}, free=left)


def _may_fit(
    required: Sequence[PodRequest],
    min_workers: Sequence[PodRequest],
    free: Free,
    eligible: Eligible,
) -> bool:
    """A necessary condition for the smallest gang, checked in one pass over the nodes
    before any placement is built: together, the eligible nodes have room for it, and for
    each of its replica types some eligible node holds one pod. Most queued jobs in a full
    pool fail here (the answer is the same as a failed placement, only sooner)."""
    gang = [*required, *min_workers]
    if not gang:
        return True
    requests = {s.type: s.request for s in gang}
    need: dict[str, int] = {}
    for s in gang:
        s.request.add_to(need)
    nodes = frozenset().union(*(eligible.get(t, frozenset()) for t in requests))
    room: dict[str, int] = {}
    unplaced = set(requests)

    def fits(t: str, left: Resources) -> bool:
        return requests[t].fits_in(left)

    for node in nodes:
        left = free.get(node)
        if left is None:
            continue
        left.add_to(room)
        if unplaced:
            unplaced -= {t for t in unplaced if node in eligible.get(t, ()) and fits(t, left)}
    return not unplaced and all(v <= room.get(k, 0) for k, v in need.items())


def place_static_gang(
    required: Sequence[PodRequest],
    workers: Sequence[PodRequest],
    min_workers: int,
    free: Free,
    allocatable: Mapping[str, Resources],
    eligible: Eligible,
    preferred: str | None = None,
) -> Assignment | None:
    """``place_gang`` for a static-size policy: every worker at once, never fewer."""
    return place_gang(required, workers, len(workers), free, allocatable, eligible, preferred)


def place_each_binpacked(
    required: Sequence[PodRequest],
    workers: Sequence[PodRequest],
    min_workers: int,
    free: Free,
    allocatable: Mapping[str, Resources],
    eligible: Eligible,
    preferred: str | None = None,
) -> Assignment | None:
    """A static-size gang (every worker), each pod on its own (``place_binpacked``)."""
    return place_binpacked([*required, *workers], free, allocatable, eligible)


def place_binpacked(
    slots: Sequence[PodRequest],
    free: Free,
    allocatable: Mapping[str, Resources],
    eligible: Eligible,
) -> Assignment | None:
    """Every slot, or None; each pod on its own on the fullest node that takes it (Volcano's
    binpack), with no regard for where the rest of its job goes."""
    left = dict(free)
    placed: dict[PodRequest, str] = {}
    for slot in slots:
        fits = [
            n
            for n in sorted(left)
            if n in eligible.get(slot.type, ()) and slot.request.fits_in(left[n])
        ]
        if not fits:
            return None
        node = min(fits, key=lambda n: (tightness(left[n], allocatable[n], slot.request), n))
        placed[slot] = node
        left[node] = left[node] - slot.request
    return Assignment(nodes=placed, free=left)


def place_repairs(
    missing: Sequence[PodRequest],
    job_pods_per_node: Mapping[str, tuple[int, int]],
    free: Free,
    eligible: Eligible,
) -> Assignment:
    """Missing pods of a running job, next to the job's parameter servers, then its other
    pods; ``job_pods_per_node`` maps node -> (required pods, all pods) of this job."""
    order = sorted(free, key=lambda n: (*(-c for c in job_pods_per_node.get(n, (0, 0))), n))
    placed, left, _ = _first_fit(missing, order, free, eligible)
    return Assignment(nodes=placed, free=left)


def used_per_node(assignment: Assignment) -> dict[str, Resources]:
    """What an assignment takes from each node it uses."""
    used: dict[str, list[Resources]] = {}
    for slot, node in assignment.nodes.items():
        used.setdefault(node, []).append(slot.request)
    return {n: Resources.total(rs) for n, rs in used.items()}


def slots(replica: Replica | None, count: int) -> list[PodRequest]:
    return [PodRequest(replica.type, i, replica) for i in range(count)] if replica else []


def slots_at(replica: Replica | None, indices: Sequence[int]) -> list[PodRequest]:
    return [PodRequest(replica.type, i, replica) for i in indices] if replica else []


def required_slots(job: Job) -> list[PodRequest]:
    """Every pod of the replica types that belong to every gang (PS, Chief, Evaluator)."""
    return [s for r in job.required() for s in slots(r, r.replicas)]
