"""Equal terms with Pollux's simulator (issue 37), as settings of the comparison
(``benchmarks/pollux_compete.py``): jobs that restart whole on any resize, the pool's
decision interval, and whether shortest-remaining-first may read a job's length."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks import pollux_compete
from benchmarks.pollux_agreement import workload_file
from benchmarks.pollux_compete import Cell, pool_spec, whole_restarts
from sim.scenario import from_trace
from sim.spec import TrainingProfile
from tests.test_migration import ask, job, nodes, simulate

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "traces"


@pytest.fixture(autouse=True)
def _workload_1_from_the_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workload 1 as the repository ships it (byte-identical to shared/'s), so these run
    without the workspace's traces beside the checkout."""
    from benchmarks import pollux_agreement

    monkeypatch.setattr(pollux_agreement, "SHARED", FIXTURES)


def moved_jct(*, move: bool, whole: bool) -> float:
    """A two-worker job (no parameter server) whose worker 0 moves at 100 s, or not."""
    profile = TrainingProfile(name="r", step_time_s=1.0, restore_s=30.0, restarts_whole=whole)
    sim, _, _ = simulate([job("a", 2, steps=600, profile=profile, ps=0)], nodes("16", "16"))
    if move:
        ask(sim, 100, "a", 0)
    result = sim.run()
    assert result.summary["jobs_finished"] == 1
    return result.jobs[0].jct_s or 0.0


def test_an_all_reduce_job_pauses_whole_on_a_resize_a_ps_job_does_not() -> None:
    ps_cost = moved_jct(move=True, whole=False) - moved_jct(move=False, whole=False)
    whole_cost = moved_jct(move=True, whole=True) - moved_jct(move=False, whole=True)
    # Parameter server: the other worker keeps training while the moved one restores.
    assert ps_cost < 20.0
    # All-reduce: both workers wait the 30 s restore (Pollux's Job.reallocate).
    assert whole_cost >= 29.9
    assert whole_cost > ps_cost + 10.0


def test_a_job_never_resized_costs_the_same_either_way() -> None:
    assert moved_jct(move=False, whole=True) == pytest.approx(moved_jct(move=False, whole=False))


def test_whole_restarts_marks_every_trace_job_and_nothing_else() -> None:
    scenario = from_trace(workload_file(1, 1.0, None), jobs=5)
    marked = whole_restarts(scenario)
    assert all(j.profile.restarts_whole for j in marked.jobs)
    assert not any(j.profile.restarts_whole for j in scenario.jobs)
    assert [replace(j, profile=replace(j.profile, restarts_whole=False)) for j in marked.jobs] == (
        list(scenario.jobs)
    )


def test_the_pool_settings_reach_the_spec() -> None:
    assert pool_spec("default") == {}
    assert pool_spec("default", 60.0, False) == {
        "decisionIntervalSeconds": 60.0,
        "lasByRemaining": False,
    }
    assert pool_spec("tiresias", None, None)["decisionIntervalSeconds"] == 60.0


def test_equal_terms_sets_all_three_and_both_keeps_the_cell_as_it_is(monkeypatch) -> None:
    seen: list[Cell] = []

    def fake_run(cell: Cell) -> dict:
        seen.append(cell)
        return {"policy": cell.label, "workload": cell.workload, "load": cell.load, "avg": 1.0,
                "p95": 1.0, "makespan": None, "apps": {}}  # fmt: skip

    class Inline:
        def __init__(self, **_: object) -> None: ...
        def __enter__(self) -> Inline:
            return self

        def __exit__(self, *_: object) -> None: ...
        def map(self, f, cells):  # type: ignore[no-untyped-def]
            return map(f, cells)

    monkeypatch.setattr(pollux_compete, "run", fake_run)
    monkeypatch.setattr(pollux_compete, "ProcessPoolExecutor", Inline)
    pollux_compete.main(["--workloads", "1", "--policies", "default", "--equal-terms", "--both"])
    assert [(c.restart_whole, c.decision_interval_s, c.remaining) for c in seen] == [
        (False, None, None),
        (True, 60.0, False),
    ]
    assert [c.label for c in seen] == ["default", "default (whole restarts, 60 s, remaining off)"]


def test_a_cell_on_equal_terms_runs_with_its_settings() -> None:
    """A short slice of workload 1, as it is and on equal terms: both finish every job,
    and each is labelled with its settings."""
    path = workload_file(1, 1.0, None)
    plain = pollux_compete.run(Cell("default", 1, 1.0, path, jobs=6))
    equal = pollux_compete.run(
        Cell("default", 1, 1.0, path, jobs=6, restart_whole=True, decision_interval_s=60.0,
             remaining=False)
    )  # fmt: skip
    assert plain["finished"] == equal["finished"] == 6
    assert equal["policy"] == "default (whole restarts, 60 s, remaining off)"
    assert equal["avg"] != plain["avg"]


def test_run_hands_the_simulation_every_setting(monkeypatch) -> None:
    """What the simulation is given: trace jobs that restart whole, and a pool that
    decides once a minute without reading a job's length."""
    seen = {}

    class Captured:
        def __init__(self, scenario, config) -> None:  # type: ignore[no-untyped-def]
            seen["scenario"], seen["config"] = scenario, config

        def run(self):  # type: ignore[no-untyped-def]
            raise StopIteration

    monkeypatch.setattr(pollux_compete, "Simulation", Captured)
    cell = Cell("default", 1, 1.0, workload_file(1, 1.0, None), jobs=4, restart_whole=True,
                decision_interval_s=60.0, remaining=False)  # fmt: skip
    with pytest.raises(StopIteration):
        pollux_compete.run(cell)
    scenario = seen["scenario"]
    assert len(scenario.jobs) == 4 and all(j.profile.restarts_whole for j in scenario.jobs)
    (pool,) = scenario.objects
    assert pool["spec"]["decisionIntervalSeconds"] == 60.0
    assert pool["spec"]["lasByRemaining"] is False
