"""The named policies as one table (policy/pool/policies.py): one row per policy, its
behaviours one ``Behaviour`` flag set the phases ask by name (issue 40).

A new policy is a row; a new behaviour is a named flag, set in the rows that do it and
read where it acts: these tests fail on a policy name without a row, on a spec switch a
policy does not honour turning on, and on a flag nothing reads."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from policy.model.admission import BLOCKED_BEHIND_HEAD
from policy.model.pool import POLICIES, PoolSpec
from policy.pool.cycle import plan
from policy.pool.policies import POLICY_TABLE, rules_for
from policy.pool.rules import Behaviour
from tests.conftest import NOW
from tests.poolbuilder import PoolBuilder

ROOT = Path(__file__).resolve().parent.parent


def test_every_policy_a_pool_may_name_has_its_row() -> None:
    assert set(POLICY_TABLE) == set(POLICIES)
    switches = ("lasPreemptLaterInQueue", "lasPromotion", "lasByRemaining")
    for name, row in POLICY_TABLE.items():
        on = PoolSpec(policy=name, **dict.fromkeys(switches, True))
        off = PoolSpec(policy=name, **dict.fromkeys(switches, False))
        assert rules_for(on).does == row.does | row.switchable
        assert rules_for(off).does == row.does


@pytest.mark.parametrize(
    ("policy", "honoured"), [("dragonet-las", True), ("tiresias", False), ("dragon", False)]
)
def test_a_spec_switch_counts_only_for_the_policies_that_honour_it(
    policy: str, honoured: bool
) -> None:
    """``lasByRemaining`` orders dragonet-las's queue by remaining GPU-time; tiresias and
    dragon ignore it, whatever it says."""
    on = rules_for(PoolSpec(policy=policy, lasByRemaining=True)).does
    off = rules_for(PoolSpec(policy=policy, lasByRemaining=False)).does
    assert (Behaviour.LAS_REMAINING in on) is honoured
    assert Behaviour.LAS_REMAINING not in off
    assert on & ~Behaviour.LAS_REMAINING == off  # nothing else changes with it


def test_every_behaviour_is_read_where_it_acts() -> None:
    """A flag no phase reads would be a switch that does nothing."""
    sources = [
        p.read_text()
        for p in (ROOT / "policy").rglob("*.py")
        if p.name not in ("rules.py", "policies.py")
    ]
    for b in Behaviour:
        read = re.compile(rf"Behaviour\.{b.name}\b")
        assert any(read.search(s) for s in sources), f"Behaviour.{b.name} is read nowhere"


def test_one_flag_added_to_a_policy_changes_what_it_does() -> None:
    """Dragonet with DRAGON's BLOCK_BEHIND_HEAD: the job behind a starving head nothing can
    help waits behind it instead of taking the room that fits it."""
    b = PoolBuilder(policy="dragonet").node("a", 4).node("b", 1)
    b.running("r", ("Worker-0@a", "Worker-1@a", "Worker-2@a", "Worker-3@a"), low=4)
    view = b.queued("h", workers=2).queued("q", workers=1).view()
    rules = rules_for(view.snap.spec)
    assert Behaviour.BLOCK_BEHIND_HEAD not in rules.does
    alone = plan(view.snap, NOW, rules).jobs["default/q"]
    assert alone.phase == "Admitted" and alone.placements[("Worker", 0)].node == "b"
    blocking = replace(rules, does=rules.does | Behaviour.BLOCK_BEHIND_HEAD)
    behind = plan(view.snap, NOW, blocking).jobs["default/q"]
    assert behind.phase == "Queued" and behind.reason == BLOCKED_BEHIND_HEAD
