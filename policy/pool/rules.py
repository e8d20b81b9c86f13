"""Each named policy's rules, chosen once per cycle, so no phase checks a policy's name."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Literal

from policy.model.pool import MigrationScore, MigrationSettings, PoolSpec
from policy.pool.move_score import TARGETS, TargetChooser

# How a queued job's pods are placed: "gang" (whole job, locality first), "binpacked"
# (whole job, each pod on the fullest node alone: Volcano's binpack) or "none" (every pod
# created at once, unplaced: the kube-scheduler places each, kube-default).
PlacementMode = Literal["gang", "binpacked", "none"]
# Which running job grows first and which gives workers up first: "oldest" (DRAGON: job by
# job in start order) or "gain" (one worker at a time where the speed-up is largest; shrink
# borrowed workers first, then the jobs with most workers per parameter server).
Order = Literal["oldest", "gain"]


@dataclass(frozen=True)
class Rules:
    """What a named policy does beyond gang admission."""

    placement: PlacementMode
    elastic: bool  # shrink and grow at all
    starvation: timedelta  # a waiting job waiting this long may shrink jobs of its priority
    idle: timedelta  # growth waits this long after the last admission or shrink
    # Workers a job holds beyond Worker.replicas (grown into idle room) go back to a
    # waiting job at once, without the starvation wait.
    reclaim_borrowed: bool = False
    # While the starving queue head cannot be helped, admit no one behind it (DRAGON).
    block_behind_head: bool = False
    # Growth needs the idle wait (DRAGON) or happens as soon as nobody waiting can use the room.
    grow_when_idle_only: bool = True
    order: Order = "oldest"
    # A static-size policy admits every worker of Worker.replicas, never fewer.
    static: bool = False
    # Least attained service: the queues' limits in GPU-seconds (empty: arrival order).
    las: tuple[float, ...] = ()
    # Preempt whole running jobs of lower priority when no shrink makes room.
    preempt_priority: bool = False
    # Preempt whole running jobs in a later LAS queue (ones that declare a checkpoint
    # interval, ran at least one interval, and were preempted fewer than max_preemptions).
    preempt_las: bool = False
    max_preemptions: int = 3
    # How many LAS queues later a victim must be than the waiting job.
    las_gap: int = 1
    # A victim may also be in the waiting job's own queue, enqueued after it.
    las_later_in_queue: bool = False
    # A preempted job that waited as long as it ran goes back to queue 0.
    las_promotion: bool = True
    migration: MigrationRules | None = None  # None: Migration requests are refused


# The policies whose queue order reads attained service (from pods' start times).
LAS_POLICIES = ("dragonet-las", "tiresias")


@dataclass(frozen=True)
class MigrationRules:
    """How the pool answers Migration requests (``spec.migration``, chosen once)."""

    score: MigrationScore
    target: TargetChooser  # the score's function (policy.pool.move_score)
    max_moves: int = 3
    min_interval: timedelta = timedelta(seconds=3)
    min_gain: float = 0.2
    consolidate: bool = False
    defragment: bool = False
    balance: bool = False


def migration_rules(spec: PoolSpec) -> MigrationRules | None:
    m: MigrationSettings = spec.migration
    if not m.enabled:
        return None
    score = m.score or ("dragon" if spec.policy == "dragon" else "dragonet")
    return MigrationRules(
        score,
        TARGETS[score],
        m.maxMoves,
        timedelta(seconds=m.minIntervalSeconds),
        m.minGain,
        m.consolidate,
        m.defragment,
        m.balance if m.balance is not None else score == "dragonet",
    )


def rules_for(spec: PoolSpec) -> Rules:
    return replace(_rules_for(spec), migration=migration_rules(spec))


def _rules_for(spec: PoolSpec) -> Rules:
    starvation = timedelta(seconds=spec.starvationSeconds)
    idle = timedelta(seconds=spec.idleSeconds)
    las = tuple(sorted(h * 3600.0 for h in spec.lasThresholdsGPUHours))
    guard = spec.maxPreemptions
    dragonet = Rules(
        "gang",
        True,
        starvation,
        idle,
        reclaim_borrowed=True,
        grow_when_idle_only=False,
        order="gain",
        preempt_priority=True,
    )
    if spec.policy == "dragonet-las":  # dragonet, in LAS order, preempting for it
        return replace(
            dragonet,
            las=las,
            preempt_las=True,
            max_preemptions=guard,
            las_gap=2,  # measured: preempting the next queue loses more than it gains
            las_later_in_queue=spec.lasPreemptLaterInQueue,
            las_promotion=spec.lasPromotion,
        )
    if spec.policy == "tiresias":
        return Rules(
            "gang",
            False,
            starvation,
            idle,
            static=True,
            las=las,
            preempt_priority=True,
            preempt_las=True,
            max_preemptions=guard,
            las_later_in_queue=spec.lasPreemptLaterInQueue,
            las_promotion=spec.lasPromotion,
        )
    if spec.policy == "dragon":
        return Rules("gang", True, starvation, idle, block_behind_head=True)
    if spec.policy == "dragonet":
        return dragonet
    if spec.policy == "gang-fifo":
        return Rules("binpacked", False, starvation, idle)
    return Rules("none", False, starvation, idle)
