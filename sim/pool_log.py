"""What the pool told each job over a run, read from its Admissions as they are written.

The per-job records of ``dragonet simulate --json`` and the web view need a job's story in
the pool's own words: when it was first admitted, each preemption (by whom, why), each
scaling decision (from, to, why), each move of a worker (from, to, why), and the last
reason it was given while it waited. All of it is in the Admission the pool writes
(``crd/admissions.dragonet.io.yaml``), so this reads only that contract, never the
planner's internals, and a real cluster's Admissions tell the same story.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policy.model.admission import ADMITTED, PREEMPTED, TYPE_KEY
from sim.results import Move, Preempted, Scaled

Obj = Mapping[str, Any]


@dataclass
class JobLog:
    """One job's story so far."""

    admitted_s: float | None = None
    phase: str = ""
    reason: str = ""  # the Admission's last reason code (empty while it runs)
    message: str = ""  # and its words
    scales: list[Scaled] = field(default_factory=list)
    preemptions: list[Preempted] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    _last_scale: Obj | None = None
    _move_counts: dict[tuple[str, int], int] = field(default_factory=dict)


class PoolLog:
    """Watches the API server's Admissions; ``jobs[namespace/name]`` is each job's log.

    A job given a second life under the same name (deleted and created again) keeps one log:
    the simulator's job keys are unique within a run.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.jobs: dict[str, JobLog] = {}

    def watch(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        """An API server watcher: only Admission writes matter."""
        if tkey != TYPE_KEY or new is None:
            return
        spec = new.get("spec") or {}
        if old is not None and (old.get("spec") or {}) == spec:
            return
        job = spec.get("job") or {}
        key = f"{new['metadata'].get('namespace') or 'default'}/{job.get('name')}"
        self._note(self.jobs.setdefault(key, JobLog()), spec)

    def _note(self, log: JobLog, spec: Obj) -> None:
        now = self.clock()
        phase = str(spec.get("phase") or "")
        reason = str(spec.get("reason") or "")
        if phase == ADMITTED and log.admitted_s is None:
            log.admitted_s = now
        if log.phase == ADMITTED and phase != ADMITTED and reason == PREEMPTED:
            last = ((spec.get("service") or {}).get("lastPreemption")) or {}
            log.preemptions.append(
                Preempted(now, str(last.get("by") or ""), str(last.get("reason") or ""))
            )
        log.phase, log.reason, log.message = phase, reason, str(spec.get("message") or "")
        scale = spec.get("lastScale")
        if scale and scale != log._last_scale:
            log.scales.append(
                Scaled(
                    now,
                    int(scale.get("from") or 0),
                    int(scale.get("to") or 0),
                    str(scale.get("reason") or ""),
                )
            )
            log._last_scale = scale
        for m in spec.get("moves") or ():
            slot = (str(m.get("type") or ""), int(m.get("index") or 0))
            count = int(m.get("count") or 0)
            if count > log._move_counts.get(slot, 0):
                log._move_counts[slot] = count
                log.moves.append(
                    Move(
                        now,
                        f"{slot[0].lower()}-{slot[1]}",
                        str(m.get("from") or ""),
                        str(m.get("to") or ""),
                        str(m.get("reason") or ""),
                    )
                )
