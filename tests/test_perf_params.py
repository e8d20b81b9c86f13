"""Pollux's step-time model, ported (``policy.model.perf_params``): the fit recovers known
parameters from the readings they would produce, and a job whose batch the pool chooses
then gets the batch Pollux's ``GoodputFunction.optimize`` would pick with the true ones."""

from __future__ import annotations

import math
import random
from dataclasses import astuple

import pytest

from policy.model.batch import BatchRange, GradStats, optimize
from policy.model.perf_params import FLOOR, PerfParams, Sample, fit, step_time
from policy.model.speedup import estimate
from policy.model.throughput import Config, History, Reading

# (name, true parameters): compute-bound, network-bound with little overlap, and one that
# overlaps much of its network time. Pollux's objective pulls gamma towards 1 (_obj_fn's
# reg1, 1e-3 (gamma-1)^2: a true gamma of 8 is fitted near 4.6), so none is near its bound.
TRUE = [
    ("compute-bound", PerfParams(0.02, 0.0008, 0.15, 0.01, 0.05, 0.004, 2.5)),
    ("network-bound", PerfParams(0.05, 0.0002, 0.60, 0.05, 0.10, 0.02, 1.2)),
    ("overlapped", PerfParams(0.01, 0.0010, 0.30, 0.02, 0.08, 0.01, 3.5)),
]
# Where the readings were taken: (workers, nodes) by per-worker batch.
PLACES = [(1, 1), (2, 1), (4, 1), (4, 2), (8, 2), (16, 4)]
SHARES = [32, 64, 128]
DECLARED = BatchRange(128, 8192)
GRAD = GradStats(sqr=1.0, var=40.0)  # noise scale 40 x 128 examples


def _readings(true: PerfParams, noise: float, seed: int) -> list[Reading]:
    rng = random.Random(seed)
    out = []
    for w, nodes in PLACES:
        for share in SHARES:
            seconds = step_time(true, nodes > 1, w, share) * rng.lognormvariate(0.0, noise)
            out.append(Reading(Config(w, 1, nodes=nodes, batch=share * w), 1 / seconds, 3))
    return out


@pytest.mark.parametrize(("name", "true"), TRUE)
def test_the_fit_recovers_known_parameters(name: str, true: PerfParams) -> None:
    samples = [
        Sample(
            r.config.spread, r.config.workers, r.config.batch / r.config.workers, 1 / r.steps_per_s
        )
        for r in _readings(true, noise=0.0, seed=0)
    ]
    got = fit(samples)
    assert astuple(got) == pytest.approx(astuple(true), rel=0.02), name


@pytest.mark.parametrize(("name", "true"), TRUE)
@pytest.mark.parametrize(
    "where", [Config(1, 1), Config(4, 1), Config(8, 1, nodes=2), Config(11, 1, nodes=3)]
)
def test_best_batch_is_pollux_optimum(name: str, true: PerfParams, where: Config) -> None:
    model = estimate(History(readings=tuple(_readings(true, noise=0.02, seed=1)), grad=GRAD))
    assert model.perf is not None
    pollux = optimize(
        lambda b: b / step_time(true, where.spread, where.workers, b / where.workers),
        where.workers,
        DECLARED,
        GRAD,
    )
    got = model.best_batch(where, DECLARED)
    assert got.size == pytest.approx(pollux.size, rel=0.12), name
    # Its promise is the goodput Pollux's model gives that batch.
    assert got.goodput == pytest.approx(pollux.goodput, rel=0.05)


def test_few_shares_seen_do_not_extrapolate_linearly() -> None:
    """Readings at one per-worker batch (a job not yet resized): Pollux's prior splits the
    compute evenly between a fixed and a per-example part, so a larger batch is cheaper per
    example, and the model still fits what it saw."""
    true = TRUE[0][1]
    readings = tuple(
        Reading(Config(w, 1, nodes=n, batch=64 * w), 1 / step_time(true, n > 1, w, 64), 2)
        for w, n in [(1, 1), (2, 1), (4, 2)]
    )
    model = estimate(History(readings=readings, grad=GRAD))
    assert model.perf is not None and model.perf.alpha_c == pytest.approx(model.perf.beta_c * 64)
    assert model.error < 0.02
    one = Config(1, 1)
    per_example = [model.throughput(Config(1, 1, batch=b)) * b for b in (64, 256)]
    assert per_example[1] > per_example[0]
    assert model.throughput(one) == pytest.approx(1 / step_time(true, False, 1, 64), rel=0.02)


def test_a_job_that_declares_nothing_keeps_the_linear_fit() -> None:
    readings = (Reading(Config(1, 1), 2.0, 3), Reading(Config(2, 1), 3.5, 3))
    model = estimate(History(readings=readings))
    assert model.perf is None
    assert model.throughput(Config(2, 1)) == pytest.approx(3.5, rel=0.01)


def test_readings_faster_with_more_workers_are_fitted() -> None:
    """Noisy readings where more workers step faster than fewer (found by a random search)
    drive the network terms towards 0: the fit keeps every parameter within Pollux's
    bounds, and predicts a finite time, where it once raised a math domain error (a term
    underflowed to 0 and the pool's sync answered 500)."""
    samples = [
        Sample(False, 12, 64, 0.027053782863339575),
        Sample(False, 1, 16, 0.017000320639707835),
        Sample(False, 4, 64, 0.04578358945147395),
        Sample(True, 4, 64, 0.02725177811673825),
        Sample(False, 8, 64, 0.036584250586870364),
        Sample(False, 12, 64, 0.01899308421481579),
    ]
    got = fit(samples)
    assert all(FLOOR <= v < math.inf for v in astuple(got))
    assert 1.0 <= got.gamma <= 10.0
    assert 0 < step_time(got, True, 32, 64) < math.inf
