"""``dragonet-monitor``: the real server (gunicorn, one process) on a port, against an API
server that is not there; and its command line when it cannot start."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: nowhere, cluster: {server: "https://127.0.0.1:%d"}}]
users: [{name: me, user: {token: "t"}}]
contexts: [{name: here, context: {cluster: nowhere, user: me}}]
current-context: here
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    config = tmp / "kubeconfig"
    config.write_text(KUBECONFIG % _free_port())  # nothing listens there
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DRAGONET_", "KUBERNETES_"))}
    env.pop("NODE_NAME", None)
    return {**env, "KUBECONFIG": str(config), **extra}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port = _free_port()
    log = tmp_path / "stderr"
    env = _env(
        tmp_path,
        NODE_NAME="node-1",
        DRAGONET_MONITOR_HOST="127.0.0.1",
        DRAGONET_MONITOR_PORT=str(port),
        DRAGONET_MONITOR_REFRESH_SECONDS="1",
        DRAGONET_MONITOR_API_TIMEOUT_SECONDS="1",
        # Reports without a token, to see the body's checks and the API's absence; the token
        # check on the real server is tests/test_monitor_auth.py's.
        DRAGONET_MONITOR_AUTH="none",
    )
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor"], env=env, stderr=err, stdout=subprocess.DEVNULL
        )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                requests.get(f"{url}/healthz", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.fail(f"dragonet-monitor did not start:\n{log.read_text()}")
        yield url, log
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def test_the_server_answers_health_refuses_bad_reports_and_says_why_it_is_not_ready(
    server,
) -> None:
    url, log = server
    assert requests.get(f"{url}/healthz", timeout=5).json() == {"status": "ok"}
    not_ready = requests.get(f"{url}/readyz", timeout=5)
    assert not_ready.status_code == 503
    assert not_ready.json()["error"].startswith(("cannot read TrainingPool 'default'", "the pool"))
    bad = requests.post(f"{url}/monitor", json={"pod": "w"}, timeout=5)
    assert (bad.status_code, bad.json()) == (400, {"error": "value: required"})
    # DRAGON's report, exactly as its script sends it: the pod cannot be looked up.
    report = requests.post(f"{url}/monitor", json={"pod": "w", "value": 0.5}, timeout=10)
    assert report.status_code == 503 and "cannot look up pod 'w'" in report.json()["error"]
    assert "dragonet_monitor_reports_total" in requests.get(f"{url}/metrics", timeout=5).text
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    access = [x for x in lines if x["logger"] == "dragonet.monitor.access"]
    assert {(x["message"], x["status"]) for x in access} >= {
        ("POST /monitor 400", 400),
        ("POST /monitor 503", 503),
    }


def test_without_a_node_name_it_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "monitor"], env=_env(tmp_path), capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["dragonet-monitor: setting NODE_NAME: Field required"]


def test_a_bad_setting_exits_2_with_one_line(tmp_path: Path) -> None:
    env = _env(tmp_path, NODE_NAME="n", DRAGONET_MONITOR_THRESHOLD="-1")
    proc = subprocess.run(
        [sys.executable, "-m", "monitor"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("dragonet-monitor: setting threshold: Input should be greater")
    assert len(proc.stderr.splitlines()) == 1


def test_a_misspelt_setting_exits_2_naming_the_setting_it_meant(tmp_path: Path) -> None:
    """Its node's name comes without the prefix (the downward API): that one is known."""
    env = _env(tmp_path, NODE_NAME="n", DRAGONET_MONITOR_THRESHHOLD="2")
    proc = subprocess.run(
        [sys.executable, "-m", "monitor"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "dragonet-monitor: DRAGONET_MONITOR_THRESHHOLD: not a setting of dragonet-monitor "
        "(did you mean DRAGONET_MONITOR_THRESHOLD? they are listed in chart/README.md)"
    ]


def test_without_any_api_configuration_it_exits_2_with_one_line(tmp_path: Path) -> None:
    env = _env(tmp_path, NODE_NAME="n", KUBECONFIG=str(tmp_path / "missing"))
    proc = subprocess.run(
        [sys.executable, "-m", "monitor"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("dragonet-monitor: no Kubernetes API configuration:")
    assert len(proc.stderr.splitlines()) == 1


def test_an_argument_it_does_not_take_exits_2_with_one_line(tmp_path: Path) -> None:
    """Its settings come from the environment: an argument would be ignored, so it is
    refused (as the reaper and the recorder refuse theirs)."""
    env = _env(tmp_path, NODE_NAME="n")
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "--port", "9000"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "dragonet-monitor: takes no arguments (got '--port'); see --help"
    ]
