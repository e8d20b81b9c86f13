"""``dragonet serve``: the production server (gunicorn) answers Metacontroller over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.conftest import load_fixture


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = _free_port()
    env = {
        **os.environ,
        "DRAGONET_PORT": str(port),
        "DRAGONET_WORKERS": "2",
        "DRAGONET_THREADS": "3",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhooks.cli", "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"dragonet serve exited: {proc.stderr.read().decode()[-2000:]}")
            try:
                if requests.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.2)
        else:
            pytest.fail("dragonet serve did not answer /healthz within 30 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_serve_answers_parallel_syncs_like_metacontrollers_five_workers(server: str) -> None:
    calls = [
        ("/pools/sync", "pool-sync-job1-one-big-node.json"),
        ("/pools/sync", "pool-sync-job1-spill.json"),
        ("/pools/sync", "pool-sync-job1-cannot-fit.json"),
        ("/pools/sync", "pool-sync-two-jobs.json"),
        ("/tfjobs/sync", "job-sync-job1-admitted.json"),
    ]

    def post(call: tuple[str, str]) -> requests.Response:
        """As Metacontroller does: a 429 (every thread of that process busy) is retried
        after its Retry-After."""
        path, fixture = call
        body = load_fixture(fixture)
        for _ in range(10):
            answer = requests.post(f"{server}{path}", json=body, timeout=10)
            if answer.status_code != 429:
                return answer
            time.sleep(float(answer.headers.get("Retry-After", "1")))
        return answer

    with ThreadPoolExecutor(max_workers=5) as pool:
        answers = list(pool.map(post, calls))
    assert [a.status_code for a in answers] == [200] * 5
    phases = [[c["spec"]["phase"] for c in a.json()["children"]] for a in answers[:4]]
    assert phases == [["Admitted"], ["Admitted"], ["Queued"], ["Admitted", "Queued"]]
    assert answers[4].json()["status"]["scheduling"]["phase"] == "Admitted"
    assert len([c for c in answers[4].json()["children"] if c["kind"] == "Pod"]) == 5


def test_serve_rejects_garbage_with_400(server: str) -> None:
    answer = requests.post(f"{server}/tfjobs/sync", data=b"\x00garbage", timeout=10)
    assert answer.status_code == 400
    assert "error" in answer.json()
