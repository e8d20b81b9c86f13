"""The pool sees each reporting job's speed-up estimate in its snapshot
(``PoolSnapshot.speedups``), from the job's ``dragonet.io/throughput`` annotation as
Metacontroller sends the job. Admission does not read it (a queued job's reports, if any,
are of a size it no longer has); who grows, who gives a worker back and who shrinks first
do (tests/test_goodput.py)."""

from __future__ import annotations

import copy

import pytest

from policy.memo import Memo
from policy.model.speedup import estimate
from policy.model.throughput import ANNOTATION, Config, History
from policy.pool.observe import observe
from tests import metacontroller as mc
from tests.conftest import Hook

JOB = "dragon-job1-cpu.yaml"  # 1 PS + 4 workers, min 1, max 4
NODES = [mc.node("n-1", cpu="64", memory="256Gi"), mc.node("n-2", cpu="64", memory="256Gi")]
HISTORY = History().add(Config(2, 1), 1.0).add(Config(4, 1), 1.6).add(Config(4, 1, 2, 2), 1.2)


def _reporting(job: dict, text: str = HISTORY.text()) -> dict:
    out = copy.deepcopy(job)
    out["metadata"].setdefault("annotations", {})[ANNOTATION] = text
    return out


def _snapshot(*jobs: dict):
    w = mc.world(jobs[0], NODES, jobs=list(jobs))
    request = mc.pool_request(w)
    return observe(request["parent"], request["children"], request["related"], Memo())


def test_a_reporting_jobs_estimate_is_in_the_pools_snapshot() -> None:
    quiet = mc.tfjob(JOB, name="quiet")
    loud = _reporting(mc.tfjob(JOB, name="loud"))
    snap = _snapshot(quiet, loud)
    assert set(snap.speedups) == {"default/loud"}  # a job that reports nothing has none
    model = snap.speedups["default/loud"]
    assert model == estimate(HISTORY)
    assert model.throughput(Config(4, 1)) == pytest.approx(1.6, rel=1e-5)
    assert model.relative_gain(Config(4, 1, 2, 2), Config(4, 1)) == pytest.approx(
        1.6 / 1.2 - 1, rel=1e-5
    )
    assert snap.problems == ()


def test_an_annotation_that_cannot_be_believed_gives_no_estimate_and_says_why() -> None:
    bad = _reporting(mc.tfjob(JOB, name="liar"), '{"version":1,"readings":[{"workers":2}]}')
    snap = _snapshot(bad)
    assert snap.speedups == {}
    assert [j.name for j in snap.jobs] == ["liar"]  # the job itself is planned as before
    (problem,) = snap.problems
    assert "TFJob default/liar" in problem and "readings[0]" in problem
    assert "stepsPerSecond" in problem


def test_admission_is_the_same_with_or_without_reports() -> None:
    first = mc.tfjob(JOB, name="first", created="2026-11-21T09:00:00Z")
    second = mc.tfjob(JOB, name="second", created="2026-11-21T09:30:00Z")
    plain = Hook().pool_sync(mc.pool_request(mc.world(first, NODES, jobs=[first, second])))
    reported = [_reporting(first), _reporting(second)]
    told = Hook().pool_sync(mc.pool_request(mc.world(reported[0], NODES, jobs=reported)))
    assert told == plain
    assert plain["children"]  # (it did decide something)
