"""The batch written into the Admission of a job that declares the batch sizes it can take
(``dragonet.io/batch-size``): the best goodput's for the size and placement the pool gave
it (``Speedup.best_batch``: Pollux's ``GoodputFunction.optimize``), taken when it pays.

Its pods read their share of the batch once, at start (``DRAGONET_BATCH_SIZE_PER_REPLICA``),
and a training pod started with another share than the Admission's is restarted by the
job's sync to read the new one (``policy.job.sync``; parameter servers keep running). So:

* **When every pod starts** (the job is admitted, again after a preemption): the best batch
  for its size and placement (``MIN`` split over the workers before it reports its
  gradient, as Pollux's ``Job.update_local_bsz``).
* **While it runs** (any size, a resize included): its workers keep their share, the global
  batch being that share times its workers (kept within its range), unless the best batch
  promises more goodput by at least ``minGainPerWorker`` and the time that saves over the
  training it has left pays for restarting its workers (``restartSeconds``):
  ``left x gain / (1 + gain) > restart``. The training left is what its progress reports
  say (at its latest speed), else what the pool assumes of a job that does not say
  (``UNMEASURED_LEFT_S`` worker-seconds). Pollux re-chooses the batch at every step for
  free (adaptdl's data loader changes it in place: ``simulator.py`` ``Job.step`` calls
  ``update_local_bsz``); a pod that reads an environment variable must restart, so a
  change is charged as growth is (``policy.pool.goodput``).
* Without gradient statistics the running share is kept: no restart without evidence.

A job that declares nothing gets no batch: it keeps its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policy.model.admission import BatchSize, Placement
from policy.model.batch import BatchRange
from policy.model.jobs import WORKER, Job
from policy.model.speedup import PRIOR, Speedup
from policy.model.throughput import Config
from policy.pool.attained_service import UNMEASURED_LEFT_S

PS_TYPES = ("PS", "Server")


@dataclass(frozen=True)
class Terms:
    """What a change of a running job's batch is weighed with (the pool's spec)."""

    restart_s: float = 30.0  # restartSeconds: a restarted worker trains again after this
    min_gain: float = 0.05  # minGainPerWorker: less than this is noise, not a reason


def chosen_batch(
    job: Job,
    model: Speedup | None,
    placements: Mapping[tuple[str, int], Placement],
    workers: int,
    running: BatchSize | None,
    terms: Terms = Terms(),
) -> BatchSize | None:
    """The batch for ``job`` admitted with ``workers`` workers at ``placements``;
    ``running``: the batch its Admission gave the pods that run now (None: every pod
    starts)."""
    if job.batch_range is None or workers < 1:
        return None
    model = model or PRIOR
    config = _config(placements, workers)
    best = model.best_batch(config, job.batch_range)
    fresh = BatchSize(size=best.size, per_replica=best.per_replica)
    if running is None:
        return fresh
    keep = _kept(running.per_replica, workers, job.batch_range)
    if keep is None:  # its share no longer fits the range at this size
        return fresh
    if model.grad is None or (keep.size, keep.per_replica) == (fresh.size, fresh.per_replica):
        return keep
    now = model.goodput(config, keep.size, job.batch_range)
    if now <= 0:
        return fresh
    gain = best.goodput / now - 1.0
    left = model.left_worker_s if model.left_worker_s is not None else UNMEASURED_LEFT_S
    saved = left / workers * gain / (1.0 + gain)
    return fresh if gain >= terms.min_gain and saved > terms.restart_s else keep


def _kept(share: int, workers: int, declared: BatchRange) -> BatchSize | None:
    """The batch of ``workers`` workers each at ``share``, None outside the range."""
    size = share * workers
    if not declared.minimum <= size <= declared.maximum:
        return None
    return BatchSize(size=size, per_replica=share)


def _config(placements: Mapping[tuple[str, int], Placement], workers: int) -> Config:
    ps_nodes = {p.node for (t, _), p in placements.items() if t in PS_TYPES and p.node}
    nodes = [p.node for (t, _), p in placements.items() if t == WORKER]
    remote = sum(1 for n in nodes if ps_nodes and n not in ps_nodes)
    ps = sum(1 for (t, _) in placements if t in PS_TYPES)
    return Config(workers, ps, remote, max(len({n for n in nodes if n}), 1))
