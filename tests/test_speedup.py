"""The speed-up estimator (policy/model/speedup.py), its solver (policy/model/nnls.py), the
history it reads (policy/model/throughput.py) and the writer that fills it
(monitor/throughput.py): learning a known curve from noisy reports, and what it must not
claim (a job that never reports, one measured at one worker count, outliers, memory)."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from monitor.throughput import JobWindow, WriterRules, config_of
from policy.model.bounds import OutOfBounds
from policy.model.nnls import nnls
from policy.model.speedup import PRIOR, TERMS, Speedup, estimate, features, grown
from policy.model.throughput import (
    MAX_READINGS,
    MAX_TEXT,
    MAX_WEIGHT,
    Config,
    History,
    Reading,
    parse,
)

# A parameter-server job's true seconds per step (Optimus's terms and a spread penalty):
# it speeds up well to about 4 workers, then its 2 parameter servers hold it back.
TRUE = dict(compute=2.0, overhead=0.1, fanin=0.02, spread=0.3, remote=0.2, psload=0.05, ps=0.01)


def true_rate(c: Config, theta: dict[str, float] = TRUE) -> float:
    return 1.0 / sum(theta[t] * x for t, x in zip(TERMS, features(c), strict=True))


def reported(
    configs: list[Config],
    minutes: int,
    *,
    noise: float = 0.05,
    outliers: float = 0.0,
    seed: int = 0,
    theta: dict[str, float] = TRUE,
) -> History:
    """A job that runs ``minutes`` minutes in each configuration, reporting every 10 s
    with log-normal noise, through the writer (as the monitor does)."""
    rng = random.Random(seed)
    window = JobWindow(WriterRules())
    history = History()
    now = 0.0
    for c in configs:
        for _ in range(minutes + 2):  # two windows settle the configuration first
            for _ in range(6):
                now += 10.0
                value = true_rate(c, theta) * rng.lognormvariate(0.0, noise)
                if outliers and rng.random() < outliers:
                    value *= 5.0 if rng.random() < 0.5 else 0.2
                window.report(now, value)
            written = window.close(now, c)
            if written is not None:
                history = written
                window.wrote(written)
    return history


MEASURED = [Config(w, 2, r, n) for w in (2, 4, 6) for r, n in ((0, 1), (w // 2, 2))]


# ----- the solver -----

# Entries the size a throughput model's features have (0, or 1e-6 to 50 either sign).
ENTRY = st.one_of(st.just(0.0), st.floats(1e-6, 50), st.floats(-50, -1e-6))


def _least_residual(a: np.ndarray, b: np.ndarray) -> float:
    """The exact non-negative least-squares residual, by brute force: an optimum is the
    least-squares solution on some set of columns with no negative coefficient, so the
    least residual over those sets is the optimum (5 columns: 32 sets). A reference that
    can neither hang nor stop early, as scipy's ``nnls`` has done on some inputs."""
    best = float(np.linalg.norm(b))  # x = 0
    for k in range(1, a.shape[1] + 1):
        for cols in itertools.combinations(range(a.shape[1]), k):
            sub = a[:, cols]
            z = np.linalg.lstsq(sub, b, rcond=None)[0]
            if (z >= 0).all():
                best = min(best, float(np.linalg.norm(sub @ z - b)))
    return best


# derandomize: the examples are the same in every run, so what passed here passes in CI.
@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.integers(1, 12).flatmap(
        lambda m: st.tuples(
            st.lists(
                st.lists(ENTRY, min_size=5, max_size=5),
                min_size=m,
                max_size=m,
            ),
            st.lists(st.floats(-20, 20, allow_nan=False), min_size=m, max_size=m),
        )
    )
)
# Found by a CI run: a 1e-6 entry beside a 3 made a dependent column look independent.
@example(([[3.0, -1.0, 0.0, 0.0, 0.0], [1.0000000000000002e-06, 0.0, 0.0, 0.0, -1.0]], [1.0, 1.0]))
def test_nnls_finds_the_least_residual(problem) -> None:
    a, b = problem
    x = nnls(a, b)
    assert all(v >= 0 for v in x)
    ours = float(np.linalg.norm(np.array(a) @ np.array(x) - np.array(b)))
    best = _least_residual(np.array(a), np.array(b))
    assert ours <= best + 1e-6 * (1 + float(np.linalg.norm(b)))


def test_nnls_recovers_an_exact_non_negative_solution() -> None:
    a = [[1.0, 1 / w, w] for w in (1, 2, 3, 4, 6, 8)]
    truth = [0.1, 2.0, 0.02]
    b = [sum(x * t for x, t in zip(row, truth, strict=True)) for row in a]
    assert nnls(a, b) == pytest.approx(truth, rel=1e-9)


# ----- learning -----


