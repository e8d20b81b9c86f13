"""Every number a tenant or an admin controls is read within its bound (issue 24).

A fuzz campaign against the real server found values the CRDs accepted that stopped a whole
pool: a tenant's checkpoint interval of 1e12 seconds, a pool's ``idleSeconds: 1e18``, the
JSON number ``1e400`` as a map entry, a condition message nested 300 deep echoed back. Each
is a regression test here, with requests shaped as Metacontroller sends them
(``tests/fuzz_requests.py``); then a property over every numeric field: the pool still
answers, nobody else's Admission changes, and the bad value is named where its owner looks
(a job's Failed condition, the pool's status).
"""

from __future__ import annotations

import copy
import json
import math
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.model.admission import Admission
from policy.model.bounds import (
    MAX_GAIN,
    MAX_GPU_HOURS,
    MAX_SECONDS,
    later,
    nested_within,
)
from policy.model.jobs import CHECKPOINT_ANNOTATION
from policy.model.pool import PoolSpec
from tests import metacontroller as mc
from tests.conftest import NOW, Clock, Hook, condition, pods_of
from tests.fuzz_requests import Deep, bases, encode

BASES = bases()
JOBS = "TFJob.kubeflow.org/v1"
ADMISSIONS = "Admission.dragonet.io/v1alpha1"
ROOT = Path(__file__).resolve().parent.parent
CRDS = (ROOT / "crd", ROOT / "chart" / "crds")


def _post(hook: Hook, path: str, body: Any) -> dict[str, Any]:
    response = hook.post(path, body if isinstance(body, bytes) else encode(body))
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def _admissions(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["spec"]["job"]["name"]: a["spec"] for a in answer["children"]}


def _set(obj: Any, path: tuple, value: Any) -> None:
    """Set the field at ``path``, creating what leads to it (a list before an index)."""
    for key, following in zip(path, (*path[1:], None), strict=True):
        if following is None:
            if isinstance(obj, list) and key >= len(obj):
                obj.append(value)
            else:
                obj[key] = value
        elif isinstance(obj, dict) and key not in obj:
            obj = obj.setdefault(key, [] if isinstance(following, int) else {})
        else:
            obj = obj[key]


def _without(request: dict[str, Any], job: str) -> dict[str, Any]:
    out = copy.deepcopy(request)
    del out["related"][JOBS][f"default/{job}"]
    return out


# --- 1. a tenant's checkpoint interval in a dragonet-las pool -------------------------------

WEEK = timedelta(days=7)
GPU_JOB = "dragon-job1-gpu.yaml"  # 1 PS + 4 one-GPU workers


def _fixed(name: str, created: str) -> dict[str, Any]:
    job = mc.tfjob(GPU_JOB, name=name, created=created)
    job["spec"]["min-instances"] = job["spec"]["max-instances"] = 4  # no shrink helps
    return job


def _las_world(interval: str) -> tuple[Hook, dict[str, Any], dict[str, Any]]:
    """A week-old job holding all four GPUs of the node (672 GPU-hours: the last LAS
    queue) with the given checkpoint interval, and a new job (queue 0) that needs them.
    Returns the hook (its clock a week on), the pool's request and the old job's sync."""
    hook = Hook(clock=Clock(NOW + WEEK), pool=mc.pool(policy="dragonet-las"))
    nodes = [mc.node("n-1", cpu="40", memory="128Gi", gpu=4)]
    old = _fixed("old", mc.T0)
    old["metadata"]["annotations"] = {CHECKPOINT_ANNOTATION: interval}
    old["status"] = {"enqueueTime": mc.T0, "startTime": mc.T0}
    placed = [("PS", 0, "n-1"), *(("Worker", i, "n-1") for i in range(4))]
    admission = mc.admission(old, placed, workers=4)
    started = _post(hook, "/tfjobs/sync", mc.job_request(mc.world(old, nodes), admission))
    pods = [mc.observed_pod(old, p) for p in pods_of(started).values()]
    new = _fixed("new", "2026-11-28T09:00:00Z")
    w = mc.world(old, nodes, jobs=[old, new], pods=pods)
    pool = mc.pool_request(w, [admission], hook.pool)
    return hook, pool, mc.job_request(mc.world(old, nodes, pods=pods), admission)


