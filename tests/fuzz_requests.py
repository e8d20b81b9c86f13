"""Real hook requests of every hook, and the ways a careless user or an attacker breaks them.

The fuzz tests (``tests/test_fuzz.py``) replace, delete or deepen one field of one of these
requests at a time. The requests are what Metacontroller sends: a pool with a running
elastic job, a starving one that makes the pool shrink it, a finished one, a queued one and
a pod on a node that has left the pool; a job's sync with its pods and Admission; its
finalize call; both customize calls.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

import orjson

from policy.job.render import render_pod
from policy.model.admission import Placement
from tests import metacontroller as mc

OLD = "2026-11-21T09:00:00Z"  # an hour before the tests' clock: the queued job starves

# Values that broke the webhook once, or could: huge and negative numbers, floats where
# integers belong, every JSON type in the wrong place, deep nesting.
SPECIAL: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    2**31 - 1,
    2**63 - 1,
    -(2**63),
    10**7,
    1e18,
    1.5,
    "",
    "x",
    "9999999",
    "-1",
    "1e18",
    "2026-13-45T99:99:99Z",
    [],
    {},
    [{}],
    {"type": {}},
    {"": None},
)


DEEP = "__deeply_nested__"  # stands for an object nested ``levels`` deep (see ``encode``)


class Deep(str):
    """A placeholder for an object nested ``levels`` deep: JSON encoders give up long before
    a parser must, so ``encode`` writes it into the bytes directly."""

    levels: int

    def __new__(cls, levels: int) -> Deep:
        obj = super().__new__(cls, f"{DEEP}{levels}")
        obj.levels = levels
        return obj


def encode(body: Any) -> bytes:
    """The request's bytes, with each ``Deep`` placeholder written out."""
    from tests.conftest import versioned

    data = orjson.dumps(versioned(body))
    while (start := data.find(b'"' + DEEP.encode())) >= 0:
        end = data.index(b'"', start + 1)
        levels = int(data[start + 1 + len(DEEP) : end])
        data = data[:start] + b'{"a":' * levels + b'"bottom"' + b"}" * levels + data[end + 1 :]
    return data


def _elastic(
    name: str, created: str, workers: int, least: int, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    job = mc.compat("dragon-job1-cpu.yaml")
    job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = workers
    job["spec"]["min-instances"] = least
    return mc.tfjob(job, name=name, created=created, status=status)


def _world() -> tuple[mc.World, list[dict[str, Any]]]:
    nodes = [
        mc.node("n-1", cpu="24", memory="64Gi"),
        mc.node("n-2", cpu="4", memory="32Gi"),
        mc.node("n-3", cpu="8", memory="32Gi", ready=False),
    ]
    running = _elastic("running", OLD, 4, 1, {"enqueueTime": OLD, "startTime": OLD})
    # Needs 12 cpu at once; 8 are free: the pool shrinks ``running`` to make room.
    starving = _elastic("starving", OLD, 2, 2, {"enqueueTime": OLD})
    finished = mc.tfjob(
        "dragon-job1-cpu.yaml",
        name="finished",
        created=OLD,
        status={
            "enqueueTime": OLD,
            "conditions": [
                {"type": "Succeeded", "status": "True", "lastTransitionTime": OLD, "reason": "x"}
            ],
        },
    )
    queued = mc.tfjob("dragon-job1-gpu.yaml", name="queued")
    placed = [("PS", 0, "n-1"), *((("Worker", i, "n-1")) for i in range(4))]
    admission = mc.admission(running, placed, workers=4)
    pods = []
    for rtype, index, node in placed:
        child = _pod_child(running, rtype, index, node)
        pods.append(mc.observed_pod(running, child))
    # A worker on a node that has left the pool (not among the request's Nodes).
    gone = mc.observed_pod(running, _pod_child(running, "Worker", 3, "n-gone"))
    gone["metadata"]["name"] = "running-worker-7"
    gone["metadata"]["labels"]["training.kubeflow.org/replica-index"] = "7"
    pods.append(gone)
    jobs = [running, starving, finished, queued]
    classes = [mc.priority_class("high", 1000), mc.priority_class("low", 10, default=True)]
    return mc.world(running, nodes, jobs, pods, priority_classes=classes), [admission]


def _pod_child(job: dict[str, Any], rtype: str, index: int, node: str) -> dict[str, Any]:
    from policy.model.jobs import parse_job
    from policy.model.kinds import TFJOB

    return render_pod(
        parse_job(job, TFJOB), Placement(type=rtype, index=index, node=node), "affinity", "", 1
    )


def _mx_world() -> tuple[mc.World, dict[str, Any]]:
    """An MXJob running with all its pods on n-1, and its Admission."""
    from policy.model.jobs import parse_job
    from policy.model.kinds import MXJOB

    container = {"name": "mxnet", "image": "mx:1", "resources": {"requests": {"cpu": "1"}}}
    spec = {
        t: {"replicas": n, "template": {"spec": {"containers": [dict(container)]}}}
        for t, n in (("Scheduler", 1), ("Server", 1), ("Worker", 2))
    }
    manifest = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": "mx"},
        "spec": {"jobMode": "MXTrain", "mxReplicaSpecs": spec},
    }
    job = mc.tfjob(manifest, created=OLD)
    placed = [("Scheduler", 0, "n-1"), ("Server", 0, "n-1"), ("Worker", 0, "n-1")]
    placed.append(("Worker", 1, "n-1"))
    parsed = parse_job(job, MXJOB)
    pods = [
        mc.observed_pod(
            job, render_pod(parsed, Placement(type=t, index=i, node=node), "affinity", "", 1)
        )
        for t, i, node in placed
    ]
    return mc.world(job, [mc.node("n-1")], pods=pods), mc.admission(job, placed, workers=2)


