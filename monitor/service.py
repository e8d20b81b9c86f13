"""The monitor's state and its one operation: take a report, judge, maybe ask for a move.

The records (one ``ConvergenceTracker`` per reporting pod) live in memory and are
disposable: a restarted monitor starts them afresh, and what matters (the requests, their
outcome, how often a pod moved) lives in the API as Migrations. Memory is bounded: a pod
silent for ``forget_seconds`` is forgotten and at most ``max_pods`` are tracked.

Time comes from a ``Clock`` (monotonic seconds for records and throttles, wall time to
age a Refused request against its ``creationTimestamp``), so tests drive it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from monitor.auth import Caller
from monitor.config import MonitorSettings
from monitor.convergence import Category, ConvergenceRules, ConvergenceTracker
from monitor.decide import Move, choose
from monitor.imbalance import PoolLoads, Verdict, pool_loads
from monitor.kube import JOB_PLURALS, AlreadyExists, ApiError, Cluster, PodInfo, migration
from monitor.metrics import MonitorMetrics
from monitor.throughput import JobWindow, WriterRules, config_of
from policy.model.batch import GradStats
from policy.model.bounds import OutOfBounds
from policy.model.cluster import L_OPERATOR, OPERATOR_NAME
from policy.model.kinds import kinds_text
from policy.model.throughput import ANNOTATION, History, Progress, history_of

log = logging.getLogger("dragonet.monitor")


@dataclass(frozen=True)
class Clock:
    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], datetime] = lambda: datetime.now(UTC)


class ReportError(Exception):
    """A report the monitor cannot take, with the HTTP status that says why."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


@dataclass
class _Record:
    pod: PodInfo
    tracker: ConvergenceTracker
    last_seen: float
    refusals: int = 0  # requests for this pod replaced after a refusal (the back-off)


