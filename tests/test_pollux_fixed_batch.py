"""The fixed-batch Pollux reference (issue 37): the check that Pollux's allocator sees each
job's fixed-batch speed-up and not the straight line the artifact substitutes for any
speed-up function it does not recognise.

The logic is tested on small fakes; the artifact itself (``petuum/adaptdl``
osdi21-artifact, never vendored) is exercised only when a checkout and its venv are on
this machine (``POLLUX_ARTIFACT``, default ``/work/pollux-artifact``: ``simulator/`` and
``.venv/``, as benchmarks/README.md sets them up).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.pollux_fixed_batch import (
    FixedBatchGoodput,
    LinearSpeedupError,
    check_speedup,
    fixed_batch_goodput,
    summarize,
)

ROOT = Path(__file__).resolve().parent.parent


def model(nodes: float, replicas: float) -> float:
    """A sublinear fixed-batch goodput: 1.0 / 1.95 / 3.16 on 1 / 2 / 4 replicas."""
    return {1: 1.0, 2: 1.95, 3: 2.5, 4: 3.16}.get(int(replicas), 0.0) * 10.0


def test_check_rejects_the_straight_line_the_artifact_substitutes() -> None:
    fair_replicas = 4  # Problem.__init__'s `lambda n, r: r / num_replicas`
    with pytest.raises(LinearSpeedupError, match=r"2 replicas is 2.0000x one \(a straight line\)"):
        check_speedup("yolov3-1", lambda n, r: r / fair_replicas, model, cap=8)


def test_check_accepts_the_model_rescaled_to_a_fair_share() -> None:
    # The allocator divides by the goodput at the job's fair share: a change of unit only.
    check_speedup("yolov3-1", lambda n, r: model(n, r) / model(1, 4), model, cap=8)


def test_check_rejects_a_wrong_shape_at_four_replicas() -> None:
    wrong = lambda n, r: model(n, r) if r != 4 else 3.9 * 10  # noqa: E731
    with pytest.raises(LinearSpeedupError, match=r"4 replicas is 3\.9000x one"):
        check_speedup("bert-2", wrong, model, cap=8)


def test_check_skips_replica_counts_the_job_is_never_offered() -> None:
    linear_beyond_two = lambda n, r: model(n, r) if r <= 2 else r * 10  # noqa: E731
    check_speedup("ncf-3", linear_beyond_two, model, cap=2)
    with pytest.raises(LinearSpeedupError):
        check_speedup("ncf-3", linear_beyond_two, model, cap=4)


def fake_job(batch: int) -> SimpleNamespace:
    """A job whose goodput is its throughput: replicas x atomic batch, 10 % lost per node."""
    app = SimpleNamespace(min_local_bsz=4, max_local_bsz=16, init_batch_size=16, max_batch_size=512)

    def goodput(nodes, replicas, atomic, accum):  # type: ignore[no-untyped-def]
        return replicas * atomic * (accum + 1) * 0.9 ** (nodes - 1) / (accum + 1)

    return SimpleNamespace(application=app, target_batch_size=batch, get_goodput_fn=lambda: goodput)


def test_fixed_batch_goodput_splits_the_batch_and_caps_replicas() -> None:
    at, cap = fixed_batch_goodput(fake_job(32), np)
    assert cap == 8  # 32 / min_local_bsz 4
    # 1 replica: local 32 over 2 accumulation steps of 16; 2 replicas: 16 each, no accumulation.
    assert at(1, 1) == pytest.approx(16.0)
    assert at(1, 2) == pytest.approx(32.0)
    assert at(2, 2) == pytest.approx(32.0 * 0.9)
    assert at(1, 16) == 0.0  # 2 samples a replica: under the smallest local batch
    assert np.allclose(at(np.array([1, 1]), np.array([1, 2])), [16.0, 32.0])


def test_fixed_batch_goodput_answers_a_fair_share_beyond_the_cap_at_the_cap() -> None:
    at, cap = fixed_batch_goodput(fake_job(32), np)
    fn = FixedBatchGoodput(at, cap)
    good, _, _ = fn.optimize(num_nodes=2, num_replicas=16, max_batch_size=512)
    assert good == pytest.approx(at(2, 8))
    good, _, _ = fn.optimize(np.array([1, 4]), np.array([4, 64]))
    assert np.allclose(good, [at(1, 4), at(4, 8)])


def test_runs_of_several_seeds_are_summarized_with_their_spread() -> None:
    def run(seed: int, yolo: float, ncf: float) -> dict:
        jcts = {"yolov3-1": yolo, "ncf-2": ncf, "ncf-3": ncf + 2}
        return {"workload": "/x/workload-1.csv", "seed": seed, "avg": sum(jcts.values()) / 3,
                "jcts": jcts}  # fmt: skip

    got = summarize([run(1, 15_000, 100), run(2, 16_000, 110), run(3, 17_000, 90)])
    w1 = got["workload-1"]
    assert (w1["runs"], w1["seeds"]) == (3, [1, 2, 3])
    assert w1["mean"] == pytest.approx((15_202 + 16_222 + 17_182) / 9)
    assert (w1["min"], w1["max"]) == (pytest.approx(15_202 / 3), pytest.approx(17_182 / 3))
    assert w1["stdev"] == pytest.approx(np.std([15_202 / 3, 16_222 / 3, 17_182 / 3], ddof=1))
    assert w1["apps"] == {"ncf": pytest.approx(101.0), "yolov3": pytest.approx(16_000.0)}
    assert summarize([run(1, 15_000, 100)])["workload-1"]["stdev"] is None


ARTIFACT = Path(os.environ.get("POLLUX_ARTIFACT", "/work/pollux-artifact"))


@pytest.mark.skipif(
    not (ARTIFACT / "simulator" / "pollux.py").exists()
    or not (ARTIFACT / ".venv" / "bin" / "python").exists(),
    reason="no osdi21-artifact checkout with its venv (POLLUX_ARTIFACT)",
)
def test_the_artifacts_allocator_rejects_plain_functions_and_keeps_speedup_function() -> None:
    """The artifact's own Problem, built for two profiled jobs: the old plain-function
    wrapping is caught as a straight line, the SpeedupFunction wrapping passes."""
    run = subprocess.run(
        [
            str(ARTIFACT / ".venv" / "bin" / "python"),
            str(ROOT / "benchmarks" / "pollux_fixed_batch.py"),
            str(ARTIFACT / "simulator"),
            "--selfcheck",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (
        "plain: check FAILED: yolov3-selfcheck: the allocator's speed-up at 2 replicas"
        in run.stdout
    )
    assert "(a straight line)" in run.stdout
    assert "SpeedupFunction: check passed" in run.stdout