def test_it_learns_a_known_curve_from_noisy_reports_within_5_percent() -> None:
    model = estimate(reported(MEASURED, minutes=5, noise=0.05))
    for w in range(2, 7):
        for c in (Config(w, 2), Config(w, 2, w // 2, 2)):
            assert model.throughput(c) == pytest.approx(true_rate(c), rel=0.05), c
    # Where to put the next worker, as the planner asks it (policy/pool/goodput.py): the
    # curve flattens past 4 workers (a third worker adds over a quarter, a seventh under
    # 2 %, where perfect scaling gives a half and a sixth), and packing pays.
    assert model.relative_gain(Config(2, 2), grown(Config(2, 2))) > 0.25
    assert model.relative_gain(Config(6, 2), grown(Config(6, 2))) < 0.02
    assert model.relative_gain(Config(4, 2, 2, 2), Config(4, 2)) == pytest.approx(
        true_rate(Config(4, 2)) / true_rate(Config(4, 2, 2, 2)) - 1, abs=0.05
    )


@settings(max_examples=25, deadline=None)
@given(
    st.fixed_dictionaries({t: st.floats(0.0, 0.5) for t in TERMS if t != "compute"}),
    st.floats(0.5, 5.0),
    st.integers(0, 10_000),
)
def test_any_optimus_curve_is_recovered_within_10_percent_where_it_was_measured(
    others: dict[str, float], compute: float, seed: int
) -> None:
    theta = {"compute": compute, **others}
    model = estimate(reported(MEASURED, minutes=3, noise=0.05, seed=seed, theta=theta))
    for c in MEASURED:
        assert model.throughput(c) == pytest.approx(true_rate(c, theta), rel=0.10)


def test_beyond_the_worker_counts_measured_it_never_claims_super_linear() -> None:
    model = estimate(reported(MEASURED, minutes=5))
    for w in range(1, 40):
        a, b = model.throughput(Config(w, 2)), model.throughput(Config(w + 1, 2))
        assert b / (w + 1) <= a / w + 1e-12  # per-worker speed never grows


def test_a_job_that_never_reports_gets_the_uninformed_prior() -> None:
    assert estimate(None) is PRIOR and estimate(History()) is PRIOR
    for w in (1, 2, 8):
        c = Config(w, 1)
        assert PRIOR.speedup(c) == pytest.approx(w)  # linear, in relative units
        assert PRIOR.relative_gain(c, grown(c)) == pytest.approx(1 / w)
    assert not PRIOR.informed


def test_reports_at_one_worker_count_claim_that_point_and_no_more() -> None:
    at = Config(4, 2)
    model = estimate(reported([at], minutes=8))
    assert model.throughput(at) == pytest.approx(true_rate(at), rel=0.05)
    # Linear from that point: the compute term alone.
    assert [t for t, v in zip(TERMS, model.theta, strict=True) if v] == ["compute"]
    # It cannot tell a spread placement's cost: packing is predicted to gain nothing.
    assert model.relative_gain(Config(4, 2, 2, 2), at) == 0.0


def test_wild_reports_do_not_move_the_estimate() -> None:
    clean = estimate(reported(MEASURED, minutes=5, seed=1))
    wild = estimate(reported(MEASURED, minutes=5, seed=1, outliers=0.15))
    for c in MEASURED:
        assert wild.throughput(c) == pytest.approx(true_rate(c), rel=0.06)
        assert wild.throughput(c) == pytest.approx(clean.throughput(c), rel=0.06)


def test_a_reading_far_off_the_others_is_left_out_of_the_fit() -> None:
    history = History()
    for c in MEASURED:
        history = history.put(Reading(c, true_rate(c), 4))
    for c in (Config(3, 2), Config(5, 2)):
        history = history.put(Reading(c, true_rate(c), 4))
    bad = Config(8, 2)
    history = history.put(Reading(bad, 3 * true_rate(bad), 4))
    model = estimate(history)
    assert model.dropped == (bad,)
    assert bad not in model.seen
    assert model.throughput(bad) == pytest.approx(true_rate(bad), rel=0.03)


# ----- the history: bounded, and read through bounds -----


def test_the_history_keeps_at_most_16_configurations_and_fits_its_annotation() -> None:
    history = History(batch=10**7)
    for w in range(1, 101):
        for _ in range(20):
            history = history.add(Config(w, 1024, w, w), 123456.789)
    assert len(history.readings) == MAX_READINGS
    assert [r.config.workers for r in history.readings] == list(range(85, 101))  # the newest
    assert all(r.reports == MAX_WEIGHT for r in history.readings)
    assert len(history.text()) <= MAX_TEXT
    assert parse(history.text()) == History(
        tuple(
            Reading(r.config, float(f"{r.steps_per_s:.6g}"), r.reports) for r in history.readings
        ),
        10**7,
    )


def test_a_configurations_speed_follows_a_drift_within_20_minutes() -> None:
    history = History()
    for _ in range(30):
        history = history.add(Config(2, 1), 1.0)
    for _ in range(20):
        history = history.add(Config(2, 1), 2.0)
    reading = history.get(Config(2, 1))
    assert reading is not None and reading.steps_per_s > 1.9


def _text(*readings: str, head: str = '"version":1') -> str:
    return "{" + head + ',"readings":[' + ",".join(readings) + "]}"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("not json", "not JSON"),
        ("[]", "must be a JSON object"),
        ('{"version":2,"readings":[]}', "version"),
        (_text('{"workers":2,"stepsPerSecond":-1}'), "readings[0].stepsPerSecond"),
        (_text('{"workers":2,"stepsPerSecond":"NaN"}'), "readings[0].stepsPerSecond"),
        (_text('{"workers":2,"stepsPerSecond":1e300}'), "readings[0].stepsPerSecond"),
        (_text('{"workers":0,"stepsPerSecond":1}'), "readings[0].workers"),
        (_text('{"workers":2000,"stepsPerSecond":1}'), "readings[0].workers"),
        (_text('{"workers":2,"remote":3,"stepsPerSecond":1}'), "readings[0]: remote"),
        (_text('{"workers":2,"stepsPerSecond":1,"reports":99}'), "readings[0].reports"),
        (_text('{"workers":2,"stepsPerSecond":1,"truth":1}'), "unknown field 'truth'"),
        (_text('{"workers":2,"stepsPerSecond":1}', '{"workers":2,"stepsPerSecond":2}'), "second"),
        (_text(*[f'{{"workers":{w},"stepsPerSecond":1}}' for w in range(1, 18)]), "at most 16"),
        (_text('{"workers":2,"stepsPerSecond":1}', head='"version":1,"batch":-5'), "batch"),
        ("{" + " " * MAX_TEXT + "}", "characters"),
    ],
)
def test_an_annotation_that_cannot_be_believed_is_refused_naming_the_field(
    raw: str, field: str
) -> None:
    with pytest.raises(OutOfBounds, match=r"dragonet\.io/throughput") as err:
        parse(raw)
    assert field in str(err.value)


