"""examples/preemptible/: the TFJob validates, Dragonet renders it into valid pods, and its
training script (chief in the PS pod, reports to the monitor) reads those pods' TF_CONFIG
and speaks the monitor's protocol. TensorFlow is not installed here, so the training loop
itself does not run; everything around it does."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from werkzeug.serving import make_server

from cli.main import main
from monitor.app import create_app
from tests.kube_schema import ROOT, validate_k8s, validate_tfjob
from tests.monitorkit import FakeCluster, make_monitor, pod, token_for

EXAMPLE = ROOT / "examples" / "preemptible"


def _load_train():
    spec = importlib.util.spec_from_file_location("preemptible_train", EXAMPLE / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # no TensorFlow needed to import it
    return module


train = _load_train()


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict[str, Any]]:
    nodes = ROOT / "examples" / "nodes.yaml"
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(io.StringIO()):
        code = main(
            ["render", str(EXAMPLE / "tfjob.yaml"), "--nodes", str(nodes), "--output", "json"]
        )
    assert code == 0
    return {o["metadata"]["name"]: o for o in json.loads(buffer.getvalue()) if o["kind"] == "Pod"}


def _env(p: dict[str, Any]) -> dict[str, Any]:
    [c] = p["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


def test_the_job_validates_against_the_tfjob_crd() -> None:
    validate_tfjob(yaml.safe_load((EXAMPLE / "tfjob.yaml").read_text()))


def test_dragonet_renders_valid_pods_with_the_chief_port_on_the_ps(rendered) -> None:
    assert sorted(rendered) == ["preemptible-ps-0", *(f"preemptible-worker-{i}" for i in range(3))]
    for p in rendered.values():
        validate_k8s(p)
    [ps] = rendered["preemptible-ps-0"]["spec"]["containers"]
    assert {p["name"]: p["containerPort"] for p in ps["ports"]} == {
        "tfjob-port": 2222,
        "chief-port": train.CHIEF_PORT,
    }
    worker = _env(rendered["preemptible-worker-1"])
    assert worker["NODE_IP"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    assert worker["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert worker["MONITOR_URL"] == "http://$(NODE_IP):8081/monitor"
    names = list(worker)
    assert names.index("NODE_IP") < names.index("MONITOR_URL")  # $(NODE_IP) expands


def test_every_pod_mounts_its_own_token_for_the_monitor_where_the_script_reads_it(
    rendered,
) -> None:
    """The monitor takes a report only with the reporting pod's own token for its audience
    (docs/monitor.md): Dragonet's pods keep the projected volume the job's template has."""
    for p in rendered.values():
        volumes = {v["name"]: v for v in p["spec"]["volumes"]}
        (source,) = volumes["monitor-token"]["projected"]["sources"]
        assert source["serviceAccountToken"]["audience"] == "dragonet-monitor"
        [c] = p["spec"]["containers"]
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        path = f"{mounts['monitor-token']}/{source['serviceAccountToken']['path']}"
        assert path == train.TOKEN_FILE


def test_every_process_derives_the_same_cluster_with_the_chief_in_the_ps_pod(rendered) -> None:
    clusters = []
    for name, p in sorted(rendered.items()):
        config = _env(p)["TF_CONFIG"]
        role = "ps" if "-ps-" in name else "worker"
        cluster, job, index = train.cluster_and_task(config, role)
        clusters.append(cluster)
        assert (job, index) == (role, int(name.rsplit("-", 1)[1]))
        if role == "ps":
            assert train.cluster_and_task(config, "chief")[1:] == ("chief", 0)
    assert all(c == clusters[0] for c in clusters)
    assert clusters[0]["chief"] == ["preemptible-ps-0.default.svc:2223"]
    assert len(clusters[0]["worker"]) == 3  # max-instances: no worker is the chief


def test_a_process_whose_role_is_not_its_tf_config_refuses_to_start(rendered) -> None:
    config = _env(rendered["preemptible-worker-0"])["TF_CONFIG"]
    with pytest.raises(SystemExit, match="role 'ps' but TF_CONFIG says 'worker'"):
        train.cluster_and_task(config, "ps")


def test_reports_stop_near_the_end() -> None:
    assert train.should_report(20, 500, 20, 1000, 15)
    assert not train.should_report(21, 500, 20, 1000, 15)
    assert not train.should_report(40, 985, 20, 1000, 15)  # the last 5 x max_workers steps


@pytest.fixture
def monitor_url() -> Iterator[str]:
    cluster = FakeCluster(pods=[pod("preemptible-worker-1")])
    monitor, _ = make_monitor(cluster)
    server = make_server("127.0.0.1", 0, create_app(monitor), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/monitor"
    server.shutdown()


def test_the_script_speaks_the_monitors_protocol(monitor_url: str, tmp_path) -> None:
    """With the pod's own token (the projected volume's file) a report is taken; the same
    token cannot report for another pod; no token file, no report taken (training goes on)."""
    token_file = tmp_path / "token"
    token_file.write_text(token_for("preemptible-worker-1") + "\n")  # as the kubelet writes it
    assert train.report(monitor_url, "preemptible-worker-1", 0.8125, token_file=token_file) == 200
    assert train.report(monitor_url, "someone-else", 0.5, token_file=token_file) == 403
    missing = str(tmp_path / "none")
    assert train.report(monitor_url, "preemptible-worker-1", 0.5, token_file=missing) == 401


def test_a_monitor_that_does_not_answer_never_stops_training() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    assert train.report(f"http://127.0.0.1:{port}/monitor", "w", 0.5, timeout=0.5) is None