def test_a_week_old_job_with_a_sane_checkpoint_interval_is_preempted_for_a_new_one() -> None:
    """The path the absurd intervals below take: the pool does preempt on it."""
    hook, pool, _ = _las_world("600")
    answer = _admissions(_post(hook, "/pools/sync", pool))
    assert answer["old"]["reason"] == "Preempted"
    assert "least attained service" in answer["old"]["service"]["lastPreemption"]["reason"]


@pytest.mark.parametrize("interval", ["1e12", "3e11", "1e18", "1e308", "1e400", "inf", "nan"])
def test_an_absurd_checkpoint_interval_fails_that_job_alone(interval: str) -> None:
    hook, pool, own = _las_world(interval)
    answer = _admissions(_post(hook, "/pools/sync", pool))
    without = _admissions(_post(Hook(clock=hook.clock), "/pools/sync", _without(pool, "old")))
    assert answer == without  # the new job is planned as if the old one were not there
    body = hook.job_sync(own)
    failed = condition(body, "Failed")
    assert failed is not None and failed["status"] == "True"
    assert CHECKPOINT_ANNOTATION in failed["message"] and repr(interval) in failed["message"]


def test_the_longest_checkpoint_interval_allowed_runs_and_never_wakes_the_pool_past_it() -> None:
    hook, pool, own = _las_world(str(MAX_SECONDS))
    answer = _post(hook, "/pools/sync", pool)
    assert _admissions(answer)["old"]["phase"] == "Admitted"  # not one checkpoint yet
    assert answer.get("resyncAfterSeconds", 0) <= MAX_SECONDS + 1
    assert condition(hook.job_sync(own), "Failed") is None


# --- 2. pool values the CRD accepted -----------------------------------------------------------

POOL_CAUSES = [
    ("idleSeconds", 1e18, "dragonet"),
    ("starvationSeconds", 1e18, "dragonet"),
    ("starvationSeconds", 1e12, "dragon"),
    ("lasThresholdsGPUHours", [1e18], "dragonet-las"),
    ("migration", {"minIntervalSeconds": 1e18}, "dragonet"),
]