@dataclass(frozen=True)
class Outcome:
    """The answer to one report (the body of a 200)."""

    pod: str
    namespace: str
    category: str
    overloaded: bool | None
    requested: str | None = None  # the pod a request was made for, if any
    reason: str | None = None
    result: str | None = None
    note: str | None = None

    def body(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class _Speeds:
    """One reporting job's window (monitor/throughput.py)."""

    kind: str
    window: JobWindow
    last_seen: float
    closing: bool = False  # a thread is reading the pods or writing


@dataclass(frozen=True)
class SpeedOutcome:
    """The answer to one speed report: ``result`` is ``taken`` (in the window),
    ``written`` (the job's history was patched), ``unchanged`` (a window closed with
    nothing new, or not measurable), ``gone`` (the job is no more) or ``error``."""

    pod: str
    namespace: str
    job: str
    result: str

    def body(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Monitor:
    cluster: Cluster
    settings: MonitorSettings
    rules: ConvergenceRules = field(default_factory=ConvergenceRules)
    clock: Clock = field(default_factory=Clock)
    metrics: MonitorMetrics = field(default_factory=MonitorMetrics)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._records: OrderedDict[tuple[str, str], _Record] = OrderedDict()  # by recency
        self._names: dict[str, list[tuple[str, str]]] = {}
        self._last_ask: dict[tuple[str, str], float] = {}
        self.loads: PoolLoads | None = None
        self.loads_at: float | None = None
        self.load_problem: str | None = "the pool's loads have not been read yet"
        self._speeds: OrderedDict[tuple[str, str], _Speeds] = OrderedDict()  # by recency
        self._speed_pods: OrderedDict[tuple[str, str], PodInfo] = OrderedDict()
        self._writer = WriterRules(
            window_s=self.settings.throughput_window_seconds,
            change=self.settings.throughput_change,
        )

    # ----- reports -----

    def report(
        self,
        name: str,
        namespace: str | None,
        value: float,
        caller: Caller | None = None,
        source_ip: str | None = None,
    ) -> Outcome:
        """Take one metric report of pod ``name``; with ``caller`` (monitor/auth.py), only
        if that is the pod the caller's token is bound to (else 403); with
        ``check_source_ip``, only from that pod's own address (``source_ip``)."""
        now = self.clock.monotonic()
        self.forget(now)
        namespace = self._claimed(name, namespace, caller)
        record = self._known(name, namespace)
        if record is not None and caller is not None and record.pod.uid != caller.uid:
            record = None  # re-created since, or another pod's token: ask the API
        if record is None:
            record = self._track(self._caller_pod(name, namespace, caller), now)
        self._from_the_pod(record.pod, source_ip)
        with self._lock:
            record.last_seen = now
            self._records.move_to_end(self._key(record.pod))
            category = record.tracker.feed(now, value)
            pods_here = [r.pod for r in self._records.values()]
        verdict = self.verdict()
        overloaded = verdict.overloaded if verdict else None
        self._count_categories()
        pod = record.pod
        note = None if pod.is_worker else "not a worker: the monitor never asks to move it"
        answer = Outcome(pod.name, pod.namespace, category.value, overloaded, note=note)
        allocatable = {}
        if self.loads and self.settings.node_name in self.loads.nodes:
            allocatable = dict(self.loads.nodes[self.settings.node_name].allocatable)
        move = choose(pod, category, bool(overloaded), pods_here, allocatable)
        if move is None:
            return answer
        result = self._ask(move, now)
        return replace(answer, requested=move.pod.name, reason=move.reason, result=result)

    def _key(self, pod: PodInfo) -> tuple[str, str]:
        return (pod.namespace, pod.name)

    def _claimed(self, name: str, namespace: str | None, caller: Caller | None) -> str | None:
        """The namespace of the pod a report is about: the caller's own (403 if the report
        names another pod or namespace); without a caller, as given."""
        if caller is None:
            return namespace
        if name != caller.pod or namespace not in (None, caller.namespace):
            where = f"{namespace}/{name}" if namespace else name
            raise ReportError(
                403, f"the token belongs to {caller}: it may report only about itself, not {where}"
            )
        return caller.namespace

    def _from_the_pod(self, pod: PodInfo, source_ip: str | None) -> None:
        """With ``check_source_ip``: 403 unless the request came from the pod's own IP."""
        if not self.settings.check_source_ip or source_ip is None:
            return
        if not pod.ip or source_ip != pod.ip:
            raise ReportError(
                403,
                f"a report about {pod.namespace}/{pod.name} must come from its own address "
                f"{pod.ip or '(none yet)'}, not {source_ip}",
            )

    def _caller_pod(self, name: str, namespace: str | None, caller: Caller | None) -> PodInfo:
        """The pod of that name on this node, from the API, once it is the caller's own:
        a pod re-created under the same name has another uid, and its token with it. Only
        a pod Dragonet made (``training.kubeflow.org/operator-name: dragonet``): beside
        Kubeflow (docs/kubeflow.md), its jobs' pods are not Dragonet's to move, nor their
        jobs' annotations to write."""
        pod = self._look_up(name, namespace)
        if caller is not None and pod.uid != caller.uid:
            raise ReportError(
                403,
                f"the token belongs to {caller} uid {caller.uid}, not the pod of that name "
                f"on node {self.settings.node_name!r} (uid {pod.uid})",
            )
        operator = pod.labels.get(L_OPERATOR)
        if operator != OPERATOR_NAME:
            said = f"{L_OPERATOR}: {operator}" if operator else f"no label {L_OPERATOR}"
            raise ReportError(
                403,
                f"pod {pod.namespace}/{pod.name} is not Dragonet's ({said}): the monitor takes "
                "reports only about the pods of Dragonet's jobs (docs/kubeflow.md)",
            )
        return pod

    def _known(self, name: str, namespace: str | None) -> _Record | None:
        with self._lock:
            keys = self._names.get(name, [])
            if namespace is not None:
                keys = [k for k in keys if k[0] == namespace]
            return self._records[keys[0]] if len(keys) == 1 else None

    def _look_up(self, name: str, namespace: str | None) -> PodInfo:
        node = self.settings.node_name
        try:
            found = self.cluster.pods_named(name, node, namespace)
        except ApiError as err:
            self.metrics.api_errors.labels("list_pods").inc()
            log.warning("cannot look up pod %s: %s", name, err)
            raise ReportError(
                503, f"cannot look up pod {name!r} in the Kubernetes API: {err}", 5
            ) from err
        if not found:
            where = f" in namespace {namespace!r}" if namespace else ""
            raise ReportError(404, f"no pod named {name!r}{where} runs on node {node!r}")
        if len(found) > 1:
            spaces = ", ".join(sorted(p.namespace for p in found))
            raise ReportError(
                400,
                f"pods named {name!r} run on node {node!r} in namespaces {spaces}: "
                'say which with "namespace"',
            )
        return found[0]

    def _track(self, pod: PodInfo, now: float) -> _Record:
        key = self._key(pod)
        with self._lock:
            if key in self._records:
                self._records[key].pod = pod  # as the API has it now (a new uid)
                return self._records[key]
            if len(self._records) >= self.settings.max_pods:
                raise ReportError(
                    429,
                    f"the monitor tracks {self.settings.max_pods} pods already "
                    "(DRAGONET_MONITOR_MAX_PODS); pods silent for "
                    f"{self.settings.forget_seconds:g} s are forgotten",
                    int(self.settings.forget_seconds),
                )
            record = _Record(pod, ConvergenceTracker(self.rules), now)
            self._records[key] = record
            self._names.setdefault(pod.name, []).append(key)
        log.info("tracking pod %s/%s", pod.namespace, pod.name)
        return record

    def forget(self, now: float) -> int:
        """Drop the records of pods silent for ``forget_seconds`` (oldest first)."""
        gone = 0
        with self._lock:
            while self._records:
                key, record = next(iter(self._records.items()))
                if now - record.last_seen < self.settings.forget_seconds:
                    break
                self._drop(key)
                gone += 1
            cutoff = now - self.settings.throttle_seconds
            for key in [k for k, t in self._last_ask.items() if t <= cutoff]:
                if key not in self._records:
                    del self._last_ask[key]
        if gone:
            self.metrics.forgotten.inc(gone)
            self._count_categories()
        return gone

    def _drop(self, key: tuple[str, str]) -> None:
        """Forget one record (the caller holds the lock)."""
        self._records.pop(key, None)
        self._last_ask.pop(key, None)
        keys = self._names.get(key[1], [])
        if key in keys:
            keys.remove(key)
        if not keys:
            self._names.pop(key[1], None)

    def tracked(self) -> int:
        with self._lock:
            return len(self._records)

    def _count_categories(self) -> None:
        with self._lock:
            counts = dict.fromkeys(Category, 0)
            for r in self._records.values():
                counts[r.tracker.category] += 1
        for category, n in counts.items():
            self.metrics.tracked.labels(category.value).set(n)

    # ----- speed reports (docs/speedup.md) -----

    def speed(
        self,
        name: str,
        namespace: str | None,
        steps_per_s: float,
        batch: int | None,
        progress: Progress | None = None,
        caller: Caller | None = None,
        source_ip: str | None = None,
        grad: GradStats | None = None,
    ) -> SpeedOutcome:
        """Take one report of a job's global steps per second (with ``caller``: only from
        the reporting pod itself, as ``report``); once a window is due, read the job's
        pods and write its history if it says something new."""
        now = self.clock.monotonic()
        pod = self._speed_pod(name, self._claimed(name, namespace, caller), caller)
        self._from_the_pod(pod, source_ip)
        if pod.owner is None or pod.owner[0] not in JOB_PLURALS:
            raise ReportError(400, f"pod {pod.name!r} belongs to no {kinds_text()}")
        kind, job = pod.owner
        key = (pod.namespace, job)
        with self._lock:
            self._forget_speeds(now)
            entry = self._speeds.pop(key, None)
            if entry is None:
                if len(self._speeds) >= self.settings.max_pods:
                    raise ReportError(
                        429,
                        f"the monitor keeps the speed of {self.settings.max_pods} jobs already",
                        int(self.settings.forget_seconds),
                    )
                entry = _Speeds(kind, JobWindow(self._writer), now)
            self._speeds[key] = entry
            entry.last_seen = now
            entry.window.report(now, steps_per_s, batch, progress, grad)
            due = entry.window.due(now) and not entry.closing
            entry.closing = entry.closing or due
        result = "taken"
        if due:
            try:
                result = self._close_window(pod.namespace, job, entry, now)
            finally:
                with self._lock:
                    entry.closing = False
        self.metrics.speeds.labels(result).inc()
        return SpeedOutcome(pod.name, pod.namespace, f"{kind}/{job}", result)

    def _speed_pod(self, name: str, namespace: str | None, caller: Caller | None) -> PodInfo:
        """The reporting pod, looked up once (a few hundred kept, the oldest forgotten)."""
        with self._lock:
            hits = [p for (ns, n), p in self._speed_pods.items() if n == name]
            if namespace is not None:
                hits = [p for p in hits if p.namespace == namespace]
            if len(hits) == 1 and (caller is None or hits[0].uid == caller.uid):
                return hits[0]
        pod = self._caller_pod(name, namespace, caller)
        with self._lock:
            self._speed_pods[self._key(pod)] = pod
            while len(self._speed_pods) > self.settings.max_pods:
                self._speed_pods.popitem(last=False)
        return pod

    def _forget_speeds(self, now: float) -> None:
        """Drop jobs silent for ``forget_seconds`` (the caller holds the lock)."""
        while self._speeds:
            key, entry = next(iter(self._speeds.items()))
            if now - entry.last_seen < self.settings.forget_seconds:
                break
            del self._speeds[key]

    def _close_window(self, namespace: str, job: str, entry: _Speeds, now: float) -> str:
        window = entry.window
        try:
            pods = self.cluster.job_pods(namespace, job)
        except ApiError as err:
            window.close(now, None)  # this window says nothing; the next one tries again
            self.metrics.api_errors.labels("throughput").inc()
            log.warning("cannot read the pods of %s/%s: %s", namespace, job, err)
            return "error"
        try:
            if not window.loaded:
                obj = self.cluster.get_job(entry.kind, namespace, job)
                if obj is None:
                    return "gone"
                annotations = (obj.get("metadata") or {}).get("annotations") or {}
                try:
                    window.wrote(history_of(annotations) or History())
                except OutOfBounds as err:  # replaced by what this monitor measures
                    log.warning("%s/%s: %s", namespace, job, err)
                    window.wrote(History())
            history = window.close(now, config_of(pods))
            if history is None:
                return "unchanged"
            self.cluster.annotate_job(entry.kind, namespace, job, ANNOTATION, history.text())
        except ApiError as err:
            if err.status == 404:
                return "gone"
            self.metrics.api_errors.labels("throughput").inc()
            log.warning("cannot write the throughput of %s/%s: %s", namespace, job, err)
            return "error"
        window.wrote(history)
        log.info("wrote the throughput of %s/%s", namespace, job)
        return "written"

    # ----- requests -----

    def _ask(self, move: Move, now: float) -> str:
        key = self._key(move.pod)
        with self._lock:
            last = self._last_ask.get(key)
            if last is not None and now - last < self.settings.throttle_seconds:
                result = "throttled"
            else:
                self._last_ask[key] = now
                result = ""
        if not result:
            result = self._write(move)
        self.metrics.requests.labels(move.reason, result).inc()
        return result

    def _write(self, move: Move) -> str:
        try:
            pod = self._current(move.pod)
            if pod is None:
                return "gone"
            body = migration(pod, move.reason, f"monitor/{self.settings.node_name}")
            try:
                self.cluster.create_migration(body)
                log.info("asked to move %s/%s: %s", pod.namespace, pod.name, move.reason)
                return "created"
            except AlreadyExists:
                existing = self.cluster.get_migration(pod.namespace, pod.name)
                if existing is None or not self._may_retry(existing, self._refusals(pod)):
                    return "exists"
                uid = (existing.get("metadata") or {}).get("uid", "")
                self.cluster.delete_migration(pod.namespace, pod.name, uid)
                self.cluster.create_migration(body)
                self._refused_again(pod)
                log.info("asked again to move %s/%s: %s", pod.namespace, pod.name, move.reason)
                return "retried"
        except AlreadyExists:
            return "exists"
        except ApiError as err:
            self.metrics.api_errors.labels("migrations").inc()
            who = f"{move.pod.namespace}/{move.pod.name}"
            log.warning("cannot request a move of %s: %s", who, err)
            return "error"

    def _current(self, pod: PodInfo) -> PodInfo | None:
        """The pod as it is now: a pod of that name may have been re-created (a restart:
        a new uid, which the request's owner reference must name, or Kubernetes would
        collect the request at once) or be gone (its record is then forgotten)."""
        found = self.cluster.pods_named(pod.name, self.settings.node_name, pod.namespace)
        key = self._key(pod)
        with self._lock:
            record = self._records.get(key)
            if not found:
                if record is not None:
                    self._drop(key)
                return None
            if record is not None:
                record.pod = found[0]
        return found[0]

    def _refusals(self, pod: PodInfo) -> int:
        with self._lock:
            record = self._records.get(self._key(pod))
            return record.refusals if record is not None else 0

    def _refused_again(self, pod: PodInfo) -> None:
        with self._lock:
            record = self._records.get(self._key(pod))
            if record is not None:
                record.refusals += 1

    def _may_retry(self, existing: Any, refusals: int = 0) -> bool:
        """A Refused request may be replaced once it is ``retry_seconds`` old, twice that
        after the pod's second refusal, and so on up to ``max_retry_seconds``: a worker no
        node would take (converged, with no better node) is not asked for every minute."""
        status = existing.get("status") or {}
        if status.get("phase") != "Refused":
            return False
        created = (existing.get("metadata") or {}).get("creationTimestamp")
        try:
            born = datetime.fromisoformat(str(created).replace("Z", "+00:00"))
        except ValueError:
            return False
        age = (self.clock.wall() - born).total_seconds()
        first, most = self.settings.retry_seconds, self.settings.max_retry_seconds
        return age >= max(first, min(first * 2 ** min(refusals, 30), most))

    # ----- loads -----

    def refresh(self) -> None:
        """Read the pool's allocation and the node metrics (where served) again."""
        now = self.clock.monotonic()
        try:
            status = self.cluster.pool_status(self.settings.pool)
        except ApiError as err:
            self.metrics.api_errors.labels("get_pool").inc()
            self.load_problem = f"cannot read TrainingPool {self.settings.pool!r}: {err}"
            log.warning("%s", self.load_problem)
            return
        try:
            metrics = self.cluster.node_metrics()
        except ApiError as err:
            self.metrics.api_errors.labels("node_metrics").inc()
            log.warning("cannot read node metrics, using requests alone: %s", err)
            metrics = None
        loads = pool_loads(status, metrics)
        for problem in loads.problems:
            log.warning("pool %s: %s", self.settings.pool, problem)
        self.loads, self.loads_at = loads, now
        me = self.settings.node_name
        self.load_problem = (
            None if me in loads.nodes else f"TrainingPool {self.settings.pool!r} has no node {me!r}"
        )
        verdict = self.verdict()
        if verdict is not None:
            self.metrics.node_load.set(verdict.load)
            self.metrics.pool_mean.set(verdict.mean)
            self.metrics.pool_std.set(verdict.std)
            self.metrics.overloaded.set(1 if verdict.overloaded else 0)

    def verdict(self) -> Verdict | None:
        if self.loads is None or self.stale():
            return None
        return self.loads.verdict(self.settings.node_name, self.settings.threshold)

    def stale(self) -> bool:
        """Loads older than three refresh periods are not used (nor is the monitor ready)."""
        if self.loads_at is None:
            return True
        return self.clock.monotonic() - self.loads_at > 3 * self.settings.refresh_seconds

    def readiness(self) -> str | None:
        """None when ready; else why not."""
        if self.load_problem:
            return self.load_problem
        if self.stale():
            return "the pool's loads were last read more than three refresh periods ago"
        return None
