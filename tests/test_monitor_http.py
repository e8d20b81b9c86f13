"""The monitor's HTTP API (monitor/app.py) as a training task and the kubelet meet it:
DRAGON's report works unchanged, and every bad input gets a clear 4xx JSON answer, never a
crash."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from monitor.app import create_app
from monitor.service import Monitor
from tests.monitorkit import FakeClock, FakeCluster, allocation, bearer, make_monitor, pod


def balanced() -> dict[str, Any]:
    return {"default": {"nodeAllocation": [allocation(f"node-{i}", "1", "4Gi") for i in (1, 2)]}}


@dataclass
class Setup:
    client: FlaskClient
    monitor: Monitor
    ticks: FakeClock
    cluster: FakeCluster


@pytest.fixture
def setup() -> Setup:
    cluster = FakeCluster(
        pods=[pod("job1-worker-0"), pod("job1-ps-0", rtype="ps")], pool=balanced()
    )
    # Hypothesis below sends many pods' tokens in a second: no review budget in the way.
    monitor, ticks = make_monitor(cluster, max_body_bytes=512, token_reviews_per_second=1e6)
    app = create_app(monitor)
    client = app.test_client()
    # Every request carries a worker's own token (monitor/auth.py); post() sends the token
    # of the pod a report names, as that pod would.
    client.environ_base["HTTP_AUTHORIZATION"] = bearer("job1-worker-0")["Authorization"]
    return Setup(client, monitor, ticks, cluster)


def _token_of(body: Any) -> dict[str, str]:
    """The token the pod a report names sends (its namespace, else team-a's)."""
    if not isinstance(body, dict) or not isinstance(body.get("pod"), str):
        return {}
    ns = body.get("namespace") if isinstance(body.get("namespace"), str) else "team-a"
    return bearer(body["pod"], ns)


def post(client: FlaskClient, body: Any, **kw: Any):
    headers = {**_token_of(body), **kw.pop("headers", {})}
    return client.post(
        "/monitor", data=json.dumps(body), content_type="application/json", headers=headers, **kw
    )


def test_dragons_report_is_taken_as_it_is_sent(setup: Setup) -> None:
    client = setup.client
    monitor = setup.monitor
    # What mnist-df-preemptible.py sends: requests.post(url, json={"pod": ..., "value": ...}).
    answer = post(client, {"pod": "job1-worker-0", "value": 0.4375})
    assert answer.status_code == 200
    assert answer.get_json() == {
        "pod": "job1-worker-0",
        "namespace": "team-a",
        "category": "Progressing",
    }
    assert monitor.tracked() == 1


def test_a_converged_worker_is_answered_with_the_request_made(setup: Setup) -> None:
    client = setup.client
    monitor = setup.monitor
    ticks = setup.ticks
    monitor.refresh()
    for _ in range(7):
        answer = post(client, {"pod": "job1-worker-0", "value": 1, "namespace": "team-a"})
        ticks.advance(10)
    assert answer.get_json() == {
        "pod": "job1-worker-0",
        "namespace": "team-a",
        "category": "Converged",
        "overloaded": False,
        "requested": "job1-worker-0",
        "reason": "Converged",
        "result": "created",
    }


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"value": 0.5}, "pod: required"),
        ({"pod": "job1-worker-0"}, "value: required"),
        ({"pod": "job1-worker-0", "value": "0.5"}, "value: must be a number"),
        ({"pod": "job1-worker-0", "value": True}, "value: must be a number"),
        ({"pod": "job1-worker-0", "value": None}, "value: must be a number"),
        ({"pod": "job1-worker-0", "value": [0.5]}, "value: must be a number"),
        ({"pod": "", "value": 0.5}, "pod: String should have at least 1 character"),
        ({"pod": "Job1_Worker", "value": 0.5}, "pod: String should match pattern"),
        ({"pod": "x" * 254, "value": 0.1}, "pod: String should have at most 253"),
        ({"pod": 7, "value": 0.5}, "pod: Input should be a valid string"),
        ({"pod": "job1-worker-0", "value": 0.5, "node": "n"}, "node: unknown field"),
        ({"pod": "job1-worker-0", "value": 0.5, "namespace": "A B"}, "namespace: String"),
        ([{"pod": "job1-worker-0", "value": 0.5}], "body must be a JSON object"),
        ("job1-worker-0", "body must be a JSON object"),
    ],
)
def test_a_report_that_is_not_a_report_is_a_400_naming_the_field(setup: Setup, body, says) -> None:
    client = setup.client
    monitor = setup.monitor
    answer = post(client, body)
    assert answer.status_code == 400, answer.get_json()
    assert answer.get_json()["error"].startswith(says)
    assert monitor.tracked() == 0


@pytest.mark.parametrize(
    "raw", [b"", b"{", b'{"pod": "a", "value": NaN}', b"\xff\xfe", b'{"pod": "a", "value": 1e999}']
)
def test_a_body_that_is_not_json_or_not_finite_is_a_400(setup: Setup, raw: bytes) -> None:
    client = setup.client
    monitor = setup.monitor
    answer = client.post("/monitor", data=raw, content_type="application/json")
    assert answer.status_code == 400
    assert answer.is_json and answer.get_json()["error"]
    assert monitor.tracked() == 0


