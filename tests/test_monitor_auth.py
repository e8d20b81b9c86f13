"""Reports no tenant can forge (monitor/auth.py): the Container Monitor's real server
(``python -m monitor``: gunicorn, the official client) against an API server over HTTP
that answers TokenReviews as Kubernetes does, takes a report only from the pod it is
about; and the token cache that keeps a report from costing a review each."""

from __future__ import annotations

import copy
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from monitor.auth import Authenticator, Refused, bearer, caller_of
from monitor.kube import ApiError
from tests.fake_apiserver import API_AUDIENCE, FakeApiState, serving
from tests.monitorkit import pod

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "%s"}}]
users: [{name: monitor, user: {token: "the-monitors-own-token"}}]
contexts: [{name: here, context: {cluster: fake, user: monitor}}]
current-context: here
"""


def _owned(p: dict[str, Any]) -> dict[str, Any]:
    job = p["metadata"]["labels"]["training.kubeflow.org/job-name"]
    p["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "name": job,
            "uid": f"uid-{job}",
            "controller": True,
        }
    ]
    return p


@dataclass
class Running:
    url: str
    api: FakeApiState
    mine: dict[str, Any]  # team-a's worker on node-1
    theirs: dict[str, Any]  # team-b's worker on the same node


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("monitor-auth")
    mine = _owned(pod("job1-worker-0", namespace="team-a", job="job1"))
    theirs = _owned(pod("job2-worker-0", namespace="team-b", job="job2"))
    elsewhere = _owned(pod("job3-worker-0", node="node-2", namespace="team-c", job="job3"))
    api = FakeApiState(pods=[mine, theirs, elsewhere])
    with serving(api) as api_url:
        config = tmp / "kubeconfig"
        config.write_text(KUBECONFIG % api_url)
        port = _free_port()
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DRAGONET_", "KUBERNETES_")) and k != "NODE_NAME"
        }
        env.update(
            KUBECONFIG=str(config),
            NODE_NAME="node-1",
            DRAGONET_MONITOR_HOST="127.0.0.1",
            DRAGONET_MONITOR_PORT=str(port),
            DRAGONET_MONITOR_API_TIMEOUT_SECONDS="2",
        )
        log = tmp / "stderr"
        with log.open("w") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "monitor"], env=env, stderr=err, stdout=subprocess.DEVNULL
            )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):  # 30 s: the machine may be loaded
                try:
                    requests.get(f"{url}/healthz", timeout=1)
                    break
                except requests.ConnectionError:
                    time.sleep(0.05)
            else:
                pytest.fail(f"dragonet-monitor did not start:\n{log.read_text()}")
            yield Running(url, api, mine, theirs)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)


def _report(r: Running, body: dict[str, Any], token: str | None, path: str = "/monitor"):
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return requests.post(f"{r.url}{path}", json=body, headers=headers, timeout=10)


_SPEED = {"stepsPerSecond": 2.5, "batch": 64}


@pytest.mark.parametrize(("path", "extra"), [("/monitor", {"value": 0.5}), ("/throughput", _SPEED)])
def test_a_report_without_a_token_is_401_and_moves_nothing(running: Running, path, extra) -> None:
    before = len(running.api.reviews)
    answer = _report(running, {"pod": "job1-worker-0", **extra}, None, path)
    assert answer.status_code == 401
    assert "Bearer" in answer.headers["WWW-Authenticate"]
    assert "ServiceAccount token for audience 'dragonet-monitor'" in answer.json()["error"]
    assert len(running.api.reviews) == before  # no API call for nothing
    assert running.api.migrations == [] and running.api.patches == []


@pytest.mark.parametrize(("path", "extra"), [("/monitor", {"value": 0.5}), ("/throughput", _SPEED)])
def test_another_pods_token_cannot_report_for_a_pod_of_another_tenant(
    running: Running, path, extra
) -> None:
    """team-b's pod, on the same node, with its own valid token, claims to be team-a's."""
    token = running.api.pod_token(running.theirs)
    for body in (
        {"pod": "job1-worker-0", **extra},
        {"pod": "job1-worker-0", "namespace": "team-a", **extra},
    ):
        answer = _report(running, body, token, path)
        assert answer.status_code == 403, answer.text
        assert answer.json()["error"].startswith("the token belongs to pod team-b/job2-worker-0")
    # Its namespace but a name of team-a's: still not its own pod.
    answer = _report(running, {"pod": "job1-worker-0", "namespace": "team-b", **extra}, token, path)
    assert answer.status_code == 403
    assert running.api.migrations == [] and running.api.patches == []


@pytest.mark.parametrize(("path", "extra"), [("/monitor", {"value": 0.5}), ("/throughput", _SPEED)])
def test_a_token_for_another_audience_is_401(running: Running, path, extra) -> None:
    """The pod's own token, but the API server's (the one every pod has mounted)."""
    token = running.api.pod_token(running.mine, audience=API_AUDIENCE)
    answer = _report(running, {"pod": "job1-worker-0", **extra}, token, path)
    assert answer.status_code == 401
    assert "not valid for audience 'dragonet-monitor'" in answer.json()["error"]
    assert running.api.reviews[-1]["audiences"] == ["dragonet-monitor"]


def test_a_token_bound_to_no_pod_or_no_token_at_all_is_refused(running: Running) -> None:
    unbound = running.api.account_token("team-a", "default", "dragonet-monitor")
    answer = _report(running, {"pod": "job1-worker-0", "value": 0.5}, unbound)
    assert answer.status_code == 403 and "bound to no pod" in answer.json()["error"]
    answer = _report(running, {"pod": "job1-worker-0", "value": 0.5}, "made-up")
    assert answer.status_code == 401 and "invalid bearer token" in answer.json()["error"]


def test_a_pods_own_token_reports_and_is_reviewed_once(running: Running) -> None:
    token = running.api.pod_token(running.mine)
    before = len(running.api.reviews)
    for _ in range(5):
        answer = _report(running, {"pod": "job1-worker-0", "value": 0.5}, token)
        assert answer.status_code == 200, answer.text
        assert answer.json()["namespace"] == "team-a"
    speed = _report(running, {"pod": "job1-worker-0", **_SPEED}, token, "/throughput")
    assert speed.status_code == 200 and speed.json()["result"] == "taken"
    assert len(running.api.reviews) == before + 1  # cached: one TokenReview for six reports
    assert running.api.reviews[-1] == {"token": token, "audiences": ["dragonet-monitor"]}


def test_the_token_of_a_pod_since_replaced_under_its_name_is_403(running: Running) -> None:
    """A pod deleted and re-created under the same name (a migration) has a new uid. The
    API server refuses a token whose pod is gone; a review answered before (kept up to
    token_cache_seconds) still names the old uid, which is not the pod on this node."""
    token = running.api.pod_token(copy.deepcopy(running.theirs))  # still reviewed as valid
    running.theirs["metadata"]["uid"] = "uid-new"
    answer = _report(running, {"pod": "job2-worker-0", "value": 0.5}, token)
    assert answer.status_code == 403 and "(uid uid-new)" in answer.json()["error"]
    running.theirs["metadata"]["uid"] = "uid-team-b-job2-worker-0"
    assert _report(running, {"pod": "job2-worker-0", "value": 0.5}, token).status_code == 200


def test_a_pod_on_another_node_is_404_even_with_its_own_token(running: Running) -> None:
    token = running.api.pod_token(running.api.pods[2])
    answer = _report(running, {"pod": "job3-worker-0", "value": 0.5}, token)
    assert answer.status_code == 404 and "runs on node 'node-1'" in answer.json()["error"]


# ----- the cache, on its own -----


@dataclass
class Reviewer:
    status: dict[str, Any]
    calls: int = 0
    down: bool = False

    def review_token(self, token: str, audience: str) -> dict[str, Any]:
        self.calls += 1
        if self.down:
            raise ApiError("ConnectionRefusedError")
        return self.status


def _pod_status(name: str = "w", uid: str = "u1") -> dict[str, Any]:
    return {
        "authenticated": True,
        "audiences": ["dragonet-monitor"],
        "user": {
            "username": "system:serviceaccount:team-a:default",
            "extra": {
                "authentication.kubernetes.io/pod-name": [name],
                "authentication.kubernetes.io/pod-uid": [uid],
            },
        },
    }


def test_reviews_are_cached_for_a_while_bounded_and_a_failed_review_is_not() -> None:
    now = [0.0]
    reviewer = Reviewer(_pod_status())
    auth = Authenticator(reviewer, "dragonet-monitor", 60, 5, max_entries=3, clock=lambda: now[0])
    caller = auth.caller("Bearer t1")
    assert (caller.namespace, caller.pod, caller.uid) == ("team-a", "w", "u1")
    auth.caller("Bearer t1")
    assert reviewer.calls == 1
    now[0] = 61.0  # expired: asked again
    auth.caller("Bearer t1")
    assert reviewer.calls == 2
    for t in ("t2", "t3", "t4", "t5"):  # more tokens than entries: the oldest go
        auth.caller(f"Bearer {t}")
    assert len(auth._cache) == 3
    reviewer.down = True
    for _ in range(2):
        with pytest.raises(Refused) as err:
            auth.caller("Bearer t9")
        assert err.value.status == 503
    assert reviewer.calls == 8  # 6 tokens + 2 failed reviews, none of them kept


def test_new_tokens_are_reviewed_at_a_bounded_rate_and_cached_ones_still_pass() -> None:
    """A pod sending a new made-up token each time cannot make the monitor flood the API
    server: past the budget it gets 429; a pod whose answer is cached is not held up."""
    now = [0.0]
    reviewer = Reviewer(_pod_status())
    auth = Authenticator(
        reviewer, "dragonet-monitor", 60, 5, clock=lambda: now[0], reviews_per_second=2
    )
    auth.caller("Bearer mine")  # a real pod, reviewed once
    for i in range(3):  # the rest of the burst of 4
        auth.caller(f"Bearer forged-{i}")
    with pytest.raises(Refused) as err:
        auth.caller("Bearer forged-x")
    assert err.value.status == 429 and reviewer.calls == 4
    assert auth.caller("Bearer mine").pod == "w"  # cached: no review needed
    now[0] = 0.5  # one more review a half second at 2/s
    auth.caller("Bearer forged-y")
    assert reviewer.calls == 5


def test_a_refusal_is_kept_shorter_than_an_answer() -> None:
    now = [0.0]
    reviewer = Reviewer({"authenticated": False, "error": "invalid bearer token"})
    auth = Authenticator(reviewer, "dragonet-monitor", 60, 5, clock=lambda: now[0])
    for _ in range(3):
        with pytest.raises(Refused):
            auth.caller("Bearer x")
    assert reviewer.calls == 1
    now[0] = 6.0
    with pytest.raises(Refused):
        auth.caller("Bearer x")
    assert reviewer.calls == 2


def test_an_authenticated_token_of_an_audience_unaware_server_is_refused() -> None:
    """TokenReview's own advice: with spec.audiences set, a status without that audience
    means the server did not check it."""
    status = _pod_status()
    status["audiences"] = []
    with pytest.raises(Refused, match="not valid for audience"):
        caller_of(status, "dragonet-monitor")


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        ("", None),
        ("Basic dXNlcjpwYXNz", None),
        ("Bearer", None),
        ("Bearer   ", None),
        ("bearer abc", "abc"),
        ("Bearer  abc ", "abc"),
    ],
)
def test_only_a_bearer_header_carries_a_token(header, token) -> None:
    assert bearer(header) == token


def test_with_the_source_ip_checked_only_the_pods_own_address_reports() -> None:
    """In addition to the token (DRAGONET_MONITOR_CHECK_SOURCE_IP): the report's source
    address must be the pod's IP, for /monitor and /throughput alike."""
    from monitor.app import create_app
    from tests.monitorkit import FakeCluster, bearer, make_monitor

    p = _owned(pod("job1-worker-0"))
    p["status"] = {"podIP": "10.1.0.7"}
    monitor, _ = make_monitor(FakeCluster(pods=[p]), check_source_ip=True)
    client = create_app(monitor).test_client()
    for path, body in (
        ("/monitor", {"pod": "job1-worker-0", "value": 0.5}),
        ("/throughput", {"pod": "job1-worker-0", **_SPEED}),
    ):
        for addr, code in (("10.1.0.8", 403), ("10.1.0.7", 200), ("10.1.0.9", 403)):
            answer = client.post(
                path,
                json=body,
                headers=bearer("job1-worker-0"),
                environ_overrides={"REMOTE_ADDR": addr},
            )
            assert answer.status_code == code, (path, addr, answer.get_json())
            if code == 403:
                assert "must come from its own address 10.1.0.7" in answer.get_json()["error"]
    # Off (the default), the address is not looked at.
    monitor, _ = make_monitor(FakeCluster(pods=[p]))
    client = create_app(monitor).test_client()
    answer = client.post(
        "/monitor",
        json={"pod": "job1-worker-0", "value": 0.5},
        headers=bearer("job1-worker-0"),
        environ_overrides={"REMOTE_ADDR": "10.9.9.9"},
    )
    assert answer.status_code == 200


def test_with_auth_none_any_report_is_taken(tmp_path: Path) -> None:
    """The opt-out the chart's monitor.auth=none sets (docs/monitor.md says what it
    exposes)."""
    from monitor.app import create_app
    from tests.monitorkit import FakeCluster, make_monitor

    monitor, _ = make_monitor(FakeCluster(pods=[pod("job1-worker-0")]), auth="none")
    client = create_app(monitor).test_client()
    answer = client.post("/monitor", json={"pod": "job1-worker-0", "value": 0.5})
    assert answer.status_code == 200
