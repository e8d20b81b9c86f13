"""The pool's admission rules, in the order each queued job meets them (``CHECKS``).

Each rule is one ``Check`` (``policy.pool.checks``): its name, the reason codes it gives,
and a function that decides and says why in words. A new rule is a function here (or in
a module of its own) and one line in ``CHECKS``: the cycle runs the list and nothing else.

1. ``Stopping``: a preempted job whose pods still terminate waits for them.
2. ``PoolHeld``: a pool whose ``stopPolicy`` holds it admits nothing (``stop.py``).
3. ``BehindHead``: DRAGON admits no one behind a starving head nothing can help.
4. ``GangFits``: the whole gang, placed in what is free now, or why not (``admit.py``).
5. ``MakeRoom``: for the first job that waits, shrink running jobs (``shrink.py``).
6. ``Preempt``: else stop whole running jobs of lower priority or a later queue
   (``preempt.py``).
7. ``StarvationWake``: a job that does not starve yet is planned again when it will.
8. ``UnknownPriorityClass``: a job whose PriorityClass does not exist is told so.
"""

from __future__ import annotations

from functools import partial
from types import MappingProxyType

from policy.model.admission import (
    BLOCKED_BEHIND_HEAD,
    NO_FEASIBLE_NODE,
    NO_NODES,
    NO_SHRINK_HELPS,
    POOL_HELD,
    PREEMPTED,
    TOO_LARGE,
    WAITING_FOR_CAPACITY,
    WAITING_FOR_PREEMPTION,
    WAITING_FOR_SHRINK,
)
from policy.pool.admit import Admitted, admit
from policy.pool.checks import Admit, Check, QueueCycle, Turn, Verdict, Wait
from policy.pool.explain import blocked_message, unhelped_message, unknown_class_message
from policy.pool.preempt import Preempted, preempt
from policy.pool.queue import NEVER, priority
from policy.pool.rules import Behaviour
from policy.pool.shrink import Reserved, make_room
from policy.pool.stop import held_reason, holds


def still_stopping() -> str:
    return "preempted: waiting for its pods to terminate before it queues again as a whole"


def _stopping(turn: Turn, cycle: QueueCycle) -> Verdict:
    """Preempted: it is admitted again once all its pods are gone."""
    if turn.stopping:
        return Wait(PREEMPTED, still_stopping, final=True)
    return None


def _pool_held(turn: Turn, cycle: QueueCycle) -> Verdict:
    """A held pool (``Hold`` or ``HoldAndDrain``) admits none."""
    if holds(cycle.rules):
        reason, explain = held_reason(cycle.pool, cycle.rules.stop)
        return Wait(reason, explain, final=True)
    return None


def _behind_head(turn: Turn, cycle: QueueCycle) -> Verdict:
    """DRAGON: behind the starving head nothing can help (``MakeRoom`` names it)."""
    if cycle.blocked_by:
        return Wait(
            BLOCKED_BEHIND_HEAD,
            partial(blocked_message, cycle.blocked_by, turn.job.namespace),
            final=True,
        )
    return None


def _gang_fits(turn: Turn, cycle: QueueCycle) -> Verdict:
    """The whole gang in what is free now (backfill: a job that does not fit is skipped)."""
    decided = admit(cycle.ledger, turn.job)
    if isinstance(decided, Admitted):
        return Admit(MappingProxyType(dict(decided.placed)), decided.workers)
    return Wait(decided.reason, decided.explain)


def _make_room(turn: Turn, cycle: QueueCycle) -> Verdict:
    """DRAGON makes room for the head of the queue only; Dragonet for the first job that
    some shrink can help, so a head nothing can help does not starve the jobs behind."""
    rules, waits = cycle.rules, turn.waits
    if Behaviour.ELASTIC not in rules.does or cycle.room_made or waits is None:
        return None
    job, ledger, starving = turn.job, cycle.ledger, turn.starving
    blocks = Behaviour.BLOCK_BEHIND_HEAD in rules.does
    prio = priority(job, cycle.priorities)
    room = make_room(ledger, job, prio, turn.since, cycle.running, turn.queue)
    cycle.room_made = isinstance(room, Reserved) or blocks
    if isinstance(room, Reserved):
        if starving:
            ledger.mark_head_waits()
        return Wait(room.reason, room.explain)
    if starving:
        ledger.mark_head_waits()
        cycle.blocked_by = job.key if blocks else None
        if room.could_shrink:
            return Wait(NO_SHRINK_HELPS, partial(unhelped_message, waits.explain))
    return None