def bases() -> dict[str, dict[str, Any]]:
    """One real request per hook (name -> (path, body))."""
    w, admissions = _world()
    mx, mx_admission = _mx_world()
    w.jobs.append(mx.parent)  # one queue: the pool plans the MXJob too
    w.pods.extend(mx.pods)
    admissions.append(mx_admission)
    job_sync = mc.job_request(w, admissions[0])
    finalizing = copy.deepcopy(
        mc.job_request(mc.world(w.parent, w.nodes, pods=w.pods, finalizing=True), None)
    )
    finalizing["parent"]["metadata"]["deletionTimestamp"] = OLD
    return {
        "/pools/sync": mc.pool_request(w, admissions),
        "/tfjobs/sync": job_sync,
        "/tfjobs/finalize": finalizing,
        "/pools/customize": {"controller": mc.controller(), "parent": mc.pool()},
        "/tfjobs/customize": {"controller": mc.controller(), "parent": w.parent},
        "/mxjobs/sync": mc.job_request(mx, mx_admission),
    }


def paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every path into a JSON value (the empty path is the value itself)."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, (*prefix, i))


def mutate(request: dict[str, Any], rng: random.Random, junk: Any) -> tuple[dict[str, Any], str]:
    """One field of a copy of ``request`` replaced by ``junk``, deleted, or wrapped deeply;
    returns the copy and what was done (for the failure message)."""
    out = copy.deepcopy(request)
    where = rng.choice([p for p in paths(out) if p and p[0] != "controller"])
    parent = out
    for key in where[:-1]:
        parent = parent[key]
    op = rng.random()
    if op < 0.15 and isinstance(parent, dict):
        del parent[where[-1]]
        return out, f"deleted {where}"
    if op < 0.2:
        parent[where[-1]] = Deep(rng.choice((50, 300, 2000)))
        return out, f"nested {where} deeply"
    value = rng.choice(SPECIAL) if op < 0.6 else junk
    parent[where[-1]] = value
    return out, f"{where} = {value!r}"[:300]


# --- one object broken inside a healthy pool (tests/test_fuzz.py, issue 24) ---------------

