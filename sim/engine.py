"""The discrete-event loop that ties the simulated cluster to the real webhook.

At each instant the cluster's own reactions run first (kube-scheduler binding, kubelets,
training programs, syncs finishing), then Metacontroller's free workers start the syncs
their queues hold (each lands ``cost`` later, ``sim/metacontroller.py``); then time jumps to
the next event. Everything random draws from one seeded generator and sync costs are a
function of the request's size by default, so a seed fixes the whole run.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import math
import random
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml
from flask import Flask

from policy.job.podgroup import pod_group_child
from policy.model.admission import TYPE_KEY as ADMISSIONS
from policy.model.cluster import L_JOB
from policy.model.jobs import COEXIST_LABEL, COEXIST_LABEL_VALUE, pod_request
from policy.model.kinds import KINDS
from policy.model.pool import (
    DEFAULT_POOL,
    POOL_KIND,
    GangScheduler,
    PolicyName,
    PoolSpec,
    admission_name,
    pool_object,
)
from policy.model.resources import Resources
from sim.apiserver import EPOCH, ApiServer, Obj, object_key, stamp
from sim.bounds import BoundJob, lower_bounds
from sim.deployments import Deployments
from sim.kube import Kube
from sim.kubeshare import KubeShare
from sim.metacontroller import (
    COST_FREE,
    WRITES,
    ApplyStrategy,
    Client,
    Controller,
    Costs,
    HotLoop,
    Metacontroller,
    SyncCost,
    View,
)
from sim.monitor import Monitor, MonitorConfig
from sim.pool_log import PoolLog
from sim.reaper import Reaper
from sim.results import JobRecord, Progress, Sample, Segment, SimResult
from sim.sizes import dress
from sim.spec import JobSpec
from sim.throughput import Reporters, ThroughputConfig
from sim.training import Programs, Training, replica_specs
from sim.webhook import WebhookClient
from webhooks.app import create_app
from webhooks.config import Settings

# metacontroller/*.yaml, shipped with the package (sim/data/manifests links to them).
MANIFESTS = Path(__file__).resolve().parent / "data" / "manifests"
# The CompositeControllers Metacontroller hosts, in the order its workers are served.
CONTROLLERS = (
    MANIFESTS / "pool-controller.yaml",
    *(MANIFESTS / f"{k.singular}-controller.yaml" for k in KINDS),
    MANIFESTS / "migration-controller.yaml",
)
POOLS, JOBS = "dragonet-pools", "dragonet-tfjobs"
TFJOBS = "TFJob.kubeflow.org/v1"
AppFactory = Callable[[Callable[[], datetime]], Flask]  # (clock) -> a webhook app
DAY = 86400.0


# A run ends this long after its last job finished, whatever far-off events remain.
TAIL_S = 3600.0


class SimulationError(RuntimeError):
    """The run cannot go on (e.g. a sync hot loop: a status that never settles)."""


@dataclass(frozen=True)
class Scenario:
    name: str
    nodes: tuple[Mapping[str, Any], ...]  # v1 Node objects
    jobs: tuple[JobSpec, ...]
    objects: tuple[Mapping[str, Any], ...] = ()  # other cluster objects (PriorityClasses)


@dataclass(frozen=True)
class SimConfig:
    # The TrainingPool "default" the run creates (unless the scenario brings its own).
    policy: PolicyName = "dragonet-las"
    binding: Literal["affinity", "nodeName"] = "affinity"
    seed: int = 0
    # Metacontroller, with its own defaults (v4.17.2; sim/metacontroller.py ``Costs``):
    # workers per CompositeController (--workers), the client's token bucket shared by
    # every controller (--client-go-qps, 0: no limit; --client-go-burst), the periodic
    # resync (--cache-flush-interval, 0: none), how long a customize answer is cached (0:
    # for ever), --apply-strategy, whether API requests and customize calls cost time,
    # and how late its informer view is. ``cost_free()``: the simulator's old behaviour.
    mc_workers: int = 5
    mc_qps: float = 5.0
    mc_burst: int = 10
    mc_resync_s: float = 1800.0
    mc_customize_ttl_s: float = 1200.0
    mc_apply_strategy: ApplyStrategy = "dynamic-apply"
    mc_charged: bool = True
    view_delay_s: float = 0.0
    # Objects as a real API server returns them (managedFields, node images and
    # conditions, kubelet pod status: sim/sizes.py), or as small as the simulator needs.
    object_sizes: Literal["real", "minimal"] = "real"
    # What a sync costs in simulated time: "model" = base + per KiB of the request, per
    # controller (deterministic); "measured" = the webhook's wall time (not reproducible).
    sync_cost: Literal["model", "measured"] = "model"
    pool_sync_base_ms: float = 2.0
    pool_sync_per_kib_ms: float = 0.02
    job_sync_base_ms: float = 1.0
    job_sync_per_kib_ms: float = 0.02
    start_delay_s: tuple[float, float] = (3.0, 7.0)
    grace_s: float = 2.0
    # The user deletes a finished job this long after it finished (None: never).
    delete_finished_after_s: float | None = 60.0
    # The reaper lists the jobs this often (its DRAGONET_REAPER_INTERVAL_SECONDS): a job
    # with ttlSecondsAfterFinished is deleted once that has passed.
    reaper_interval_s: float = 30.0
    starvation_seconds: float = 30.0
    idle_seconds: float = 60.0
    # The default pool's external gang scheduler (none, kube-batch, volcano, coscheduling):
    # the run also runs that scheduler (sim/gang.py).
    gang_scheduler: GangScheduler = "none"
    # Faults and operations, at simulated times: a fresh webhook process (restart), a node
    # that disappears, a pod evicted, a container that exits with a code.
    webhook_restarts_s: tuple[float, ...] = ()
    node_losses: tuple[tuple[float, str], ...] = ()
    evictions: tuple[tuple[float, str], ...] = ()
    crashes: tuple[tuple[float, str, int], ...] = ()
    max_time_s: float = 60 * DAY
    # One parent synced more often within one simulated second: its status or children
    # never settle (a hot loop), and the run stops.
    max_syncs_per_parent_second: int = 200
    # The Container Monitor and its reporting training tasks (sim/monitor.py; None: none),
    # and the default pool's spec.migration (docs/migration.md; None: the CRD's defaults).
    monitor: MonitorConfig | None = None
    # Training jobs report their speed to the monitor's writer (sim/throughput.py; None:
    # no job reports, as before).
    throughput: ThroughputConfig | None = None
    migration: Mapping[str, Any] | None = None
    # Fractional GPUs: the default pool's spec.kubeshare (KubeShare is modelled either way).
    kubeshare: Literal["none", "v1", "v2"] = "none"
    # Beside Kubeflow's training-operator (the chart's kubeflow.coexist, docs/kubeflow.md):
    # the job controllers select only the jobs labelled for Dragonet, the webhook and the
    # reaper run with their kubeflow_coexist settings.
    kubeflow_coexist: bool = False

    @property
    def costs(self) -> Costs:
        """Metacontroller's costs and flags of this run."""
        return Costs(
            qps=self.mc_qps,
            burst=self.mc_burst,
            workers=self.mc_workers,
            resync_s=self.mc_resync_s,
            customize_ttl_s=self.mc_customize_ttl_s,
            apply_strategy=self.mc_apply_strategy,
            charged=self.mc_charged,
        )

    def cost_free(self) -> SimConfig:
        """This config as the simulator ran before it charged Metacontroller's costs: one
        worker, free and instant writes, no resync, customize cached for ever and free,
        no last-applied annotation, minimal objects."""
        free = COST_FREE
        return replace(
            self,
            mc_workers=free.workers,
            mc_qps=free.qps,
            mc_burst=free.burst,
            mc_resync_s=free.resync_s,
            mc_customize_ttl_s=free.customize_ttl_s,
            mc_apply_strategy=free.apply_strategy,
            mc_charged=free.charged,
            object_sizes="minimal",
        )

    def cost_of(self, controller: Mapping[str, Any]) -> SyncCost | None:
        """The cost model of a CompositeController's hooks (None: measured wall time)."""
        if self.sync_cost == "measured":
            return None
        if controller["spec"]["parentResource"]["resource"] == "trainingpools":
            return SyncCost(self.pool_sync_base_ms, self.pool_sync_per_kib_ms)
        return SyncCost(self.job_sync_base_ms, self.job_sync_per_kib_ms)


