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

    return render_pod(parse_job(job), rtype, index, node, node, "affinity", "", 1)


def _mx_world() -> tuple[mc.World, dict[str, Any]]:
    """An MXJob running with all its pods on n-1, and its Admission."""
    from policy.model.jobs import MXJOB, parse_job

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
        mc.observed_pod(job, render_pod(parsed, t, i, node, node, "affinity", "", 1))
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
