"""Batch sizes a job can take: its declaration, and Pollux's choice of batch for a size.

A TFJob or MXJob may declare that it trains at whatever global batch size the pool
chooses within a range it states: the annotation ``dragonet.io/batch-size: "MIN-MAX"``
(``BatchRange``). ``MIN`` is the batch it would train at alone (Pollux's
``init_batch_size``, to which its learning rate is tuned and its gradient statistics are
normalised); ``MAX`` the largest it can take (Pollux's ``max_batch_size``). A job that
declares nothing keeps its batch: nothing here applies to it.

The choice is Pollux's (Qiao et al., OSDI'21, §3.2), ported from
``petuum/adaptdl`` ``simulator/goodput.py`` at ``osdi21-artifact`` c793c70 (Apache-2.0):

* ``efficiency`` is ``GoodputFunction.efficiency`` (lines 81-89): the statistical
  efficiency of a batch, from the gradient's squared norm and variance the job measured
  (Pollux's agent's ``grad_sqr``, ``grad_var``, the variance of a gradient of ``MIN``
  examples), ``(PGNS + MIN) / (PGNS + batch)`` with ``PGNS = var / sqr * MIN``.
* ``optimize`` is ``GoodputFunction.optimize`` (lines 91-145) for one configuration:
  50 candidate global batches in geometric space from ``max(MIN, min_local * replicas)``
  to ``MAX`` (``np.geomspace``'s default of 50), each split evenly over the replicas
  (``ceil(batch / replicas)`` per replica), the goodput (examples per second times
  efficiency) of each evaluated, and the first best kept. Without accumulation steps:
  whether a replica's share fits its memory at once is the training program's business
  (``DRAGONET_BATCH_SIZE_PER_REPLICA``, ``docs/speedup.md``), not the pool's.
* Without gradient statistics each replica trains at ``MIN``, the global batch ``MIN``
  times the replicas (within ``MAX``): the linear scaling rule data-parallel jobs are
  commonly started with (Goyal et al., 2017). Pollux starts such a job at
  ``max(init_batch_size, min_local_bsz * replicas)`` (``simulator.py``,
  ``Job.update_local_bsz``, lines 69-70), knowing each GPU's smallest efficient batch,
  which a declaration does not say; ``MIN`` split over the replicas measured 15 % slower
  on Pollux's workload 1 (its first 30 jobs, ``benchmarks/README.md``), a worker's share
  being then too small to keep its GPU busy.

Pure: the throughput comes in as a function (``policy.model.speedup`` gives it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from policy.model.bounds import OutOfBounds

ANNOTATION = "dragonet.io/batch-size"
# What a declaring job's pods read at start (docs/speedup.md): the global batch the pool
# chose and each worker's share of it.
BATCH_ENV = "DRAGONET_BATCH_SIZE"
BATCH_PER_REPLICA_ENV = "DRAGONET_BATCH_SIZE_PER_REPLICA"
# The largest global batch a job may declare: 2^20 examples per step, beyond any published
# large-batch run (Goyal et al. 8k, You et al. 32k-64k), so arithmetic on it stays exact.
MAX_BATCH = 1 << 20
CANDIDATES = 50  # np.geomspace's default, as GoodputFunction.optimize samples
_RANGE = re.compile(r"^\s*(\d{1,7})\s*-\s*(\d{1,7})\s*$")
_EPS = 1e-8  # goodput.py's tolerance for floor/ceil


@dataclass(frozen=True)
class BatchRange:
    """The global batch sizes a job can train at (both ends included)."""

    minimum: int
    maximum: int

    def text(self) -> str:
        return f"{self.minimum}-{self.maximum}"


@dataclass(frozen=True)
class GradStats:
    """What Pollux's agent measures of the gradient: its squared norm and its variance at
    the job's smallest batch (``GradParams(sqr, var)``, goodput.py line 52)."""

    sqr: float
    var: float

    def noise_scale(self, init_batch: int) -> float:
        """The gradient noise scale (PGNS), in examples."""
        return self.var / self.sqr * init_batch if self.sqr > 0 else math.inf


