"""Shortest remaining first (issue 26): a job whose speed reports say how far it is queues
by the GPU-time it has left (``policy.pool.attained_service.by_remaining``).

By hand on one 4-GPU node, end to end through the simulator, the real webhook and the
monitor's writer (the pool sees only what the jobs report): a new short job preempts a
long one it would have waited behind under least attained service, and a job nearly done
is not preempted for a new one, though it attained more than the pool's limit.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from monitor.throughput import JobWindow, WriterRules
from policy.model.admission import AttainedService
from policy.model.bounds import OutOfBounds
from policy.model.pool import pool_object
from policy.model.speedup import estimate
from policy.model.throughput import Config, History, Progress, Reading, parse
from policy.pool.attained_service import (
    REMAINING_LADDER_S,
    UNMEASURED_LEFT_S,
    Attained,
    by_remaining,
)
from sim.engine import Scenario, SimConfig, SimResult, Simulation
from sim.throughput import ThroughputConfig
from tests.simkit import job
from tests.test_preemption import Watch, _checkpointed, _world

HOUR = 3600.0

# ----- the report and the history -----


def test_progress_round_trips_through_the_annotation_and_says_what_is_left() -> None:
    history = History((Reading(Config(4, 1), 2.0, 3),), 256, Progress(1000, 5000))
    assert parse(history.text()) == history
    # 4,000 steps left at 2 steps/s on 4 workers: 8,000 worker-seconds
    assert history.left_worker_s() == pytest.approx(8000.0)
    assert estimate(history).left_worker_s == pytest.approx(8000.0)
    assert History((Reading(Config(4, 1), 2.0),)).left_worker_s() is None  # no progress
    assert History(progress=Progress(1, 2)).left_worker_s() is None  # no speed yet


@pytest.mark.parametrize(
    ("progress", "field"),
    [
        ('{"step": 5}', "step and totalSteps are required"),
        ('{"step": 6, "totalSteps": 5}', "step 6 of totalSteps 5"),
        ('{"step": 0, "totalSteps": 0}', "totalSteps 0"),
        ('{"step": -1, "totalSteps": 5}', "progress.step"),
        ('{"step": 1, "totalSteps": 5, "eta": 3}', "unknown field 'eta'"),
        ("[1, 5]", "must be an object"),
    ],
)
def test_a_progress_that_cannot_be_believed_is_refused_naming_the_field(
    progress: str, field: str
) -> None:
    raw = f'{{"version":1,"readings":[{{"workers":1,"stepsPerSecond":1.0}}],"progress":{progress}}}'
    with pytest.raises(OutOfBounds, match="progress") as err:
        parse(raw)
    assert field in str(err.value)


def _window_writes(lefts: list[int], total: int = 10_000) -> list[int | None]:
    """What the writer writes as progress at each window close, for a job steady in one
    configuration whose steps left are ``lefts`` at the closes (None: no write)."""
    window = JobWindow(WriterRules())
    config = Config(2, 1)
    out: list[int | None] = []
    for i, left in enumerate(lefts):
        now = 60.0 * i
        for k in range(4):
            window.report(now + 10 * k, 1.0, None, Progress(total - left, total))
        history = window.close(now + 60.0, config)
        if history is not None:
            window.wrote(history)
        out.append(history.progress.left if history and history.progress else None)
    return out


def test_the_writer_writes_progress_when_a_fifth_of_what_was_left_is_done() -> None:
    lefts = [10_000, 9_900, 9_800, 9_000, 7_900, 7_800, 6_200, 100, 0, 0, 0]
    assert _window_writes(lefts) == [
        None,  # the configuration is new: nothing measured
        None,  # ... nor for a whole window before
        9_800,  # the first reading, with the progress
        9_000,  # the reading's own write (2 minutes of reports) carries it
        None,  # 7,900 left: less than a fifth of 9,000 done, and the reading says nothing new
        7_800,  # the reading's write after 4 minutes
        6_200,  # a fifth of 7,800 done: news on its own
        100,
        0,
        None,  # done is said once
        None,
    ]


# ----- the ladder -----


def _got(total_h: float, queue: int) -> Attained:
    return Attained(AttainedService(gpu_seconds=total_h * HOUR), 0.0, total_h * HOUR, queue, None)


def test_the_ladder_ranks_by_what_is_left_and_places_the_unmeasured_by_las() -> None:
    las = (16 * HOUR,)
    # reported: 3 worker-hours left on 2-GPU workers = 6 GPU-h, between 4 and 8
    ranked = by_remaining(_got(20, 1), 3 * HOUR, 2.0, las)
    assert ranked.left == pytest.approx(6 * HOUR)
    assert REMAINING_LADDER_S[ranked.queue - 1] <= 6 * HOUR < REMAINING_LADDER_S[ranked.queue]
    # not reported, in LAS queue 0: UNMEASURED_LEFT_S; past the limit: the limit
    new = by_remaining(_got(1, 0), None, 1.0, las)
    old = by_remaining(_got(40, 1), None, 1.0, las)
    assert new.left is None and old.left is None
    assert REMAINING_LADDER_S[new.queue - 1] <= UNMEASURED_LEFT_S < REMAINING_LADDER_S[new.queue]
    assert REMAINING_LADDER_S[old.queue - 1] <= 16 * HOUR < REMAINING_LADDER_S[old.queue]
    nearly_done = by_remaining(_got(40, 1), 0.1 * HOUR, 1.0, las)
    assert nearly_done.queue < new.queue < old.queue
    # a limit below a new job's assumed 2 GPU-h: LAS's queues keep their order
    low = (0.01 * HOUR, 0.1 * HOUR)
    queues = [
        by_remaining(_got(h, q), None, 1.0, low).queue for h, q in ((0, 0), (0.05, 1), (1, 2))
    ]
    assert queues == sorted(queues) and len(set(queues)) == 3


# ----- by hand, through the simulator -----


def _reporting(world: Scenario, progress: bool = True, **pool: object) -> tuple[SimResult, Watch]:
    """The run under dragonet-las with ``pool``'s settings, every job reporting its speed
    (and, with ``progress``, how far it is)."""
    world = replace(world, objects=(pool_object("default", policy="dragonet-las", **pool),))
    config = SimConfig(
        delete_finished_after_s=None, throughput=ThroughputConfig(noise=0.0, progress=progress)
    )
    sim = Simulation(world, config)
    watch = Watch(sim)
    return sim.run(), watch


def _jct(result: SimResult, name: str) -> float:
    (got,) = [j for j in result.jobs if j.key == f"default/{name}"]
    assert got.jct_s is not None
    return got.jct_s


def test_a_new_short_job_preempts_a_long_one_it_would_wait_behind_under_las() -> None:
    """ "long" (4 workers, about 2 h alone) reports how far it is; "short" (4 workers, about
    10 minutes) arrives after 10 minutes. Under least attained service both are in queue 0
    and "short", the later arrival, waits for "long"; shortest remaining first ranks "long"
    by the 8 GPU-h its reports leave it, above a new job's 2, and preempts it."""
    fixed = {"min_workers": 4, "max_workers": 4, "ps": 1}
    long = _checkpointed(job("long", 4, steps=4 * 7200, **fixed))
    short = job("short", 4, arrival=600.0, steps=4 * 600, **fixed)
    world = _world([long, short], gpus_nodes=1)

    srpt, watch = _reporting(world)
    preempted = watch.services("long")[0]["lastPreemption"]
    assert preempted["by"] == "default/short"
    assert "shortest remaining first" in preempted["reason"]
    assert _jct(srpt, "short") < 1500.0

    las, watch = _reporting(world, lasByRemaining=False)
    assert watch.services("long") == []
    assert _jct(las, "short") > 6000.0  # it waited for "long"


