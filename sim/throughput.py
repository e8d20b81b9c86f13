"""Simulated training jobs report their speed, as a real one does (docs/speedup.md).

Every ``report_every_s`` each job that trains reports its global steps per second: the
simulator's true rate (``sim.training``, from ``sim.pollux_model`` or the profiles) times a
log-normal measurement noise (``noise``, sigma of the log), plus, with probability
``outlier_share``, a wild value (``outlier_factor`` off: a garbage-collection pause, a slow
step); with ``progress``, a report also says how far the job is (its global step of the
steps it trains, exact: a training loop counts its steps). The reports go to the same
writer the Container Monitor runs (``monitor.throughput.JobWindow``); a window closes every
minute with the job's pods read from the API server (the monitor's list call, not charged:
it is served from the watch cache by the monitor's own client), and a history worth writing
is patched into the job's annotation ``dragonet.io/throughput`` through Metacontroller's
client (``sim.metacontroller.Client``): the write takes a token of the one 5 QPS budget
every writer shares, and the annotation change re-syncs the job and the pool as a real one
does. The planner sees the reports only there; it never sees the true rate.

Jobs in ``silent`` (keys ``namespace/name``) report nothing, as a job whose training code
does not.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from monitor.throughput import JobWindow, WriterRules, config_of
from policy.model.batch import GradStats
from policy.model.throughput import ANNOTATION, Config, Progress
from sim.apiserver import ApiServer
from sim.metacontroller import Client
from sim.training import PODS, Programs

Schedule = Callable[[float, Callable[[], None]], None]


@dataclass(frozen=True)
class ThroughputConfig:
    report_every_s: float = 10.0  # a real job's cadence (e.g. every 100 steps)
    noise: float = 0.05  # sigma of the log of a report's measurement error
    outlier_share: float = 0.0  # share of reports that are wild
    outlier_factor: float = 5.0  # how wild (x or / this)
    silent: frozenset[str] = frozenset()  # jobs that report nothing
    # Reports also say how far the job is (its global step of the steps it trains), as a
    # training loop with a step limit (TensorFlow's max_steps) knows.
    progress: bool = True
    rules: WriterRules = field(default_factory=WriterRules)


@dataclass
class Reporters:
    api: ApiServer
    schedule: Schedule
    programs: Programs
    client: Client
    config: ThroughputConfig = field(default_factory=ThroughputConfig)
    seed: int = 0
    # Whether every job of the run has finished (then the reports stop).
    all_done: Callable[[], bool] = lambda: False
    windows: dict[str, JobWindow] = field(default_factory=dict)
    reports: int = 0  # reports the jobs sent
    writes: int = 0  # annotation patches sent
    pod_lists: int = 0  # the writer's reads of a job's pods
    # The true rate at each report, by job and the configuration read at its window's
    # close: what tests and reports compare the planner's estimates with (never written).
    truth: dict[str, dict[Config, list[float]]] = field(default_factory=dict)
    _pending: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(f"throughput-{self.seed}")

    def start(self) -> None:
        self.schedule(self.config.report_every_s, self._tick)

    def _tick(self) -> None:
        now = self.api.clock()
        for key in sorted(self.programs.jobs):
            t = self.programs.jobs[key]
            if key in self.config.silent or t.finished_s is not None or t.rate <= 0:
                continue
            window = self.windows.setdefault(key, JobWindow(self.config.rules))
            batch = getattr(t.spec.profile, "batch_size", None)
            done = self.programs.progress_now(key, now)
            progress = None
            if self.config.progress:
                total = math.ceil(t.spec.steps)
                progress = Progress(min(int(done), total), total)
            rate, grad = t.rate, None
            if getattr(t.spec.profile, "adaptive", False):
                # Its steps (its progress is Pollux's), its batch, and what Pollux's agent
                # measures of its gradient.
                rate, batch = t.steps_rate, t.batch
                grad = GradStats(*t.spec.profile.grad_stats(batch, done))  # type: ignore[attr-defined]
            window.report(now, self._measured(rate), batch, progress, grad)
            self._pending.setdefault(key, []).append(rate)
            self.reports += 1
            if window.due(now):
                self._close(key, window, now)
        for key in [k for k in self.windows if self.programs.jobs[k].finished_s is not None]:
            del self.windows[key]
            self._pending.pop(key, None)  # its process is gone, and so is the monitor's record
        if not self.all_done():  # (jobs yet to arrive count: a lull is not the end)
            self.schedule(self.config.report_every_s, self._tick)

    def _measured(self, rate: float) -> float:
        c = self.config
        value = rate * self.rng.lognormvariate(0.0, c.noise)
        if c.outlier_share and self.rng.random() < c.outlier_share:
            value *= c.outlier_factor if self.rng.random() < 0.5 else 1 / c.outlier_factor
        return value

    def _close(self, key: str, window: JobWindow, now: float) -> None:
        self.pod_lists += 1
        pods = [
            p for k in sorted(self.programs.pods_of.get(key, ())) if (p := self.api.get(PODS, k))
        ]
        config = config_of(pods)
        rates = self._pending.pop(key, [])
        if config is not None and config == window.config and window.settled:
            self.truth.setdefault(key, {}).setdefault(config, []).extend(rates)
        history = window.close(now, config)
        if history is None:
            return
        kind = self.programs.jobs[key].spec.manifest["kind"]
        tkey = f"{kind}.kubeflow.org/v1"

        def patch() -> None:
            job = self.api.get(tkey, key)
            if job is None or job["metadata"].get("deletionTimestamp"):
                return
            meta = dict(job["metadata"])
            meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION: history.text()}
            self.api.patch(tkey, key, metadata=meta)
            window.wrote(history)
            self.writes += 1

        self.client.run([("update", patch)], now, lambda: None)
