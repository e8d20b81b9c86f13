"""Admission checks: the rules a queued job's turn goes through, one after the other.

kube-scheduler runs a pod through its plugins and answers a ``Status`` with a code and
reasons (``Unschedulable``: preemption may help; ``UnschedulableAndUnresolvable``: nothing
will); Kueue runs a workload through its admission checks. The pool's cycle runs each
queued job, in queue order, through an ordered list of checks
(``policy.pool.admission_checks.CHECKS``). A check looks at the job's ``Turn`` and the
queue's ``QueueCycle`` and answers

* ``None``: it has nothing to say; the next check runs;
* ``Admit``: the job's gang is admitted with these placements; no later check runs;
* ``Wait``: the job waits, for this reason (a code of ``policy.model.admission``) and in
  these words. A ``final`` wait ends the turn (nothing can change it in this cycle);
  otherwise it is the reason so far, and a later check may make room and say another
  (a shrink, a preemption) or add to its words.

A check's reason codes, its words and its decision are in one place, the check; the cycle
only runs the list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property

from policy.model.jobs import Job
from policy.model.priority import Priorities
from policy.pool.ledger import Ledger
from policy.pool.placement import Placed
from policy.pool.queue import enqueue_time
from policy.pool.rules import Rules
from policy.pool.running import Running


@dataclass(frozen=True)
class Admit:
    """The job's whole gang is admitted, with these placements and workers."""

    placed: Placed
    workers: int


@dataclass(frozen=True)
class Wait:
    """The job waits: why (a code), in words (built only when asked), and when a time rule
    may change that. ``final``: no later check may change it (kube-scheduler's
    ``UnschedulableAndUnresolvable``)."""

    reason: str
    explain: Callable[[], str] = field(compare=False, repr=False)
    final: bool = False
    wake_at: datetime | None = None


Verdict = Admit | Wait | None


@dataclass
class Turn:
    """One queued job's turn: the job, and the reason it waits so far (``None`` until a
    check says one)."""

    job: Job
    now: datetime
    starvation: timedelta  # the policy's (Rules.starvation)
    queue: int = 0  # its least-attained-service queue (0 without LAS)
    stopping: bool = False  # preempted, and some of its pods still exist
    waits: Wait | None = None

    @cached_property
    def since(self) -> datetime:
        """When it was enqueued (``policy.pool.queue.NEVER`` if never)."""
        return enqueue_time(self.job, self.now)

    @property
    def starving(self) -> bool:
        """It has waited the policy's starvation time."""
        return self.now - self.since >= self.starvation


@dataclass
class QueueCycle:
    """What the checks share across one cycle's queue: the ledger, the running jobs (in
    victim order), the priority classes, the pool's name, and what earlier turns decided
    that later ones read."""

    ledger: Ledger
    running: Sequence[Running]
    priorities: Priorities
    pool: str
    wakes: list[datetime]  # when a running job becomes preemptible (appended to)
    # DRAGON: the starving head nothing can help; nobody behind it is admitted.
    blocked_by: str | None = None
    room_made: bool = False  # a shrink was tried for the first job that waits
    preempted: bool = False  # a job was preempted for a waiting one in this cycle

    @property
    def rules(self) -> Rules:
        return self.ledger.rules

    @property
    def now(self) -> datetime:
        return self.ledger.now

    @cached_property
    def lowest_priority(self) -> int | None:
        """The lowest priority of a running job (None: nothing runs)."""
        return min((r.priority for r in self.running), default=None)

    @cached_property
    def latest_queue(self) -> int:
        """The latest least-attained-service queue of a running job."""
        return max((r.queue for r in self.running), default=0)


@dataclass(frozen=True)
class Check:
    """One admission rule: its name, the reason codes it may give, and its decision."""

    name: str
    reasons: tuple[str, ...]
    decide: Callable[[Turn, QueueCycle], Verdict] = field(repr=False)


def run(checks: Sequence[Check], turn: Turn, cycle: QueueCycle) -> Admit | Wait:
    """The job's outcome: the first ``Admit`` or ``final`` wait, else the last wait said."""
    for check in checks:
        got = check.decide(turn, cycle)
        if got is None:
            continue
        if isinstance(got, Admit):
            return got
        turn.waits = got
        if got.final:
            break
    if turn.waits is None:
        raise ValueError(f"no admission check decided for {turn.job.key}")
    return turn.waits