def test_a_body_that_is_not_json_by_its_type_is_a_415(setup: Setup) -> None:
    client = setup.client
    for kind in ("text/plain", "application/x-www-form-urlencoded", None):
        answer = client.post(
            "/monitor", data='{"pod": "job1-worker-0", "value": 1}', content_type=kind
        )
        assert answer.status_code == 415
        assert "application/json" in answer.get_json()["error"]


def test_a_body_over_the_limit_is_a_413(setup: Setup) -> None:
    client = setup.client
    monitor = setup.monitor
    answer = post(client, {"pod": "job1-worker-0", "value": 0.5, "pad": "x" * 600})
    assert answer.status_code == 413
    assert "512 bytes" in answer.get_json()["error"]
    chunked = client.post(
        "/monitor",
        input_stream=io.BytesIO(b'{"pod": "a", "value": 1, "x": "' + b"y" * 600 + b'"}'),
        content_type="application/json",
        headers={"Transfer-Encoding": "chunked"},
        environ_overrides={"wsgi.input_terminated": True},  # as gunicorn marks a chunked body
    )
    assert chunked.status_code == 413 and chunked.is_json
    assert monitor.tracked() == 0


def test_a_pod_elsewhere_is_a_404_and_an_unreachable_api_a_503(setup: Setup) -> None:
    client = setup.client
    cluster = setup.cluster
    answer = post(client, {"pod": "job9-worker-0", "value": 0.5})
    assert answer.status_code == 404
    # The namespace is the token's (the pod's own), so the answer names it.
    assert answer.get_json()["error"] == (
        "no pod named 'job9-worker-0' in namespace 'team-a' runs on node 'node-1'"
    )
    cluster.down = True
    answer = post(client, {"pod": "job1-worker-0", "value": 0.5})
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "5"


def test_other_methods_and_paths_are_json_errors(setup: Setup) -> None:
    client = setup.client
    assert client.get("/monitor").status_code == 405
    assert client.get("/monitor").get_json()["error"] == "GET /monitor: Method Not Allowed"
    assert client.post("/migrate", json={}).status_code == 404
    assert client.get("/nope").is_json


def test_health_and_readiness(setup: Setup) -> None:
    client = setup.client
    monitor = setup.monitor
    assert client.get("/healthz").get_json() == {"status": "ok"}
    not_ready = client.get("/readyz")
    assert not_ready.status_code == 503
    assert "not been read yet" in not_ready.get_json()["error"]
    monitor.refresh()
    assert client.get("/readyz").get_json() == {"status": "ready", "tracked": 0}


def test_metrics_count_reports_by_answer_and_pods_by_category(setup: Setup) -> None:
    client = setup.client
    post(client, {"pod": "job1-worker-0", "value": 0.5})
    post(client, {"pod": "job1-worker-0"})
    answer = client.get("/metrics")
    assert answer.status_code == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(answer.get_data(as_text=True))
        for s in family.samples
    }
    assert samples[("dragonet_monitor_reports_total", (("code", "200"),))] == 1
    assert samples[("dragonet_monitor_reports_total", (("code", "400"),))] == 1
    assert samples[("dragonet_monitor_tracked_pods", (("category", "Progressing"),))] == 1


def test_a_bug_is_a_logged_500_json_not_a_dead_server(setup: Setup, caplog) -> None:
    client = setup.client
    monitor = setup.monitor

    def broken(*_: Any) -> None:
        raise RuntimeError("boom")

    monitor.report = broken  # type: ignore[method-assign]
    answer = post(client, {"pod": "job1-worker-0", "value": 0.5})
    assert answer.status_code == 500 and answer.get_json() == {"error": "internal error (logged)"}
    assert "boom" in caplog.text
    assert client.get("/healthz").status_code == 200


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_REPORTS = st.fixed_dictionaries(
    {
        "pod": st.one_of(st.sampled_from(["job1-worker-0", "job1-ps-0", "x"]), _JSON),
        "value": st.one_of(st.floats(), st.integers(), _JSON),
    },
    optional={"namespace": st.one_of(st.just("team-a"), _JSON), "extra": _JSON},
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=st.one_of(_REPORTS, _JSON), raw=st.binary(max_size=64), as_raw=st.booleans())
def test_no_input_makes_the_monitor_answer_5xx(
    setup: Setup, body: Any, raw: bytes, as_raw: bool
) -> None:
    data = raw if as_raw else json.dumps(body, allow_nan=True)
    answer = setup.client.post(
        "/monitor", data=data, content_type="application/json", headers=_token_of(body)
    )
    assert answer.status_code in (200, 400, 404, 413), answer.get_json()
    assert answer.is_json and (answer.status_code == 200) != ("error" in answer.get_json())
