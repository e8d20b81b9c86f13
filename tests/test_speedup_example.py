"""examples/preemptible/train.py reports its job's speed the way docs/speedup.md says: the
chief (in the PS pod) posts global steps per second to the monitor on its node, and the
PS pod's rendered environment tells it where. TensorFlow is not installed here, so the
training loop itself does not run; the pieces around it do."""

from __future__ import annotations

import importlib.util
import socket
import threading
from collections.abc import Iterator

import pytest
import yaml
from werkzeug.serving import make_server

from monitor.app import create_app
from tests.kube_schema import ROOT
from tests.monitorkit import FakeCluster, make_monitor, pod, token_for

EXAMPLE = ROOT / "examples" / "preemptible"


def _load_train():
    spec = importlib.util.spec_from_file_location("preemptible_train_speed", EXAMPLE / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # no TensorFlow needed to import it
    return module


train = _load_train()


def test_the_speed_is_global_steps_per_second_between_two_readings() -> None:
    assert train.steps_per_second((100.0, 40), (110.0, 65)) == pytest.approx(2.5)
    assert train.steps_per_second((100.0, 40), (100.0, 65)) is None  # no time passed
    assert train.steps_per_second((100.0, 40), (110.0, 0)) is None  # the PS restarted


@pytest.fixture
def speed_url() -> Iterator[str]:
    ps = pod("preemptible-ps-0", rtype="ps")
    ps["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "name": "preemptible",
            "controller": True,
        }
    ]
    monitor, _ = make_monitor(FakeCluster(pods=[ps]))
    server = make_server("127.0.0.1", 0, create_app(monitor), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/throughput"
    server.shutdown()


def test_the_chief_speaks_the_monitors_speed_protocol(
    speed_url: str, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(token_for("preemptible-ps-0"))
    monkeypatch.setenv("MONITOR_TOKEN_FILE", str(token_file))  # the projected volume's file
    assert train.report_speed(speed_url, "preemptible-ps-0", 2.5, train.BATCH) == 200
    # the PS pod's token is the PS pod's: it reports for no other pod
    assert train.report_speed(speed_url, "someone-else", 2.5, train.BATCH) == 403
    # how far it is: the global step of the steps it runs (a step past the limit is the limit)
    assert train.report_speed(speed_url, "preemptible-ps-0", 2.5, train.BATCH, (10, 1000)) == 200
    assert train.report_speed(speed_url, "preemptible-ps-0", 2.5, train.BATCH, (1001, 1000)) == 200


def test_a_monitor_that_does_not_answer_never_stops_the_chief() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/throughput"
    assert train.report_speed(url, "w", 1.0, 16, timeout=0.5) is None


def test_the_ps_pod_is_told_where_to_report_the_speed() -> None:
    job = yaml.safe_load((EXAMPLE / "tfjob.yaml").read_text())
    (container,) = job["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["SPEED_URL"] == "http://$(NODE_IP):8081/throughput"
    assert env["NODE_IP"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
