"""The batch written into the Admission of a job that declares the batch sizes it can take
(``dragonet.io/batch-size``): the best goodput's for the size and placement the pool gave
it (``Speedup.best_batch``: Pollux's ``GoodputFunction.optimize``).

Its pods read the batch once, at start (``DRAGONET_BATCH_SIZE``), so a new choice only
reaches pods that start after it: the batch is chosen again only when the job's worker
target changes (a resize, whose new workers start anyway) or the job is admitted (again,
after a preemption: every pod starts). Between those it stays as written, however the
job's reports refine its model: no pod restarts to change its batch, and the Admission is
not rewritten for it. A job that declares nothing gets no batch: it keeps its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from policy.model.admission import BatchSize, Placement
from policy.model.jobs import WORKER, Job
from policy.model.speedup import PRIOR, Speedup
from policy.model.throughput import Config


def chosen_batch(
    job: Job,
    model: Speedup | None,
    placements: Mapping[tuple[str, int], Placement],
    workers: int,
    kept: BatchSize | None,
) -> BatchSize | None:
    """The batch for ``job`` admitted with ``workers`` workers at ``placements``; ``kept``:
    the batch its Admission holds for the same target (the job's pods run with it)."""
    if job.batch_range is None or workers < 1:
        return None
    if kept is not None:
        return kept
    ps_nodes = {p.node for (t, _), p in placements.items() if t in ("PS", "Server") and p.node}
    nodes = [p.node for (t, _), p in placements.items() if t == WORKER]
    remote = sum(1 for n in nodes if ps_nodes and n not in ps_nodes)
    ps = sum(1 for (t, _) in placements if t in ("PS", "Server"))
    config = Config(workers, ps, remote, max(len({n for n in nodes if n}), 1))
    choice = (model or PRIOR).best_batch(config, job.batch_range)
    return BatchSize(size=choice.size, per_replica=choice.per_replica)
