"""Batch sizes a job can take (issue 37): the declaration, what its pods are given, and the
pool's choice of batch and replicas from the job's reports."""

from __future__ import annotations

from typing import Any

import pytest

from policy.model.admission import Admission
from policy.model.batch import ANNOTATION, MAX_BATCH, BatchRange, parse_range
from policy.model.bounds import OutOfBounds
from policy.model.jobs import MXJOB, InvalidJob, parse_job
from tests import metacontroller as mc
from tests.conftest import Hook, pods_of
from tests.kube_schema import validate_child, validate_custom
from tests.test_mxjob import mxjob

JOB = "dragon-job1-cpu.yaml"  # 1 PS + 4 workers, min 1, max 4
NODES = [mc.node("n-1", cpu="64", memory="256Gi")]
ALL = [("PS", 0, "n-1"), *(("Worker", i, "n-1") for i in range(4))]


def _declaring(value: str = "64-1024") -> dict[str, Any]:
    job = mc.tfjob(JOB)
    job["metadata"]["annotations"] = {ANNOTATION: value}
    return job


# --- the declaration --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "lo", "hi"),
    [("64-1024", 64, 1024), (" 32 - 32 ", 32, 32), ("1-1048576", 1, MAX_BATCH)],
)
def test_a_declared_range_is_read(raw: str, lo: int, hi: int) -> None:
    assert parse_range(raw) == BatchRange(lo, hi)
    job = parse_job(_declaring(raw))
    assert job.batch_range == BatchRange(lo, hi)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("1024-64", "MIN (1024) is greater than MAX (64)"),
        ("0-64", "1..1048576"),
        ("64-2000000", "1..1048576"),
        ("64", "MIN-MAX"),
        ("64..1024", "MIN-MAX"),
        ("-64-1024", "MIN-MAX"),
        ("64-1024.5", "MIN-MAX"),
        ("sixty-four", "MIN-MAX"),
        ("", "MIN-MAX"),
    ],
)
def test_a_bad_range_is_refused_naming_the_annotation(raw: str, why: str) -> None:
    with pytest.raises(OutOfBounds, match="batch-size"):
        parse_range(raw)
    with pytest.raises(InvalidJob) as err:
        parse_job(_declaring(raw))
    assert ANNOTATION in str(err.value) and why in str(err.value)


def test_a_bad_range_fails_the_job_with_the_annotation_named(hook: Hook) -> None:
    job = _declaring("1024-64")
    body = hook.job_sync(mc.job_request(mc.world(job, NODES), None))
    failed = next(c for c in body["status"]["conditions"] if c["type"] == "Failed")
    assert ANNOTATION in failed["message"] and "'1024-64'" in failed["message"]
    assert pods_of(body) == {}


def test_a_job_that_declares_nothing_has_no_range_and_an_mxjob_may_declare() -> None:
    assert parse_job(mc.tfjob(JOB)).batch_range is None
    raw = mxjob()
    raw["metadata"]["annotations"] = {ANNOTATION: "128-4096"}
    assert parse_job(raw, MXJOB).batch_range == BatchRange(128, 4096)


# --- the pods ---------------------------------------------------------------------------------


def _with_batch(job: dict[str, Any], size: int, per: int) -> dict[str, Any]:
    admission = mc.admission(job, ALL, workers=4)
    admission["spec"]["batch"] = {"size": size, "perReplica": per}
    return admission


def _env(pod: dict[str, Any]) -> dict[str, str]:
    main = next(c for c in pod["spec"]["containers"] if c["name"] == "tensorflow")
    return {e["name"]: e.get("value", "") for e in main.get("env") or []}


def test_the_chosen_batch_is_in_every_pod_at_start(hook: Hook) -> None:
    job = _declaring()
    admission = _with_batch(job, 512, 128)
    validate_custom(admission)
    Admission.from_object(admission)  # the pool's own type reads it
    body = hook.job_sync(mc.job_request(mc.world(job, NODES), admission))
    pods = pods_of(body)
    assert sorted(pods) == ["job1-ps-0", *(f"job1-worker-{i}" for i in range(4))]
    for pod in pods.values():
        validate_child(pod)
        env = _env(pod)
        assert env["DRAGONET_BATCH_SIZE"] == "512"
        assert env["DRAGONET_BATCH_SIZE_PER_REPLICA"] == "128"
        assert "TF_CONFIG" in env  # beside the cluster spec, not instead of it


def test_a_job_whose_admission_chose_no_batch_gets_no_batch_variable(hook: Hook) -> None:
    job = mc.tfjob(JOB)
    body = hook.job_sync(mc.job_request(mc.world(job, NODES), mc.admission(job, ALL, workers=4)))
    for pod in pods_of(body).values():
        assert not any(k.startswith("DRAGONET_BATCH") for k in _env(pod))


@pytest.mark.parametrize("bad", [{"size": 0, "perReplica": 1}, {"size": 64}])
def test_an_admission_with_an_unreadable_batch_is_refused(bad: dict[str, Any]) -> None:
    job = _declaring()
    admission = mc.admission(job, ALL, workers=4)
    admission["spec"]["batch"] = bad
    with pytest.raises(ValueError, match="unreadable Admission"):
        Admission.from_object(admission)
