"""examples/adaptive-batch/train.py trains at the batch the pool chose and reports what
docs/speedup.md asks of a declaring job: its speed at that batch and its gradient's
statistics, which the monitor takes. TensorFlow is not installed here, so the training
loop itself does not run; the pieces around it do."""

from __future__ import annotations

import importlib.util
import random
import threading
from collections.abc import Iterator

import pytest
import yaml
from werkzeug.serving import make_server

from monitor.app import create_app
from policy.model.batch import ANNOTATION as BATCH_ANNOTATION
from policy.model.batch import BATCH_ENV, BATCH_PER_REPLICA_ENV, parse_range
from tests import metacontroller as mc
from tests.conftest import Hook, pods_of
from tests.kube_schema import ROOT
from tests.monitorkit import FakeCluster, make_monitor, pod, token_for

EXAMPLE = ROOT / "examples" / "adaptive-batch"


def _load_train():
    spec = importlib.util.spec_from_file_location("adaptive_batch_train", EXAMPLE / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # no TensorFlow needed to import it
    return module


train = _load_train()
JOB = yaml.safe_load((EXAMPLE / "tfjob.yaml").read_text())


def _worker_env(job: dict) -> dict:
    (container,) = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_the_example_reads_the_names_dragonet_sets() -> None:
    assert (train.BATCH_ENV, train.BATCH_PER_REPLICA_ENV) == (BATCH_ENV, BATCH_PER_REPLICA_ENV)
    declared = parse_range(JOB["metadata"]["annotations"][BATCH_ANNOTATION])
    assert train.declared_min(_worker_env(JOB)["BATCH_RANGE"]) == declared.minimum


def test_each_worker_trains_at_the_share_its_pod_was_given(hook: Hook) -> None:
    """The job's sync renders the example's workers with the Admission's batch; the
    script reads it (and MIN each when there is none)."""
    job = mc.tfjob("dragon-job1-cpu.yaml")
    admission = mc.admission(job, [("PS", 0, "n-1"), ("Worker", 0, "n-1")], workers=1)
    admission["spec"]["batch"] = {"size": 256, "perReplica": 128}
    world = mc.world(job, [mc.node("n-1", cpu="64", memory="256Gi")])
    worker = pods_of(hook.job_sync(mc.job_request(world, admission)))["job1-worker-0"]
    (main,) = [c for c in worker["spec"]["containers"] if c["name"] == "tensorflow"]
    env = {e["name"]: e["value"] for e in main["env"] if "value" in e}
    assert train.batch_from_env(env, 32) == (256, 128)
    assert train.batch_from_env({}, 32) == (32, 32)
    assert train.learning_rate(128, 32) == pytest.approx(4 * train.BASE_RATE)


def test_the_gradient_statistics_are_those_of_the_true_gradient() -> None:
    """Gradients of ``share`` examples around a known true gradient: the estimates,
    averaged over many reports, give its squared norm and the variance of a gradient of
    MIN examples within 5 %."""
    rng = random.Random(7)
    true = [rng.uniform(-1, 1) for _ in range(20)]
    sigma2, share, minimum = 0.5, 128, 32  # each example's variance per coordinate
    sqrs, vars_ = [], []
    for _ in range(1500):
        grads = [
            [g + rng.gauss(0, (sigma2 / share) ** 0.5) for g in true] for _ in range(train.COUNT)
        ]
        sqr, var = train.grad_stats(grads, share, minimum)
        sqrs.append(sqr)
        vars_.append(var)
    assert sum(sqrs) / len(sqrs) == pytest.approx(sum(g * g for g in true), rel=0.05)
    assert sum(vars_) / len(vars_) == pytest.approx(len(true) * sigma2 / minimum, rel=0.05)
    with pytest.raises(ValueError, match="two gradients"):
        train.grad_stats([true], share, minimum)


def test_the_speed_is_in_steps_of_the_global_batch() -> None:
    """Four asynchronous workers at 100 examples each, 20 worker steps a second: 2,000
    examples a second, 5 steps of the global 400."""
    steps = train.steps_of_the_global_batch(20.0, 100, 400)
    assert steps * 400 == pytest.approx(20.0 * 100)


@pytest.fixture
def speed_url() -> Iterator[str]:
    worker = pod("adaptive-batch-worker-0", job="adaptive-batch")
    worker["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "name": "adaptive-batch",
            "controller": True,
        }
    ]
    monitor, _ = make_monitor(FakeCluster(pods=[worker]))
    server = make_server("127.0.0.1", 0, create_app(monitor), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/throughput"
    server.shutdown()


def test_worker_0_speaks_the_monitors_protocol_with_its_gradient(
    speed_url: str, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(token_for("adaptive-batch-worker-0"))
    monkeypatch.setenv("MONITOR_TOKEN_FILE", str(token_file))
    name = "adaptive-batch-worker-0"
    assert train.report(speed_url, name, 5.0, 400, (0.02, 0.47)) == 200
    assert train.report(speed_url, name, 5.0, 400, (0.02, 0.47), (10, 1000)) == 200
    # A gradient the monitor cannot believe is refused, naming the field.
    assert train.report(speed_url, name, 5.0, 400, (0.0, 0.47)) == 400
    assert train.report(speed_url, name, 5.0, 400, (0.02, -1.0)) == 400
    assert train.report(speed_url, "someone-else", 5.0, 400, (0.02, 0.47)) == 403