JOBS = "TFJob.kubeflow.org/v1"
ADMISSIONS = "Admission.dragonet.io/v1alpha1"
MXJOBS = "MXJob.kubeflow.org/v1"
_TOKEN = "__bare_token__"
# JSON allows every one of these; 1e400 and the 401-digit integer are infinite as doubles.
TOKENS = (b"1e400", b"-1e400", b"1e-400", b"18446744073709551616", b"1" + b"0" * 400)
# Outside every pool field's bound (policy/model/bounds.py), and accepted by the old CRDs.
ABSURD = (1e12, 3e11, 1e18, 1e308, -1, 2**63 - 1, 2**64 - 1, -0.5)
POOL_NUMBERS = (
    ("starvationSeconds",),
    ("idleSeconds",),
    ("lasThresholdsGPUHours",),
    ("maxPreemptions",),
    ("preemptionGraceSeconds",),
    ("migration", "minIntervalSeconds"),
    ("migration", "minGain"),
    ("migration", "maxMoves"),
)
POLICIES = ("dragonet", "dragon", "dragonet-las", "tiresias", "gang-fifo")
ANNOTATIONS = (
    "dragonet.io/checkpoint-interval-seconds",
    "dragonet.io/tensorboard",
    "DRAGON_KUBESHARE",
    "kubeshare/gpu_request",
    "kubeshare/gpu_limit",
    "kubeshare/gpu_mem",
)
ANNOTATION_VALUES = ("1e12", "3e11", "1e18", "1e308", "1e400", "-1", "nan", "inf", "", "1" * 400)
# Where a deep value would be echoed back: (type key, object key, path).
DEEP_PLACES = (
    (JOBS, "default/running", ("status", "conditions", 0)),
    (JOBS, "default/running", ("status", "conditions", 0, "message")),
    (JOBS, "default/running", ("status", "somethingNew")),
    (JOBS, "default/running", ("status", "scheduling", "service")),
    (JOBS, "default/starving", ("status", "scheduling")),
    (JOBS, "default/queued", ("metadata", "labels", "team")),
    (ADMISSIONS, "default/tfjob-running", ("spec", "message")),
    (ADMISSIONS, "default/tfjob-running", ("spec", "pods", 0)),
    ("Pod.v1", "default/running-worker-1", ("status", "message")),
    ("Pod.v1", "default/running-worker-1", ("metadata", "annotations", "x")),
    ("Node.v1", "n-1", ("status", "conditions", 0, "message")),
)
_CONDITION = {
    "type": "Created",
    "status": "True",
    "reason": "TFJobCreated",
    "lastTransitionTime": OLD,
    "lastUpdateTime": OLD,
}


def group_of(tkey: str) -> str:
    """Where a type's objects are in the pool's request: its Admissions are children."""
    return "children" if tkey == ADMISSIONS else "related"


