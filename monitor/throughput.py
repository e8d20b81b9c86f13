"""From a training job's speed reports to the rare write of its throughput history.

One process of a job (its chief, or worker 0 without one) reports its global steps per
second every few seconds. The writer (the Container Monitor on that process's node, or
the simulator's stand-in, with this same code) keeps, per job, a :class:`JobWindow`:

* every ``window_s`` (60 s) it reads the job's pods (one list call) and closes the window:
  the reports of a window count only if the job ran in the same configuration (workers,
  parameter servers, their placement: :func:`config_of`) at the window's start, at its end
  and for a whole window before it (a new worker restores a checkpoint before it adds
  anything; a reading taken then would blame the configuration for the restart);
* a window of at least ``min_reports`` reports gives its median (one wild report moves
  nothing), clipped to finite positive values;
* every median joins the writer's own record per configuration, whose speed is the
  median of its last ``MAX_WEIGHT`` window medians (robust to a window that caught
  several wild reports); the job's history (``policy.model.throughput.History``) is
  written only when that says something new: a configuration never written, or a
  speed ``change`` (10 %) away from what the history holds, or twice the minutes behind
  it (the planner's confidence grows with them). A job that runs steadily is written at
  most four times per configuration (after 1, 2, 4 and 8 minutes of readings).

A report may also say how far the job is (``step`` of ``totalSteps``); that progress rides
on the history's writes, and is itself news once the steps left have fallen by a fifth
(``progress_change``) since the last write: about 10 more writes over a job's life.

So a job costs at most one write a minute, and about one per scaling action; its history
holds at most ``MAX_READINGS`` readings. Nothing here reads a clock or the network: the
caller passes the time and the pods.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from policy.model.batch import GradStats
from policy.model.cluster import L_TYPE
from policy.model.throughput import (
    MAX_READINGS,
    MAX_STEPS_PER_S,
    MAX_WEIGHT,
    Config,
    History,
    Progress,
    Reading,
)

PS_TYPES = ("ps", "server")  # a TFJob's parameter servers, an MXJob's servers
WORKER_TYPES = ("worker",)  # a chief trains too, but one report per job says the job's speed


@dataclass(frozen=True)
class WriterRules:
    window_s: float = 60.0  # how often a window closes (and at most how often one writes)
    min_reports: int = 3  # reports a window needs to say anything
    change: float = 0.10  # a relative change of a configuration's speed worth a write
    max_reports: int = 64  # reports kept per window (a job reporting faster is sampled)
    # Progress is written again once the steps left have fallen by this share since the
    # last write (with a reading's write, at most once a window): a job's rank by the
    # training it has left is then never more than this far off.
    progress_change: float = 0.2
    # The gradient noise scale is written again once it has moved by this share (it grows
    # as a job trains: Pollux's batch grows with it).
    grad_change: float = 0.25


def config_of(pods: Iterable[Mapping[str, Any]]) -> Config | None:
    """Where a job's running workers are, from its pods as the API serves them; None while
    none runs. A worker is *remote* on a node without a running parameter server."""
    running = [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
        and not (p.get("metadata") or {}).get("deletionTimestamp")
        and (p.get("spec") or {}).get("nodeName")
    ]

    def role(p: Mapping[str, Any]) -> str:
        return str(((p.get("metadata") or {}).get("labels") or {}).get(L_TYPE, ""))

    ps_nodes = {p["spec"]["nodeName"] for p in running if role(p) in PS_TYPES}
    workers = [p["spec"]["nodeName"] for p in running if role(p) in WORKER_TYPES]
    if not workers:
        return None
    remote = sum(1 for n in workers if ps_nodes and n not in ps_nodes)
    ps = sum(1 for p in running if role(p) in PS_TYPES)
    return Config(len(workers), ps, remote, len(set(workers)))


@dataclass
class JobWindow:
    """One job's reports since its window opened, and what it last wrote."""

    rules: WriterRules = field(default_factory=WriterRules)
    opened_s: float | None = None
    config: Config | None = None  # at the window's start
    settled: bool = False  # ``config`` also held for the whole window before this one
    speeds: deque[float] = field(default_factory=deque)
    written: History = field(default_factory=History)  # the history as last read or written
    loaded: bool = False  # ``written`` was read from the API (or written) since we started
    # The last ``MAX_WEIGHT`` window medians of each configuration (at most
    # ``MAX_READINGS`` configurations): what is written is their median, so neither a wild
    # window nor the window that happened to differ biases it.
    recent: dict[Config, deque[float]] = field(default_factory=dict)
    batch: int | None = None
    progress: Progress | None = None  # the latest report's
    grad: GradStats | None = None  # the latest report's gradient statistics

    def report(
        self,
        now: float,
        steps_per_s: float,
        batch: int | None = None,
        progress: Progress | None = None,
        grad: GradStats | None = None,
    ) -> None:
        """One report of the job's global steps per second (the caller checked the body).
        A job that reports its gradient's statistics (its batch is the pool's to choose)
        has a reading per batch it trained at."""
        if self.opened_s is None:
            self.opened_s = now
        if batch is not None:
            self.batch = batch
        if progress is not None:
            self.progress = progress
        if grad is not None:
            self.grad = grad
        if math.isfinite(steps_per_s) and 0 < steps_per_s <= MAX_STEPS_PER_S:
            self.speeds.append(steps_per_s)
            while len(self.speeds) > self.rules.max_reports:
                self.speeds.popleft()

    def due(self, now: float) -> bool:
        """The window is old enough to close (the caller then reads the pods)."""
        return self.opened_s is not None and now - self.opened_s >= self.rules.window_s

    def close(self, now: float, config: Config | None) -> History | None:
        """Close the window with the configuration read now: the history to write, or None
        when there is nothing new to say. Opens the next window."""
        if config is not None and self.grad is not None and self.batch is not None:
            config = replace(config, batch=self.batch)
        speeds = sorted(self.speeds)
        same = config is not None and config == self.config
        measured = same and self.settled and len(speeds) >= self.rules.min_reports
        self.settled = same
        self.config, self.opened_s = config, now
        self.speeds.clear()
        if not measured or config is None:
            return None
        recent = self.recent.pop(config, None) or deque(maxlen=MAX_WEIGHT)
        recent.append(_median(speeds))
        self.recent[config] = recent  # the most recent last
        while len(self.recent) > MAX_READINGS:
            del self.recent[next(iter(self.recent))]
        mean = Reading(config, _median(sorted(recent)), len(recent))
        known = self.written.get(config)
        new_batch = self.batch is not None and self.batch != self.written.batch
        close_to = known is not None and (
            abs(mean.steps_per_s - known.steps_per_s) <= self.rules.change * known.steps_per_s
        )
        firmer = known is not None and mean.reports >= 2 * known.reports
        news = new_batch or firmer or self._progressed() or self._grad_moved()
        if close_to and not news:
            return None
        history = self.written.put(mean).with_batch(self.batch).with_progress(self.progress)
        return history.with_grad(self.grad)

    def _grad_moved(self) -> bool:
        """The gradient noise scale moved by ``grad_change`` since the written one (or the
        job reported it for the first time)."""
        now, then = self.grad, self.written.grad
        if now is None:
            return False
        if then is None:
            return True
        a, b = now.noise_scale(1), then.noise_scale(1)
        if not (math.isfinite(a) and math.isfinite(b)):
            return a != b
        return abs(a - b) > self.rules.grad_change * max(b, 1e-12)

    def _progressed(self) -> bool:
        """The steps left fell by ``progress_change`` since the written progress (or the
        job said how far it is for the first time)."""
        now, then = self.progress, self.written.progress
        if now is None:
            return False
        if then is None or now.total != then.total:
            return True
        return then.left > 0 and now.left <= (1 - self.rules.progress_change) * then.left

    def wrote(self, history: History) -> None:
        """The history is now in the API (or was read from it)."""
        if not self.loaded:  # read from the API: what this writer knew before is older
            self.recent = {
                r.config: deque([r.steps_per_s] * r.reports, maxlen=MAX_WEIGHT)
                for r in history.readings
            }
        self.written, self.loaded = history, True


def _median(ordered: list[float]) -> float:
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
