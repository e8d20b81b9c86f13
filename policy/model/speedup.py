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

**Prior.** A job without readings gets ``PRIOR``: linear speed-up, in relative units, not
``informed``: an allocation rule must treat it exactly as it treats jobs today.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

from policy.model.bounds import OutOfBounds
from policy.model.jobs import Job
from policy.model.nnls import nnls
from policy.model.throughput import ANNOTATION, Config, History, Reading, parse

TERMS: tuple[str, ...] = ("compute", "overhead", "fanin", "spread", "remote", "psload", "ps")
# The order in which terms enter a fit: what the monitor sees change (where the workers
# are) before what can only be inferred (how the job scales). Two readings, two workers
# packed and three spread, say that spreading costs, not that the third worker adds nothing.
FIT_ORDER: tuple[int, ...] = (0, 3, 4, 1, 2, 5, 6)
Cached = Callable[[Hashable, Callable[[], "Speedup"]], "Speedup"]
OUTLIER = 0.3  # a reading this far off (relative), and 4x the median residual, is dropped


def features(c: Config) -> tuple[float, ...]:
    w, p = c.workers, max(c.ps, 1)
    return (1.0 / w, 1.0, float(w), 1.0 if c.spread else 0.0, c.remote / p, w / p, float(c.ps))


def grown(c: Config, remote: bool = False) -> Config:
    """``c`` with one more worker: on a node with a parameter server, or (``remote``) on a
    node of its own."""
    if remote:
        return Config(c.workers + 1, c.ps, c.remote + 1, c.nodes + 1)
    return Config(c.workers + 1, c.ps, c.remote, c.nodes)


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

    def throughput(self, c: Config) -> float:
        """Predicted global steps per second (relative units for the prior)."""
        t = sum(a * b for a, b in zip(self.theta, features(c), strict=True))
        return 1.0 / t if t > 0 else 0.0

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


def estimate(history: History | None) -> Speedup:
    """The job's model from its readings; ``PRIOR`` without any."""
    if history is None or not history.readings:
        return PRIOR
    kept = list(history.readings)
    dropped: list[Config] = []
    if len(kept) > len(_identifiable([r.config for r in kept])) + 1:
        # Each reading as the others predict it: one far off them is left out (once).
        apart = [_held_out_error(kept, i) for i in range(len(kept))]
        worst = max(range(len(kept)), key=lambda i: apart[i])
        typical = sorted(apart)[len(apart) // 2]
        if apart[worst] > OUTLIER and apart[worst] > 4 * max(typical, 0.01):
            dropped = [kept[worst].config]
            del kept[worst]
    theta, error = _fit(kept)
    return Speedup(
        theta=tuple(theta),
        seen=tuple(sorted(r.config for r in kept)),
        reports=sum(r.reports for r in kept),
        error=error,
        dropped=tuple(dropped),
        left_worker_s=history.left_worker_s(),
    )


def _held_out_error(readings: Sequence[Reading], i: int) -> float:
    """How far reading ``i`` is (relative) from what the others predict for it."""
    theta, _ = _fit([r for j, r in enumerate(readings) if j != i])
    t = sum(a * b for a, b in zip(theta, features(readings[i].config), strict=True))
    y = 1.0 / readings[i].steps_per_s
    return abs(t - y) / y


def _identifiable(configs: Sequence[Config]) -> list[int]:
    """The terms, in FIT_ORDER, that the distinct configurations can tell apart."""
    rows = [features(c) for c in sorted(set(configs))]
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


def _fit(readings: Sequence[Reading]) -> tuple[list[float], float]:
    """θ (by TERMS) and the weighted relative RMS residual."""
    terms = _identifiable([r.config for r in readings])
    rows, target = [], []
    for r in readings:
        y = 1.0 / r.steps_per_s  # seconds per step
        scale = math.sqrt(r.reports) / y  # relative error, weighted by minutes of reports
        x = features(r.config)
        rows.append([x[j] * scale for j in terms])
        target.append(y * scale)
    solved = nnls(rows, target)
    theta = [0.0] * len(TERMS)
    for j, v in zip(terms, solved, strict=True):
        theta[j] = v
    total = weight = 0.0
    for r in readings:
        y = 1.0 / r.steps_per_s
        t = sum(a * b for a, b in zip(theta, features(r.config), strict=True))
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
        try:
            out[job.key] = cached(("speedup", raw), partial(_from_text, raw))
        except OutOfBounds as err:
            problems.append(f"{job.kind.kind} {job.key}: its throughput is left out: {err}")
    return out


def _from_text(raw: str) -> Speedup:
    return estimate(parse(raw))