def _observed(request: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(
        (a["metadata"]["name"], a["spec"]) for a in request["children"][ADMISSIONS].values()
    )


@pytest.mark.parametrize(("field", "value", "policy"), POOL_CAUSES)
def test_a_pool_value_past_its_bound_is_an_error_status_that_keeps_every_admission(
    field: str, value: Any, policy: str
) -> None:
    request = copy.deepcopy(BASES["/pools/sync"])
    request["parent"] = mc.pool(policy=policy)
    request["parent"]["spec"][field] = value
    hook = Hook()
    answer = _post(hook, "/pools/sync", request)
    assert f"spec.{field}" in answer["status"]["message"]
    assert "less than or equal to" in answer["status"]["message"]
    kept = sorted((a["metadata"]["name"], a["spec"]) for a in answer["children"])
    assert kept == _observed(request)


def test_the_crds_maximums_are_the_webhooks_bounds() -> None:
    """An admin whose value the API server accepts gets a pool that plans with it."""
    for base in CRDS:
        with open(base / "trainingpools.dragonet.io.yaml") as f:
            crd = yaml.safe_load(f)
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        props, migration = spec["properties"], spec["properties"]["migration"]["properties"]
        maxima = {
            "starvationSeconds": props["starvationSeconds"]["maximum"],
            "idleSeconds": props["idleSeconds"]["maximum"],
            "preemptionGraceSeconds": props["preemptionGraceSeconds"]["maximum"],
            "lasThresholdsGPUHours": [props["lasThresholdsGPUHours"]["items"]["maximum"]],
            "maxPreemptions": props["maxPreemptions"]["maximum"],
            "migration": {
                "minIntervalSeconds": migration["minIntervalSeconds"]["maximum"],
                "minGain": migration["minGain"]["maximum"],
            },
        }
        assert maxima["idleSeconds"] == MAX_SECONDS and maxima["migration"]["minGain"] == MAX_GAIN
        assert maxima["lasThresholdsGPUHours"] == [MAX_GPU_HOURS]
        PoolSpec.model_validate(maxima)  # the webhook accepts each maximum
        for key in ("starvationSeconds", "idleSeconds", "maxPreemptions"):
            with pytest.raises(ValueError, match=key):
                PoolSpec.model_validate({key: maxima[key] + 1})


def _crd_field(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for key in path:
        schema = schema["items"] if key == "[]" else schema["properties"][key]
    return schema


ADMISSION_MAXIMA = [
    ("workers",),
    ("pods", "[]", "index"),
    ("moves", "[]", "count"),
    ("moves", "[]", "index"),
    ("migrations", "[]", "move"),
    ("service", "gpuSeconds"),
    ("service", "preemptions"),
    ("service", "lasPreemptions"),
    ("gracePeriodSeconds",),
]


@pytest.mark.parametrize("path", ADMISSION_MAXIMA, ids=".".join)
def test_an_admission_at_its_crds_maximum_is_read_and_one_past_it_is_not(path: tuple) -> None:
    with open(CRDS[0] / "admissions.dragonet.io.yaml") as f:
        crd = yaml.safe_load(f)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    maximum = _crd_field(spec, path)["maximum"]
    with open(CRDS[1] / "admissions.dragonet.io.yaml") as f:
        assert yaml.safe_load(f) == crd  # the chart's copy says the same
    job = BASES["/tfjobs/sync"]["parent"]
    entries = {
        "pods": {"type": "Worker", "index": 0},
        "moves": {"type": "Worker", "index": 0, "count": 1, "time": mc.T0},
        "migrations": {"request": "r", "phase": "Done"},
    }
    for value, readable in ((maximum, True), (maximum + 1, False)):
        admission = mc.admission(job, [("PS", 0, "n-1")], workers=1)
        if path[0] == "service":  # a record always holds its GPU-seconds
            admission["spec"]["service"] = {"gpuSeconds": 0.0}
        if path[0] in entries:
            admission["spec"][path[0]] = [{**entries[path[0]], path[-1]: value}]
        else:
            _set(admission["spec"], tuple(p for p in path if p != "[]"), value)
        if readable:
            Admission.from_object(admission)
        else:
            with pytest.raises(ValueError, match="unreadable Admission spec"):
                Admission.from_object(admission)


def test_the_charts_values_schema_refuses_what_the_pool_would() -> None:
    """The chart writes the default pool from ``scheduling.*``: its schema's maximums are
    the CRD's, so ``helm install`` refuses the value instead of a pool in error."""
    with open(ROOT / "chart" / "values.schema.json") as f:
        scheduling = json.load(f)["properties"]["scheduling"]["properties"]
    with open(CRDS[0] / "trainingpools.dragonet.io.yaml") as f:
        crd = yaml.safe_load(f)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    props = spec["properties"]
    for key in ("starvationSeconds", "idleSeconds", "maxPreemptions", "preemptionGraceSeconds"):
        assert scheduling[key]["maximum"] == props[key]["maximum"], key
    las = scheduling["lasThresholdsGPUHours"]["items"]["maximum"]
    assert las == props["lasThresholdsGPUHours"]["items"]["maximum"]
    for key in ("minIntervalSeconds", "minGain", "maxMoves"):
        chart = scheduling["migration"]["properties"][key]["maximum"]
        assert chart == props["migration"]["properties"][key]["maximum"], key


def test_helm_refuses_an_idle_threshold_past_the_bound(helm: str, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"scheduling": {"idleSeconds": 1e18}}))
    command = [helm, "template", "x", str(ROOT / "chart"), "-f", str(values)]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode != 0 and "idleSeconds" in result.stderr


