"""What a simulation run produces: per-job records, allocation samples and the summary."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

# queued: no pod holds anything; holding: pods hold resources but a pod the gang needs has
# no node (it cannot train: deadlocked); training: the whole gang is bound (starting,
# restoring its checkpoint, or making progress).
State = Literal["queued", "holding", "training"]


@dataclass(frozen=True)
class Segment:
    start_s: float
    end_s: float
    state: State
    workers: int = 0  # live workers while training


@dataclass(frozen=True)
class JobRecord:
    key: str
    arrival_s: float
    start_s: float | None  # first time the gang trained
    finish_s: float | None  # the chief exited 0 (None: never finished)
    workers_requested: int
    segments: tuple[Segment, ...]
    # (time, resource -> units its bound pods request) from each change on, until it
    # finished; empty when unknown.
    allocation: tuple[tuple[float, Mapping[str, float]], ...] = ()

    @property
    def jct_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.arrival_s


@dataclass(frozen=True)
class Sample:
    """Cluster allocation from ``t_s`` until the next sample, in resource units (GPUs, cores)."""

    t_s: float
    allocated: Mapping[str, float]  # requested by pods bound to nodes
    training: Mapping[str, float]  # of which: pods of jobs that make progress


@dataclass(frozen=True)
class SimResult:
    policy: str
    scenario: str
    capacity: Mapping[str, float]  # resource -> total allocatable units
    jobs: tuple[JobRecord, ...]
    samples: tuple[Sample, ...]
    summary: Mapping[str, Any]  # what `dragonet simulate --json` prints


@dataclass(frozen=True)
class Progress:
    """A live view's snapshot of a running simulation."""

    policy: str
    sim_time_s: float
    jobs_total: int
    jobs_done: int
    jobs_training: int
    jobs_waiting: int
    sync_calls: int
