"""Each named policy's rules, chosen once per pool spec (``spec.policy``), so no phase
checks a policy's name: one row per policy (``POLICY_TABLE``), whose strategies come from
the phases' own modules and whose behaviours are named ``Behaviour`` flags. A new policy
is a row here (and its name in ``policy.model.pool.PolicyName``); a new behaviour is a
``Behaviour`` member, set in the rows that do it and read where it acts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from operator import attrgetter
from types import MappingProxyType

from policy.model.pool import MigrationSettings, PolicyName, PoolSpec
from policy.pool.goodput import grow_by_goodput
from policy.pool.grow import grow_oldest_first
from policy.pool.move_score import TARGETS
from policy.pool.placement import (
    GangPlacer,
    place_each_binpacked,
    place_gang,
    place_static_gang,
)
from policy.pool.rules import NOTHING, Behaviour, Growth, MigrationRules, Rules, VictimOrder
from policy.pool.shrink import victims_least_loss, victims_oldest_first

B = Behaviour  # (short, for the table's rows)


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


@dataclass(frozen=True, kw_only=True)
class Policy:
    """One named policy's row: its strategies, what it always does, the behaviours its
    pool's spec may switch on (each by its own field: ``SPEC_SWITCHES``), and which of the
    spec's thresholds it reads."""

    place_gang: GangPlacer
    grow: Growth
    victim_order: VictimOrder
    does: Behaviour
    switchable: Behaviour = NOTHING
    # Queues by least attained service: reads lasThresholdsGPUHours and maxPreemptions.
    las: bool = False
    # The allocation rule: reads restartSeconds, allocationIntervalSeconds, minGainPerWorker.
    allocation: bool = False


_DRAGONET = B.ELASTIC | B.RECLAIM_BORROWED | B.PREEMPT_PRIORITY
_LAS_SWITCHES = B.LAS_LATER_IN_QUEUE | B.LAS_PROMOTION

# Every named policy (``PoolSpec.policy``), one row each.
POLICY_TABLE: Mapping[PolicyName, Policy] = MappingProxyType(
    {
        "dragon": Policy(
            place_gang=place_gang,
            grow=grow_oldest_first,
            victim_order=victims_oldest_first,
            does=B.ELASTIC | B.GROW_WHEN_IDLE_ONLY | B.BLOCK_BEHIND_HEAD,
        ),
        "dragonet": Policy(
            place_gang=place_gang,
            grow=grow_by_goodput,
            victim_order=victims_least_loss,
            does=_DRAGONET,
            allocation=True,
        ),
        "dragonet-las": Policy(  # dragonet, in LAS order, preempting for it
            place_gang=place_gang,
            grow=grow_by_goodput,
            victim_order=victims_least_loss,
            does=_DRAGONET | B.PREEMPT_LAS,
            switchable=_LAS_SWITCHES | B.LAS_REMAINING,
            las=True,
            allocation=True,
        ),
        "tiresias": Policy(
            place_gang=place_static_gang,
            grow=grow_oldest_first,
            victim_order=victims_oldest_first,
            does=B.STATIC | B.GROW_WHEN_IDLE_ONLY | B.PREEMPT_PRIORITY | B.PREEMPT_LAS,
            switchable=_LAS_SWITCHES,
            las=True,
        ),
        "gang-fifo": Policy(
            place_gang=place_each_binpacked,
            grow=grow_oldest_first,
            victim_order=victims_oldest_first,
            does=B.STATIC | B.GROW_WHEN_IDLE_ONLY,
        ),
        "kube-default": Policy(
            place_gang=place_gang,
            grow=grow_oldest_first,
            victim_order=victims_oldest_first,
            does=B.KUBE_SCHEDULER_PLACES | B.GROW_WHEN_IDLE_ONLY,
        ),
    }
)

# The behaviours a pool's spec switches on, each by its own field (for the policies whose
# row lists it as switchable; the others ignore the field).
SPEC_SWITCHES: tuple[tuple[Behaviour, Callable[[PoolSpec], bool]], ...] = (
    (B.LAS_LATER_IN_QUEUE, attrgetter("lasPreemptLaterInQueue")),
    (B.LAS_PROMOTION, attrgetter("lasPromotion")),
    (B.LAS_REMAINING, attrgetter("lasByRemaining")),
)


def rules_for(spec: PoolSpec) -> Rules:
    """The pool's rules: its policy's row, with the behaviours and thresholds its spec sets."""
    row = POLICY_TABLE[spec.policy]
    does = row.does
    for behaviour, switched_on in SPEC_SWITCHES:
        if behaviour in row.switchable and switched_on(spec):
            does |= behaviour
    rules = Rules(
        place_gang=row.place_gang,
        grow=row.grow,
        victim_order=row.victim_order,
        does=does,
        starvation=timedelta(seconds=spec.starvationSeconds),
        idle=timedelta(seconds=spec.idleSeconds),
        migration=migration_rules(spec),
        stop=spec.stopPolicy,
    )
    if row.las:
        rules = replace(
            rules,
            las=tuple(sorted(h * 3600.0 for h in spec.lasThresholdsGPUHours)),
            max_preemptions=spec.maxPreemptions,
        )
    if row.allocation:
        rules = replace(
            rules,
            restart=timedelta(seconds=spec.restartSeconds),
            interval=timedelta(seconds=spec.allocationIntervalSeconds),
            min_gain=spec.minGainPerWorker,
        )
    return rules
