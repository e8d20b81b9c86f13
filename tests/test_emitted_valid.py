"""The webhook answers only children and statuses an API server accepts (issue 24).

A job's template is copied into its pods, and the TFJob and MXJob CRDs keep templates
schemaless: a template field of the wrong type used to reach the pods, and each pod was a
422 that Metacontroller retried forever. Now such a job fails with a condition naming the
field, and nothing is rendered from it. A namespace no API server stores is a malformed
request (400) in a job's hooks, and the job is left out of its pool's plan. Every answer
here is checked by ``tests.conftest.Hook`` (each child against Kubernetes' schemas or the
CRDs, each status against its CRD), and the fuzz test below does the same for templates
broken at random.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import metacontroller as mc
from tests.conftest import Hook, condition, load_fixture
from tests.fuzz_requests import SPECIAL, bases, encode, mutate, paths
from tests.kube_schema import validate_child, validate_job_status
from tests.test_fuzz import EXAMPLES, _junk

BASES = bases()
# The replica type whose template each case breaks, per kind.
TEMPLATES = {"TFJob": ("tfReplicaSpecs", "Worker"), "MXJob": ("mxReplicaSpecs", "Server")}
JOBS = {"TFJob": "/tfjobs/sync", "MXJob": "/mxjobs/sync"}


def _job(kind: str) -> dict[str, Any]:
    return copy.deepcopy(BASES[JOBS[kind]]["parent"])


def _template(job: dict[str, Any], kind: str) -> dict[str, Any]:
    field, rtype = TEMPLATES[kind]
    return job["spec"][field][rtype]["template"]


def _main(template: dict[str, Any]) -> dict[str, Any]:
    return template["spec"]["containers"][0]


def _set_main(key: str, value: Any):
    return lambda t: _main(t).__setitem__(key, value)


# (case, edit of the template, the words the Failed message must hold after the template's
# path). Every place a user can put a value the API server would refuse in a pod.
WRONG: list[tuple[str, Any, str]] = [
    (
        "command a string",
        _set_main("command", "python train.py"),
        "spec.containers[0].command: must be a list of strings",
    ),
    (
        "an args item a number",
        _set_main("args", ["--steps", 100]),
        "spec.containers[0].args[1]: must be a string",
    ),
    (
        "an env value a number",
        _set_main("env", [{"name": "STEPS", "value": 100}]),
        "spec.containers[0].env[0].value: must be a string",
    ),
    (
        "an env item without a name",
        _set_main("env", [{"value": "1"}]),
        "spec.containers.0.env.0.name: Field required",
    ),
    (
        "an env source of the wrong type",
        _set_main("env", [{"name": "IP", "valueFrom": {"fieldRef": "status.podIP"}}]),
        "spec.containers[0].env[0].valueFrom.fieldRef: must be an ObjectFieldSelector object",
    ),
    (
        "resources a list",
        _set_main("resources", ["cpu"]),
        "spec.containers.0.resources: Input should be a valid dictionary",
    ),
    (
        "a resources field that does not exist",
        _set_main("resources", {"limits": {"cpu": "1"}, "type": {}}),
        "spec.containers[0].resources.type: unknown field",
    ),
    (
        "a quantity that is an object",
        _set_main("resources", {"requests": {"nvidia.com/gpu": {"count": 1}}}),
        "spec.containers.0.resources.requests.nvidia.com/gpu",
    ),
    (
        "a port's hostPort a string",
        _set_main("ports", [{"containerPort": 2222, "hostPort": "2222"}]),
        "spec.containers[0].ports[0].hostPort: must be an integer",
    ),
    (
        "a port's protocol a number",
        _set_main("ports", [{"containerPort": 2222, "protocol": 6}]),
        "spec.containers[0].ports[0].protocol: must be a string",
    ),
    (
        "a volumeMount without mountPath",
        _set_main("volumeMounts", [{"name": "data"}]),
        "spec.containers[0].volumeMounts[0].mountPath: required",
    ),
    (
        "volumeMounts an object",
        _set_main("volumeMounts", {"name": "data", "mountPath": "/data"}),
        "spec.containers[0].volumeMounts: must be a list of VolumeMount objects",
    ),
    (
        "a volume source of the wrong type",
        lambda t: t["spec"].__setitem__("volumes", [{"name": "data", "emptyDir": "yes"}]),
        "spec.volumes[0].emptyDir: must be an EmptyDirVolumeSource object",
    ),
    (
        "a misspelt container field",
        _set_main("comand", ["python"]),
        "spec.containers[0].comand: unknown field",
    ),
    (
        "a probe port that is a fraction",
        _set_main("livenessProbe", {"httpGet": {"port": 1.5}}),
        "spec.containers[0].livenessProbe.httpGet.port: must be an integer or a string",
    ),
    (
        "runAsUser a string",
        _set_main("securityContext", {"runAsUser": "1000"}),
        "spec.containers[0].securityContext.runAsUser: must be an integer",
    ),
    (
        "terminationGracePeriodSeconds a string",
        lambda t: t["spec"].__setitem__("terminationGracePeriodSeconds", "30"),
        "spec.terminationGracePeriodSeconds: must be an integer",
    ),
    (
        "an int32 beyond its range",
        lambda t: t["spec"].__setitem__("priority", 2**40),
        "spec.priority: 1099511627776 is out of range",
    ),
    (
        "an init container's command a string",
        lambda t: t["spec"].__setitem__(
            "initContainers", [{"name": "init", "image": "busybox", "command": "true"}]
        ),
        "spec.initContainers[0].command: must be a list of strings",
    ),
    (
        "a template annotation a number",
        lambda t: t.setdefault("metadata", {}).__setitem__("annotations", {"a": 1}),
        "metadata.annotations.a: Input should be a valid string",
    ),
    (
        "imagePullPolicy in lower case",
        _set_main("imagePullPolicy", "always"),
        "spec.containers[0].imagePullPolicy: must be one of 'Always', 'Never', 'IfNotPresent'",
    ),
    (
        "a toleration's operator that does not exist",
        lambda t: t["spec"].__setitem__("tolerations", [{"key": "gpu", "operator": "Is"}]),
        "spec.tolerations[0].operator: must be one of 'Exists', 'Equal'",
    ),
    (
        "a sidecar whose name is no DNS label",
        lambda t: t["spec"]["containers"].append({"name": "Side_Car", "image": "busybox"}),
        "spec.containers[1].name: 'Side_Car' is not a DNS-1123 label",
    ),
    (
        "two containers of one name",
        lambda t: t["spec"].__setitem__(
            "initContainers", [{"name": _main(t)["name"], "image": "busybox"}]
        ),
        "spec.containers[0].name: ",
    ),
    (
        "a port name too long for a Service",
        _set_main("ports", [{"containerPort": 2222, "name": "parameter-server-port"}]),
        "spec.containers[0].ports[0].name: 'parameter-server-port' is not a port name",
    ),
    (
        "a volumeMount naming no volume",
        _set_main("volumeMounts", [{"name": "data", "mountPath": "/data"}]),
        "spec.containers[0].volumeMounts[0].name: 'data' names no volume of the pod",
    ),
    (
        "an env name that is empty",
        _set_main("env", [{"name": "", "value": "1"}]),
        "spec.containers[0].env[0].name: '' is not a variable name",
    ),
    (
        "a resource name without its domain",
        _set_main("resources", {"limits": {"gpu": "1"}}),
        "spec.containers[0].resources.limits.gpu: not a standard resource",
    ),
    (
        "half a GPU",
        _set_main("resources", {"limits": {"nvidia.com/gpu": "0.5"}}),
        "spec.containers[0].resources.limits['nvidia.com/gpu']: '0.5': nvidia.com/gpu comes "
        "in whole units",
    ),
    (
        "a GPU requested without its limit",
        _set_main("resources", {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}),
        "spec.containers[0].resources.requests['nvidia.com/gpu']: must equal its limit",
    ),
    (
        "a request above its limit",
        _set_main("resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
        "spec.containers[0].resources.requests.cpu: must be at most its limit ('1')",
    ),
    (
        "a template label value with spaces",
        lambda t: t.setdefault("metadata", {}).__setitem__("labels", {"team": "data science"}),
        "metadata.labels.team: 'data science' is not a label value",
    ),
    (
        "a nodeSelector key that is no label key",
        lambda t: t["spec"].__setitem__("nodeSelector", {"gpu type": "v100"}),
        "spec.nodeSelector['gpu type']: the key 'gpu type' is not a qualified name",
    ),
    (
        "annotations beyond what a pod may hold",
        lambda t: t.setdefault("metadata", {}).__setitem__("annotations", {"a": "x" * 262_144}),
        "metadata.annotations: 262145 bytes: a pod's annotations may hold 262144 bytes",
    ),
    (
        "a template creationTimestamp that is no time",
        lambda t: t.setdefault("metadata", {}).__setitem__("creationTimestamp", "yesterday"),
        "metadata.creationTimestamp: must be an RFC 3339 time",
    ),
]


@pytest.mark.parametrize("kind", sorted(JOBS))
@pytest.mark.parametrize(("case", "edit", "words"), WRONG, ids=[c[0] for c in WRONG])
def test_a_template_that_cannot_make_a_valid_pod_fails_the_job_naming_the_field(
    kind: str, case: str, edit: Any, words: str
) -> None:
    job = _job(kind)
    edit(_template(job, kind))
    body = Hook().job_sync(mc.job_request(mc.world(job, []), None))
    failed = condition(body, "Failed")
    assert failed is not None and failed["status"] == "True", case
    field, rtype = TEMPLATES[kind]
    assert f"spec.{field}.{rtype}.template.{words}" in failed["message"], failed["message"]
    assert body["children"] == []


def test_a_tensorboard_whose_pod_would_be_refused_fails_the_job_naming_the_field() -> None:
    job = _job("TFJob")
    job["metadata"].setdefault("annotations", {})["dragonet.io/tensorboard"] = (
        '{"logDir": "/logs", "volumes": [{"name": "logs", "emptyDir": 5}]}'
    )
    body = Hook().job_sync(mc.job_request(mc.world(job, []), None))
    failed = condition(body, "Failed")
    assert failed is not None and "spec.volumes[0].emptyDir: must be" in failed["message"]
    assert "metadata.annotations['dragonet.io/tensorboard']" in failed["message"]
    assert body["children"] == []


def test_a_template_as_users_write_them_still_runs() -> None:
    """Init containers, volumes, probes, env sources, a nullable creationTimestamp: all
    valid, all copied into the pods as they are."""
    job = _job("TFJob")
    template = _template(job, "TFJob")
    template.setdefault("metadata", {})["creationTimestamp"] = None
    spec = template["spec"]
    spec["volumes"] = [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}]
    spec["initContainers"] = [{"name": "fetch", "image": "busybox", "command": ["true"]}]
    main = _main(template)
    main["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    main["livenessProbe"] = {"tcpSocket": {"port": "tfjob-port"}, "periodSeconds": 10}
    main["env"] = [{"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    body = Hook().job_sync(BASES["/tfjobs/sync"] | {"parent": job})
    assert condition(body, "Failed") is None
    pods = [c for c in body["children"] if c["kind"] == "Pod"]
    workers = [p for p in pods if "-worker-" in p["metadata"]["name"]]
    assert workers and all(p["spec"]["volumes"] == spec["volumes"] for p in workers)


# --- namespaces no API server stores -------------------------------------------------------


@pytest.mark.parametrize("namespace", ["Team_A", "-1", "a" * 64, ""])
@pytest.mark.parametrize("path", ["/tfjobs/sync", "/tfjobs/finalize", "/tfjobs/customize"])
def test_a_job_in_a_namespace_no_api_server_stores_is_a_malformed_request(
    path: str, namespace: str
) -> None:
    request = copy.deepcopy(BASES[path])
    request["parent"]["metadata"]["namespace"] = namespace
    response = Hook().post(path, encode(request))
    assert response.status_code == 400, response.get_data(as_text=True)
    assert "metadata.namespace" in response.get_json()["error"]


def test_a_job_in_a_namespace_no_api_server_stores_is_left_out_of_its_pools_plan() -> None:
    jobs = "TFJob.kubeflow.org/v1"
    request = copy.deepcopy(BASES["/pools/sync"])
    queued = request["related"][jobs].pop("default/queued")
    queued["metadata"]["namespace"] = "Team_A"
    request["related"][jobs]["Team_A/queued"] = queued
    hook = Hook()
    answer = hook.pool_sync(request)  # every Admission checked against its CRD
    namespaces = {a["metadata"]["namespace"] for a in answer["children"]}
    assert namespaces == {"default"}
    assert any("metadata.namespace" in p for p in answer["status"]["problems"])
    without = copy.deepcopy(BASES["/pools/sync"])
    del without["related"][jobs]["default/queued"]
    assert answer["children"] == Hook().pool_sync(without)["children"]


# --- statuses -------------------------------------------------------------------------------

BROKEN_STATUS = {
    "somethingElse": {"a": 1},
    "conditions": [
        {"type": "Created", "status": "True", "reason": 5, "extra": "x"},
        {"status": "True"},
    ],
    "replicaStatuses": {"Worker": {"active": "one"}, "PS": [1]},
    "scheduling": {"workers": {"max": 2**40}, "nodes": "n-1", "elastic": "no"},
    "startTime": "yesterday",
}


@pytest.mark.parametrize("path", ["/tfjobs/sync", "/tfjobs/finalize", "/mxjobs/sync"])
@pytest.mark.parametrize("managed", [False, True], ids=["ours", "MultiKueue's"])
def test_a_status_someone_broke_is_never_echoed_into_the_status_written(
    path: str, managed: bool
) -> None:
    request = copy.deepcopy(BASES[path])
    request["parent"]["status"] = copy.deepcopy(BROKEN_STATUS)
    if managed:
        request["parent"]["spec"]["runPolicy"] = {"managedBy": "kueue.x-k8s.io/multikueue"}
    response = Hook().post(path, encode(request))
    assert response.status_code == 200, response.get_data(as_text=True)
    kind = request["parent"]["kind"]
    validate_job_status(kind, response.get_json()["status"])


def test_a_failed_condition_quoting_a_huge_value_stays_bounded() -> None:
    job = _job("TFJob")
    job["metadata"]["annotations"] = {"dragonet.io/checkpoint-interval-seconds": "x" * 100_000}
    body = Hook().job_sync(mc.job_request(mc.world(job, []), None))
    failed = condition(body, "Failed")
    assert failed is not None and "checkpoint-interval-seconds" in failed["message"]
    assert len(failed["message"]) <= 32_768


# --- the property ----------------------------------------------------------------------------


def _gang_request(backend: str) -> dict[str, Any]:
    """A job admitted to a pool with a gang scheduler (its PodGroup among the children),
    with a schedulingPolicy that goes into the PodGroup."""
    request = load_fixture(f"job-sync-gang-tfjob-{backend}.json")
    request["parent"]["spec"]["runPolicy"] = {
        "schedulingPolicy": {
            "minAvailable": 2,
            "priorityClass": "high",
            "minResources": {"cpu": "4", "memory": "8Gi"},
            "scheduleTimeoutSeconds": 60,
        }
    }
    return request


# Hook path -> request: the bases, and a job of each gang backend.
REQUESTS = {
    **{path: BASES[path] for path in JOBS.values()},
    **{f"/tfjobs/sync {b}": _gang_request(b) for b in ("volcano", "coscheduling", "kube-batch")},
}


def _template_paths(request: dict[str, Any]) -> list[tuple]:
    """Every place in the job's templates and its schedulingPolicy."""
    spec = request["parent"]["spec"]
    field = "tfReplicaSpecs" if "tfReplicaSpecs" in spec else "mxReplicaSpecs"
    out = []
    for rtype, replica in spec[field].items():
        prefix = ("parent", "spec", field, rtype, "template")
        out += [prefix + p for p in paths(replica["template"])]
    policy = (spec.get("runPolicy") or {}).get("schedulingPolicy")
    if policy is not None:
        out += [("parent", "spec", "runPolicy", "schedulingPolicy", *p) for p in paths(policy)]
    return out


