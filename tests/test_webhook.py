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
from tests.conftest import Clock, Hook, load_fixture, pods_of
from webhooks.config import LabelSelector, Settings

# Malformed for every hook; the last ones concern objects only the sync hook reads.
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
    (
        "a node without a name",
        {
            "parent": mc.tfjob("dragon-job1-cpu.yaml"),
            "related": {"Node.v1": {"x": {"metadata": {}, "status": {}}}},
        },
        "unreadable Node or Pod in the request",
    ),
    (
        "a node with an unreadable capacity",
        {
            "parent": mc.tfjob("dragon-job1-cpu.yaml"),
            "related": {
                "Node.v1": {
                    "n": {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "lots"}}}
                }
            },
        },
        "unreadable Node or Pod in the request",
    ),
]


@pytest.mark.parametrize(("case", "body", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_request_is_a_400_with_a_json_message(
    hook: Hook, case: str, body: Any, message: str
) -> None:
    paths = ["/tfjobs/sync"] + ([] if "node" in case else ["/tfjobs/finalize"])
    for path in paths:
        response = hook.post(path, body)
        assert response.status_code == 400, response.get_data(as_text=True)
        assert response.mimetype == "application/json"
        assert message in response.get_json()["error"]


def test_wrong_method_and_unknown_route_answer_json(hook: Hook) -> None:
    assert hook.client.get("/tfjobs/sync").status_code == 405
    response = hook.post("/mxjobs/sync", {})
    assert response.status_code == 404
    assert "error" in response.get_json()


def test_healthz(hook: Hook) -> None:
    assert hook.client.get("/healthz").get_json() == {"status": "ok"}


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


BASE = mc.sync_request(
    mc.tfjob("dragon-job1-cpu.yaml", status={"enqueueTime": mc.T0}),
    [mc.node("n-1", cpu="24", memory="64Gi")],
)
BASE_PATHS = [p for p in _paths(BASE) if p and p[0] != "controller"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), junk=_json_values())
def test_no_mutation_of_a_real_request_makes_the_webhook_answer_500(seed: int, junk: Any) -> None:
    """Replace one random field of a real sync request by random JSON: the answer is a
    sync response (200) or a clear rejection (400), never a crash."""
    hook = Hook()
    request = copy.deepcopy(BASE)
    path = random.Random(seed).choice(BASE_PATHS)
    target = request
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = junk
    response = hook.post("/tfjobs/sync", request)
    assert response.status_code in (200, 400), (path, junk, response.get_data(as_text=True))
    assert "error" in response.get_json() or "children" in response.get_json()


def test_customize_asks_for_nodes_dragonet_pods_all_tfjobs_and_priority_classes(hook: Hook) -> None:
    request = {"controller": mc.controller(), "parent": mc.tfjob("dragon-job1-cpu.yaml")}
    body = hook.post("/tfjobs/customize", request).get_json()
    assert body == {
        "relatedResources": [
            {"apiVersion": "v1", "resource": "nodes", "labelSelector": {}},
            {
                "apiVersion": "v1",
                "resource": "pods",
                "labelSelector": {
                    "matchLabels": {"training.kubeflow.org/operator-name": "dragonet"}
                },
            },
            {"apiVersion": "kubeflow.org/v1", "resource": "tfjobs", "labelSelector": {}},
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "resource": "priorityclasses",
                "labelSelector": {},
            },
        ]
    }


def test_customize_uses_the_configured_pool_and_pod_scope() -> None:
    pool = LabelSelector(matchLabels={"pool": "training"})
    hook = Hook(Settings(pool_selector=pool, watch_all_pods=True))
    request = {"controller": {}, "parent": mc.tfjob("dragon-job1-cpu.yaml")}
    rules = hook.post("/tfjobs/customize", request).get_json()["relatedResources"]
    assert rules[0]["labelSelector"] == {"matchLabels": {"pool": "training"}}
    assert rules[1]["labelSelector"] == {}


def test_finalize_deletes_children_and_finishes_once_they_are_gone(hook: Hook) -> None:
    request = load_fixture("sync-job1-one-big-node.json")
    parent = request["parent"]
    body = hook.sync(request)
    pods = [mc.observed_pod(parent, p) for p in pods_of(body).values()]
    dying = mc.sync_request(
        parent, request["related"]["Node.v1"].values(), pods=pods, finalizing=True
    )
    for path in ("/tfjobs/finalize", "/tfjobs/sync"):  # one handler may serve both
        answer = hook.post(path, dying).get_json()
        assert answer["children"] == [] and answer["finalized"] is False
    gone = mc.sync_request(parent, [], finalizing=True)
    assert hook.post("/tfjobs/finalize", gone).get_json()["finalized"] is True


def test_identical_requests_give_byte_identical_answers() -> None:
    request = load_fixture("sync-job1-spill.json")
    first = Hook().post("/tfjobs/sync", request).get_data()
    again = Hook().post("/tfjobs/sync", request).get_data()  # a fresh process: no memory
    assert first == again


def test_order_of_related_objects_does_not_change_the_answer(hook: Hook) -> None:
    request = load_fixture("sync-two-jobs-for-job-a.json")
    reordered = copy.deepcopy(request)
    for group in ("related", "children"):
        reordered[group] = {
            t: dict(reversed(list(objs.items())))
            for t, objs in reversed(list(request[group].items()))
        }
    assert json.dumps(hook.sync(request)) == json.dumps(hook.sync(reordered))


def test_concurrent_syncs_on_one_snapshot_never_share_capacity(clock: Clock) -> None:
    """Five jobs, room for two: each job's sync (any order, any replica of the webhook)
    takes only its own slice of the same plan."""
    nodes = [mc.node("n-1", cpu="20", memory="64Gi"), mc.node("n-2", cpu="20", memory="64Gi")]
    jobs = [
        mc.tfjob("dragon-job1-cpu.yaml", name=f"job-{i}", created=f"2026-11-21T09:00:0{i}Z")
        for i in range(5)
    ]
    for i in range(5):
        jobs[i]["spec"]["min-instances"] = 4
    placed: dict[str, list[str]] = {}
    for job in random.Random(7).sample(jobs, len(jobs)):
        body = Hook(clock=clock).sync(mc.sync_request(job, nodes, jobs=jobs))
        for pod in pods_of(body).values():
            node = pod["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0]
            placed.setdefault(node, []).append(pod["metadata"]["name"])
    assert sorted(placed) == ["n-1", "n-2"]
    # Each node holds exactly one whole job (5 pods of 4 cpu = 20 cpu): the two oldest.
    owners = {n: {p.rsplit("-", 2)[0] for p in pods} for n, pods in placed.items()}
    assert sorted(o for s in owners.values() for o in s) == ["job-0", "job-1"]
    assert all(len(pods) == 5 for pods in placed.values())


def test_the_response_has_only_fields_metacontrollers_strict_decoder_knows(hook: Hook) -> None:
    body = orjson.loads(hook.post("/tfjobs/sync", load_fixture("sync-job1-spill.json")).get_data())
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
    body = orjson.dumps(load_fixture("sync-job1-spill.json"))

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
