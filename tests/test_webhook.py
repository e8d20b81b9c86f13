"""The HTTP contract with Metacontroller: routes, errors, determinism, statelessness."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import metacontroller as mc
from tests.conftest import Clock, Hook, load_fixture, node_of, pods_of
from webhooks.config import Settings

# Malformed for every hook; the last ones concern objects only the pool's sync reads.
MALFORMED: list[tuple[str, Any, str]] = [
    ("not JSON", b"{not json", "request body is not valid JSON"),
    ("a JSON array", [], "request body must be a JSON object"),
    ("no parent", {"controller": {}, "children": {}}, "parent: Field required"),
    ("parent is a string", {"parent": "job1"}, "parent: Input should be a valid dictionary"),
    ("parent without metadata", {"parent": {"spec": {}}}, "parent.metadata"),
    (
        "children not a map of maps",
        {"parent": mc.tfjob("dragon-job1-cpu.yaml"), "children": {"Pod.v1": []}},
        "children.Pod.v1: Input should be a valid dictionary",
    ),
]
HOOKS = ["/pools/sync", "/tfjobs/sync", "/tfjobs/finalize"]


@pytest.mark.parametrize(("case", "body", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_request_is_a_400_with_a_json_message(
    hook: Hook, case: str, body: Any, message: str
) -> None:
    for path in HOOKS:
        response = hook.post(path, body)
        assert response.status_code == 400, (path, response.get_data(as_text=True))
        assert response.mimetype == "application/json"
        assert message in response.get_json()["error"], path


UNREADABLE_NODES = {
    "a node without a name": ({"metadata": {}, "status": {}}, "metadata.name"),
    "a node with an unreadable capacity": (
        {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "lots"}}},
        "lots",
    ),
    # Found by the fuzz suite: a ratio over it overflowed a float in a wait message.
    "a node with a capacity no API server stores": (
        {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "-18e304"}}},
        "out of range",
    ),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE_NODES))
def test_an_unreadable_node_is_left_out_and_reported_and_the_rest_is_planned(
    hook: Hook, case: str
) -> None:
    """A broken Node used to make every pool sync a 400: nobody was planned at all."""
    broken, words = UNREADABLE_NODES[case]
    job = mc.tfjob("dragon-job1-cpu.yaml")
    request = mc.pool_request(mc.world(job, [mc.node("n-1", cpu="24", memory="64Gi")]))
    request["related"]["Node.v1"]["broken"] = broken
    body = hook.pool_sync(request)
    assert body["status"]["nodes"] == 1
    assert body["status"]["message"] == "1 object(s) could not be read and are left out"
    [problem] = body["status"]["problems"]
    assert problem.startswith("Node broken is left out: ") and words in problem
    [admission] = body["children"]
    assert admission["spec"]["phase"] == "Admitted"
    assert {p["node"] for p in admission["spec"]["pods"]} == {"n-1"}


def test_wrong_method_and_unknown_route_answer_json(hook: Hook) -> None:
    assert hook.client.get("/tfjobs/sync").status_code == 405
    assert hook.client.get("/pools/sync").status_code == 405
    response = hook.post("/xgboostjobs/sync", {})  # a kind Dragonet does not run
    assert response.status_code == 404
    assert "error" in response.get_json()


def test_healthz(hook: Hook) -> None:
    assert hook.client.get("/healthz").get_json() == {"status": "ok"}


def test_readyz(hook: Hook) -> None:
    assert hook.client.get("/readyz").get_json() == {"status": "ready"}


def _json_values() -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8)
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=6,
    )


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


_JOB = mc.tfjob("dragon-job1-cpu.yaml", status={"enqueueTime": mc.T0})
_WORLD = mc.world(_JOB, [mc.node("n-1", cpu="24", memory="64Gi")])
_ADMITTED = mc.admission(_JOB, [("PS", 0, "n-1"), ("Worker", 0, "n-1")], workers=1)
_MIGRATION = {
    "apiVersion": "dragonet.io/v1alpha1",
    "kind": "Migration",
    "metadata": {
        "name": "job1-worker-0",
        "namespace": "default",
        "uid": "mig-0",
        "creationTimestamp": mc.T0,
        "labels": {"training.kubeflow.org/job-name": "job1"},
    },
    "spec": {"pod": "job1-worker-0", "node": "n-1", "reason": "Manual"},
}
_ANSWERED = copy.deepcopy(_ADMITTED)
_ANSWERED["spec"]["migrations"] = [
    {"request": "job1-worker-0", "uid": "mig-0", "phase": "Refused", "reason": "IsChief"}
]
_ANSWERED["spec"]["moves"] = [{"type": "Worker", "index": 0, "count": 1, "time": mc.T0}]
BASES = {
    "/pools/sync": {
        **mc.pool_request(_WORLD, [_ANSWERED]),
        "related": {
            **mc.pool_request(_WORLD, [_ANSWERED])["related"],
            "Migration.dragonet.io/v1alpha1": {"default/job1-worker-0": _MIGRATION},
        },
    },
    "/tfjobs/sync": mc.job_request(_WORLD, _ANSWERED),
    "/migrations/sync": {
        "controller": {},
        "parent": _MIGRATION,
        "children": {},
        "related": {"Admission.dragonet.io/v1alpha1": {"default/tfjob-job1": _ANSWERED}},
    },
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), junk=_json_values())
def test_no_mutation_of_a_real_request_makes_the_webhook_answer_500(seed: int, junk: Any) -> None:
    """Replace one random field of a real pool or job sync request by random JSON: the
    answer is a sync response (200) or a clear rejection (400), never a crash."""
    rng = random.Random(seed)
    path = rng.choice(sorted(BASES))
    request = copy.deepcopy(BASES[path])
    where = rng.choice([p for p in _paths(request) if p and p[0] != "controller"])
    target = request
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = junk
    response = Hook().post(path, request)
    assert response.status_code in (200, 400), (where, junk, response.get_data(as_text=True))
    assert "error" in response.get_json() or "children" in response.get_json()


def test_a_pools_customize_asks_for_its_nodes_dragonet_pods_all_jobs_and_priorities(
    hook: Hook,
) -> None:
    team = mc.pool("team-a", nodeSelector={"matchLabels": {"pool": "team-a"}})
    request = {"controller": mc.controller(mc.POOL_CONTROLLER_YAML), "parent": team}
    body = hook.post("/pools/customize", request).get_json()
    assert body == {
        "relatedResources": [
            {
                "apiVersion": "v1",
                "resource": "nodes",
                "labelSelector": {"matchLabels": {"pool": "team-a"}},
            },
            {
                "apiVersion": "v1",
                "resource": "pods",
                "labelSelector": {
                    "matchLabels": {"training.kubeflow.org/operator-name": "dragonet"}
                },
            },
            {"apiVersion": "kubeflow.org/v1", "resource": "tfjobs", "labelSelector": {}},
            # One queue: the pool sees MXJobs as it sees TFJobs.
            {"apiVersion": "kubeflow.org/v1", "resource": "mxjobs", "labelSelector": {}},
            {"apiVersion": "kubeflow.org/v1", "resource": "pytorchjobs", "labelSelector": {}},
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "resource": "priorityclasses",
                "labelSelector": {},
            },
            # Migration requests, in every namespace (docs/migration.md).
            {"apiVersion": "dragonet.io/v1alpha1", "resource": "migrations", "labelSelector": {}},
        ]
    }


def test_the_default_pool_also_watches_the_other_pools_and_can_watch_every_pod(
    hook: Hook,
) -> None:
    request = {"controller": {}, "parent": mc.pool(watchAllPods=True)}
    rules = hook.post("/pools/customize", request).get_json()["relatedResources"]
    assert rules[0]["labelSelector"] == {}  # every node
    assert rules[1]["labelSelector"] == {}  # every pod
    assert rules[-1] == {
        "apiVersion": "dragonet.io/v1alpha1",
        "resource": "trainingpools",
        "labelSelector": {
            "matchExpressions": [
                {"key": "dragonet.io/pool", "operator": "NotIn", "values": ["default"]}
            ]
        },
    }


def test_a_jobs_customize_asks_for_its_own_admission_and_nothing_of_the_cluster(
    hook: Hook,
) -> None:
    job = mc.tfjob("dragon-job1-cpu.yaml", namespace="team-a")
    body = hook.post("/tfjobs/customize", {"controller": mc.controller(), "parent": job})
    assert body.get_json() == {
        "relatedResources": [
            {
                "apiVersion": "dragonet.io/v1alpha1",
                "resource": "admissions",
                "namespace": "team-a",
                "names": ["tfjob-job1"],
            }
        ]
    }


def test_finalize_deletes_children_and_finishes_once_they_are_gone(hook: Hook) -> None:
    request = load_fixture("job-sync-job1-admitted.json")
    parent = request["parent"]
    body = hook.job_sync(request)
    pods = [mc.observed_pod(parent, p) for p in pods_of(body).values()]
    dying = mc.job_request(mc.world(parent, [], pods=pods, finalizing=True), None)
    for path in ("/tfjobs/finalize", "/tfjobs/sync"):  # one handler may serve both
        answer = hook.post(path, dying).get_json()
        assert answer["children"] == [] and answer["finalized"] is False
    gone = mc.job_request(mc.world(parent, [], finalizing=True), None)
    assert hook.post("/tfjobs/finalize", gone).get_json()["finalized"] is True


@pytest.mark.parametrize(
    ("path", "fixture"),
    [
        ("/pools/sync", "pool-sync-job1-spill.json"),
        ("/pools/sync", "pool-sync-two-jobs.json"),
        ("/tfjobs/sync", "job-sync-job1-admitted.json"),
    ],
)
def test_identical_requests_give_byte_identical_answers(path: str, fixture: str) -> None:
    request = load_fixture(fixture)
    first = Hook().post(path, request).get_data()
    again = Hook().post(path, request).get_data()  # a fresh process: no memory
    assert first == again


def test_order_of_related_objects_does_not_change_the_pools_answer(hook: Hook) -> None:
    request = load_fixture("pool-sync-two-jobs.json")
    reordered = copy.deepcopy(request)
    for group in ("related", "children"):
        reordered[group] = {
            t: dict(reversed(list(objs.items())))
            for t, objs in reversed(list(request[group].items()))
        }
    assert json.dumps(hook.pool_sync(request)) == json.dumps(Hook().pool_sync(reordered))


def test_parallel_job_syncs_take_only_what_their_admission_places(clock: Clock) -> None:
    """Five jobs, room for two: the pool plans once; each job's sync (any order, any
    replica of the webhook) renders only its own Admission's pods."""
    nodes = [mc.node("n-1", cpu="20", memory="64Gi"), mc.node("n-2", cpu="20", memory="64Gi")]
    jobs = [
        mc.tfjob("dragon-job1-cpu.yaml", name=f"job-{i}", created=f"2026-11-21T09:00:0{i}Z")
        for i in range(5)
    ]
    for i in range(5):
        jobs[i]["spec"]["min-instances"] = 4
    pool = Hook(clock=clock)
    pool.pool_sync(mc.pool_request(mc.world(jobs[0], nodes, jobs=jobs)))
    placed: dict[str, list[str]] = {}
    for job in random.Random(7).sample(jobs, len(jobs)):
        replica = Hook(clock=clock)  # another webhook process: nothing shared but the API
        body = replica.job_sync(mc.job_request(mc.world(job, nodes), pool.admission(job)))
        for pod in pods_of(body).values():
            placed.setdefault(node_of(pod), []).append(pod["metadata"]["name"])
    assert sorted(placed) == ["n-1", "n-2"]
    # Each node holds exactly one whole job (5 pods of 4 cpu = 20 cpu): the two oldest.
    owners = {n: {p.rsplit("-", 2)[0] for p in pods} for n, pods in placed.items()}
    assert sorted(o for s in owners.values() for o in s) == ["job-0", "job-1"]
    assert all(len(pods) == 5 for pods in placed.values())


