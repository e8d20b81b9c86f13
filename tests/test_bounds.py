"""Lower bounds on makespan and average JCT.

What users would notice if these broke: a policy reported as beating "optimal" (a bound
above a real schedule) or a needlessly loose bound that makes every policy look good.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.bounds import BoundJob, lower_bounds, srpt_flow_time


def rigid(arrival: float, duration: float, **demand: float) -> BoundJob:
    """A job that holds ``demand`` of each resource for ``duration`` seconds."""
    return BoundJob(arrival, duration, {r: n * duration for r, n in demand.items()})


def test_single_job_runs_alone() -> None:
    bounds = lower_bounds([rigid(10, 100, gpu=4)], {"gpu": 4})

    assert bounds.makespan_s == 110
    assert bounds.avg_jct_s == 100


def test_short_job_arriving_later_goes_first_in_the_jct_bound() -> None:
    # One GPU; a 10 s job at 0 and a 2 s job at 1. FIFO: JCTs 10 and 11 (avg 10.5).
    # SRPT preempts the long job: JCTs 12 and 2 (avg 7), which beats both LB1 (6) and FIFO.
    bounds = lower_bounds([rigid(0, 10, gpu=1), rigid(1, 2, gpu=1)], {"gpu": 1})

    assert bounds.avg_jct_s == 7
    assert bounds.makespan_s == 12  # all 12 GPU-seconds of work from t = 0


def test_srpt_preempts_for_each_shorter_arrival() -> None:
    # A(0, 10), B(2, 3), C(3, 1): A runs 0-2, B 2-3, C 3-4, B 4-6, A 6-14.
    assert srpt_flow_time([(0, 10), (2, 3), (3, 1)]) == 1 + 4 + 14


def test_many_small_jobs_at_once_are_bound_by_total_work() -> None:
    jobs = [rigid(0, 10, gpu=1) for _ in range(100)]
    bounds = lower_bounds(jobs, {"gpu": 4})

    assert bounds.makespan_s == 250  # 1000 GPU-seconds on 4 GPUs, far above 10 s
    assert bounds.avg_jct_s == pytest.approx(2.5 * 101 / 2)  # completions at 2.5, 5, ...


def test_work_arriving_late_sets_the_makespan() -> None:
    jobs = [rigid(0, 5, gpu=1)] + [rigid(1000, 10, gpu=2) for _ in range(8)]
    bounds = lower_bounds(jobs, {"gpu": 4})

    assert bounds.makespan_s == 1000 + 8 * 20 / 4  # counting from 0 would give 41.25


def test_scarcest_resource_binds() -> None:
    jobs = [rigid(0, 100, gpu=1, cpu=8) for _ in range(4)]
    bounds = lower_bounds(jobs, {"gpu": 4, "cpu": 16})

    assert bounds.makespan_s == 200  # CPUs allow two at a time, GPUs four
    assert bounds.avg_jct_s == pytest.approx((50 + 100 + 150 + 200) / 4)


def test_resources_without_capacity_are_ignored() -> None:
    jobs = [rigid(0, 100, gpu=1, fpga=1)]
    assert lower_bounds(jobs, {"gpu": 4, "fpga": 0}) == lower_bounds(jobs, {"gpu": 4})
    assert lower_bounds(jobs, {}).makespan_s == 100


def test_no_jobs_and_invalid_jobs() -> None:
    assert lower_bounds([], {"gpu": 4}).avg_jct_s == 0.0
    with pytest.raises(ValueError, match="must not be negative"):
        BoundJob(-1.0, 10.0, {"gpu": 10.0})


# --- bounds never exceed a real schedule ---------------------------------------------------

Demand = Mapping[str, float]
CAPACITY: Mapping[str, float] = {"gpu": 8, "cpu": 32}


def fifo(jobs: Sequence[tuple[float, float, Demand]]) -> list[float]:
    """Completion times of rigid jobs started in arrival order as soon as they fit."""
    running: list[tuple[float, Demand]] = []  # (end, demand)
    last_start = 0.0
    completions = []
    for arrival, duration, demand in sorted(jobs, key=lambda j: j[0]):
        t = max(arrival, last_start)
        while True:
            running = [(end, d) for end, d in running if end > t]
            if all(sum(d[r] for _, d in running) + demand[r] <= CAPACITY[r] for r in CAPACITY):
                break
            t = min(end for end, _ in running)
        running.append((t + duration, demand))
        completions.append(t + duration)
        last_start = t
    return completions


job_strategy = st.tuples(
    st.floats(0, 1000),
    st.floats(1, 500),
    st.fixed_dictionaries({"gpu": st.integers(0, 8), "cpu": st.integers(1, 32)}),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(job_strategy, min_size=1, max_size=25))
def test_bounds_never_exceed_a_fifo_schedule(jobs: list[tuple[float, float, Demand]]) -> None:
    completions = fifo(jobs)
    ordered = sorted(jobs, key=lambda j: j[0])
    jct = sum(c - a for c, (a, _, _) in zip(completions, ordered, strict=True)) / len(jobs)
    bounds = lower_bounds([rigid(a, d, **demand) for a, d, demand in jobs], CAPACITY)

    assert bounds.makespan_s <= max(completions) * (1 + 1e-9)
    assert bounds.avg_jct_s <= jct * (1 + 1e-9)
