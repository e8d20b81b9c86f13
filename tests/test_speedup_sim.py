"""Simulated training reports its speed through the same writer and the same API objects as
a real job (sim/throughput.py), and the pool's planner, reading only what Metacontroller
sends it, learns each job's throughput (docs/speedup.md)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from policy.model.speedup import Speedup
from policy.model.throughput import ANNOTATION, Config
from policy.pool import sync as pool_sync
from policy.pool.observe import PoolSnapshot, observe
from sim.engine import SimConfig, Simulation
from sim.throughput import ThroughputConfig
from sim.traces import load_pollux
from tests.simkit import gpu_nodes, scenario

# Whole simulated runs of a trace's first jobs (half a minute): make test-slow and CI.
pytestmark = pytest.mark.slow

WORKLOAD = Path(__file__).parent / "fixtures" / "traces" / "workload-1.csv"
ERROR = 0.10  # stated: an estimate within 10 % of the true mean speed where measured


class PlannerView:
    """What the pool's planner observed at each of its syncs: every job's estimate, the
    last one seen (the planner's own parse of Metacontroller's request, taken as the pool's
    sync makes it: parsing each request a second time here doubled the run's cost)."""

    def __init__(self, sim: Simulation, monkeypatch: pytest.MonkeyPatch) -> None:
        self.estimates: dict[str, Speedup] = {}
        self.syncs = 0
        monkeypatch.setattr(pool_sync, "observe", self._spy)

    def _spy(self, *args: Any) -> PoolSnapshot:
        snap = observe(*args)
        self.syncs += 1
        self.estimates.update(snap.speedups)
        return snap


@pytest.fixture(scope="module")
def run() -> Iterator[tuple[Simulation, PlannerView, str]]:
    jobs = load_pollux(WORKLOAD, jobs=24)
    silent = jobs[3].key  # a long deepspeech2 job whose code does not report
    config = SimConfig(
        throughput=ThroughputConfig(noise=0.05, outlier_share=0.1, silent=frozenset({silent}))
    )
    sim = Simulation(scenario(gpu_nodes(4), jobs), config)
    with pytest.MonkeyPatch.context() as monkeypatch:
        view = PlannerView(sim, monkeypatch)
        sim.run()
    yield sim, view, silent


def test_the_planners_estimates_come_within_10_percent_of_the_true_speed(run) -> None:
    sim, view, _ = run
    reporters = sim.reporters
    assert reporters is not None
    checked = 0
    for key, model in view.estimates.items():
        assert model.informed
        for c in model.seen:
            rates = reporters.truth[key][c]
            truth = sum(rates) / len(rates)
            assert model.throughput(c) == pytest.approx(truth, rel=ERROR), (key, c)
            checked += 1
    # Most jobs ran long enough to be measured: at least one measured minute (6 reports,
    # after a settled minute) of at least one configuration.
    assert len(view.estimates) >= 10 and checked >= 15


def test_a_job_that_reports_nothing_has_no_estimate(run) -> None:
    sim, view, silent = run
    assert silent not in view.estimates
    assert sim.programs.jobs[silent].finished_s is not None  # it ran, and finished


def test_reports_are_written_rarely(run) -> None:
    sim, _, _ = run
    r = sim.reporters
    assert r is not None
    assert r.reports > 3000
    # a write per 50 reports at most, and about ten more per job for how far it is
    # (written once a fifth of what was left is done: docs/speedup.md)
    assert r.writes <= r.reports / 50 + 10 * len(sim.programs.jobs)
    assert r.writes <= r.pod_lists  # at most one per window closed


def test_without_progress_reports_are_written_more_rarely_still() -> None:
    jobs = load_pollux(WORKLOAD, jobs=8)
    writes = {}
    for progress in (True, False):
        config = SimConfig(throughput=ThroughputConfig(noise=0.0, progress=progress))
        sim = Simulation(scenario(gpu_nodes(4), jobs), config)
        sim.run()
        assert sim.reporters is not None
        writes[progress] = sim.reporters.writes
    # how far a job is costs it a few writes more, about ten at most (docs/speedup.md)
    assert writes[False] < writes[True] <= writes[False] + 10 * len(jobs)


def test_a_spread_job_learns_what_packing_would_give(run) -> None:
    _, view, _ = run
    spread = [(m, c) for m in view.estimates.values() for c in m.seen if c.spread and c.workers > 1]
    assert spread
    for m, c in spread:
        packed = Config(c.workers, c.ps)  # every worker on the parameter servers' node
        assert m.relative_gain(c, packed) >= 0.0  # packing never predicted to slow a job down


def test_without_reports_no_job_ever_carries_a_throughput_annotation() -> None:
    jobs = load_pollux(WORKLOAD, jobs=4)
    sim = Simulation(scenario(gpu_nodes(2), jobs), SimConfig())
    seen: list[str] = []

    def watch(tkey: str, old: Any, new: Any) -> None:
        if new is not None and ANNOTATION in (new["metadata"].get("annotations") or {}):
            seen.append(tkey)

    sim.api.watchers.append(watch)
    sim.run()
    assert sim.reporters is None and seen == []


def test_jobs_that_arrive_after_a_lull_still_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every job that had started once finished before the next one arrived: the reports
    went on (they once stopped for good at the first such lull, so a trace with a quiet
    spell was planned without any report after it)."""
    early, late = load_pollux(WORKLOAD, jobs=2)
    first = replace(early, arrival_s=0.0)  # a cifar10 job of 15 min
    later = replace(late, arrival_s=3 * 3600.0)  # a deepspeech2 job, hours later
    assert first.trace_duration_s is not None and first.trace_duration_s < 3600
    sim = Simulation(
        scenario(gpu_nodes(2), [first, later]), SimConfig(throughput=ThroughputConfig())
    )
    view = PlannerView(sim, monkeypatch)
    sim.run()
    assert later.key in view.estimates