# ----- the writer -----


def test_a_steady_job_is_written_four_times_per_configuration_then_no_more() -> None:
    window = JobWindow(WriterRules())
    rng = random.Random(0)
    writes: list[float] = []
    now = 0.0
    for minute in range(60):
        c = Config(2, 1) if minute < 30 else Config(4, 1)
        for _ in range(6):
            now += 10.0
            window.report(now, (1.0 if minute < 30 else 1.8) * rng.lognormvariate(0, 0.03))
        written = window.close(now, c)
        if written is not None:
            writes.append(now)
            window.wrote(written)
    # The noise never crosses 10 %: written after 1, 2, 4 and 8 minutes of readings of
    # each configuration (the first once it settled a whole window and was measured one).
    assert writes == [180.0, 240.0, 360.0, 600.0, 1980.0, 2040.0, 2160.0, 2400.0]
    assert [r.config for r in window.written.readings] == [Config(2, 1), Config(4, 1)]


def test_a_window_whose_configuration_changed_says_nothing() -> None:
    window = JobWindow(WriterRules())
    for minute, c in enumerate([Config(2, 1), Config(2, 1), Config(3, 1), Config(2, 1)]):
        for s in range(6):
            window.report(minute * 60 + s * 10.0, 1.0)
        written = window.close(minute * 60 + 60.0, c)
        assert written is None, minute  # never two equal closes after a settled window


def test_a_window_keeps_a_bounded_number_of_reports() -> None:
    window = JobWindow(WriterRules(max_reports=64))
    for i in range(10_000):
        window.report(i * 0.001, 1.0 + i)
    assert len(window.speeds) == 64


def test_the_configuration_is_read_from_the_jobs_running_pods() -> None:
    def pod(kind: str, node: str, phase: str = "Running") -> dict:
        return {
            "metadata": {"labels": {"training.kubeflow.org/replica-type": kind}},
            "spec": {"nodeName": node},
            "status": {"phase": phase},
        }

    pods = [
        pod("ps", "a"),
        pod("worker", "a"),
        pod("worker", "a"),
        pod("worker", "b"),
        pod("worker", "c", "Pending"),
        pod("chief", "a"),
    ]
    assert config_of(pods) == Config(workers=3, ps=1, remote=1, nodes=2)
    assert config_of([pod("ps", "a")]) is None


def test_the_estimate_is_a_value_the_pool_can_keep() -> None:
    model = estimate(reported(MEASURED[:2], minutes=2))
    assert isinstance(model, Speedup)
    assert hash(model) == hash(estimate(reported(MEASURED[:2], minutes=2)))  # pure, frozen
    assert math.isfinite(model.error)
