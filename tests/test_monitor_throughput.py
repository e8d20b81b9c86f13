"""``POST /throughput``: a training job's speed reports reach its TFJob's
``dragonet.io/throughput`` annotation through the Container Monitor, aggregated, rarely
written, and never believed blindly (docs/speedup.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask.testing import FlaskClient

from monitor.app import create_app
from policy.model.bounds import OutOfBounds
from policy.model.throughput import ANNOTATION, Config, parse
from tests.monitorkit import FakeCluster, bearer, make_monitor, pod

JOB = ("TFJob", "team-a", "job1")


def _pod(name: str, node: str, rtype: str = "worker", phase: str = "Running") -> dict[str, Any]:
    p = pod(name, node=node, rtype=rtype)
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "job1", "controller": True}
    ]
    p["status"] = {"phase": phase}
    return p


def _setup(*workers_on: str):
    pods = [_pod("job1-ps-0", "node-1", "ps")]
    pods += [_pod(f"job1-worker-{i}", n) for i, n in enumerate(workers_on)]
    cluster = FakeCluster(pods=pods, jobs={JOB: {"metadata": {"name": "job1"}}})
    monitor, ticks = make_monitor(cluster)
    return create_app(monitor).test_client(), cluster, ticks


def post(client: FlaskClient, body: Any):
    """As the pod the report names sends it: with its own token (monitor/auth.py)."""
    name = body.get("pod") if isinstance(body, dict) else None
    headers = bearer(name) if isinstance(name, str) else {}
    return client.post(
        "/throughput", data=json.dumps(body), content_type="application/json", headers=headers
    )


def report_for(client: FlaskClient, ticks, seconds: float, speed: float, batch: int = 256) -> list:
    answers = []
    for _ in range(int(seconds // 10)):
        ticks.advance(10)
        r = post(client, {"pod": "job1-worker-0", "stepsPerSecond": speed, "batch": batch})
        assert r.status_code == 200, r.get_json()
        answers.append(r.get_json()["result"])
    return answers


def test_a_steady_job_is_written_once_its_configuration_settled_and_then_rarely() -> None:
    client, cluster, ticks = _setup("node-1", "node-2")
    answers = report_for(client, ticks, 660, 2.5)  # 10 windows closed
    # Settled in the first two, then written after 1, 2, 4 and 8 minutes measured.
    assert answers.count("written") == 4
    written = [p for p in cluster.patches if p[3] == ANNOTATION]
    assert len(written) == answers.count("written")
    history = parse(cluster.jobs[JOB]["metadata"]["annotations"][ANNOTATION])
    (reading,) = history.readings
    assert reading.config == Config(workers=2, ps=1, remote=1, nodes=2)
    assert reading.steps_per_s == pytest.approx(2.5)
    assert history.batch == 256
    # One list of the job's pods per window closed, one read of the job, nothing more.
    calls = cluster.calls
    assert calls.count("list_job_pods") == 10 and calls.count("get_job") == 1
    assert calls.count("list_pods") == 1  # the reporting pod, looked up once


def test_how_far_a_job_is_reaches_its_history_with_its_speed() -> None:
    """A report with ``step`` of ``totalSteps``: the history says how far the job is, and so
    how much training it has left at its measured speed (what shortest remaining first
    ranks it by)."""
    client, cluster, ticks = _setup("node-1", "node-1")
    step = 0
    for _ in range(30):  # 5 minutes at 2 steps per second
        ticks.advance(10)
        step += 20
        body = {"pod": "job1-worker-0", "stepsPerSecond": 2.0, "step": step, "totalSteps": 10_000}
        assert post(client, body).status_code == 200
    history = parse(cluster.jobs[JOB]["metadata"]["annotations"][ANNOTATION])
    assert history.progress is not None and history.progress.total == 10_000
    assert 0 < history.progress.step <= step
    left = (10_000 - history.progress.step) / 2.0 * 2  # worker-seconds on its 2 workers
    assert history.left_worker_s() == pytest.approx(left)


def test_a_new_configuration_is_added_to_what_the_job_already_holds() -> None:
    client, cluster, ticks = _setup("node-1")
    cluster.jobs[JOB]["metadata"]["annotations"] = {
        ANNOTATION: '{"version":1,"readings":[{"workers":4,"ps":1,"stepsPerSecond":3.0}]}'
    }
    report_for(client, ticks, 200, 1.0)
    history = parse(cluster.jobs[JOB]["metadata"]["annotations"][ANNOTATION])
    assert [r.config.workers for r in history.readings] == [4, 1]


def test_an_unbelievable_history_is_replaced_by_what_is_measured() -> None:
    client, cluster, ticks = _setup("node-1")
    cluster.jobs[JOB]["metadata"]["annotations"] = {ANNOTATION: '{"version":1,"readings":7}'}
    report_for(client, ticks, 200, 1.0)
    history = parse(cluster.jobs[JOB]["metadata"]["annotations"][ANNOTATION])
    assert [r.config for r in history.readings] == [Config(1, 1)]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"pod": "job1-worker-0"}, "stepsPerSecond: required"),
        ({"pod": "job1-worker-0", "stepsPerSecond": "fast"}, "stepsPerSecond: must be a number"),
        ({"pod": "job1-worker-0", "stepsPerSecond": -1}, "stepsPerSecond: must be a number above"),
        ({"pod": "job1-worker-0", "stepsPerSecond": 1e300}, "at most"),
        ({"pod": "job1-worker-0", "stepsPerSecond": 1, "batch": 0}, "batch"),
        ({"pod": "job1-worker-0", "stepsPerSecond": 1, "gpu": 1}, "gpu: unknown field"),
        ({"pod": "Job1", "stepsPerSecond": 1}, "pod"),
        ({"pod": "job1-worker-0", "stepsPerSecond": 1, "step": 5}, "give both"),
        ({"pod": "job1-worker-0", "stepsPerSecond": 1, "totalSteps": 5}, "give both"),
        ({"pod": "job1-worker-0", "stepsPerSecond": 1, "step": -1, "totalSteps": 5}, "step"),
        ({"pod": "job1-worker-0", "stepsPerSecond": 1, "step": 1, "totalSteps": 0}, "totalSteps"),
        ({"pod": "job1-worker-0", "stepsPerSecond": 1, "gradSqr": 1.0}, "give both"),
        ({"pod": "job1-worker-0", "stepsPerSecond": 1, "gradVar": 1.0}, "give both"),
        ({"pod": "job1-worker-0", "stepsPerSecond": 1, "gradSqr": 0, "gradVar": 1}, "gradSqr"),
        ({"pod": "job1-worker-0", "stepsPerSecond": 1, "gradSqr": 1, "gradVar": -1}, "gradVar"),
        ({"pod": "job1-worker-0", "stepsPerSecond": 1, "gradSqr": 1e31, "gradVar": 1}, "gradSqr"),
        ({"pod": "job1-worker-0", "stepsPerSecond": 1, "gradSqr": "1", "gradVar": 1}, "gradSqr"),
    ],
)
def test_a_report_that_cannot_be_believed_is_refused_naming_the_field(body, says) -> None:
    client, cluster, _ = _setup("node-1")
    answer = post(client, body)
    assert answer.status_code == 400
    assert says in answer.get_json()["error"]
    assert cluster.patches == []


def test_a_pod_of_no_training_job_cannot_report_a_speed() -> None:
    client, cluster, _ = _setup("node-1")
    cluster.pods.append(pod("lonely", node="node-1"))
    answer = post(client, {"pod": "lonely", "stepsPerSecond": 1})
    assert answer.status_code == 400
    assert "no TFJob, MXJob or PyTorchJob" in answer.get_json()["error"]


def test_a_kubeflow_jobs_pod_cannot_report_a_speed_nor_have_its_job_annotated() -> None:
    client, cluster, ticks = _setup("node-1")
    theirs = _pod("kf-worker-0", "node-1")
    theirs["metadata"]["labels"]["training.kubeflow.org/operator-name"] = "tfjob-controller"
    cluster.pods.append(theirs)
    for _ in range(20):
        ticks.advance(10)
        answer = post(client, {"pod": "kf-worker-0", "stepsPerSecond": 1.5, "batch": 64})
        assert answer.status_code == 403
    assert "is not Dragonet's" in answer.get_json()["error"]
    assert cluster.patches == []


def test_a_job_whose_writes_fail_keeps_training_and_is_written_later() -> None:
    client, cluster, ticks = _setup("node-1")
    report_for(client, ticks, 10, 1.0)  # the pod is known
    cluster.down = True
    assert "error" in report_for(client, ticks, 170, 1.0)
    cluster.down = False
    assert "written" in report_for(client, ticks, 200, 1.0)


def test_gradient_statistics_reach_the_history_with_a_reading_per_batch() -> None:
    """A job whose batch the pool chooses reports Pollux's agent's gradient statistics: the
    history keeps the latest, and a reading for each batch the job trained at (the pool
    fits how its speed depends on the batch)."""
    client, cluster, ticks = _setup("node-1", "node-1")
    for batch, speed in ((128, 2.0), (512, 1.0)):
        for _ in range(30):  # 5 minutes at each batch
            ticks.advance(10)
            body = {"pod": "job1-worker-0", "stepsPerSecond": speed, "batch": batch,
                    "gradSqr": 0.5, "gradVar": 2.0}  # fmt: skip
            assert post(client, body).status_code == 200
    history = parse(cluster.jobs[JOB]["metadata"]["annotations"][ANNOTATION])
    assert history.grad is not None and (history.grad.sqr, history.grad.var) == (0.5, 2.0)
    speeds = {r.config.batch: r.steps_per_s for r in history.readings}
    assert speeds == {128: pytest.approx(2.0), 512: pytest.approx(1.0)}
    assert {r.config.workers for r in history.readings} == {2}


@pytest.mark.parametrize(
    ("grad", "says"),
    [
        ('{"sqr": 1}', "grad: sqr and var are required"),
        ('{"sqr": 0, "var": 1}', "grad.sqr"),
        ('{"sqr": 1, "var": -0.5}', "grad.var"),
        ('{"sqr": 1, "var": 1, "norm": 2}', "unknown field 'norm'"),
        ("[1, 2]", "grad must be an object"),
    ],
)
def test_an_annotation_with_unbelievable_gradient_statistics_is_refused(grad, says) -> None:
    raw = '{"version":1,"readings":[{"workers":1,"ps":1,"stepsPerSecond":1}],"grad":' + grad + "}"
    with pytest.raises(OutOfBounds, match=r"dragonet\.io/throughput") as err:
        parse(raw)
    assert says in str(err.value)
