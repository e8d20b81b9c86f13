"""Pollux's own model of its six applications, at a fixed global batch size.

Ported from Pollux's simulator (``petuum/adaptdl``, branch ``osdi21-artifact``,
``simulator/applications.py`` and ``simulator.py``'s ``Job``; Apache-2.0, Qiao et al.,
OSDI'21), so that Dragonet's simulator replays Pollux's workloads with the job sizes and
speeds Pollux's own simulator gives them. Its measurements are vendored under
``sim/data/pollux_throughput/<app>/`` (``placements.csv``, ``scalability.csv``,
``validation-<batch>.csv``). What is ported, for a job that keeps its row's ``batch_size``
(the "TunedJobs" baselines; no batch-size adaptation):

* **Throughput.** A step's time on a placement (GPUs per node) at a per-GPU batch: linear in
  the per-GPU batch between the measured ones when the placement was measured, else a
  linear interpolation over (nodes, GPUs, per-GPU batch) of the measured placements' means
  and ``scalability.csv`` (scipy's ``LinearNDInterpolator``, as Pollux). A per-GPU batch
  above ``max_local_bsz`` is split into gradient-accumulation steps, each costing the step's
  compute time (step time less all-reduce time).
* **Statistical efficiency.** Progress per step is ``gain = (var + sqr) / (var / scale +
  sqr)`` with ``scale = batch / init_batch`` and the gradient statistics of the epoch
  (interpolated between the validated batch sizes). The job is done after ``max_epochs``
  epochs of the progress the validation runs recorded.

With the batch fixed, ``gain`` depends on the epoch only, so the job's work is a number of
steps (``PolluxJob.steps``) and its speed on a placement ``1 / step time``: what
``sim.training`` runs. Where Dragonet places workers on more GPUs than the batch can use
(per-GPU batch below the smallest measured, or more nodes and GPUs than Pollux measured),
extra workers add nothing.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

import numpy as np
from scipy.interpolate import LinearNDInterpolator

from sim.spec import TrainingProfile

# Pollux restarts a job 30 s after each reallocation (simulator.py, Job.reallocate).
RESTART_S = 30.0
# Pollux's simulator interpolates over at most 16 nodes (its scalability profiles' range).
MAX_NODES = 16

# The TrainingPool spec of Pollux's Tiresias (simulator/tiresias.py): static sizes, two
# queues split at 16 GPU-hours attained (``_queue_threshold = 3600 * 16`` GPU-seconds), the
# jobs re-admitted in (queue, arrival) order every cycle, so a job preempts later arrivals
# of its own queue too, and no starvation guard (``_solve_starvation = 0``): a job may be
# preempted any number of times and is never promoted back to the first queue. It decides
# once a minute, as the simulator's ``Cluster.step(60)`` re-allocates (``decisionIntervalSeconds``).
# examples/pollux-tiresias-pool.yaml is the same pool.
TIRESIAS_POOL: Mapping[str, Any] = MappingProxyType(
    {
        "policy": "tiresias",
        "lasThresholdsGPUHours": [16.0],
        "lasPreemptLaterInQueue": True,
        "lasPromotion": False,
        "maxPreemptions": 1_000_000,
        "decisionIntervalSeconds": 60.0,
    }
)

# Pollux's per-application settings (applications.py, APPLICATIONS): epochs to train, and
# yolov3's largest per-GPU batch (the others: the largest measured).
MAX_EPOCHS: Mapping[str, int] = {
    "bert": 2, "cifar10": 100, "ncf": 10, "imagenet": 90, "deepspeech2": 80, "yolov3": 50,
}  # fmt: skip
MAX_LOCAL_BSZ: Mapping[str, int] = {"yolov3": 8}

Placement = tuple[int, ...]  # GPUs (workers) per node, nodes without any left out


@dataclass(frozen=True)
class Epoch:
    """One row of a ``validation-<batch>.csv``: what a run at that batch had after an epoch."""

    progress: float
    grad_sqr: float
    grad_var: float


class Application:
    """One of Pollux's applications: its measured throughput and validation runs."""

    def __init__(
        self,
        name: str,
        placements: Sequence[Mapping[str, str]],
        scalability: Sequence[Mapping[str, str]],
        validation: Mapping[int, Sequence[Epoch]],
        *,
        max_epochs: int,
        max_local_bsz: int | None = None,
    ) -> None:
        self.name = name
        self.validation = dict(sorted(validation.items()))
        self.init_batch_size = min(self.validation)
        self.max_batch_size = max(self.validation)
        self.max_epochs = max_epochs
        self._measured: dict[str, list[tuple[int, float, float]]] = {}
        for row in placements:
            point = (int(row["local_bsz"]), float(row["step_time"]), float(row["sync_time"]))
            self._measured.setdefault(row["placement"].strip(), []).append(point)
        for points in self._measured.values():
            points.sort()
        local = [b for points in self._measured.values() for b, _, _ in points]
        self.min_local_bsz = min(local)
        self.max_local_bsz = max_local_bsz or max(local)
        self._interpolator = _interpolator(self._measured, scalability)

    def step_time(self, placement: Placement, local_bsz: float) -> tuple[float, float]:
        """(step time, all-reduce time) in seconds: ``applications.get_throughput``."""
        placement = canonical(placement)
        measured = self._measured.get("".join(map(str, placement)))
        if measured is not None:
            xs = [b for b, _, _ in measured]
            step = float(np.interp(local_bsz, xs, [s for _, s, _ in measured]))
            sync = float(np.interp(local_bsz, xs, [s for _, _, s in measured]))
            return step, sync
        nodes = min(len(placement), MAX_NODES)
        step, sync = self._interpolator([nodes, sum(placement), local_bsz])[0]
        if not (math.isfinite(step) and math.isfinite(sync)):
            raise ValueError(
                f"{self.name}: placement {placement} at per-GPU batch {local_bsz} is outside "
                "Pollux's measurements"
            )
        return float(step), float(sync)

    def batch_split(self, batch_size: int, replicas: int) -> tuple[int, int]:
        """(per-GPU batch, accumulation steps) of a global batch: ``Job.update_local_bsz``."""
        local_bsz = math.ceil(batch_size / replicas - 1e-8)
        accum = math.ceil(local_bsz / self.max_local_bsz - 1e-8) - 1
        if replicas == 1 and batch_size > self.init_batch_size:
            accum = max(1, accum)
        atomic = math.ceil(local_bsz / (accum + 1) - 1e-8)
        atomic = min(atomic, int(self.max_batch_size / (replicas * (accum + 1))))
        return atomic, accum

    def iteration_time(self, placement: Placement, batch_size: int) -> float:
        """Seconds per step of ``batch_size`` on ``placement`` (accumulation included)."""
        replicas = sum(placement)
        atomic, accum = self.batch_split(batch_size, replicas)
        atomic = max(atomic, self.min_local_bsz)  # more workers than the batch can use
        step, sync = self.step_time(placement, atomic)
        return step + (step - sync) * accum

    def progress(self, epoch: int) -> float:
        """Progress needed to finish ``epoch`` epochs: ``Application.get_progress``."""
        if epoch == 0:
            return 0.0
        return min(runs[epoch - 1].progress for runs in self.validation.values())

    def gain(self, batch_size: float, epoch: int) -> float:
        """Progress per step at ``batch_size`` during ``epoch`` (statistical efficiency)."""
        sqr, var = self._grad_stats(batch_size, epoch)
        scale = batch_size / self.init_batch_size
        return (var + sqr) / (var / scale + sqr)

    def steps(self, batch_size: int, replicas: int) -> float:
        """Steps a job of ``batch_size`` trained on ``replicas`` GPUs needs to finish."""
        atomic, accum = self.batch_split(batch_size, replicas)
        actual = replicas * atomic * (accum + 1)
        return sum(
            (self.progress(e + 1) - self.progress(e)) / self.gain(actual, e)
            for e in range(self.max_epochs)
        )

    def _grad_stats(self, batch_size: float, epoch: int) -> tuple[float, float]:
        sizes = list(self.validation)
        if not sizes[0] <= batch_size <= sizes[-1]:
            raise ValueError(
                f"{self.name}: batch size {batch_size:g} outside the validated "
                f"{sizes[0]}..{sizes[-1]}"
            )
        lower = max(b for b in sizes if b <= batch_size)
        upper = min(b for b in sizes if b >= batch_size)
        lo, up = self.validation[lower][epoch], self.validation[upper][epoch]
        if lower == upper:
            return lo.grad_sqr, lo.grad_var
        w = (batch_size - lower) / (upper - lower)
        return (
            lo.grad_sqr + w * (up.grad_sqr - lo.grad_sqr),
            lo.grad_var + w * (up.grad_var - lo.grad_var),
        )