def _broken(request: dict[str, Any], rng: random.Random, junk: Any) -> tuple[dict, str]:
    """One place in one replica template replaced, deleted or added."""
    out = copy.deepcopy(request)
    where = rng.choice(_template_paths(out))
    target = out
    for key in where[:-1]:
        target = target[key]
    value = rng.choice(SPECIAL) if rng.random() < 0.4 else junk
    if isinstance(target[where[-1]], dict) and rng.random() < 0.3:
        target[where[-1]][rng.choice(("command", "resources", "x", "env", "ports"))] = value
        return out, f"{where} gets a field = {value!r}"[:300]
    if isinstance(target, dict) and rng.random() < 0.15:
        del target[where[-1]]
        return out, f"deleted {where}"
    target[where[-1]] = value
    return out, f"{where} = {value!r}"[:300]


_HOOK = Hook()


@settings(
    max_examples=max(EXAMPLES // 4, 100), deadline=None, suppress_health_check=list(HealthCheck)
)
@given(seed=st.integers(0, 2**32 - 1), junk=_junk(), base=st.sampled_from(sorted(REQUESTS)))
def test_whatever_a_template_holds_every_child_and_status_answered_is_valid(
    seed: int, junk: Any, base: str
) -> None:
    request, what = _broken(REQUESTS[base], random.Random(seed), junk)
    response = _HOOK.post(base.split()[0], encode(request))
    assert response.status_code == 200, (what, response.get_data(as_text=True))
    body = response.get_json()
    for child in body["children"]:
        try:
            validate_child(child)
        except AssertionError as err:
            raise AssertionError(f"{what}: {err}") from None
    try:
        validate_job_status(request["parent"]["kind"], body["status"])
    except AssertionError as err:
        raise AssertionError(f"{what}: {err}") from None


@settings(
    max_examples=max(EXAMPLES // 4, 100), deadline=None, suppress_health_check=list(HealthCheck)
)
@given(
    seed=st.integers(0, 2**32 - 1),
    junk=_junk(),
    path=st.sampled_from(["/tfjobs/sync", "/mxjobs/sync", "/tfjobs/finalize"]),
)
def test_whatever_a_job_hook_request_holds_a_200_answers_only_valid_children_and_status(
    seed: int, junk: Any, path: str
) -> None:
    """Any one field of the request (the job, its pods, its Admission) broken, as the
    campaign's fuzzer broke them: a 400, or children and a status the API server takes."""
    request, what = mutate(BASES[path], random.Random(seed), junk)
    response = _HOOK.post(path, encode(request))
    assert response.status_code in (200, 400), (what, response.get_data(as_text=True))
    if response.status_code == 400:
        return
    body = response.get_json()
    kind = "MXJob" if path.startswith("/mxjobs") else "TFJob"
    try:
        for child in body["children"]:
            validate_child(child)
        validate_job_status(kind, body["status"])
    except AssertionError as err:
        raise AssertionError(f"{what}: {err}") from None


@pytest.mark.parametrize("kind", sorted(JOBS))
def test_a_port_the_template_names_otherwise_is_listed_once_in_the_service(kind: str) -> None:
    """The API server refuses a Service that lists a port number twice: the template's
    port 2222 named "grpc", and the port Dragonet adds under its own name."""
    request = copy.deepcopy(BASES[JOBS[kind]])
    number = 2222 if kind == "TFJob" else 9091
    _main(_template(request["parent"], kind))["ports"] = [{"name": "grpc", "containerPort": number}]
    body = Hook().job_sync(request)
    services = [c for c in body["children"] if c["kind"] == "Service"]
    assert services
    for service in services:
        numbers = [p["port"] for p in service["spec"]["ports"]]
        assert len(numbers) == len(set(numbers)), service["spec"]["ports"]
