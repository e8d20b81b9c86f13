"""Builders and probes for simulator tests: small clusters and jobs, and watchers that see
every change the simulated API server makes, so tests can check invariants at each step."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from policy.model.jobs import pod_request
from policy.model.resources import Resources
from sim.apiserver import Obj, object_key
from sim.engine import Scenario, Simulation
from sim.kube import Kube, node_object
from sim.spec import JobSpec, TrainingProfile, tfjob_manifest
from sim.training import job_of
from sim.webhook import HookResponse
from webhooks.manifests import load_documents

FIXTURES = Path(__file__).parent / "fixtures"
COMPAT = FIXTURES / "compat"
TFJOBS = "TFJob.kubeflow.org/v1"
PODS = "Pod.v1"
GPU = "nvidia.com/gpu"
# A short checkpoint restore keeps simulated jobs (and so the number of syncs) small.
QUICK = TrainingProfile(name="quick", restore_s=2.0)


def gpu_nodes(
    count: int,
    *,
    gpus: int = 4,
    cpu: str = "64",
    memory: str = "256Gi",
    labels: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], ...]:
    """GPU nodes with more cpu and memory than any test job needs: GPUs are the bottleneck."""
    alloc = {"cpu": cpu, "memory": memory, GPU: str(gpus)}
    return tuple(node_object(f"gpu-{i}", alloc, dict(labels or {})) for i in range(1, count + 1))


def cpu_nodes(count: int, *, cpu: str = "16", memory: str = "64Gi") -> tuple[dict[str, Any], ...]:
    return tuple(
        node_object(f"cpu-{i}", {"cpu": cpu, "memory": memory}) for i in range(1, count + 1)
    )


def job(
    name: str,
    workers: int,
    *,
    arrival: float = 0.0,
    steps: float = 100.0,
    profile: TrainingProfile = QUICK,
    **manifest: Any,
) -> JobSpec:
    """A DRAGON-style TFJob (one GPU per worker) arriving at ``arrival``."""
    return JobSpec(tfjob_manifest(name, workers=workers, **manifest), arrival, steps, profile)


def file_job(path: Path, *, arrival: float = 0.0, steps: float = 100.0) -> JobSpec:
    """The first document of a manifest file, as its user wrote it."""
    manifest = load_documents(path)[0]
    manifest["metadata"].setdefault("namespace", "default")
    return JobSpec(manifest, arrival, steps, QUICK)


def scenario(nodes: Iterable[Mapping[str, Any]], jobs: Iterable[JobSpec]) -> Scenario:
    return Scenario("test", tuple(nodes), tuple(sorted(jobs, key=lambda j: j.arrival_s)))


def stale_view_race() -> Scenario:
    """One 4-GPU node; x (4 workers) arrives first, the higher-priority y (4 workers) half a
    second later: on a view 2 s stale the pool plans both onto the same GPUs."""
    x = job("x", 4, steps=60)
    y = job("y", 4, arrival=0.5, steps=60)
    y.manifest["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": "high"}}
    high = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    }
    base = scenario(gpu_nodes(1), [x, y])
    return Scenario(base.name, base.nodes, base.jobs, (high,))


def status_of(sim: Simulation, key: str) -> Mapping[str, Any]:
    obj = sim.api.get(TFJOBS, key)
    assert obj is not None, f"{key} is not in the API server"
    return obj.get("status") or {}


def condition(status: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    return next((c for c in status.get("conditions") or () if c.get("type") == ctype), None)


MEASURED = ("wall_time_s", "sync_latency_ms", "sync_latency_ms_by_controller")


def comparable(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A summary without what measures the machine rather than the simulated run."""
    return {k: v for k, v in summary.items() if k not in MEASURED}


def first_create(sim: Simulation, job_key: str) -> float | None:
    """When the first pod of a job was created (None: never)."""
    prefix = job_key + "-"
    return next((t for t, ev, pod, _ in sim.log if ev == "create" and pod.startswith(prefix)), None)


