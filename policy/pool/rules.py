"""What a policy's rules are: its thresholds, its strategies as functions the phases
call, and its behaviours as one ``Behaviour`` flag set the phases ask by name, so no phase
checks a policy's name (each named policy's row: ``policies.POLICY_TABLE``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import Flag, auto
from typing import Any

from policy.model.cluster import Pod
from policy.model.pool import MigrationScore, StopPolicy
from policy.model.speedup import Speedup
from policy.pool.move_score import TargetChooser
from policy.pool.placement import GangPlacer
from policy.pool.running import Running

# Which running job grows first (``policy.pool.grow``): called with the cycle's ledger and
# the growable jobs (with their victim order), it returns the workers each job gets.
Growth = Callable[..., Mapping[str, Any]]
# The order in which a shrink takes workers (``policy.pool.shrink``): a sort key of a
# worker of a running job, from the job's order among running jobs, the worker's rank in
# ``shrinkable``'s order, the workers the job keeps before it is taken, and the job's
# throughput model (None: it reports nothing).
VictimOrder = Callable[[Running, Pod, int, int, int, Speedup | None], tuple]


class Behaviour(Flag):
    """What a named policy does beyond gang admission, one named switch each: a policy's
    ``Rules.does`` holds the ones it does (its row in ``policy.pool.policies.POLICY_TABLE``,
    and the ones its pool's spec switches on), and a phase asks by name
    (``Behaviour.ELASTIC in rules.does``)."""

    # Shrink and grow at all.
    ELASTIC = auto()
    # Every pod created at once, unplaced: the kube-scheduler places each (kube-default).
    KUBE_SCHEDULER_PLACES = auto()
    # Workers a job holds beyond Worker.replicas (grown into idle room) go back to a
    # waiting job at once, without the starvation wait.
    RECLAIM_BORROWED = auto()
    # While the starving queue head cannot be helped, admit no one behind it (DRAGON).
    BLOCK_BEHIND_HEAD = auto()
    # Growth needs the idle wait (DRAGON); without it, growth happens as soon as nobody
    # waiting can use the room.
    GROW_WHEN_IDLE_ONLY = auto()
    # A static-size policy admits every worker of Worker.replicas, never fewer.
    STATIC = auto()
    # Preempt whole running jobs of lower priority when no shrink makes room.
    PREEMPT_PRIORITY = auto()
    # Preempt whole running jobs in a later LAS queue (ones that declare a checkpoint
    # interval, ran at least one interval, and were preempted fewer than max_preemptions).
    PREEMPT_LAS = auto()
    # A victim may also be in the waiting job's own queue, enqueued after it
    # (spec.lasPreemptLaterInQueue).
    LAS_LATER_IN_QUEUE = auto()
    # A preempted job that waited as long as it ran goes back to queue 0 (spec.lasPromotion).
    LAS_PROMOTION = auto()
    # Jobs that report how far they are queue by the GPU-time they have left, shortest
    # first (policy.pool.attained_service.by_remaining); the others as least attained
    # service places them (spec.lasByRemaining).
    LAS_REMAINING = auto()


NOTHING = Behaviour(0)


@dataclass(frozen=True, kw_only=True)
class Rules:
    """What a named policy does beyond gang admission: its strategies, its behaviours
    (``does``) and its thresholds."""

    # How a queued gang is placed: locality first (DRAGON's, with or without every
    # worker at once), or each pod on its own (Volcano's binpack).
    place_gang: GangPlacer
    grow: Growth
    victim_order: VictimOrder
    does: Behaviour
    starvation: timedelta  # a waiting job waiting this long may shrink jobs of its priority
    idle: timedelta  # growth waits this long after the last admission or shrink
    # Least attained service: the queues' limits in GPU-seconds (empty: arrival order).
    las: tuple[float, ...] = ()
    # A job is preempted for least attained service at most this often (PREEMPT_LAS).
    max_preemptions: int = 3
    migration: MigrationRules | None = None  # None: Migration requests are refused
    # The allocation rule (policy.pool.goodput): how long a new worker takes to train
    # (start and restore), how often growth is decided again (0: at every event), and the
    # least relative speed-up per worker, charged its restart, that a job's reports must
    # promise before it grows.
    restart: timedelta = timedelta(seconds=30)
    interval: timedelta = timedelta(0)
    min_gain: float = 0.0
    # The pool's spec.stopPolicy (policy.pool.stop): Hold admits and grows nothing,
    # HoldAndDrain also stops every admitted job.
    stop: StopPolicy = "None"

    @property
    def reads_service(self) -> bool:
        """Whether the plan reads attained service, and so when each pod started (least
        attained service's queues, or its preemption): the LAS policies' rules."""
        return bool(self.las) or Behaviour.PREEMPT_LAS in self.does


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