@pytest.mark.parametrize(
    ("path", "fixture"),
    [("/pools/sync", "pool-sync-job1-spill.json"), ("/tfjobs/sync", "job-sync-job1-admitted.json")],
)
def test_the_response_has_only_fields_metacontrollers_strict_decoder_knows(
    hook: Hook, path: str, fixture: str
) -> None:
    body = orjson.loads(hook.post(path, load_fixture(fixture)).get_data())
    assert set(body) <= {"status", "children", "resyncAfterSeconds", "finalized"}


def test_an_overloaded_webhook_answers_429_with_retry_after() -> None:
    """Past its in-flight limit the webhook says "busy, retry in 1 s" at once (Metacontroller
    requeues after Retry-After without error backoff) instead of queueing into a timeout."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from tests.conftest import NOW
    from webhooks.app import create_app

    inside, release = threading.Event(), threading.Event()

    def blocking_clock():
        inside.set()
        release.wait(10)
        return NOW

    app = create_app(Settings(max_inflight=1), clock=blocking_clock)
    body = orjson.dumps(load_fixture("job-sync-job1-admitted.json"))

    def post():
        return app.test_client().post("/tfjobs/sync", data=body, content_type="application/json")

    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(post)
        assert inside.wait(10)
        busy = post()
        release.set()
        assert first.result().status_code == 200
    assert busy.status_code == 429
    assert busy.headers["Retry-After"] == "1"
    assert post().status_code == 200, "the slot is free again"


def test_in_flight_limit_leaves_a_thread_free_by_default() -> None:
    assert Settings(threads=4).inflight_limit() == 3
    assert Settings(threads=1).inflight_limit() == 1
    assert Settings(threads=4, max_inflight=8).inflight_limit() == 8


def test_a_pool_of_a_shard_asks_only_for_the_jobs_of_its_shard(hook: Hook) -> None:
    pool = mc.pool("team-a")
    pool["metadata"]["labels"]["dragonet.io/shard"] = "a"
    rules = hook.post("/pools/customize", {"parent": pool}).get_json()["relatedResources"]
    (tfjobs,) = [r for r in rules if r["resource"] == "tfjobs"]
    assert tfjobs["labelSelector"] == {"matchLabels": {"dragonet.io/shard": "a"}}