@dataclass
class CapacityProbe:
    """Checks after every pod change that no node holds more than it can: what the bound,
    unfinished pods request (``Kube.holds``) against the node's allocatable."""

    sim: Simulation
    held: dict[str, Resources] = field(default_factory=dict)
    overcommits: list[tuple[float, str, str]] = field(default_factory=list)  # (t, node, pod)

    def __post_init__(self) -> None:
        self.allocatable = {
            n["metadata"]["name"]: Resources.parse(n["status"]["allocatable"])
            for n in self.sim.scenario.nodes
        }
        self.sim.api.watchers.append(self._on_change)

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey != PODS:
            return
        for pod, sign in ((old, -1), (new, 1)):
            if not Kube.holds(pod):
                continue
            node, req = pod["spec"]["nodeName"], pod_request(pod["spec"])
            cur = self.held.get(node, Resources({}))
            self.held[node] = cur + req if sign > 0 else cur - req
            if sign > 0 and not self.held[node].fits_in(self.allocatable[node]):
                self.overcommits.append((self.sim.now, node, object_key(pod)))


@dataclass
class ClaimProbe:
    """GPUs each job's pods claim (created and not yet Succeeded/Failed), at the end of every
    simulated instant in which some pod changed: what a FIFO scheduler may hand out."""

    sim: Simulation
    claims: dict[str, int] = field(default_factory=dict)  # job -> milli-GPUs now
    instants: dict[float, dict[str, int]] = field(default_factory=dict)  # t -> claims at end

    def __post_init__(self) -> None:
        self.sim.api.watchers.append(self._on_change)

    @staticmethod
    def _claims(pod: Obj | None) -> int:
        if pod is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        return pod_request(pod["spec"])[GPU]

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey != PODS:
            return
        job = job_of(new if new is not None else old)
        if job is None:
            return
        delta = self._claims(new) - self._claims(old)
        self.claims[job] = self.claims.get(job, 0) + delta
        self.instants[self.sim.now] = dict(self.claims)


@dataclass
class HookCall:
    t: float  # simulated time the call was made (its effects land later: the sync's cost)
    controller: str  # the CompositeController that called (dragonet-pools, dragonet-tfjobs)
    path: str  # the hook's HTTP path: /pools/sync, /tfjobs/customize, ...
    parent: str  # the parent's key: namespace/name, or name for a cluster-scoped parent
    uid: str
    generation: int
    status: int = 0  # the HTTP status of the answer
    answer: Any = None  # the answer's body, after any rewrite

    @property
    def hook(self) -> str:
        """customize, sync or finalize."""
        return self.path.rsplit("/", 1)[-1]


@dataclass
class HookSpy:
    """Wraps the simulated Metacontroller's webhook client (one process serves both
    controllers): records every call and lets a test rewrite an answer
    (``rewrite(call, body) -> body``) before Metacontroller applies it."""

    sim: Simulation
    rewrite: Callable[[HookCall, Any], Any] | None = None
    calls: list[HookCall] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._post = self.sim.webhook.post
        self.sim.webhook.post = self._spy  # type: ignore[method-assign]

    def _spy(self, path: str, body: bytes, *, measure: bool = True) -> HookResponse:
        request = orjson.loads(body)
        meta = request["parent"]["metadata"]
        call = HookCall(
            self.sim.now,
            request["controller"]["metadata"]["name"],
            path,
            f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"],
            meta["uid"],
            int(meta.get("generation", 0)),
        )
        self.calls.append(call)
        answer = self._post(path, body, measure=measure)
        if self.rewrite is not None and answer.status == 200:
            answer.body = self.rewrite(call, answer.body)
        call.status, call.answer = answer.status, answer.body
        return answer

    def of(self, path: str) -> list[HookCall]:
        """The calls to one hook path (``/tfjobs/sync``; a leading slash is optional)."""
        path = path if path.startswith("/") else "/" + path
        return [c for c in self.calls if c.path == path]

    def by(self, controller: str, hook: str | None = None) -> list[HookCall]:
        """The calls one controller made (of one hook: customize, sync, finalize)."""
        return [c for c in self.calls if c.controller == controller and hook in (None, c.hook)]
