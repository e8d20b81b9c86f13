"""Each job's throughput model, learned from what it reported (``policy.model.throughput``):
what the allocation rule asks before it gives a job another worker or packs it.

The model is Optimus's (Peng et al., EuroSys'18, §4.2) for parameter-server training at a
fixed global batch, with Pollux's placement term (Qiao et al., OSDI'21, §3.1: a job whose
replicas cross nodes pays a slower synchronisation). Seconds per global step, for ``w``
workers, ``p`` parameter servers, ``r`` of the workers on a node without one:

    1/f = θ_compute/w + θ_overhead + θ_fanin·w + θ_spread·[spread] + θ_remote·r/max(p,1)
          + θ_psload·w/max(p,1) + θ_ps·p            (every θ ≥ 0)

fitted by non-negative least squares (``policy.model.nnls``) on relative errors, each
reading weighted by the minutes behind it. Non-negative terms keep every fit physical:
``f(w)/w`` never grows with ``w`` (no super-linear speed-up), and spreading never helps.

**Only what the readings can tell.** A term enters the fit only if the configurations seen
can tell it from the terms before it, in ``FIT_ORDER``: readings at one worker count fit
``θ_compute`` alone (linear speed-up through the one point measured); a spread placement
adds the placement terms (what the monitor sees change comes first); a second worker count
the fixed overhead (Amdahl's law), a third the growing fan-in.

**Outliers.** Each reading is already a median of a minute of reports. With more readings
than terms plus one, each reading is compared with what the others predict for it; the one
farthest off is left out if it is more than ``OUTLIER`` (relative) and four times the
typical such distance away (once: a second wild reading among sixteen is a drifting job,
and the fit's residual says so).

**A job whose batch the pool chooses** gets Pollux's own step-time model instead
(``policy.model.perf_params``: compute linear in each worker's batch, network by link and
replicas, overlapped by a p-norm), fitted as Pollux fits it: a linear extrapolation from
the shares measured mispredicts the batch of best goodput.

**Prior.** A job without readings gets ``PRIOR``: linear speed-up, in relative units, not
``informed``: an allocation rule must treat it exactly as it treats jobs today.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from policy.model.batch import BatchRange, Choice, GradStats, efficiency, gain, optimize
from policy.model.bounds import OutOfBounds
from policy.model.jobs import Job
from policy.model.nnls import nnls
from policy.model.perf_params import PerfParams, Sample, step_time
from policy.model.perf_params import fit as fit_perf
from policy.model.throughput import ANNOTATION, Config, History, Reading, parse

TERMS: tuple[str, ...] = ("compute", "overhead", "fanin", "spread", "remote", "psload", "ps")
# The order in which terms enter a fit: what the monitor sees change (where the workers
# are) before what can only be inferred (how the job scales). Two readings, two workers
# packed and three spread, say that spreading costs, not that the third worker adds nothing.
FIT_ORDER: tuple[int, ...] = (0, 3, 4, 1, 2, 5, 6)
Cached = Callable[[Hashable, Callable[[], "Speedup"]], "Speedup"]
OUTLIER = 0.3  # a reading this far off (relative), and 4x the median residual, is dropped


def features(c: Config, ref: int = 0) -> tuple[float, ...]:
    """The terms' factors at ``c``. For a job whose batch the pool chooses, compute grows
    with each worker's share of the batch: ``(batch / ref) / w``, ``ref`` the history's
    reference batch (0, or a reading without a batch: the reference itself)."""
    w, p = c.workers, max(c.ps, 1)
    share = (c.batch / ref if c.batch and ref else 1.0) / w
    return (share, 1.0, float(w), 1.0 if c.spread else 0.0, c.remote / p, w / p, float(c.ps))


def grown(c: Config, remote: bool = False) -> Config:
    """``c`` with one more worker: on a node with a parameter server, or (``remote``) on a
    node of its own."""
    if remote:
        return replace(c, workers=c.workers + 1, remote=c.remote + 1, nodes=c.nodes + 1)
    return replace(c, workers=c.workers + 1)


@dataclass(frozen=True)
class Speedup:
    """A job's fitted model, or the prior (``informed`` False)."""

    theta: tuple[float, ...]  # seconds per step, by TERMS (0 for a term not fitted)
    seen: tuple[Config, ...] = ()  # the configurations the fit rests on
    reports: int = 0  # minutes of reports behind it
    error: float = 0.0  # relative RMS residual of the fit
    dropped: tuple[Config, ...] = ()  # readings left out as outliers
    informed: bool = field(default=True)
    # Worker-seconds of training left, by the job's last progress report (None: it never
    # said how far it is): what orders jobs shortest-remaining first.
    left_worker_s: float | None = None
    # A job whose batch the pool chooses: the batch the compute term is relative to (0:
    # its readings carry none), and its gradient's statistics as last reported.
    ref_batch: int = 0
    grad: GradStats | None = None
    # Its Pollux step-time model (a job whose readings all carry a batch); None: ``theta``.
    perf: PerfParams | None = None

    def throughput(self, c: Config) -> float:
        """Predicted global steps per second (relative units for the prior)."""
        if self.perf is not None:
            return 1.0 / _perf_step_s(self.perf, c, self.ref_batch)
        t = sum(a * b for a, b in zip(self.theta, features(c, self.ref_batch), strict=True))
        return 1.0 / t if t > 0 else 0.0

    def best_batch(self, c: Config, declared: BatchRange) -> Choice:
        """The global batch of the best goodput at ``c`` (``policy.model.batch.optimize``,
        Pollux's ``GoodputFunction.optimize``), and that goodput (examples per second
        times statistical efficiency; relative units for the prior)."""
        return optimize(
            lambda b: self.throughput(replace(c, batch=b)) * b, c.workers, declared, self.grad
        )

    def goodput(self, c: Config, size: int, declared: BatchRange) -> float:
        """Goodput at ``c`` training at the global batch ``size`` (examples per second
        times statistical efficiency; the speed alone without gradient statistics)."""
        speed = self.throughput(replace(c, batch=size)) * size
        return speed if self.grad is None else speed * efficiency(self.grad, declared.minimum, size)

    def goodput_gain(self, before: Config, after: Config, declared: BatchRange) -> float | None:
        """How much more goodput ``after`` gives than ``before``, each at its best batch,
        relatively; None when ``before`` has none."""
        here = self.best_batch(before, declared).goodput
        return self.best_batch(after, declared).goodput / here - 1.0 if here > 0 else None

    def speedup(self, c: Config) -> float:
        """Throughput at ``c`` over one worker's next to its parameter servers: comparable
        between jobs (a job that scales perfectly has speed-up ``w``)."""
        one = self.throughput(Config(1, c.ps))
        return self.throughput(c) / one if one > 0 else 0.0

    def relative_gain(self, before: Config, after: Config) -> float | None:
        """How much faster ``after`` is than ``before``, relatively (0.25: a quarter
        faster; negative: slower); None when ``before`` has no speed to compare with."""
        here = self.throughput(before)
        return self.throughput(after) / here - 1.0 if here > 0 else None