def _may_preempt(turn: Turn, cycle: QueueCycle) -> bool:
    """Whether preempting is worth trying: the policy allows it, no job was preempted in
    this cycle yet, and some running job is of lower priority or (LAS) in a later queue.
    Checked before any victim is sought, so a pool whose jobs share one priority pays
    nothing for it."""
    lowest = cycle.lowest_priority
    if cycle.preempted or lowest is None:
        return False
    rules = cycle.rules
    if Behaviour.PREEMPT_PRIORITY in rules.does and lowest < priority(turn.job, cycle.priorities):
        return True
    las = Behaviour.PREEMPT_LAS in rules.does
    if Behaviour.LAS_LATER_IN_QUEUE in rules.does:  # a later arrival of its queue too
        return las and cycle.latest_queue >= turn.queue
    return las and cycle.latest_queue > turn.queue


def _preempt(turn: Turn, cycle: QueueCycle) -> Verdict:
    """When no shrink makes room: stop whole running jobs, for one waiting job a cycle."""
    if turn.waits is None or turn.waits.reason == WAITING_FOR_SHRINK:
        return None
    if not _may_preempt(turn, cycle):
        return None
    prio = priority(turn.job, cycle.priorities)
    got = preempt(cycle.ledger, turn.job, prio, turn.queue, cycle.running, cycle.wakes)
    if isinstance(got, Preempted):
        cycle.preempted = True
        return Wait(got.reason, got.explain)
    return None


def _starvation_wake(turn: Turn, cycle: QueueCycle) -> Verdict:
    """An elastic policy decides again once the job starves (it may then shrink others)."""
    waits, elastic = turn.waits, Behaviour.ELASTIC in cycle.rules.does
    if waits is None or not elastic or turn.starving or turn.since == NEVER:
        return None  # (NEVER: no time to wake at)
    return Wait(waits.reason, waits.explain, wake_at=turn.since + cycle.rules.starvation)


def _unknown_priority_class(turn: Turn, cycle: QueueCycle) -> Verdict:
    """A PriorityClass that does not exist: queued with the default priority, and told."""
    waits, job, priorities = turn.waits, turn.job, cycle.priorities
    if waits is None or priorities.value(job.priority_class) is not None:
        return None
    explain = partial(unknown_class_message, waits.explain, job.priority_class, priorities)
    return Wait(waits.reason, explain, wake_at=waits.wake_at)


STOPPING = Check("Stopping", (PREEMPTED,), _stopping)
HELD = Check("PoolHeld", (POOL_HELD,), _pool_held)
BEHIND_HEAD = Check("BehindHead", (BLOCKED_BEHIND_HEAD,), _behind_head)
GANG_FITS = Check(
    "GangFits", (NO_NODES, NO_FEASIBLE_NODE, TOO_LARGE, WAITING_FOR_CAPACITY), _gang_fits
)
MAKE_ROOM = Check("MakeRoom", (WAITING_FOR_SHRINK, NO_SHRINK_HELPS), _make_room)
PREEMPT = Check("Preempt", (WAITING_FOR_PREEMPTION,), _preempt)
STARVATION_WAKE = Check("StarvationWake", (), _starvation_wake)
UNKNOWN_PRIORITY_CLASS = Check("UnknownPriorityClass", (), _unknown_priority_class)

# The order each queued job meets them.
CHECKS: tuple[Check, ...] = (
    STOPPING,
    HELD,
    BEHIND_HEAD,
    GANG_FITS,
    MAKE_ROOM,
    PREEMPT,
    STARVATION_WAKE,
    UNKNOWN_PRIORITY_CLASS,
)