def test_a_job_nearly_done_is_not_preempted_for_a_new_one() -> None:
    """With a limit of 0.01 GPU-h, "long" is in least attained service's second queue after
    a few seconds, and "new" (queue 0) preempts it when it arrives, 5 minutes before "long"
    would end. By its reports "long" has about 0.3 GPU-h left, less than a new job's 2:
    shortest remaining first lets it finish."""
    fixed = {"min_workers": 4, "max_workers": 4, "ps": 1}
    long = _checkpointed(job("long", 4, steps=4 * 1500, **fixed))
    new = job("new", 4, arrival=1200.0, steps=4 * 600, **fixed)
    world = _world([long, new], gpus_nodes=1)
    limit = {"lasThresholdsGPUHours": [0.01]}

    _, watch = _reporting(world, **limit)
    assert watch.services("long") == []

    _, watch = _reporting(world, **limit, lasByRemaining=False)
    assert watch.services("long")[0]["lastPreemption"]["by"] == "default/new"


def test_a_pool_of_jobs_that_report_no_progress_plans_as_least_attained_service() -> None:
    """Reports without progress: the ladder places every job by its LAS queue alone, so
    "new" preempts "long" as under least attained service, and every job ends when it
    does there."""
    fixed = {"min_workers": 4, "max_workers": 4, "ps": 1}
    long = _checkpointed(job("long", 4, steps=4 * 1500, **fixed))
    new = job("new", 4, arrival=1200.0, steps=4 * 600, **fixed)
    world = _world([long, new], gpus_nodes=1)
    limit = {"lasThresholdsGPUHours": [0.01]}
    on, watch = _reporting(world, progress=False, **limit)
    assert watch.services("long")[0]["lastPreemption"]["by"] == "default/new"
    off, _ = _reporting(world, progress=False, **limit, lasByRemaining=False)
    for name in ("long", "new"):
        assert _jct(on, name) == pytest.approx(_jct(off, name))