def test_a_pool_at_every_maximum_plans_and_answers() -> None:
    request = copy.deepcopy(BASES["/pools/sync"])
    request["parent"] = mc.pool(
        policy="dragonet-las",
        starvationSeconds=MAX_SECONDS,
        idleSeconds=MAX_SECONDS,
        lasThresholdsGPUHours=[MAX_GPU_HOURS],
        preemptionGraceSeconds=MAX_SECONDS,
        migration={"minIntervalSeconds": MAX_SECONDS, "minGain": MAX_GAIN},
    )
    answer = Hook().pool_sync(request)
    assert "message" not in answer["status"] or "invalid" not in answer["status"]["message"]
    assert {"running", "starving", "queued", "mx"} <= set(_admissions(answer))


# --- 3. numbers JSON allows and no decoder holds; tokens that are not JSON -------------------


def _entry(body: bytes, group: bytes, token: bytes) -> bytes:
    """``token`` as one more entry of a type map (``group`` is its opening bytes)."""
    assert group in body
    return body.replace(group, group + b'"default/zz":' + token + b",", 1)


@pytest.mark.parametrize("token", [b"1e400", b"-1e400", b"[1e400]", b'{"a":1e400}'])
def test_an_entry_no_decoder_holds_is_left_out_of_the_pools_plan_and_named(token: bytes) -> None:
    body = encode(BASES["/pools/sync"])
    answer = _post(Hook(), "/pools/sync", _entry(body, b'"TFJob.kubeflow.org/v1":{', token))
    assert _admissions(answer) == _admissions(_post(Hook(), "/pools/sync", body))
    if token.startswith(b"{"):
        assert any("default/zz" in p for p in answer["status"]["problems"])


@pytest.mark.parametrize("token", [b"1e400", b'{"metadata":{"name":1e400}}'])
def test_a_pod_entry_no_decoder_holds_leaves_a_jobs_sync_as_it_was(token: bytes) -> None:
    body = encode(BASES["/tfjobs/sync"])
    answer = _post(Hook(), "/tfjobs/sync", _entry(body, b'"Pod.v1":{', token))
    assert answer == _post(Hook(), "/tfjobs/sync", body)


@pytest.mark.parametrize("token", [b"NaN", b"Infinity", b"-Infinity", b"nan"])
@pytest.mark.parametrize("path", ["/pools/sync", "/tfjobs/sync"])
def test_a_token_that_is_not_json_is_a_bad_request(path: str, token: bytes) -> None:
    """Not JSON at all (RFC 8259 has no NaN): no API server sends it, so the request is
    malformed (400, said in JSON), never a 500."""
    body = encode(BASES[path]).replace(b'"replicas":1', b'"replicas":' + token, 1)
    response = Hook().post(path, body)
    assert response.status_code == 400
    assert "not valid JSON" in response.get_json()["error"]


# --- 4. deep nesting we would echo back -----------------------------------------------------


def test_a_condition_nested_300_deep_is_written_anew_not_echoed() -> None:
    request = copy.deepcopy(BASES["/tfjobs/sync"])
    # A condition the sync asserts again unchanged is kept as it is: this one was echoed.
    deep = {"type": "Created", "status": "True", "reason": "TFJobCreated", "message": Deep(300)}
    deep["lastTransitionTime"] = deep["lastUpdateTime"] = mc.T0
    request["parent"]["status"]["conditions"] = [deep]
    body = _post(Hook(), "/tfjobs/sync", request)
    created = condition(body, "Created")
    assert created is not None and created["message"] == "TFJob running is created."
    assert nested_within(body)


def test_a_condition_without_its_transition_time_gets_one() -> None:
    request = copy.deepcopy(BASES["/tfjobs/sync"])
    request["parent"]["status"]["conditions"] = [{"type": "Running", "status": "True"}]
    body = Hook().job_sync(request)
    assert condition(body, "Running")["lastTransitionTime"]