def load_controllers(
    gang_schedulers: Iterable[str] = (), sharepods: bool = False, kubeflow_coexist: bool = False
) -> list[dict[str, Any]]:
    """The plain manifests of ``metacontroller/``; with gang backends, the job controllers
    also own those backends' PodGroups (metacontroller/README.md, the chart's
    ``scheduling.gangSchedulers``), with ``sharepods`` KubeShare v1 SharePods, as the
    chart's ``scheduling.kubeshare: v1`` makes them, and with ``kubeflow_coexist`` they
    select only the jobs labelled for Dragonet, as the chart's ``kubeflow.coexist`` makes
    them."""
    controllers = [orjson.loads(raw) for raw in _controller_manifests()]
    for c in controllers:
        if c["spec"]["parentResource"]["resource"] in JOB_RESOURCES:
            c["spec"]["childResources"] += [pod_group_child(b) for b in gang_schedulers]
            if sharepods:
                c["spec"]["childResources"].append(SHAREPOD_CHILD)
            if kubeflow_coexist:
                c["spec"]["parentResource"]["labelSelector"] = COEXIST_SELECTOR
    return controllers


@cache
def _controller_manifests() -> tuple[bytes, ...]:
    """``CONTROLLERS`` read once a process, as JSON: each run gets its own copy to change."""
    return tuple(orjson.dumps(yaml.safe_load(path.read_text())) for path in CONTROLLERS)


