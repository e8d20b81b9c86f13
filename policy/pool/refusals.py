"""Refusals: the nodes the kube-scheduler refused a job's pods on, as the pool records them.

A pod pinned to a node (required node affinity) that the kube-scheduler marks
``PodScheduled=False``/``Unschedulable`` is *stuck* (``policy.model.cluster.Pod``). When the
pool sees room on that node for it and every other pod stuck there, nothing it observes
explains the refusal: either room freed a moment ago (the kube-scheduler tries its
unschedulable pods again when a pod leaves a node, after at most its 10 s pod backoff),
or pods the pool does not see fill the node (another tenant's, with ``watchAllPods:
false``). So the pool first records that it *saw* the pod stuck with room (``seen``), and
keeps placing it there; if it is still stuck ``GRACE`` later, the refusal is *counted*:
the node is left out of the job's eligible nodes until its backoff ends
(``policy.model.refusal``), and the pod's slot is placed elsewhere, or waits. A refusal
the pool's view explains (the node is full of pods it sees, or more pods are stuck there
than its room holds, as after plans made on a stale view) is not recorded: the node's
room decides.

Pure functions of the job's pods, its Admission, the observed free capacity and ``now``:
the same snapshot records the same refusals (a stuck pod seen again is not counted again:
its refusal is at or after its creation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from policy.model.admission import Admission, Refusal
from policy.model.bounds import MAX_EVENTS
from policy.model.cluster import Pod
from policy.model.refusal import GRACE, backoff
from policy.model.resources import Resources


def unexplained(pods: Sequence[Pod], free: Mapping[str, Resources]) -> frozenset[str]:
    """The nodes with stuck pods whose observed ``free`` room holds all of them: what the
    pool sees does not explain why the kube-scheduler refused them."""
    stuck: dict[str, list[Resources]] = {}
    for p in pods:
        if p.stuck and p.node is not None and not p.terminating:
            stuck.setdefault(p.node, []).append(p.request)
    return frozenset(
        node
        for node, requests in stuck.items()
        if node in free and Resources.total(requests).fits_in(free[node])
    )


def refusals(
    pods: Sequence[Pod],
    admission: Admission | None,
    unexplained: frozenset[str],
    now: datetime,
) -> tuple[Refusal, ...]:
    """The job's refusals once what the pool observes now is recorded, by node: for a
    stuck pod of the job on an ``unexplained`` node, seen now, or counted once seen for
    ``GRACE``; a sighting that no longer holds (the pod was bound, or the node's room
    explains it) is dropped; a counted node that took one of the job's pods since its
    backoff ended is forgiven."""
    if admission is None or not admission.admitted:
        return admission.refused if admission is not None else ()
    stuck: dict[str, Pod] = {}  # node -> the job's first stuck pod there (by name)
    for p in sorted(pods, key=lambda p: p.name):
        if p.stuck and p.node in unexplained and not p.terminating:
            stuck.setdefault(p.node, p)  # type: ignore[arg-type]
    by_node = {r.node: r for r in admission.refused}
    for node in sorted({*by_node, *stuck}):
        r = _recorded(by_node.get(node, Refusal(node=node)), stuck.get(node), pods, now)
        if r is None:
            by_node.pop(node, None)
        else:
            by_node[node] = r
    return tuple(sorted(by_node.values(), key=lambda r: r.node))


def _recorded(r: Refusal, pod: Pod | None, pods: Sequence[Pod], now: datetime) -> Refusal | None:
    """One node's record after this cycle (None: nothing to keep)."""
    if r.seen is not None and (pod is None or pod.name != r.seen_pod or not _since(r.seen, pod)):
        r = r.model_copy(update={"seen": None, "seen_pod": None})  # it did not hold
    if pod is not None:
        if r.seen is not None:
            if now - r.seen >= GRACE:
                count = min(r.count + 1, MAX_EVENTS)
                return Refusal(
                    node=r.node,
                    pod=pod.name,
                    count=count,
                    time=now,
                    until=now + backoff(count),
                )
        elif not (r.counted and r.time is not None and _since(r.time, pod)):
            r = r.model_copy(update={"seen": now, "seen_pod": pod.name})
    if r.counted and not active(r, now) and any(_took(p, r) for p in pods):
        return None  # it took a pod of the job again: forgiven
    return r if r.counted or r.seen is not None else None


def _since(at: datetime, pod: Pod) -> bool:
    """``at`` is at or after the pod's creation: it is about this very pod."""
    return pod.created is None or at >= pod.created


def _took(pod: Pod, r: Refusal) -> bool:
    """A pod of the job bound on the refused node, created after the refusal."""
    created, at = pod.created, r.time
    return (
        pod.node == r.node
        and pod.bound
        and pod.live
        and created is not None
        and at is not None
        and created > at
    )


def active(r: Refusal, now: datetime) -> bool:
    """Counted, and its backoff has not ended."""
    return r.counted and r.until is not None and now < r.until


def avoided(refused: Sequence[Refusal], now: datetime) -> frozenset[str]:
    """The nodes the job's pods avoid now."""
    return frozenset(r.node for r in refused if active(r, now))


def next_end(refused: Sequence[Refusal], now: datetime) -> datetime | None:
    """When the job is to be planned again: a backoff ends, or a sighting would count."""
    ends = []
    for r in refused:
        if active(r, now) and r.until is not None:
            ends.append(r.until)
        if r.seen is not None:
            ends.append(r.seen + GRACE)
    return min((e for e in ends if e > now), default=None)