def canonical(placement: Sequence[int]) -> Placement:
    """Largest node first, then Pollux's normal form: the smallest rotation."""
    nodes = tuple(sorted((g for g in placement if g), reverse=True))
    if not nodes:
        raise ValueError("a placement needs at least one GPU")
    return min(nodes[i:] + nodes[:i] for i in range(len(nodes)))


def packed(gpus: int, per_node: int = 4) -> Placement:
    """``gpus`` on as few nodes of ``per_node`` GPUs as possible, fullest first."""
    full, rest = divmod(gpus, per_node)
    return (per_node,) * full + ((rest,) if rest else ())


def _interpolator(
    measured: Mapping[str, list[tuple[int, float, float]]], scalability: Sequence[Mapping[str, str]]
) -> LinearNDInterpolator:
    """Pollux's fallback for unmeasured placements: the measured placements' means per
    (nodes, GPUs, per-GPU batch), sorted as pandas' groupby does, then ``scalability.csv``."""
    groups: dict[tuple[int, int, int], list[tuple[float, float]]] = {}
    for placement, points in measured.items():
        key = (len(placement), sum(map(int, placement)))
        for bsz, step, sync in points:
            groups.setdefault((*key, bsz), []).append((step, sync))
    xs = [list(k) for k in sorted(groups)]
    ys = [[float(np.mean([v[i] for v in groups[k]])) for i in (0, 1)] for k in sorted(groups)]
    for row in scalability:
        xs.append([int(row["num_nodes"]), int(row["num_replicas"]), int(row["local_bsz"])])
        ys.append([float(row["step_time"]), float(row["sync_time"])])
    return LinearNDInterpolator(np.array(xs, dtype=float), np.array(ys, dtype=float))


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@cache
def application(name: str) -> Application:
    """Pollux's model of ``name``, read once from ``sim/data/pollux_throughput/<name>/``."""
    if name not in MAX_EPOCHS:
        raise KeyError(f"unknown application {name!r}; known: {', '.join(sorted(MAX_EPOCHS))}")
    folder = resources.files("sim") / "data" / "pollux_throughput" / name
    validation = {}
    for item in folder.iterdir():
        stem = item.name.removesuffix(".csv")
        if stem.startswith("validation-"):
            rows = _csv(item.read_text(encoding="utf-8"))
            validation[int(stem.split("-")[1])] = [
                Epoch(float(r["progress"]), float(r["grad_sqr"]), float(r["grad_var"]))
                for r in rows
            ]
    return Application(
        name,
        _csv((folder / "placements.csv").read_text(encoding="utf-8")),
        _csv((folder / "scalability.csv").read_text(encoding="utf-8")),
        validation,
        max_epochs=MAX_EPOCHS[name],
        max_local_bsz=MAX_LOCAL_BSZ.get(name),
    )


