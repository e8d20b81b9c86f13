"""Elastic scaling: which workers a shrink takes, where growth goes, and when rules fire.

DRAGON's two rules, made stateless (DESIGN §2.5-2.6): the times they compare against come
from job statuses (``startTime`` on admission, ``scheduling.lastScale`` on a shrink or a
growth), so every sync on every replica reaches the same decision from the same snapshot.
A shrink removes only the workers it takes and a growth only adds workers: TF_CONFIG
lists ``max-instances`` workers from the start, so no running worker ever restarts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from policy.config import PolicyConfig
from policy.model.cluster import Pod
from policy.model.jobs import Job
from policy.model.timeutil import parse_time

# The status keys the rules read back.
LAST_SCALE = "lastScale"


@dataclass(frozen=True)
class Rules:
    """What a named policy does beyond gang admission."""

    elastic: bool  # shrink and grow at all
    starvation: timedelta  # a queue head waiting this long may shrink jobs of its priority
    idle: timedelta  # growth waits this long after the last admission or shrink
    # Workers a job holds beyond Worker.replicas (grown into idle room) go back to a
    # waiting job at once, without the starvation wait.
    reclaim_borrowed: bool = False
    # While the starving queue head cannot be helped, admit no one behind it (DRAGON).
    block_behind_head: bool = False
    # Growth needs the idle wait (DRAGON) or happens as soon as nobody waiting can use the room.
    grow_when_idle_only: bool = True
    # "oldest": running jobs in start order, each to its max (DRAGON); "fewest": one worker
    # at a time to the job with the fewest workers per parameter server (largest gain).
    growth_order: str = "oldest"


def rules_for(config: PolicyConfig) -> Rules:
    starvation = timedelta(seconds=config.starvation_seconds)
    idle = timedelta(seconds=config.idle_seconds)
    if config.policy == "dragon":
        return Rules(True, starvation, idle, block_behind_head=True)
    if config.policy == "dragonet":
        return Rules(
            True,
            starvation,
            idle,
            reclaim_borrowed=True,
            grow_when_idle_only=False,
            growth_order="fewest",
        )
    return Rules(False, starvation, idle)


@dataclass(frozen=True)
class Scale:
    """A change of a job's worker target, recorded once in its status when decided."""

    before: int
    after: int
    reason: str

    @property
    def shrink(self) -> bool:
        return self.after < self.before


def last_scale(job: Job) -> tuple[datetime | None, bool]:
    """When the job last scaled, and whether that was a shrink."""
    raw = (job.status.get("scheduling") or {}).get(LAST_SCALE) or {}
    if not isinstance(raw, Mapping):
        return None, False
    before, after = raw.get("from"), raw.get("to")
    shrink = isinstance(before, int) and isinstance(after, int) and after < before
    return parse_time(raw.get("time")), shrink


def idle_since(jobs: Iterable[Job]) -> datetime | None:
    """The last admission or shrink anywhere: growth waits ``idle`` after it."""
    times = []
    for job in jobs:
        started = parse_time(job.status.get("startTime"))
        if started is not None:
            times.append(started)
        when, shrink = last_scale(job)
        if when is not None and shrink:
            times.append(when)
    return max(times) if times else None


def is_chief_worker(job: Job, pod: Pod) -> bool:
    """Worker 0 is the chief of a job without a Chief or Master: it never shrinks."""
    return job.chief_type is None and pod.index == 0


def shrinkable(job: Job, workers: Sequence[Pod], ps_nodes: frozenset[str]) -> list[Pod]:
    """Workers a shrink may take, best first: not yet running, then lonely (off every
    parameter server's node), then the highest index. Never the chief."""
    ok = [
        p
        for p in workers
        if p.live and p.phase in ("Pending", "Running") and not is_chief_worker(job, p)
    ]
    return sorted(ok, key=lambda p: (p.phase == "Running", p.node in ps_nodes, -p.index))


def waited(since: datetime | None, now: datetime) -> str:
    if since is None:
        return ""
    return f"{int((now - since).total_seconds())} s"
