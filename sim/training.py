"""The simulated training programs: how far each job has got, and what it holds.

A parameter-server job trains only while its gang runs: every parameter server and the
chief (if any) Running, and at least ``min-instances`` workers (all of ``Worker.replicas``
for a job without DRAGON's bounds). Its speed comes from :class:`TrainingProfile` (a
Pollux workload's: from its workers' placement, ``sim.pollux_model``): each
worker contributes once it has restored the checkpoint (``restore_s`` after it started),
faster next to a parameter server than across the network, and (a CPU-bound profile) at
the share of the CPU it could use that its node's CFS gives it (``sim.cpu``): a CPU worker
wants all its limit allows, a GPU worker, a parameter server or a scheduler its request,
and a GPU worker steps at its GPUs' pace. Asynchronous parameter-server training adds the
workers' steps (each pushes its own gradients), so a slowed worker slows only its own part.
A moved worker is a new pod: it restores before it contributes,
so every migration costs ``restore_s`` of that worker. When the global steps are
done, the chief and the workers exit 0; parameter servers run until they are deleted.

Model state lives on the parameter servers (and, for an MXJob, its servers): when one of
them goes away while the job trains (a preemption deletes every pod), the job falls back to
its last checkpoint. It checkpoints every ``dragonet.io/checkpoint-interval-seconds`` of
training (none declared: it never checkpoints and starts over), and pays the restore
again when its workers start. The GPU-seconds spent on the lost progress and on the
restore are counted as lost (``lost_gpu_s``). A program that saves when stopped
(``saves_on_stop``, as AdaptDL does on SIGTERM) loses no progress, only the restore.

An MXJob trains the same way: its servers are its parameter servers, and its scheduler
must run too (ps-lite's root); when the steps are done its workers and scheduler exit 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from policy.model.batch import BATCH_PER_REPLICA_ENV
from policy.model.cluster import L_INDEX, L_JOB, L_OPERATOR, L_TYPE, OPERATOR_NAME
from policy.model.jobs import CHECKPOINT_ANNOTATION, InvalidJob, pod_request
from policy.model.kinds import BY_KIND, TFJOB
from policy.model.migration import move_of
from policy.model.resources import Resources
from sim.apiserver import ApiServer, Obj, object_key
from sim.cpu import Claim, Usage, claim_of, fair_share
from sim.results import Segment, State
from sim.spec import JobSpec

PODS = "Pod.v1"
NODES = "Node.v1"
CHIEFS = ("chief", "master")
PS_ROLES = ("ps", "server")  # a TFJob's parameter servers, an MXJob's servers
ROOT = "scheduler"  # an MXJob's ps-lite scheduler: needed to train, exits with the workers
_DONE = ("Succeeded", "Failed")
TENSORBOARD = "tensorboard"
GPU = "nvidia.com/gpu"


def job_of(pod: Obj) -> str | None:
    labels = pod["metadata"].get("labels") or {}
    if labels.get(L_OPERATOR) != OPERATOR_NAME or L_JOB not in labels:
        return None
    return f"{pod['metadata'].get('namespace') or 'default'}/{labels[L_JOB]}"


def _running(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get(
        "deletionTimestamp"
    )


def _bound_and_holding(pod: Obj) -> bool:
    return bool(pod["spec"].get("nodeName")) and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


@dataclass
class Training:
    """One job's training program."""

    spec: JobSpec
    ps: int
    chief: bool
    min_workers: int
    gang: int  # pods the job needs to train (PS + chief + min workers)
    root: bool = False  # an MXJob's scheduler
    progress: float = 0.0
    rate: float = 0.0
    updated_s: float = 0.0
    started_s: float | None = None
    finished_s: float | None = None
    state: State = "queued"
    since_s: float = 0.0
    held: Resources = field(default_factory=lambda: Resources({}))
    workers_live: int = 0
    open_workers: int = 0
    segments: list[Segment] = field(default_factory=list)
    # (time, what its bound pods request) at every change, until it finishes: the plot's
    # per-job allocation, where a scale action is a step.
    held_history: list[tuple[float, Resources]] = field(default_factory=list)
    # (time, live workers) at every change: the per-job record's workers over time.
    workers_history: list[tuple[float, int]] = field(default_factory=list)
    scale_actions: int = 0  # its part of Programs.scale_actions
    moves: int = 0  # its part of Programs.migrations
    warm: dict[str, tuple[str, int, float]] = field(default_factory=dict)  # pod -> uid, restarts, t
    members: frozenset[tuple[str, str]] = frozenset()  # running workers (pod, uid): whole restarts
    token: int = 0
    checkpoint_s: float | None = None  # declared interval (None: never checkpoints)
    saved: float = 0.0  # progress at the last checkpoint
    since_saved_s: float = 0.0  # training time since the last checkpoint
    since_saved_gpu_s: float = 0.0  # GPU-seconds spent since the last checkpoint
    state_up: bool = False  # its parameter servers hold the model state
    losses: int = 0  # times it fell back to a checkpoint
    lost_gpu_s: float = 0.0  # GPU-seconds of lost progress and restores
    batch: int = 0  # the global batch it trains at now (a job whose batch the pool chooses)
    steps_rate: float = 0.0  # its steps per second now (``rate`` is progress, for such a job)

    @classmethod
    def of(cls, spec: JobSpec, now: float) -> Training:
        replicas = replica_specs(spec.manifest)
        ps = sum(int((replicas.get(t) or {}).get("replicas", 0) or 0) for t in ("PS", "Server"))
        chief = any(t in replicas for t in ("Chief", "Master"))
        root = "Scheduler" in replicas
        worker = replicas.get("Worker") or {}
        bounds = {**spec.manifest["spec"], **worker}
        w = int(worker.get("replicas", 0) or 0)
        min_workers = int(_min_workers(spec.manifest, bounds.get("min-instances")) or w) if w else 0
        gang = ps + chief + root + min_workers
        annotations = spec.manifest["metadata"].get("annotations") or {}
        raw = annotations.get(CHECKPOINT_ANNOTATION)
        checkpoint = float(raw) if raw is not None else None
        return cls(
            spec,
            ps,
            chief,
            min_workers,
            gang,
            root=root,
            updated_s=now,
            since_s=now,
            checkpoint_s=checkpoint,
        )

    def advance(self, now: float) -> None:
        """Progress (and checkpoints) from the last update to ``now`` at the current rate."""
        dt = now - self.updated_s
        if dt > 0 and self.rate > 0:
            gpus = self.held.get(GPU, 0) / 1000
            every = self.checkpoint_s
            elapsed = self.since_saved_s + dt
            if every is not None and elapsed >= every:
                saves = int(elapsed // every)
                last = self.updated_s + (saves * every - self.since_saved_s)
                self.saved = self.progress + self.rate * (last - self.updated_s)
                self.since_saved_s = elapsed - saves * every
                self.since_saved_gpu_s = gpus * self.since_saved_s
            else:
                self.since_saved_s = elapsed
                self.since_saved_gpu_s += gpus * dt
            self.progress += self.rate * dt
        self.updated_s = now

    def lose_state(self) -> None:
        """Its parameter servers went away: back to the last checkpoint, restore again."""
        gpus = self.held.get(GPU, 0) / 1000
        self.lost_gpu_s += gpus * self.spec.profile.restore_s
        if not self.spec.profile.saves_on_stop:  # else it saved when stopped
            self.lost_gpu_s += self.since_saved_gpu_s
            self.progress = min(self.progress, self.saved)
        self.since_saved_s = self.since_saved_gpu_s = 0.0
        self.losses += 1


def _min_workers(manifest: Mapping[str, Any], declared: Any) -> Any:
    """The fewest workers the job trains with: DRAGON's ``min-instances`` as the kind reads
    it with its own fields (a PyTorchJob's ``elasticPolicy.minReplicas``); as declared
    where the kind cannot read them (the webhook fails such a job)."""
    kind = BY_KIND.get(manifest.get("kind") or TFJOB.kind) or TFJOB
    try:
        extension = kind.extension.model_validate(manifest["spec"])
        low, _ = extension.worker_bounds(kind, declared, None)
    except (InvalidJob, ValidationError, TypeError):
        return declared
    return low


def replica_specs(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    """A job's replica specs (a TFJob's ``tfReplicaSpecs``, an MXJob's ``mxReplicaSpecs``...)."""
    kind = BY_KIND.get(manifest.get("kind") or TFJOB.kind)
    return manifest["spec"].get((kind or TFJOB).replica_specs_field) or {}


@dataclass
class Programs:
    """Every job's training program, driven by the pods the API server holds."""

    api: ApiServer
    schedule: Callable[[float, Callable[[], None]], None]
    exit_pod: Callable[[str, int], None]
    on_finish: Callable[[str], None] | None = None
    request: Callable[[Mapping[str, Any]], Resources] = pod_request  # a pod spec's request
    jobs: dict[str, Training] = field(default_factory=dict)
    pods_of: dict[str, set[str]] = field(default_factory=dict)
    scale_actions: int = 0
    restarts: int = 0
    migrations: int = 0  # replacement pods of moved workers
    _names_seen: set[str] = field(default_factory=set)
    _shrunk: set[str] = field(default_factory=set)  # workers deleted by a shrink
    _dirty: set[str] = field(default_factory=set)
    _flush_pending: bool = False
    # the jobs in state "holding", and what they hold together (None: to add up again):
    # the engine reads it at every step, and few jobs ever hold
    _holding: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)  # the jobs that have finished
    _blocked: Resources | None = None
    _cpu: dict[str, Usage] | None = None  # every running pod's CPU (None: to work out again)
    _cpu_bound: set[str] = field(default_factory=set)  # unfinished jobs of CPU-bound profiles
    _on_node: dict[str, set[str]] = field(default_factory=dict)  # node -> CPU-bound jobs seen

    def __post_init__(self) -> None:
        self.api.watchers.append(self._on_change)

    def add(self, spec: JobSpec, now: float) -> None:
        self.jobs[spec.key] = Training.of(spec, now)
        self.done.discard(spec.key)
        if spec.profile.cpu_bound:
            self._cpu_bound.add(spec.key)
        if spec.key in self._holding:  # a new job of that name starts queued
            self._holding.discard(spec.key)
            self._blocked = None

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey != PODS:
            return
        self._cpu = None
        pod = new if new is not None else old
        job = job_of(pod)
        # a pod on a node slows or frees the CPU-bound jobs there
        nodes = {n for o in (old, new) if o is not None and (n := o["spec"].get("nodeName"))}
        if job in self._cpu_bound:
            for n in nodes:
                self._on_node.setdefault(n, set()).add(job)
        crowd = {j for n in nodes for j in self._on_node.get(n, ())} & self._cpu_bound
        if job is None or job not in self.jobs or _role(pod) == TENSORBOARD:
            self._mark(crowd)
            return  # a TensorBoard is no part of training (its room shows in the cluster's)
        key = object_key(pod)
        t = self.jobs[job]
        growing = t.started_s is not None and t.finished_s is None and _role(pod) == "worker"
        if new is not None and old is None:
            self.pods_of.setdefault(job, set()).add(key)
            if key in self._names_seen and key not in self._shrunk:
                self.restarts += 1  # the same pod again: a restart, not a scale action
            elif move_of(pod["metadata"]["name"]):
                self.migrations += 1  # a moved worker's replacement
                t.moves += 1
            elif growing:
                self.scale_actions += 1  # a new worker, or one a shrink took, grown back
                t.scale_actions += 1
            self._shrunk.discard(key)
            self._names_seen.add(key)
        elif new is None:
            self.pods_of.get(job, set()).discard(key)
        else:
            if _restart_count(new) > _restart_count(old):
                self.restarts += 1
            shrunk = new["metadata"].get("deletionTimestamp") and not old["metadata"].get(
                "deletionTimestamp"
            )
            # A live worker deleted while the job trains is a shrink (also one not yet
            # running), unless the kube-scheduler found no room for it (a re-placement).
            if (
                growing
                and shrunk
                and (old.get("status") or {}).get("phase") in ("Pending", "Running")
                and (new.get("status") or {}).get("phase") not in _DONE
                and not _unschedulable(old)
                and not self._replaced(job, new)
            ):
                self.scale_actions += 1
                t.scale_actions += 1
                self._shrunk.add(key)
        self._mark({job, *crowd})

    def _mark(self, jobs: set[str]) -> None:
        """Update these jobs once this instant's changes are in."""
        if not jobs:
            return
        self._dirty.update(jobs)
        if not self._flush_pending:
            self._flush_pending = True
            self.schedule(0.0, self._flush)

    def _replaced(self, job: str, pod: Obj) -> bool:
        """Another live pod holds the same replica index: a migration, not a shrink."""
        labels = pod["metadata"].get("labels") or {}
        for key in self.pods_of.get(job, ()):
            other = self.api.get(PODS, key)
            if other is None or other["metadata"]["name"] == pod["metadata"]["name"]:
                continue
            o = other["metadata"].get("labels") or {}
            if (
                o.get(L_TYPE) == labels.get(L_TYPE)
                and o.get(L_INDEX) == labels.get(L_INDEX)
                and not other["metadata"].get("deletionTimestamp")
            ):
                return True
        return False

    def _flush(self) -> None:
        self._flush_pending = False
        now = self.api.clock()
        for job in sorted(self._dirty):
            self.update(job, now)
        self._dirty.clear()

    def update(self, job: str, now: float) -> None:
        t = self.jobs[job]
        if t.finished_s is not None:
            self._set_state(t, None, now)
            return
        t.advance(now)
        pods = [p for k in sorted(self.pods_of.get(job, ())) if (p := self.api.get(PODS, k))]
        ps_nodes = {p["spec"]["nodeName"] for p in pods if _role(p) in PS_ROLES and _running(p)}
        ps_up = sum(1 for p in pods if _role(p) in PS_ROLES and _running(p))
        chief_up = any(_role(p) in CHIEFS and _running(p) for p in pods)
        root_up = any(_role(p) == ROOT and _running(p) for p in pods)
        workers = [p for p in pods if _role(p) in ("worker", *CHIEFS) and _running(p)]
        n_workers = sum(1 for p in workers if _role(p) == "worker")
        ready = (
            ps_up >= t.ps
            and (chief_up or not t.chief)
            and (root_up or not t.root)
            and n_workers >= t.min_workers
        )
        local = remote = 0
        per_node: dict[str, int] = {}
        shares: list[tuple[bool, float]] = []
        cpu = self.cpu() if t.spec.profile.cpu_bound else {}
        next_warm = None
        shares_given: list[int | None] = []  # each training worker's batch (adaptive jobs)
        if t.spec.profile.restarts_whole:
            members = frozenset((object_key(p), p["metadata"]["uid"]) for p in workers)
            if members != t.members and t.members:
                for p in workers:  # an all-reduce job restarts whole on any change
                    key = object_key(p)
                    mark = (p["metadata"]["uid"], _restart_count(p))
                    t.warm[key] = (*mark, now + t.spec.profile.restore_s)
            t.members = members
        for p in workers:
            key = object_key(p)
            mark = (p["metadata"]["uid"], _restart_count(p))
            seen = t.warm.get(key)
            if seen is None or seen[:2] != mark:
                seen = (*mark, now + t.spec.profile.restore_s)
                t.warm[key] = seen
            if seen[2] > now:
                next_warm = seen[2] if next_warm is None else min(next_warm, seen[2])
                continue
            near = not t.ps or p["spec"]["nodeName"] in ps_nodes
            if near:
                local += 1
            else:
                remote += 1
            shares.append((near, cpu[key].speed if key in cpu and not _gpus(p) else 1.0))
            shares_given.append(_batch_share(p))
            per_node[p["spec"]["nodeName"]] = per_node.get(p["spec"]["nodeName"], 0) + 1
        state_up = bool(t.ps) and ps_up >= t.ps
        if t.state_up and not state_up and t.progress > 0:
            t.lose_state()
        t.state_up = state_up
        adaptive = getattr(t.spec.profile, "adaptive", False)
        if not ready:
            t.rate = 0.0
        elif adaptive:
            t.rate, t.steps_rate, t.batch = t.spec.profile.adaptive_rate(  # type: ignore[attr-defined]
                list(per_node.values()), shares_given, t.progress
            )
        elif t.spec.profile.cpu_bound:
            t.rate = t.spec.profile.rate_of(shares, max(t.ps, 1))
        else:
            t.rate = t.spec.profile.rate_on(list(per_node.values()), local, remote, max(t.ps, 1))
        if t.workers_live != n_workers or not t.workers_history:
            t.workers_history.append((now, n_workers))
        t.workers_live = n_workers
        if ready and t.started_s is None:
            t.started_s = now
        t.held = Resources.total(self.request(p["spec"]) for p in pods if _bound_and_holding(p))
        if job in self._holding:
            self._blocked = None
        if (t.held_history[-1][1] if t.held_history else Resources({})) != t.held:
            t.held_history.append((now, t.held))
        live = [p for p in pods if (p.get("status") or {}).get("phase") not in _DONE]
        blocked = not ready and (
            any(not p["spec"].get("nodeName") for p in live) or len(live) < t.gang
        )
        state: State = "queued" if not t.held else ("holding" if blocked else "training")
        self._set_state(t, state, now)
        t.token += 1
        token = t.token
        if t.rate > 0:
            until = t.spec.steps
            if adaptive:  # its speed changes with the epoch: updated then
                change = t.spec.profile.next_change(t.progress)  # type: ignore[attr-defined]
                until = min(until, change) if change is not None else until
            left = max(until - t.progress, 0.0) / t.rate
            self.schedule(left, lambda: self._maybe_finish(job, token))
        if next_warm is not None:
            self.schedule(next_warm - now, lambda: self._rewarm(job, token))

    def cpu(self) -> dict[str, Usage]:
        """Every running pod's CPU, by pod key, as its node's cgroups would show it."""
        if self._cpu is None:
            claims: dict[str, dict[str, Claim]] = {}
            for pod in self.api.list(PODS):
                if _running(pod):
                    node = claims.setdefault(pod["spec"]["nodeName"], {})
                    node[object_key(pod)] = claim_of(pod["spec"], _want(pod))
            self._cpu = {}
            for node in self.api.list(NODES):
                on = claims.get(node["metadata"]["name"])
                if on:
                    alloc = Resources.parse(node["status"].get("allocatable"))["cpu"]
                    self._cpu.update(fair_share(on, alloc))
        return self._cpu

    def progress_now(self, job: str, now: float) -> float:
        """Global steps done by ``now`` (between updates, at the current rate)."""
        t = self.jobs[job]
        return min(t.spec.steps, t.progress + t.rate * max(now - t.updated_s, 0.0))

    def _rewarm(self, job: str, token: int) -> None:
        if self.jobs[job].token == token:
            self.update(job, self.api.clock())

    def _maybe_finish(self, job: str, token: int) -> None:
        t = self.jobs[job]
        if t.token != token or t.finished_s is not None:
            return
        now = self.api.clock()
        t.advance(now)
        if t.progress < t.spec.steps * (1 - 1e-9):
            self.update(job, now)
            return
        t.finished_s = now
        self.done.add(job)
        self._cpu_bound.discard(job)
        t.rate = 0.0
        t.held_history.append((now, Resources({})))  # done: what is left is cleanup
        t.workers_history.append((now, 0))
        self._set_state(t, None, now)
        if self.on_finish is not None:
            self.on_finish(job)
        for key in sorted(self.pods_of.get(job, ())):
            pod = self.api.get(PODS, key)
            if pod is not None and _role(pod) in ("worker", ROOT, *CHIEFS) and _running(pod):
                self.exit_pod(key, 0)

    def _set_state(self, t: Training, state: State | None, now: float) -> None:
        """Close the open segment when the state changes; ``None`` = finished."""
        if t.since_s == float("inf") or state == t.state:
            return
        if now > t.since_s:
            t.segments.append(Segment(t.since_s, now, t.state, t.open_workers))
        if state is None:
            t.since_s = float("inf")
            return
        t.state, t.since_s, t.open_workers = state, now, t.workers_live
        key = t.spec.key
        if (state == "holding") != (key in self._holding):
            (self._holding.add if state == "holding" else self._holding.discard)(key)
            self._blocked = None

    def blocked(self) -> Resources:
        """What the jobs that hold pods but cannot train (state "holding") hold together."""
        if self._blocked is None:
            self._blocked = Resources.total(self.jobs[k].held for k in self._holding)
        return self._blocked


def _batch_share(pod: Obj) -> int | None:
    """The per-replica batch a worker was started with (its environment), if any."""
    for c in pod["spec"].get("containers") or ():
        for e in c.get("env") or ():
            if e.get("name") == BATCH_PER_REPLICA_ENV:
                try:
                    return int(e.get("value", ""))
                except ValueError:
                    return None
    return None


def _gpus(pod: Obj) -> int:
    return pod_request(pod["spec"]).get(GPU, 0)


def _want(pod: Obj) -> int | None:
    """What a running pod's program would use alone, in millicores: a CPU worker (or chief)
    all it may have (None), anything else (a GPU worker feeding its GPUs, a parameter
    server, a scheduler, a pod of no job) its request."""
    if job_of(pod) is not None and _role(pod) in ("worker", *CHIEFS) and not _gpus(pod):
        return None
    return pod_request(pod["spec"])["cpu"]


def _role(pod: Obj) -> str:
    return (pod["metadata"].get("labels") or {}).get(L_TYPE, "")


def _unschedulable(pod: Obj) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def _restart_count(pod: Obj) -> int:
    return sum(
        int(cs.get("restartCount") or 0)
        for cs in (pod.get("status") or {}).get("containerStatuses") or ()
    )
