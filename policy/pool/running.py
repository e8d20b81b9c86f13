"""An admitted job as one cycle sees it: its pods, its worker target and who is leaving.

The worker target and the pods a job may have come from the job's Admission, which the pool
wrote and reads back as its child: DRAGON's rules made stateless (DESIGN §2.5). Before a job
has an Admission (an upgrade from the first design, or an Admission lost), the target its
status records stands in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from policy.model.admission import Admission, LastScale
from policy.model.cluster import Pod
from policy.model.gpushare import GPU
from policy.model.jobs import WORKER, Job, child_name
from policy.model.lifecycle import Assessment
from policy.model.migration import move_of
from policy.model.once import cached_property
from policy.model.slot import Slot, SlotLabel
from policy.pool.attained_service import Attained

LAST_SCALE = "lastScale"  # the status key a job's sync copies the Admission's lastScale to


def recorded_target(job: Job, admission: Admission | None) -> int:
    """The worker count the pool decided last (``Worker.replicas`` before any)."""
    if job.worker is None:
        return 0
    if admission is not None and admission.admitted:
        recorded: object = admission.workers
    else:
        recorded = ((job.status.get("scheduling") or {}).get("workers") or {}).get("target")
    target = recorded if type(recorded) is int and recorded >= 0 else job.worker.replicas
    return max(job.min_workers, min(target, job.max_workers))


def last_scale(job: Job, admission: Admission | None) -> LastScale | None:
    if admission is not None and admission.last_scale is not None:
        return admission.last_scale
    return LastScale.from_json((job.status.get("scheduling") or {}).get(LAST_SCALE))


def scaled_at(job: Job, admission: Admission | None) -> datetime | None:
    """When the pool last changed the job's worker target (None: never, or unreadable)."""
    scale = last_scale(job, admission)
    return scale.time if scale is not None else None


def idle_since(jobs: Iterable[tuple[Job, Admission | None]]) -> datetime | None:
    """The last admission or shrink anywhere: DRAGON's growth waits ``idle`` after it."""
    times = []
    for job, admission in jobs:
        admitted = admission.admitted_at if admission is not None else None
        started = admitted or job.started_at
        if started is not None:
            times.append(started)
        scale = last_scale(job, admission)
        if scale is not None and scale.shrink:
            times.append(scale.time)
    return max(times) if times else None


def is_chief_worker(job: Job, pod: Pod) -> bool:
    """Worker 0 is the chief of a job without a Chief or Master: it never shrinks."""
    return job.chief_type is None and pod.index == 0


def shrinkable(job: Job, workers: Sequence[Pod], ps_nodes: frozenset[str]) -> list[Pod]:
    """Workers a shrink may take, best first: not yet running, then lonely (off every
    parameter server's node), then the highest index. Never the chief."""
    ok = [
        p
        for p in workers
        if p.live and p.phase in ("Pending", "Running") and not is_chief_worker(job, p)
    ]
    return sorted(ok, key=lambda p: (p.phase == "Running", p.node in ps_nodes, -p.index))


def waited(since: datetime | None, now: datetime) -> str:
    if since is None:
        return ""
    return f"{int((now - since).total_seconds())} s"


def _listed(pod: Pod, admission: Admission) -> bool:
    """In the Admission, or newer than the Admission we read (then our view of it is stale
    and the pod was created from one that lists it)."""
    newer = (pod.admission_generation or 0) > admission.generation > 0
    return newer or SlotLabel(pod.replica_type, pod.index) in admission.labelled


def current_pod(job: Job, slot: Slot, pods: Sequence[Pod], admission: Admission | None) -> Pod:
    """The pod that is a slot's worker among its live pods, while a worker moves
    (make-before-break: its old pod and its replacement both exist): the one the Admission
    names (a leftover replacement of a move called off is not), else the newest move (an
    Admission rebuilt from scratch), never one the kube-scheduler could not place."""
    placement = admission.slots.get(slot) if admission is not None else None
    listed = (placement.pod if placement is not None else None) or child_name(job, *slot)
    named = next((p for p in pods if p.name == listed and not p.stuck), None)
    if named is not None:
        return named
    placeable = [p for p in pods if not p.stuck] or list(pods)
    return max(placeable, key=lambda p: move_of(p.name))


