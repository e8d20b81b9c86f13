"""Each named policy's rules, chosen once per pool spec (``spec.policy``), so no phase
checks a policy's name: the strategies come from the phases' own modules."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from policy.model.pool import MigrationSettings, PoolSpec
from policy.pool.goodput import grow_by_goodput
from policy.pool.grow import grow_oldest_first
from policy.pool.move_score import TARGETS
from policy.pool.placement import place_each_binpacked, place_gang, place_static_gang
from policy.pool.rules import MigrationRules, Rules
from policy.pool.shrink import victims_least_loss, victims_oldest_first


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
    return replace(_rules_for(spec), migration=migration_rules(spec), stop=spec.stopPolicy)


def _rules_for(spec: PoolSpec) -> Rules:
    starvation = timedelta(seconds=spec.starvationSeconds)
    idle = timedelta(seconds=spec.idleSeconds)
    las = tuple(sorted(h * 3600.0 for h in spec.lasThresholdsGPUHours))
    guard = spec.maxPreemptions
    dragonet = Rules(
        place_gang,
        grow_by_goodput,
        victims_least_loss,
        True,
        starvation,
        idle,
        reclaim_borrowed=True,
        grow_when_idle_only=False,
        preempt_priority=True,
        restart=timedelta(seconds=spec.restartSeconds),
        interval=timedelta(seconds=spec.allocationIntervalSeconds),
        min_gain=spec.minGainPerWorker,
    )
    if spec.policy == "dragonet-las":  # dragonet, in LAS order, preempting for it
        return replace(
            dragonet,
            las=las,
            preempt_las=True,
            max_preemptions=guard,
            las_later_in_queue=spec.lasPreemptLaterInQueue,
            las_promotion=spec.lasPromotion,
            las_remaining=spec.lasByRemaining,
        )
    dragon = Rules(place_gang, grow_oldest_first, victims_oldest_first, True, starvation, idle)
    if spec.policy == "tiresias":
        return replace(
            dragon,
            place_gang=place_static_gang,
            elastic=False,
            static=True,
            las=las,
            preempt_priority=True,
            preempt_las=True,
            max_preemptions=guard,
            las_later_in_queue=spec.lasPreemptLaterInQueue,
            las_promotion=spec.lasPromotion,
        )
    if spec.policy == "dragon":
        return replace(dragon, block_behind_head=True)
    if spec.policy == "dragonet":
        return dragonet
    if spec.policy == "gang-fifo":
        return replace(dragon, place_gang=place_each_binpacked, elastic=False, static=True)
    return replace(dragon, elastic=False, kube_scheduler_places=True)  # kube-default