def test_an_unusable_pool_keeps_its_admissions_but_one_too_deep_to_echo_which_it_names() -> None:
    request = copy.deepcopy(BASES["/pools/sync"])
    request["parent"]["spec"]["policy"] = "no-such-policy"
    admissions = request["children"][ADMISSIONS]
    admissions["default/tfjob-running"]["spec"]["message"] = Deep(300)
    answer = _post(Hook(), "/pools/sync", request)
    assert "spec.policy" in answer["status"]["message"]
    [problem] = answer["status"]["problems"]
    assert problem.startswith("Admission default/tfjob-running is left out")
    kept = {a["metadata"]["name"]: a["spec"] for a in answer["children"]}
    assert kept == {k.split("/")[1]: a["spec"] for k, a in admissions.items() if "running" not in k}


@pytest.mark.parametrize("token", [b"1e400", b'{"spec":{"workers":1e400}}'])
def test_an_unusable_pool_names_an_admission_entry_no_decoder_holds(token: bytes) -> None:
    request = copy.deepcopy(BASES["/pools/sync"])
    request["parent"]["spec"]["idleSeconds"] = 1e18
    body = _entry(encode(request), ADMISSIONS.encode().join([b'"', b'":{']), token)
    answer = _post(Hook(), "/pools/sync", body)
    [problem] = answer["status"]["problems"]
    assert problem.startswith("Admission default/zz is left out")
    kept = sorted((a["metadata"]["name"], a["spec"]) for a in answer["children"])
    assert kept == _observed(request)


def test_an_unusable_pool_keeps_an_admission_nested_no_deeper_than_kubernetes_objects() -> None:
    request = copy.deepcopy(BASES["/pools/sync"])
    request["parent"]["spec"]["idleSeconds"] = -1
    answer = _post(Hook(), "/pools/sync", request)
    assert "problems" not in answer["status"]
    assert sorted((a["metadata"]["name"], a["spec"]) for a in answer["children"]) == (
        _observed(request)
    )


def test_a_move_count_no_int64_holds_in_a_jobs_status_reads_as_never_written() -> None:
    request = copy.deepcopy(BASES["/tfjobs/sync"])
    moves = [{**_MOVE, "count": 1e308}]
    request["parent"]["status"]["scheduling"] = {"moves": moves}
    body = Hook().job_sync(request)
    assert "moves" not in body["status"]["scheduling"]
    assert condition(body, "Failed") is None


@pytest.mark.parametrize("junk", [{"a": 1}, {}, Deep(300)])
def test_a_service_record_without_its_gpu_seconds_is_no_record_on_a_warm_or_fresh_webhook(
    junk: Any,
) -> None:
    """Read with every field defaulted, such a section once became a zero record in the
    running job's Admission, but only in a fresh process: a warm one reused its plan."""
    request = copy.deepcopy(BASES["/pools/sync"])
    request["related"][JOBS]["default/running"]["status"]["scheduling"] = {"service": junk}
    warm = Hook()
    before = _admissions(_post(warm, "/pools/sync", BASES["/pools/sync"]))
    for hook in (warm, Hook()):
        answer = _admissions(_post(hook, "/pools/sync", request))
        assert "service" not in answer["running"]
        assert answer == before


# --- the reading itself -----------------------------------------------------------------------


def test_later_is_never_past_the_horizon_and_exact_within_it() -> None:
    assert later(NOW, 60) == NOW + timedelta(seconds=60)
    assert later(NOW, -5) == NOW
    for absurd in (MAX_SECONDS + 1, 1e18, 1e308, math.inf, math.nan):
        assert later(NOW, absurd) is None


def test_nested_within_counts_levels_without_recursing() -> None:
    deep: Any = "bottom"
    for _ in range(100_000):  # far past Python's recursion limit
        deep = {"a": deep}
    assert not nested_within(deep)
    assert nested_within({"a": [{"b": 1}]}, 3) and not nested_within({"a": [{"b": {}}]}, 3)