PRIOR = Speedup(theta=(1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), informed=False)


def estimate(history: History | None, init_batch: int | None = None) -> Speedup:
    """The job's model from its readings; ``PRIOR`` without any. ``init_batch``: the
    smallest batch of a job whose batch the pool chooses (its progress is counted in steps
    of that batch)."""
    if history is None or not history.readings:
        return PRIOR
    kept = list(history.readings)
    batches = sorted({r.config.batch for r in kept if r.config.batch})
    ref = batches[0] if batches else 0
    if ref and all(r.config.batch for r in kept):
        return _pollux(history, ref, init_batch)
    dropped: list[Config] = []
    if len(kept) > len(_identifiable([r.config for r in kept], ref)) + 1:
        # Each reading as the others predict it: one far off them is left out (once).
        apart = [_held_out_error(kept, i, ref) for i in range(len(kept))]
        worst = max(range(len(kept)), key=lambda i: apart[i])
        typical = sorted(apart)[len(apart) // 2]
        if apart[worst] > OUTLIER and apart[worst] > 4 * max(typical, 0.01):
            dropped = [kept[worst].config]
            del kept[worst]
    theta, error = _fit(kept, ref)
    if ref and len({r.config.batch / r.config.workers for r in kept if r.config.batch}) == 1:
        # One per-worker batch measured: half its compute counts as a fixed cost per step,
        # which makes a larger batch look cheaper per example (Pollux's prior:
        # goodput.py fit_perf_params, lines 173-180, alpha_c fixed at half the time).
        share = next(r.config.batch / r.config.workers for r in kept if r.config.batch) / ref
        half = theta[0] / 2
        theta[0], theta[1] = half, theta[1] + half * share
    return Speedup(
        theta=tuple(theta),
        seen=tuple(sorted(r.config for r in kept)),
        reports=sum(r.reports for r in kept),
        error=error,
        dropped=tuple(dropped),
        left_worker_s=_left(history, init_batch),
        ref_batch=ref,
        grad=history.grad,
    )


def _left(history: History, init_batch: int | None) -> float | None:
    """Worker-seconds of training left, by the last progress report."""
    left = history.left_worker_s()
    last = history.readings[-1]
    if left is not None and history.grad is not None and init_batch and last.config.batch:
        # Its progress counts steps of its smallest batch; a step of its batch is worth more.
        left /= gain(history.grad, init_batch, last.config.batch)
    return left


def _perf_step_s(perf: PerfParams, c: Config, ref: int) -> float:
    """Seconds per step at ``c`` by Pollux's model (a configuration without a batch: the
    reference batch)."""
    return step_time(perf, c.spread, c.workers, (c.batch or ref) / c.workers)


def _pollux(history: History, ref: int, init_batch: int | None) -> Speedup:
    """A job whose batch the pool chooses: Pollux's model fitted to every reading (Pollux
    drops none; each reading is already a median)."""
    readings = history.readings
    perf = fit_perf(
        [
            Sample(
                r.config.spread,
                r.config.workers,
                r.config.batch / r.config.workers,
                1 / r.steps_per_s,
            )
            for r in readings
        ]
    )
    total = weight = 0.0
    for r in readings:
        y = 1.0 / r.steps_per_s
        e = (_perf_step_s(perf, r.config, ref) - y) / y
        total += r.reports * e * e
        weight += r.reports
    return Speedup(
        theta=PRIOR.theta,
        seen=tuple(sorted(r.config for r in readings)),
        reports=sum(r.reports for r in readings),
        error=math.sqrt(total / weight),
        left_worker_s=_left(history, init_batch),
        ref_batch=ref,
        grad=history.grad,
        perf=perf,
    )


def _held_out_error(readings: Sequence[Reading], i: int, ref: int = 0) -> float:
    """How far reading ``i`` is (relative) from what the others predict for it."""
    theta, _ = _fit([r for j, r in enumerate(readings) if j != i], ref)
    t = sum(a * b for a, b in zip(theta, features(readings[i].config, ref), strict=True))
    y = 1.0 / readings[i].steps_per_s
    return abs(t - y) / y


def _identifiable(configs: Sequence[Config], ref: int = 0) -> list[int]:
    """The terms, in FIT_ORDER, that the distinct configurations can tell apart."""
    rows = [features(c, ref) for c in sorted(set(configs))]
    basis: list[list[float]] = []
    chosen: list[int] = []
    for j in FIT_ORDER:
        v = [row[j] for row in rows]
        norm0 = math.sqrt(sum(x * x for x in v))
        if norm0 == 0.0:
            continue
        for q in basis:
            d = sum(a * b for a, b in zip(q, v, strict=True))
            v = [a - d * b for a, b in zip(v, q, strict=True)]
        norm = math.sqrt(sum(x * x for x in v))
        if norm > 1e-9 * norm0:
            basis.append([x / norm for x in v])
            chosen.append(j)
    return chosen


def _fit(readings: Sequence[Reading], ref: int = 0) -> tuple[list[float], float]:
    """θ (by TERMS) and the weighted relative RMS residual."""
    terms = _identifiable([r.config for r in readings], ref)
    rows, target = [], []
    for r in readings:
        y = 1.0 / r.steps_per_s  # seconds per step
        scale = math.sqrt(r.reports) / y  # relative error, weighted by minutes of reports
        x = features(r.config, ref)
        rows.append([x[j] * scale for j in terms])
        target.append(y * scale)
    solved = nnls(rows, target)
    theta = [0.0] * len(TERMS)
    for j, v in zip(terms, solved, strict=True):
        theta[j] = v
    total = weight = 0.0
    for r in readings:
        y = 1.0 / r.steps_per_s
        t = sum(a * b for a, b in zip(theta, features(r.config, ref), strict=True))
        e = abs(t - y) / y
        total += r.reports * e * e
        weight += r.reports
    return theta, math.sqrt(total / weight)


def of_jobs(jobs: Iterable[Job], cached: Cached, problems: list[str]) -> dict[str, Speedup]:
    """Each reporting job's model, by job key (``cached(key, make)``: once per history,
    ``policy.memo.Memo.get``). A job that reports nothing has none; one whose history
    cannot be believed has none either, and ``problems`` says why."""
    out: dict[str, Speedup] = {}
    for job in jobs:
        raw = job.annotations.get(ANNOTATION)
        if raw is None:
            continue
        init = job.batch_range.minimum if job.batch_range is not None else None
        try:
            out[job.key] = cached(("speedup", raw, init), partial(_from_text, raw, init))
        except OutOfBounds as err:
            problems.append(f"{job.kind.kind} {job.key}: its throughput is left out: {err}")
    return out


def _from_text(raw: str, init_batch: int | None = None) -> Speedup:
    return estimate(parse(raw), init_batch)