@dataclass(frozen=True)
class PolluxProfile(TrainingProfile):
    """A job of one application at a fixed global batch, timed by Pollux's model.

    Its speed is one step per ``Application.iteration_time`` of the workers' placement (GPUs
    per node; all-reduce, so where the parameter servers run does not matter), and every
    worker starts ``RESTART_S`` after its pod does, as Pollux charges each reallocation.
    """

    batch_size: int = 1
    restore_s: float = RESTART_S
    saves_on_stop: bool = True  # Pollux's simulator loses no progress on preemption
    contention: float = 0.0
    remote_factor: float = 1.0

    def rate_on(self, placement: Sequence[int], local: int, remote: int, ps: int) -> float:
        if not any(placement):
            return 0.0
        return 1.0 / _iteration_time(self.name, canonical(placement), self.batch_size)

    def rate(self, local: int, remote: int, ps: int) -> float:
        """Steps per second on as few nodes as hold ``local + remote`` workers."""
        n = local + remote
        return self.rate_on(packed(n), local, remote, ps) if n else 0.0


@cache
def _iteration_time(app: str, placement: Placement, batch_size: int) -> float:
    """Beyond Pollux's measurements (more than 16 nodes or 64 GPUs), a worker adds nothing:
    the time of the same placement less its last workers."""
    model = application(app)
    while True:
        try:
            return model.iteration_time(placement, batch_size)
        except ValueError:
            if sum(placement) <= 1:
                raise
            smaller = sorted(placement, reverse=True)
            smaller[-1] -= 1
            placement = canonical(smaller)


@cache
def pollux_profile(app: str, batch_size: int) -> PolluxProfile:
    """The profile of a job of ``app`` at global batch ``batch_size`` (checked here)."""
    model = application(app)
    if not model.init_batch_size <= batch_size <= model.max_batch_size:
        raise ValueError(
            f"{app}: batch_size {batch_size} outside Pollux's validated "
            f"{model.init_batch_size}..{model.max_batch_size}"
        )
    return PolluxProfile(name=app, step_time_s=1.0, batch_size=batch_size)