# --- the property: every numeric field a tenant or an admin controls -------------------------

# (who owns it, the object, the path to the field). Pool: the TrainingPool's spec; job: the
# running job (its pool's view and its own sync); admission: its Admission; status: its
# status; node and priority: what an admin writes (a quantity, a PriorityClass value).
POOL_FIELDS = [
    ("starvationSeconds",),
    ("idleSeconds",),
    ("lasThresholdsGPUHours", 0),
    ("maxPreemptions",),
    ("preemptionGraceSeconds",),
    ("migration", "minIntervalSeconds"),
    ("migration", "minGain"),
    ("migration", "maxMoves"),
]
WORKER_TEMPLATE = ("spec", "tfReplicaSpecs", "Worker", "template", "spec")
JOB_FIELDS = [
    ("metadata", "annotations", CHECKPOINT_ANNOTATION),
    ("spec", "max-instances"),
    ("spec", "min-instances"),
    ("spec", "tfReplicaSpecs", "PS", "replicas"),
    ("spec", "tfReplicaSpecs", "Worker", "replicas"),
    ("spec", "runPolicy", "activeDeadlineSeconds"),
    ("spec", "runPolicy", "ttlSecondsAfterFinished"),
    ("spec", "runPolicy", "backoffLimit"),
    ("spec", "runPolicy", "schedulingPolicy", "minAvailable"),
    ("spec", "runPolicy", "schedulingPolicy", "scheduleTimeoutSeconds"),
    (*WORKER_TEMPLATE, "terminationGracePeriodSeconds"),
    (*WORKER_TEMPLATE, "priority"),
    (*WORKER_TEMPLATE, "containers", 0, "resources", "requests", "cpu"),
]
STATUS_FIELDS = [
    ("status", "scheduling", "workers", "target"),
    ("status", "scheduling", "service", "gpuSeconds"),
    ("status", "scheduling", "service", "preemptions"),
    ("status", "scheduling", "lastScale", "from"),
    ("status", "replicaStatuses", "Worker", "active"),
    ("status", "scheduling", "moves", 0, "count"),
    ("status", "scheduling", "moves", 0, "index"),
]
_MOVE = {"type": "Worker", "index": 0, "count": 1, "time": mc.T0}
ADMISSION_FIELDS = [
    ("spec", "workers"),
    ("spec", "service", "gpuSeconds"),
    ("spec", "service", "lasPreemptions"),
    ("spec", "lastScale", "to"),
    ("spec", "gracePeriodSeconds"),
    ("spec", "pods", 1, "index"),
]

FIELDS = (
    [("pool", f) for f in POOL_FIELDS]
    + [("job", f) for f in JOB_FIELDS]
    + [("status", f) for f in STATUS_FIELDS]
    + [("admission", f) for f in ADMISSION_FIELDS]
    + [("node", ("status", "allocatable", "cpu")), ("priority", ("value",))]
)

# Finite numbers of every size JSON can carry (orjson writes integers to 64 bits), and the
# ones the campaign found; as themselves or as the text an annotation or a quantity holds.
NUMBERS = (
    st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0, -1, 1e12, 3e11, 1e18, 1e308, 2**31, 2**63 - 1, 0.5, 5e-324])
)
VALUES = NUMBERS | NUMBERS.map(str) | st.sampled_from(["1e400", "inf", "nan", "-0", "1e-400"])


def _within(value: Any, most: float, least: float = 0) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and least <= value <= most
    )


_POOL_BOUND = {
    "starvationSeconds": MAX_SECONDS,
    "idleSeconds": MAX_SECONDS,
    "lasThresholdsGPUHours": MAX_GPU_HOURS,
    "maxPreemptions": 10**6,
    "preemptionGraceSeconds": MAX_SECONDS,
    "minIntervalSeconds": MAX_SECONDS,
    "minGain": MAX_GAIN,
    "maxMoves": 100,
}
_INTEGERS = ("maxPreemptions", "preemptionGraceSeconds", "maxMoves")