@dataclass(frozen=True)
class Choice:
    """A batch chosen for a configuration: the global batch, each replica's share, and
    the goodput it promises (examples per second times efficiency)."""

    size: int
    per_replica: int
    goodput: float


def parse_range(raw: object) -> BatchRange:
    """``"MIN-MAX"`` (whole numbers, 1 <= MIN <= MAX <= ``MAX_BATCH``); ``OutOfBounds``
    naming the annotation otherwise."""
    where = f"metadata.annotations[{ANNOTATION!r}]"
    if not isinstance(raw, str):
        raise OutOfBounds(f'{where} must be a string like "64-1024"')
    m = _RANGE.match(raw)
    if m is None:
        raise OutOfBounds(
            f'{where} is {raw!r}; give the smallest and largest global batch as "MIN-MAX" '
            f'(whole numbers, e.g. "64-1024")'
        )
    lo, hi = int(m.group(1)), int(m.group(2))
    if lo < 1 or hi > MAX_BATCH:
        raise OutOfBounds(f"{where} is {raw!r}; each end must lie in 1..{MAX_BATCH}")
    if lo > hi:
        raise OutOfBounds(f"{where} is {raw!r}; MIN ({lo}) is greater than MAX ({hi})")
    return BatchRange(lo, hi)


def declared(annotations: Mapping[str, str]) -> BatchRange | None:
    """The job's declared range, None if it declares none (``OutOfBounds`` if unreadable)."""
    raw = annotations.get(ANNOTATION)
    return None if raw is None else parse_range(raw)


def efficiency(grad: GradStats, init_batch: int, batch: float) -> float:
    """Progress per example at ``batch`` relative to ``init_batch`` (1 there, falling as
    the batch grows past the gradient noise scale): ``GoodputFunction.efficiency``."""
    scale = batch / init_batch
    denom = grad.var / scale + grad.sqr
    gain = (grad.var + grad.sqr) / denom if denom > 0 else 1.0
    return gain / scale


def gain(grad: GradStats, init_batch: int, batch: float) -> float:
    """Progress per step at ``batch``, in steps at ``init_batch`` (Pollux's ``gain``)."""
    return efficiency(grad, init_batch, batch) * batch / init_batch


def candidates(lo: float, hi: float, n: int = CANDIDATES) -> list[float]:
    """``np.geomspace(lo, hi, n)``."""
    if n == 1 or hi == lo:
        return [float(lo)] * n
    ratio = math.log(hi / lo) / (n - 1)
    out = [lo * math.exp(ratio * i) for i in range(n)]
    out[0], out[-1] = float(lo), float(hi)
    return out


def optimize(
    examples_per_s: Callable[[int], float],
    replicas: int,
    declared: BatchRange,
    grad: GradStats | None,
    min_local: int = 1,
) -> Choice:
    """The global batch of the best goodput for ``replicas`` replicas in one configuration
    (``examples_per_s(batch)``: the job's throughput there at that global batch).

    ``GoodputFunction.optimize`` (goodput.py lines 91-145) without accumulation; the
    batch actually used is ``replicas * ceil(batch / replicas)`` (line 128), kept within
    ``MAX`` as ``Job.update_local_bsz`` does (simulator.py lines 82-83)."""
    replicas = max(replicas, 1)
    init, top = declared.minimum, declared.maximum
    if grad is None:  # each worker at MIN (within MAX): the linear scaling rule
        per = max(min(init, top // replicas), 1)
        return Choice(per * replicas, per, examples_per_s(per * replicas))
    lo = max(init, min_local * replicas)
    if lo > top:  # more replicas than the largest batch can feed: the largest
        per = max(top // replicas, 1)
        size = per * replicas
        return Choice(size, per, examples_per_s(size) * efficiency(grad, init, size))
    best: Choice | None = None
    for b in candidates(lo, top):
        per = math.ceil(b / replicas - _EPS)
        per = min(per, top // replicas) if top >= replicas else 1
        size = per * replicas
        value = examples_per_s(size) * efficiency(grad, init, size) if size >= init else 0.0
        if best is None or value > best.goodput:
            best = Choice(size, per, value)
    assert best is not None
    return best