def isolated_gpu_hours(app: str, batch_size: int, replicas: int) -> float:
    """GPU-hours a job takes alone, packed, at its batch size (Pollux's model, no restart)."""
    model = application(app)
    place = packed(replicas)
    return (
        model.steps(batch_size, replicas)
        * model.iteration_time(place, batch_size)
        * (replicas / 3600.0)
    )


def declared_range(app: str) -> tuple[int, int]:
    """The batch sizes a job of ``app`` declares under ``--adaptive-batch``: the artifact's
    bounds (``Application.init_batch_size`` .. ``max_batch_size``), but ncf, which Pollux's
    simulator runs at 32,768 whatever it is given (simulator.py ``Cluster.__init__``, lines
    190-192: ``job.target_batch_size = 32768``)."""
    if app == "ncf":
        return (32768, 32768)
    model = application(app)
    return (model.init_batch_size, model.max_batch_size)


def max_replicas(app: str) -> int:
    """Pollux's bound on a job's replicas (simulator.py ``get_pollux_job_info``, lines
    328-333): 64, and no more than its largest batch over its smallest per-GPU batch; ncf 1."""
    if app == "ncf":
        return 1
    model = application(app)
    return min(64, model.max_batch_size // model.min_local_bsz)


@dataclass(frozen=True)
class AdaptiveProfile(PolluxProfile):
    """A job of one application that trains at the batch its pods were given
    (``DRAGONET_BATCH_SIZE_PER_REPLICA``), as Pollux's simulator trains a job whose batch
    Pollux chooses (``Job.step``, simulator.py lines 110-156): its progress is counted in
    Pollux's units (``Application.progress``; the job is done at ``progress(max_epochs)``),
    and a step of global batch ``B`` on a placement takes ``iteration_time`` and is worth
    ``gain(B, epoch)`` of progress, the epoch read from the progress made. The global batch
    is what its running workers were given, added up (each started with its share)."""

    adaptive: bool = True

    def total(self) -> float:
        model = application(self.name)
        return model.progress(model.max_epochs)

    def epoch(self, progress: float) -> int:
        model = application(self.name)
        p = progress * (1 + 1e-12) + 1e-9  # reached (floating point)
        e = 0
        while e < model.max_epochs - 1 and model.progress(e + 1) <= p:
            e += 1
        return e

    def next_change(self, progress: float) -> float | None:
        """The progress at which the epoch (so the gain) changes next."""
        model = application(self.name)
        e = self.epoch(progress)
        return model.progress(e + 1) if e + 1 < model.max_epochs else None

    def global_batch(self, shares: Sequence[int | None]) -> int:
        model = application(self.name)
        lo, hi = declared_range(self.name)
        given = sum(s for s in shares if s) or lo
        return max(model.init_batch_size, min(max(given, lo), hi, model.max_batch_size))

    def adaptive_rate(
        self, placement: Sequence[int], shares: Sequence[int | None], progress: float
    ) -> tuple[float, float, int]:
        """(progress per second, steps per second, the global batch) of workers placed
        ``placement`` (GPUs per node), given the per-replica batches ``shares``."""
        if not any(placement):
            return 0.0, 0.0, 0
        batch = self.global_batch(shares)
        seconds = _iteration_time(self.name, canonical(placement), batch)
        gain = application(self.name).gain(batch, self.epoch(progress))
        return gain / seconds, 1.0 / seconds, batch

    def grad_stats(self, batch: int, progress: float) -> tuple[float, float]:
        """(grad_sqr, grad_var) a job at ``batch`` measures now: what Pollux's simulator
        hands its agent (``get_grad_stats``, simulator.py line 123), the variance at the
        smallest batch the job declares (ncf's 32,768: the artifact's, at its 256, divided
        by 128, as a mean over 128 times the examples)."""
        model = application(self.name)
        clamped = min(max(batch, model.init_batch_size), model.max_batch_size)
        sqr, var = model._grad_stats(clamped, self.epoch(progress))
        return sqr, var * model.init_batch_size / declared_range(self.name)[0]


@cache
def adaptive_profile(app: str) -> AdaptiveProfile:
    lo, _ = declared_range(app)
    return AdaptiveProfile(name=app, step_time_s=1.0, batch_size=lo)
