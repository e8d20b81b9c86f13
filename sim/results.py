"""What a simulation run produces: per-job records, allocation samples and the summary.

A :class:`JobRecord` is one job's story under one policy; :meth:`JobRecord.as_json` is the
record ``dragonet simulate --json`` prints for it (docs/simulator.md, "Per-job records").
"""

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
class Scaled:
    """A scaling decision of the pool (the Admission's ``lastScale``): workers from, to."""

    t_s: float
    from_workers: int
    to_workers: int
    reason: str


@dataclass(frozen=True)
class Preempted:
    """The pool stopped the whole job and queued it again, for ``by`` (namespace/name)."""

    t_s: float
    by: str
    reason: str


@dataclass(frozen=True)
class Move:
    """A worker moved (make-before-break) from one node to another."""

    t_s: float
    replica: str  # "worker-1"
    from_node: str
    to_node: str
    reason: str


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
    kind: str = "TFJob"
    admitted_s: float | None = None  # the pool first admitted it (its Admission)
    # (time, live workers) from each change on; 0 once it finished.
    workers: tuple[tuple[float, int], ...] = ()
    scale_actions: int = 0  # workers added or removed while it trained (as the summary's)
    scales: tuple[Scaled, ...] = ()
    preemptions: tuple[Preempted, ...] = ()
    moves: tuple[Move, ...] = ()
    state_losses: int = 0  # times it fell back to a checkpoint
    # The pool's last word while it waited (its Admission's reason code and message); for
    # a job that never finished, why. Empty for one still running or never seen.
    reason: str = ""
    message: str = ""

    @property
    def jct_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.arrival_s

    @property
    def wait_s(self) -> float | None:
        """Arrival to its first training (the summary's ``avg_queue_s`` averages it)."""
        return None if self.start_s is None else self.start_s - self.arrival_s

    def state_at_end(self) -> str:
        """ "finished", "training", "holding", "queued" or "not arrived"."""
        if self.finish_s is not None:
            return "finished"
        if not self.segments:
            return "queued" if self.workers or self.reason else "not arrived"
        return self.segments[-1].state

    def why_unfinished(self) -> str:
        """One line: why the job never finished ("" if it did)."""
        state = self.state_at_end()
        if state == "finished":
            return ""
        if state == "not arrived":
            return "the run ended before it arrived"
        said = f"{self.reason}: {self.message}" if self.reason and self.message else self.reason
        if state == "training":
            return "still training when the run stopped" + (f" ({said})" if said else "")
        if state == "holding":
            return "holds pods but a pod its gang needs has no node" + (
                f" ({said})" if said else ""
            )
        return said or "queued: the pool never wrote it an Admission"

    def as_json(self) -> dict[str, Any]:
        """The record ``--json`` prints (docs/simulator.md "Per-job records")."""
        return {
            "job": self.key,
            "kind": self.kind,
            "arrival_s": _r(self.arrival_s),
            "admitted_s": _r(self.admitted_s),
            "started_s": _r(self.start_s),
            "finished_s": _r(self.finish_s),
            "wait_s": _r(self.wait_s),
            "jct_s": _r(self.jct_s),
            "state": self.state_at_end(),
            "workers_requested": self.workers_requested,
            "workers": [[_r(t), n] for t, n in self.workers],
            "scale_actions": self.scale_actions,
            "scales": [
                {"t_s": _r(s.t_s), "from": s.from_workers, "to": s.to_workers, "reason": s.reason}
                for s in self.scales
            ],
            "preemptions": [
                {"t_s": _r(p.t_s), "by": p.by, "reason": p.reason} for p in self.preemptions
            ],
            "moves": [
                {
                    "t_s": _r(m.t_s),
                    "replica": m.replica,
                    "from": m.from_node,
                    "to": m.to_node,
                    "reason": m.reason,
                }
                for m in self.moves
            ],
            "state_losses": self.state_losses,
            "reason": self.reason,
            "message": self.message,
            "why_unfinished": self.why_unfinished() or None,
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


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