def _one_per_index(
    job: Job, workers: tuple[Pod, ...], admission: Admission | None
) -> tuple[Pod, ...]:
    """One pod per worker index (``current_pod``): a moving worker counts once."""
    by_index: dict[int, list[Pod]] = {}
    for p in workers:
        by_index.setdefault(p.index, []).append(p)
    if len(by_index) == len(workers):
        return workers
    kept = {current_pod(job, (WORKER, i), pods, admission).name for i, pods in by_index.items()}
    return tuple(p for p in workers if p.name in kept)


@dataclass(frozen=True)
class Running:
    """An admitted job as one cycle sees it: its workers and what is recorded of them."""

    job: Job
    pods: tuple[Pod, ...]
    verdict: Assessment
    priority: int
    admission: Admission | None
    target: int  # recorded worker target
    workers: tuple[Pod, ...]  # worker pods that hold an index (not terminating)
    surplus: tuple[Pod, ...]  # workers the job is giving up: a shrink in progress
    ps_nodes: frozenset[str]
    attained: Attained | None = None  # under least attained service: its service and queue
    # The same job without ``attained`` (``ranked``), else None: what a job's plan that
    # does not read its service derives from, the very object again while the job's view
    # and Admission are (``policy.memo``; the service itself changes every cycle).
    unranked: Running | None = field(default=None, compare=False, repr=False)

    @property
    def queue(self) -> int:
        return self.attained.queue if self.attained is not None else 0

    @property
    def base(self) -> Running:
        """The job's state without its attained service (itself when it has none)."""
        return self.unranked if self.unranked is not None else self

    def ranked(self, attained: Attained) -> Running:
        """This state with its attained service and queue (``unranked``: this)."""
        return replace(self, attained=attained, unranked=self.base)

    @classmethod
    def of(
        cls,
        job: Job,
        pods: tuple[Pod, ...],
        verdict: Assessment,
        prio: int,
        admission: Admission | None,
        attained: Attained | None = None,
    ) -> Running:
        target = recorded_target(job, admission)
        workers = _one_per_index(
            job,
            tuple(p for p in pods if p.replica_type == "worker" and not p.terminating),
            admission,
        )
        ps_nodes = frozenset(
            p.node for p in pods if p.replica_type != "worker" and p.live and p.node
        )
        if admission is not None and admission.admitted:
            surplus = tuple(p for p in workers if p.live and not _listed(p, admission))
        else:
            extra = len(workers) - target
            surplus = tuple(shrinkable(job, workers, ps_nodes)[:extra]) if extra > 0 else ()
        return cls(
            job, pods, verdict, prio, admission, target, workers, surplus, ps_nodes, attained
        )

    @cached_property
    def has_moves(self) -> bool:
        """A move on record or in flight, or a moved pod (``policy.pool.migrate``)."""
        if self.unranked is not None:
            return self.unranked.has_moves
        a = self.admission
        if a is not None and (a.moves or a.migrations or any(p.pod or p.source for p in a.pods)):
            return True
        return any(move_of(p.name) for p in self.pods)

    @cached_property
    def bursts(self) -> bool:
        """A running CPU worker of the job may use more CPU than it requests: only such
        workers can oversubscribe a node's CPU (the scheduler fits requests). Read by
        ``policy.pool.migrate`` every cycle; derived once per job state."""
        if self.unranked is not None:
            return self.unranked.bursts
        worker = self.job.replicas.get(WORKER)
        if worker is None or worker.request[GPU]:
            return False  # (most jobs of a GPU pool, at one look-up)
        return any(bursting(p) for p in self.pods)

    @property
    def count(self) -> int:
        """Workers the job keeps (before this cycle's decisions)."""
        return len(self.workers) - len(self.surplus)

    def new_indices(self, n: int) -> list[int]:
        """The lowest free worker indices: TF_CONFIG lists max-instances of them."""
        taken = {p.index for p in self.pods if p.replica_type == "worker"}
        free = [i for i in range(self.job.max_workers) if i not in taken]
        return free[:n]


def cpu_worker(p: Pod) -> bool:
    """A worker that computes on CPU: a GPU worker steps at its GPUs' pace."""
    return p.replica_type == WORKER.lower() and not p.request[GPU]


def bursting(p: Pod) -> bool:
    """A CPU worker that may use more CPU than it requests (its limit is higher)."""
    return cpu_worker(p) and p.limits["cpu"] > p.request["cpu"]