def _leaves(value: Any, prefix: tuple = ()) -> list[tuple]:
    """The paths to every number and string of a JSON value."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*prefix, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*prefix, i))]
    return [prefix] if isinstance(value, (int, float, str)) and prefix else []


def _place(obj: Any, path: tuple, value: Any) -> None:
    for key, following in zip(path, (*path[1:], None), strict=True):
        if following is None:
            obj[key] = value
        elif isinstance(obj, dict) and not isinstance(obj.get(key), (dict, list)):
            obj[key] = [dict(_CONDITION)] if isinstance(following, int) else {}
            obj = obj[key]
        else:
            obj = obj[key]


def broken_in_pool(
    pool: dict[str, Any], rng: random.Random
) -> tuple[dict[str, Any], bytes, tuple[str, str] | None, str, bool]:
    """A copy of a healthy pool's request with one object broken by one of four classes
    of mutation (a bare JSON token no decoder holds, a deep value the webhook would echo
    back, an absurd pool value, an absurd annotation): (the request, the token its
    placeholder stands for (``with_token``), the broken object (type key, key) or None for
    the pool's spec, what was done, whether the pool's spec is unusable)."""
    request = copy.deepcopy(pool)
    cls = rng.choice(("bare token", "deep echo", "absurd pool value", "annotation"))
    token = b""
    if cls == "absurd pool value":
        path, value = rng.choice(POOL_NUMBERS), rng.choice(ABSURD)
        request["parent"]["spec"]["policy"] = rng.choice(POLICIES)
        _place(request["parent"]["spec"], path, [value] if path[-1].startswith("las") else value)
        return request, token, None, f"pool spec {path} = {value!r}", True
    if cls == "deep echo":
        tkey, key, path = rng.choice(DEEP_PLACES)
        _place(request[group_of(tkey)][tkey][key], path, Deep(rng.choice((300, 2000))))
        if tkey == ADMISSIONS and rng.random() < 0.5:  # an unusable pool echoes it
            request["parent"]["spec"]["policy"] = "no-such-policy"
            return request, token, (tkey, key), f"deep {path} of {key}, pool unusable", True
        return request, token, (tkey, key), f"deep {path} of {key}", False
    if cls == "annotation":
        tkey = rng.choice((JOBS, JOBS, MXJOBS, "Pod.v1"))
        key = rng.choice(sorted(request["related"][tkey]))
        name, value = rng.choice(ANNOTATIONS), rng.choice(ANNOTATION_VALUES)
        obj = request["related"][tkey][key]
        obj["metadata"].setdefault("annotations", {})[name] = value
        return request, token, (tkey, key), f"{key} annotation {name} = {value!r}", False
    tkey = rng.choice(sorted(t for t in (*request["related"], ADMISSIONS) if t in _TYPES))
    key = rng.choice(sorted(request[group_of(tkey)][tkey]))
    obj = request[group_of(tkey)][tkey][key]
    path = rng.choice(_leaves(obj))
    _place(obj, path, _TOKEN)
    token = rng.choice(TOKENS)
    return request, token, (tkey, key), f"{key} {path} = {token[:20]!r}", False


_TYPES = (JOBS, MXJOBS, "Pod.v1", "Node.v1", "PriorityClass.scheduling.k8s.io/v1", ADMISSIONS)


def with_token(body: dict[str, Any], token: bytes) -> bytes:
    """The request's bytes (``encode``), the bare token in its placeholder's place."""
    return encode(body).replace(f'"{_TOKEN}"'.encode(), token)


def job_sync_after(
    pool: dict[str, Any], tkey: str, key: str, answer: dict[str, Any], base: dict[str, Any]
) -> dict[str, Any]:
    """The job's sync as Metacontroller sends it after the pool's answer: its own pods as
    children, the Admission the pool answered (as stored) as related; the controller and
    child types are those of ``base``, a job sync request of the same kind."""
    job = pool["related"][tkey][key]
    uid = job["metadata"].get("uid") if isinstance(job.get("metadata"), dict) else None
    pods = {
        k: p
        for k, p in pool["related"]["Pod.v1"].items()
        if isinstance(p.get("metadata"), dict)
        and isinstance(p["metadata"].get("labels"), dict)
        and p["metadata"]["labels"].get("controller-uid") == uid
    }
    kind = "mxjob" if tkey == MXJOBS else "tfjob"
    name = f"default/{kind}-{key.split('/')[1]}"
    stored = {}
    for a in answer["children"]:
        if f"{a['metadata']['namespace']}/{a['metadata']['name']}" == name:
            stored[name] = mc.stored_admission(pool["parent"], a, None)
    children = {t: {} for t in base["children"]}
    children["Pod.v1"] = pods
    return {
        "controller": base["controller"],
        "parent": job,
        "children": children,
        "related": {ADMISSIONS: stored},
        "finalizing": False,
    }


# --- mixed two-tier traffic (issue 24) ------------------------------------------------------
# Pools of every size, each followed by its jobs' syncs, as the campaign that found the
# memo's stale answers and its unbounded growth sent them: TFJobs and MXJobs, some running
# (pods and Admissions), some queued, under every policy, some with a gang scheduler or
# KubeShare, with one field of one job or node mutated now and then.

_POLICIES = ("dragonet", "dragon", "gang-fifo", "dragonet-las", "tiresias")
CHECKPOINT = "dragonet.io/checkpoint-interval-seconds"


def _mixed_job(rng: random.Random, name: str, kubeshare: bool) -> dict[str, Any]:
    if rng.random() < 0.2:
        replicas = {"Scheduler": 1, "Server": rng.randint(1, 2), "Worker": rng.randint(1, 4)}
        container = {
            "name": "mxnet",
            "image": "mx:1",
            "resources": {"requests": {"cpu": str(rng.choice((1, 2))), "memory": "2Gi"}},
        }
        spec = {
            t: {"replicas": n, "template": {"spec": {"containers": [copy.deepcopy(container)]}}}
            for t, n in replicas.items()
        }
        manifest = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": {"name": name},
            "spec": {"jobMode": "MXTrain", "mxReplicaSpecs": spec},
        }
    else:
        file = (
            "dragon-job1-kubeshare.yaml"
            if kubeshare
            else rng.choice(("dragon-job1-cpu.yaml", "dragon-job1-gpu.yaml"))
        )
        manifest = mc.compat(file)
        workers = rng.randint(1, 6)
        manifest["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = workers
        manifest["spec"]["min-instances"] = rng.randint(1, workers)
        manifest["spec"]["max-instances"] = workers + rng.randint(0, 4)
    if rng.random() < 0.5:
        manifest["metadata"].setdefault("annotations", {})[CHECKPOINT] = str(
            rng.choice((30, 60, 600))
        )
    return manifest


def two_tier(
    rng: random.Random, nodes: int, jobs: int, pool: str = "default", mutate_p: float = 0.2
) -> list[tuple[str, bytes]]:
    """A pool's sync request of ``nodes`` nodes and ``jobs`` jobs, then each job's sync:
    (path, body). Running jobs have their pods (placed where room is, first fit) and
    Admissions; started 1 to 600 minutes before the tests' clock. With ``mutate_p``, one
    field of one job or node of the pool's request is mutated (``mutate``)."""
    from datetime import timedelta

    from policy.model.jobs import parse_job
    from policy.model.kinds import MXJOB, TFJOB
    from tests.conftest import NOW

    gang = rng.choice(("none", "none", "volcano", "coscheduling"))
    kubeshare = "none" if gang != "none" else rng.choice(("none", "none", "v1", "v2"))
    spec: dict[str, Any] = {"policy": rng.choice(_POLICIES), "gangScheduler": gang}
    spec["kubeshare"] = kubeshare
    if spec["policy"] in ("dragonet-las", "tiresias"):
        spec["lasThresholdsGPUHours"] = [0.01, rng.choice((0.05, 1.0))]
    pool_obj = mc.pool(pool, **spec)
    cpus = [rng.choice((8, 16, 32, 64)) for _ in range(nodes)]
    gpus = [rng.choice((0, 4, 8)) for _ in range(nodes)]
    node_objs = [
        mc.node(f"{pool}-n{i}", cpu=str(cpus[i]), memory="256Gi", gpu=gpus[i]) for i in range(nodes)
    ]
    free = [(c * 1000, g) for c, g in zip(cpus, gpus, strict=True)]
    world_jobs: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    admissions: dict[str, dict[str, Any]] = {}
    tag = rng.getrandbits(32)
    for j in range(jobs):
        name = f"{pool}-j{j}-{tag:x}"
        manifest = _mixed_job(rng, name, kubeshare != "none" and rng.random() < 0.5)
        minutes = rng.randint(1, 600)
        created = (NOW - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
        namespace = rng.choice(("default", "team-a", "team-b"))
        job = mc.tfjob(manifest, namespace=namespace, created=created)
        kind = MXJOB if job["kind"] == "MXJob" else TFJOB
        parsed = parse_job(job, kind)
        placed: list[tuple[str, int, str]] = []
        if rng.random() < 0.6:  # running, if it fits: its pods where room is
            trial = list(free)
            for rtype, replica in parsed.replicas.items():
                cpu = replica.request.get("cpu", 0)
                gpu = int(sum(v for k, v in replica.request.items() if k.endswith("/gpu")) / 1000)
                for index in range(replica.replicas):
                    at = next((n for n, (c, g) in enumerate(trial) if c >= cpu and g >= gpu), None)
                    if at is None:
                        break
                    trial[at] = (trial[at][0] - cpu, trial[at][1] - gpu)
                    placed.append((rtype, index, node_objs[at]["metadata"]["name"]))
            total = sum(r.replicas for r in parsed.replicas.values())
            if len(placed) == total:
                free = trial
            else:
                placed = []
        status: dict[str, Any] = {"enqueueTime": created}
        if placed:
            status["startTime"] = created
        job["status"] = status
        world_jobs.append(job)
        if placed:
            workers = sum(1 for t, _, _ in placed if t == "Worker")
            admission = mc.admission(job, placed, workers=workers, pool_name=pool)
            admission["spec"]["admittedTime"] = created
            admissions[name] = admission
            for rtype, index, node in placed:
                child = render_pod(
                    parsed, Placement(type=rtype, index=index, node=node), "affinity", "", 1
                )
                pod = mc.observed_pod(job, child)
                pod["status"]["startTime"] = created
                pods.append(pod)
    w = mc.world(world_jobs[0], node_objs, world_jobs, pods)
    pool_req = mc.pool_request(w, admissions.values(), parent=pool_obj)
    if rng.random() < mutate_p:
        section = rng.choice(("Node.v1", "TFJob.kubeflow.org/v1"))
        objs = pool_req["related"].get(section) or {}
        if objs:
            key = rng.choice(sorted(objs))
            objs[key], _ = mutate(objs[key], rng, rng.choice(SPECIAL))
    out = [("/pools/sync", encode(pool_req))]
    for job in world_jobs:
        jw = mc.world(job, node_objs, world_jobs, pods)
        path = "/mxjobs/sync" if job["kind"] == "MXJob" else "/tfjobs/sync"
        out.append((path, encode(mc.job_request(jw, admissions.get(job["metadata"]["name"])))))
    return out