def _pool_value_usable(path: tuple, value: Any) -> bool:
    """The pool's bound, written independently of its model: a finite number within it
    (an integer where the CRD says integer)."""
    name = next(p for p in reversed(path) if isinstance(p, str))
    if not _within(value, _POOL_BOUND[name]):
        return False
    return name not in _INTEGERS or float(value).is_integer()


_HOOK = Hook()  # one process for all examples, its memo included
_BASE = _admissions(_post(_HOOK, "/pools/sync", BASES["/pools/sync"]))
_ALONE = _admissions(_post(_HOOK, "/pools/sync", _without(BASES["/pools/sync"], "running")))


def _mutated(owner: str, path: tuple, value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pool's request and the running job's sync with the one field set."""
    pool, job = copy.deepcopy(BASES["/pools/sync"]), copy.deepcopy(BASES["/tfjobs/sync"])
    if owner == "pool":
        _set(pool["parent"], ("spec", *path), value)
    elif owner in ("job", "status"):
        for obj in (pool["related"][JOBS]["default/running"], job["parent"]):
            if "moves" in path:  # a move count the status kept (policy.job.status)
                _set(obj, ("status", "scheduling", "moves"), [dict(_MOVE)])
            _set(obj, path, value)
    elif owner == "admission":
        _set(pool["children"][ADMISSIONS]["default/tfjob-running"], path, value)
        _set(job["related"][ADMISSIONS]["default/tfjob-running"], path, value)
    elif owner == "node":
        _set(pool["related"]["Node.v1"]["n-1"], path, value)
    else:
        _set(pool["related"]["PriorityClass.scheduling.k8s.io/v1"]["low"], path, value)
    return pool, job


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(field=st.sampled_from(FIELDS), value=VALUES)
def test_no_number_in_any_field_stops_the_pool_or_changes_anyone_elses_admission(
    field: tuple[str, tuple], value: Any
) -> None:
    owner, path = field
    if owner == "job" and path[-1] == CHECKPOINT_ANNOTATION:
        value = str(value)  # annotations are strings (the API server refuses a number)
    if owner == "pool" and isinstance(value, str):
        value = len(value)  # the CRD's fields are numbers (the API server refuses text)
    pool, job = _mutated(owner, path, value)
    answer = _post(_HOOK, "/pools/sync", pool)  # 200, whatever the value
    assert nested_within(answer)
    planned = _admissions(answer)
    if owner == "pool":
        usable = _pool_value_usable(path, value)
        message = answer["status"].get("message", "")
        assert ("is invalid" not in message) == usable, (path, value, message)
        if not usable:
            name = ".".join(str(p) for p in ("spec", *path) if isinstance(p, str))
            assert name in message
            kept = sorted((a["metadata"]["name"], a["spec"]) for a in answer["children"])
            assert kept == _observed(pool)
        return
    if owner in ("node", "priority"):
        return  # an admin's cluster-wide value: the pool answered, that is the property
    if "running" not in planned:  # the pool could not use it: the others as without it
        others = {k: v for k, v in planned.items() if k != "running"}
        assert others in (_BASE, _ALONE), (path, value)
    response = _HOOK.post("/tfjobs/sync", encode(job))
    assert response.status_code == 200, response.get_data(as_text=True)
    body = response.get_json()
    assert nested_within(body)
    failed = condition(body, "Failed")
    if owner == "job" and "running" not in planned:  # left out: its own sync says why
        assert failed is not None and failed["status"] == "True", (path, value)
        if failed["reason"] != "TFJobFailedValidation":
            return  # a value that ends it (activeDeadlineSeconds 0): its outcome, not an error
        named = [p for p in path if isinstance(p, str) and p not in ("spec", "metadata")]
        assert any(n in failed["message"] for n in named[-2:]), (path, failed["message"])
    if owner in ("status", "admission"):  # a broken record is written anew, never a failure
        assert failed is None, (path, value)