COEXIST_SELECTOR = {"matchLabels": {COEXIST_LABEL: COEXIST_LABEL_VALUE}}


JOB_RESOURCES = tuple(k.plural for k in KINDS)  # the job controllers (not pools', migrations')
SHAREPOD_CHILD = {
    "apiVersion": "kubeshare.nthu/v1",
    "resource": "sharepods",
    "updateStrategy": {"method": "OnDelete"},
}


class Simulation:
    def __init__(
        self,
        scenario: Scenario,
        config: SimConfig | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        webhook_app: AppFactory | None = None,
    ) -> None:
        """``webhook_app`` builds the app Metacontroller calls (default: Dragonet's own,
        ``webhooks.app.create_app``); it is called again at every webhook restart."""
        self.scenario = scenario
        self.config = config = config or SimConfig()
        self.on_progress = on_progress
        self._app_factory = webhook_app
        self.stopped_at_horizon = False
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.rng = random.Random(config.seed)
        self.api = ApiServer(clock=lambda: self.now)
        if config.object_sizes == "real":
            ssa = config.mc_apply_strategy == "server-side-apply"
            self.api.dress = lambda old, new: dress(old, new, stamp(self.now), ssa)
        self.kube = Kube(self.api, self.schedule, self.rng, config.start_delay_s, config.grace_s)
        self.kubeshare = KubeShare(self.api, self.schedule, self.kube)
        self.programs = Programs(self.api, self.schedule, self.kube.exit, request=self.kube.request)
        self.deployments = Deployments(self.api, self.schedule)  # TFJobs' TensorBoards
        # Deletes jobs whose ttlSecondsAfterFinished has passed (reaper/; the chart's).
        self.reaper = Reaper(
            self.api,
            self.schedule,
            self.clock,
            config.reaper_interval_s,
            self._goes_on,
            kubeflow_coexist=config.kubeflow_coexist,
        )
        self.programs.on_finish = self._finished
        self.monitor = (
            Monitor(self.api, self.schedule, self.programs, config.monitor)
            if config.monitor is not None
            else None
        )
        self.view = View(self.api, self.schedule, config.view_delay_s)
        self.settings = Settings(kubeflow_coexist=config.kubeflow_coexist)
        self.webhook = WebhookClient(self._new_app())
        costs = config.costs
        client = Client(self.schedule, lambda: self.now, costs)  # one per process
        self.mc = Metacontroller(
            [
                Controller(
                    c,
                    self.api,
                    self.view,
                    self.webhook,
                    self.schedule,
                    workers=config.mc_workers,
                    cost=config.cost_of(c),
                    max_syncs_per_second=config.max_syncs_per_parent_second,
                    client=client,
                    costs=costs,
                )
                for c in load_controllers(
                    self._gang_backends(),
                    sharepods=self._kubeshare() == "v1",
                    kubeflow_coexist=config.kubeflow_coexist,
                )
            ],
            client,
        )
        self.reporters = (
            Reporters(
                self.api,
                self.schedule,
                self.programs,
                client,
                config.throughput,
                config.seed,
                self._all_done,
            )
            if config.throughput is not None
            else None
        )
        self.policy = self._pool_policy()
        if names := self._gang_scheduler_names():
            self.kube.run_gang_scheduler(names)
        self.log: list[tuple[float, str, str, str]] = []  # (t, event, pod, node)
        self.api.watchers.append(self._record)
        self.pool_log = PoolLog(lambda: self.now)  # each job's story in the pool's words
        self.api.watchers.append(self.pool_log.watch)
        self.capacity = Resources.total(
            Resources.parse(n["status"]["allocatable"]) for n in scenario.nodes
        )
        self._alloc_int: dict[str, float] = {}
        self._decided: dict[str, float] = {}  # Admission key -> its last decision's time
        self._decision_to_pod: list[float] = []
        self._blocked_int: dict[str, float] = {}
        self.samples: list[Sample] = []
        self._sampled: tuple[Resources, Resources] | None = None  # the last step's totals
        self._kinds: dict[str, str] = {}  # job key -> its kind (the first job of that key)
        for spec in scenario.jobs:
            self._kinds.setdefault(spec.key, spec.manifest["kind"])

    # --- plumbing --------------------------------------------------------------------

    def clock(self) -> datetime:
        return EPOCH + timedelta(seconds=self.now)

    def _new_app(self) -> Flask:
        if self._app_factory is not None:
            return self._app_factory(self.clock)
        return create_app(self.settings, clock=self.clock)

    def _own_pool(self) -> Mapping[str, Any] | None:
        """The scenario's own TrainingPool "default", if it brings one."""
        return next(
            (
                o
                for o in self.scenario.objects
                if o.get("kind") == POOL_KIND and o["metadata"]["name"] == DEFAULT_POOL
            ),
            None,
        )

    def _pool_specs(self) -> list[PoolSpec]:
        """The spec of every pool the run has (its own ones, or the default pool)."""
        own = [o for o in self.scenario.objects if o.get("kind") == POOL_KIND]
        if self._own_pool() is None:
            own.append(self.default_pool())
        return [PoolSpec.model_validate(o.get("spec") or {}) for o in own]

    def _gang_backends(self) -> list[str]:
        return sorted({s.gangScheduler for s in self._pool_specs()} - {"none"})

    def _gang_scheduler_names(self) -> set[str]:
        return {s.scheduler_name for s in self._pool_specs() if s.gangScheduler != "none"}

    def _kubeshare(self) -> str:
        own = self._own_pool()
        if own is None:
            return self.config.kubeshare
        return str((own.get("spec") or {}).get("kubeshare") or "none")

    def _pool_policy(self) -> str:
        own = self._own_pool()
        if own is None:
            return self.config.policy
        return str((own.get("spec") or {}).get("policy") or "dragonet")

    def default_pool(self) -> dict[str, Any]:
        """The TrainingPool "default" made from the config."""
        c = self.config
        return pool_object(
            DEFAULT_POOL,
            policy=c.policy,
            binding=c.binding,
            starvationSeconds=c.starvation_seconds,
            idleSeconds=c.idle_seconds,
            gangScheduler=c.gang_scheduler,
            **({"migration": dict(c.migration)} if c.migration is not None else {}),
            kubeshare=c.kubeshare,
        )

    def schedule(self, delay: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._heap, (self.now + max(delay, 0.0), next(self._seq), action))

    def _record(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == ADMISSIONS:
            self._note_decision(old, new)
            return
        if tkey != "Pod.v1":
            return
        if old is None and new is not None:
            self._pod_made(new)
            self.log.append((self.now, "create", object_key(new), new["spec"].get("nodeName", "")))
        elif new is not None and new["spec"].get("nodeName") != (old or {}).get("spec", {}).get(
            "nodeName"
        ):
            self.log.append((self.now, "bind", object_key(new), new["spec"]["nodeName"]))
        elif new is None:
            self.log.append((self.now, "gone", object_key(old), old["spec"].get("nodeName", "")))

    def _note_decision(self, old: Obj | None, new: Obj | None) -> None:
        """An Admission's spec written by a pool sync: when the pool decided it."""
        decided = self.mc.client.decision_s if self.mc.client else None
        if new is None or decided is None:
            return
        if old is not None and old.get("spec") == new.get("spec"):
            return
        self._decided[object_key(new)] = decided

    def _pod_made(self, pod: Obj) -> None:
        """The first pod a job gets after a decision of the pool about it: how long after."""
        meta = pod["metadata"]
        owners = meta.get("ownerReferences") or ()
        job = (meta.get("labels") or {}).get(L_JOB)
        if not owners or job is None:
            return
        key = f"{meta.get('namespace')}/{admission_name(owners[0]['kind'], job)}"
        decided = self._decided.pop(key, None)
        if decided is not None:
            self._decision_to_pod.append(self.now - decided)

    def _writes(self) -> int:
        client = self.mc.client
        return sum(client.requests[v] for v in WRITES) if client else 0

    # --- the run ---------------------------------------------------------------------

    def _setup(self) -> None:
        for obj in (*self.scenario.nodes, *self.scenario.objects):
            self.api.create(obj)
        if self._own_pool() is None:
            self.api.create(self.default_pool())
        for spec in self.scenario.jobs:
            self.schedule(spec.arrival_s, lambda s=spec: self._arrive(s))
        if self.monitor is not None:
            self.monitor.start()
        if self.reporters is not None:
            self.reporters.start()
        self.mc.start_resync(self.config.mc_resync_s, self._goes_on)
        for t in self.config.webhook_restarts_s:
            self.schedule(t, self._restart_webhook)
        for t, node in self.config.node_losses:
            self.schedule(t, lambda n=node: self.kube.lose_node(n))
        for t, pod in self.config.evictions:
            self.schedule(t, lambda p=pod: self.kube.evict(p))
        for t, pod, code in self.config.crashes:
            self.schedule(t, lambda p=pod, c=code: self.kube.exit(p, c))

    def _arrive(self, spec: JobSpec) -> None:
        manifest = {**spec.manifest, "metadata": {**spec.manifest["metadata"]}}
        manifest["metadata"].setdefault("namespace", spec.namespace)
        self.programs.add(spec, self.now)
        self.api.create(manifest)

    def _finished(self, job: str) -> None:
        after = self.config.delete_finished_after_s
        if after is not None:
            kind = self._kinds[job]
            self.schedule(after, lambda: self.api.delete(f"{kind}.kubeflow.org/v1", job))

    def _restart_webhook(self) -> None:
        self.webhook.app = self._new_app()

    def _goes_on(self) -> bool:
        """False once the run is over but for far-off events (``_run``: an hour after the
        last job finished)."""
        if not self._all_done():
            return True
        last = max((t.finished_s or 0.0 for t in self.programs.jobs.values()), default=0.0)
        return self.now <= last + TAIL_S

    def _all_done(self) -> bool:
        jobs = self.programs.jobs
        return len(jobs) == len(self.scenario.jobs) == len(self.programs.done)

    def _advance(self, to: float) -> None:
        dt = to - self.now
        if dt > 0:
            blocked = self.programs.blocked()
            allocated = self.kube.used_total()
            for k, v in allocated.items():
                self._alloc_int[k] = self._alloc_int.get(k, 0.0) + v * dt
            for k, v in blocked.items():
                self._blocked_int[k] = self._blocked_int.get(k, 0.0) + v * dt
            # The same totals (cached objects) make the same sample as the last step's,
            # which the last sample already equals.
            if self._sampled is None or (
                self._sampled[0] is not allocated or self._sampled[1] is not blocked
            ):
                self._sampled = (allocated, blocked)
                sample = Sample(self.now, _units(allocated), _units(allocated - blocked))
                if not self.samples or (
                    sample.allocated != self.samples[-1].allocated
                    or sample.training != self.samples[-1].training
                ):
                    self.samples.append(sample)
        self.now = to

    def run(self) -> SimResult:
        # The run keeps every object alive; a full garbage collection would walk them all
        # on every few thousand allocations (each hook request is one big JSON tree). What
        # is alive before the run is frozen as it is, not collected first: a full collection
        # walks the whole process (in a long-lived one, a test worker's, most of a run's cost).
        thresholds = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(200_000, 50, 1000)
        try:
            return self._run()
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()

    def _step(self) -> bool:
        """Run what is due now: one event, else the syncs free workers can start. False
        when nothing is left to do at this instant."""
        if self._heap and self._heap[0][0] <= self.now:
            _, _, action = heapq.heappop(self._heap)
            action()
            return True
        try:
            return self.mc.start_syncs() > 0
        except HotLoop as err:
            raise SimulationError(f"t={self.now:.3f}s: {err}") from err

    def settle(self, max_s: float = 600.0) -> None:
        """Run until Metacontroller has nothing queued or in flight (for tests that poke a
        finished run: enqueue a key, then settle). Events due meanwhile run too."""
        until = self.now + max_s
        while True:
            if self._step():
                continue
            if self.mc.idle or not self._heap or self._heap[0][0] > until:
                return
            self._advance(self._heap[0][0])

    def _run(self) -> SimResult:
        started = time.perf_counter()
        self._setup()
        finished_at: float | None = None
        while True:
            if self._step():
                continue
            if finished_at is None and self._all_done():
                finished_at = self.now
            if not self._heap or self._heap[0][0] > self.config.max_time_s:
                # Work was still due past the horizon: the run is cut, not over.
                self.stopped_at_horizon = bool(self._heap) and finished_at is None
                break
            if finished_at is not None and self._heap[0][0] > finished_at + TAIL_S:
                break  # only far-off resyncs left
            self._report()
            self._advance(self._heap[0][0])
        # A cut run is measured up to its horizon: what ran kept running until then.
        self._advance(self.config.max_time_s if self.stopped_at_horizon else self.now)
        return self._result(time.perf_counter() - started)

    def _report(self) -> None:
        if self.on_progress is None:
            return
        jobs = self.programs.jobs.values()
        self.on_progress(
            Progress(
                policy=self.policy,
                sim_time_s=self.now,
                jobs_total=len(self.scenario.jobs),
                jobs_done=sum(1 for t in jobs if t.finished_s is not None),
                jobs_training=sum(1 for t in jobs if t.finished_s is None and t.rate > 0),
                jobs_waiting=sum(1 for t in jobs if t.finished_s is None and t.rate == 0),
                sync_calls=self.mc.sync_calls,
            )
        )

    # --- results ---------------------------------------------------------------------

    def _bound_job(self, spec: JobSpec) -> BoundJob:
        """The job alone on an ideal cluster, at its best size: no policy can beat it."""
        t = self.programs.jobs.get(spec.key) or Training.of(spec, spec.arrival_s)
        replicas = replica_specs(spec.manifest)
        worker = replicas.get("Worker") or {}
        w = int(worker.get("replicas", 0) or 0)
        top = int(spec.manifest["spec"].get("max-instances", w) or w)
        low = max(t.min_workers, 1) if w else 0
        fixed = Resources.total(
            _times(pod_request(r["template"]["spec"]), int(r.get("replicas", 1)))
            for name, r in replicas.items()
            if name != "Worker"
        )
        per_worker = pod_request(worker["template"]["spec"]) if w else Resources({})
        overhead = self.config.start_delay_s[0] + spec.profile.restore_s
        best = math.inf
        work: dict[str, float] = {}
        for n in range(low, max(top, low) + 1) if w else [0]:
            rate = spec.profile.rate(n, 0, max(t.ps, 1)) if n else 1.0
            run = spec.steps / rate if rate > 0 else math.inf
            best = min(best, overhead + run)
            for k, v in _units(fixed + _times(per_worker, n)).items():
                if k != "pods":
                    work[k] = min(work.get(k, math.inf), v * run)
        return BoundJob(spec.arrival_s, best, work)

    def _result(self, wall_s: float) -> SimResult:
        records = []
        for spec in self.scenario.jobs:
            key = spec.key
            t = self.programs.jobs.get(key)
            if t is None:  # the run ended before it arrived
                kind = str(spec.manifest.get("kind") or "TFJob")
                records.append(JobRecord(key, spec.arrival_s, None, None, 0, (), kind=kind))
                continue
            segments = list(t.segments)
            if t.since_s != math.inf and self.now > t.since_s:
                segments.append(Segment(t.since_s, math.inf, t.state, t.open_workers))
            w = (replica_specs(spec.manifest).get("Worker") or {}).get("replicas", 0)
            allocation = tuple((at, _units(held)) for at, held in t.held_history)
            said = self.pool_log.jobs.get(key)
            records.append(
                JobRecord(
                    key,
                    spec.arrival_s,
                    t.started_s,
                    t.finished_s,
                    int(w),
                    tuple(segments),
                    allocation,
                    kind=str(spec.manifest.get("kind") or "TFJob"),
                    admitted_s=said.admitted_s if said else None,
                    workers=_changes([(spec.arrival_s, 0), *t.workers_history]),
                    scale_actions=t.scale_actions,
                    scales=tuple(said.scales) if said else (),
                    preemptions=tuple(said.preemptions) if said else (),
                    moves=tuple(said.moves) if said else (),
                    state_losses=t.losses,
                    reason=said.reason if said and t.finished_s is None else "",
                    message=said.message if said and t.finished_s is None else "",
                )
            )
        jcts = [r.jct_s for r in records if r.jct_s is not None]
        finishes = [r.finish_s for r in records if r.finish_s is not None]
        makespan = max(finishes) if finishes else None
        # What was allocated is integrated up to ``now`` (the horizon, for a cut run); after
        # the last job finished it is nothing. A run with a job unfinished: up to ``now``.
        all_finished = len(jcts) == len(records)
        span = (makespan if all_finished and makespan else self.now) or 1.0
        cap = {k: v for k, v in _units(self.capacity).items() if k != "pods"}
        # The controllers that were called (a scenario without MXJobs reports no MXJob one).
        controllers = [c for c in self.mc.controllers.values() if c.sync_calls]
        lat = sorted(x * 1000 for c in controllers for x in c.latencies_s)
        bounds = lower_bounds([self._bound_job(s) for s in self.scenario.jobs], cap)
        summary = {
            "policy": self.policy,
            "scenario": self.scenario.name,
            "jobs": len(records),
            "jobs_finished": len(jcts),
            "avg_jct_s": _round(statistics.fmean(jcts)) if jcts else None,
            "p50_jct_s": _round(_pct(sorted(jcts), 50)) if jcts else None,
            "p95_jct_s": _round(_pct(sorted(jcts), 95)) if jcts else None,
            "makespan_s": _round(makespan),
            "avg_queue_s": _round(
                statistics.fmean(r.start_s - r.arrival_s for r in records if r.start_s is not None)
            )
            if any(r.start_s is not None for r in records)
            else None,
            "utilization": {
                k: round(self._alloc_int.get(k, 0.0) / 1000 / (v * span), 4)
                for k, v in cap.items()
                if v > 0 and k != "pods"
            },
            "deadlocked_resource_seconds": {
                k: _round(self._blocked_int.get(k, 0.0) / 1000)
                for k, v in cap.items()
                if v > 0 and k != "pods"
            },
            "scale_actions": self.programs.scale_actions,
            "pod_restarts": self.programs.restarts,
            **(
                {
                    "migrations": self.programs.migrations,
                    "migration_requests": self.monitor.requests if self.monitor else 0,
                }
                if self.monitor is not None or self.programs.migrations
                else {}
            ),
            **(
                {
                    "speed_reports": self.reporters.reports,
                    "speed_writes": self.reporters.writes,
                    "jobs_with_speed": len(self.reporters.truth),
                }
                if self.reporters is not None
                else {}
            ),
            # Parameter-server state lost (a preemption), and the GPU-seconds it cost: the
            # progress since the last checkpoint plus the restore (sim/training.py).
            "state_losses": sum(t.losses for t in self.programs.jobs.values()),
            "lost_gpu_s": _round(sum(t.lost_gpu_s for t in self.programs.jobs.values())),
            "kubelet_rejections": self.kube.rejected,
            "sync_calls": self.mc.sync_calls,
            "sync_calls_by_controller": {c.name: c.sync_calls for c in controllers},
            "sync_errors": self.mc.errors,
            "sync_throttled": self.mc.throttled,
            "sync_latency_ms": _percentiles(lat),
            "sync_latency_ms_by_controller": {
                c.name: _percentiles(sorted(x * 1000 for x in c.latencies_s)) for c in controllers
            },
            "sync_busy_s_by_controller": {c.name: round(c.busy_s, 3) for c in controllers},
            "customize_calls_by_controller": {c.name: c.customize_calls for c in controllers},
            # Metacontroller's API requests (its one rate-limited client), the time from a
            # sync's decision (the webhook's clock) to each of its writes, the time from a
            # pool decision to the pods it placed existing, and each workqueue's depth.
            "api_requests": dict(self.mc.client.requests) if self.mc.client else {},
            "writes_per_s": round(self._writes() / span, 3),
            "write_latency_s": _spread(self.mc.client.write_latencies_s if self.mc.client else []),
            "decision_to_pod_s": _spread(self._decision_to_pod),
            "queue_depth_by_controller": {
                c.name: {"max": c.depth_max, "mean": round(c.mean_depth(self.now), 3)}
                for c in controllers
            },
            "lower_bounds": {
                "makespan_s": _round(bounds.makespan_s),
                "avg_jct_s": _round(bounds.avg_jct_s),
            },
            "wall_time_s": round(wall_s, 3),
            # True when jobs were still running or waiting at max_time_s: then makespan
            # and JCTs cover the finished jobs only.
            "stopped_at_horizon": self.stopped_at_horizon,
            "horizon_s": self.config.max_time_s,
        }
        samples = tuple(self.samples)
        return SimResult(self.policy, self.scenario.name, cap, tuple(records), samples, summary)


def _changes(history: Sequence[tuple[float, int]]) -> tuple[tuple[float, int], ...]:
    """A (time, value) history with one entry per time (the last) and no repeated value."""
    out: list[tuple[float, int]] = []
    for t, n in history:
        if out and out[-1][0] == t:
            out.pop()
        if not out or out[-1][1] != n:
            out.append((t, n))
    return tuple(out)


def _times(r: Resources, n: int) -> Resources:
    return Resources({k: v * n for k, v in r.items()})


def _units(r: Resources) -> dict[str, float]:
    return {k: v / 1000 for k, v in r.items()}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def _spread(values: Sequence[float]) -> dict[str, float | None]:
    """p50, p95 and max of ``values`` (seconds, to the millisecond)."""
    ordered = sorted(values)
    if not ordered:
        return {"p50": None, "p95": None, "max": None}
    return {
        "p50": round(_pct(ordered, 50), 3),
        "p95": round(_pct(ordered, 95), 3),
        "max": round(ordered[-1], 3),
    }


def _percentiles(sorted_ms: Sequence[float]) -> dict[str, float | None]:
    return {
        "p50": round(_pct(sorted_ms, 50), 3) if sorted_ms else None,
        "p99": round(_pct(sorted_ms, 99), 3) if sorted_ms else None,
    }


def _pct(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile."""
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def simulate(scenario: Scenario, config: SimConfig | None = None, **kw: Any) -> SimResult:
    return Simulation(scenario, config, **kw).run()


__all__ = ["Scenario", "SimConfig", "SimResult", "Simulation", "SimulationError", "simulate"]
