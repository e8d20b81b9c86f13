"""The allocation rule: the next worker goes where it adds the most speed, as the job's
own reports say (Optimus, Peng et al. EuroSys'18 §4; Pollux, Qiao et al. OSDI'21 §4), for
parameter-server jobs whose global batch is fixed.

* **Grow** (``grow_by_goodput``): each spare worker goes, one at a time, to the running job
  it speeds up most, relatively: ``gain = f(w+1) / f(w) - 1`` from the job's throughput
  model (``policy.model.speedup``; a job that reports nothing: the linear prior, with a
  worker off its parameter servers' node counted ``REMOTE``). A relative gain shortens the
  job's remaining time by the same share, whatever its size, so it compares jobs of any
  speed. Least attained service comes first (a job in an earlier queue grows first).
* **The restart is charged**: a new worker trains only after it has started and restored
  the job's state (``Rules.restart``), and the size is decided again after
  ``Rules.interval``, so over one decision a worker is worth ``gain x (interval -
  restart) / interval``.
* **The user's size first, borrowing on evidence.** Up to ``Worker.replicas`` (the size
  the user tuned) a job grows as room allows, ranked by its gain, but never by a worker
  its own reports say makes it slower (one on a node of its own, for a job that measured
  spreading slower than it was: Pollux's yolov3 at a batch of 64 runs 1.76x slower on
  2+2 GPUs than on 4 of one node). Beyond it, a worker is
  borrowed only while the job's own reports promise at least ``Rules.min_gain`` (with an
  interval set, one step per interval, so that each step is measured before the next: the
  job's monitor needs about two minutes of a steady configuration); and a borrowed worker
  that the reports say adds less than half of that goes back (``give_back``).
* **A pool where nobody reports, with no interval set**, grows exactly as before
  (``grow_by_gain``): a job that reports nothing is scheduled as today.

Who shrinks first for a waiting job follows the same signal (``shrink.victims_least_loss``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from policy.model.batch import BatchRange
from policy.model.cluster import Pod
from policy.model.speedup import PRIOR, Speedup, grown
from policy.model.throughput import Config
from policy.pool.grow import grow_by_gain, room_next_to_ps
from policy.pool.ledger import Ledger, Scale
from policy.pool.locality import REMOTE
from policy.pool.placement import Placed, slots_at
from policy.pool.repair import new_pods, place_for
from policy.pool.running import Running, shrinkable


@dataclass(frozen=True)
class Worth:
    """What one more worker is worth to a job over one decision (``value``), and whether
    its reports speak for it (``informed``: the ``min_gain`` limit applies)."""

    value: float
    informed: bool


def config_of(r: Running, extra: Sequence[str | None] = (), without: Pod | None = None) -> Config:
    """The job's configuration as its monitor reads it: live workers (with ``extra``: the
    nodes of workers placed in this cycle; ``without`` one that leaves), parameter servers,
    workers off every parameter server's node, nodes."""
    live = [p for p in r.workers if p.live and p not in r.surplus and p != without]
    nodes = [p.node for p in live] + list(extra)
    ps = sum(1 for p in r.pods if p.replica_type == "ps" and p.live)
    remote = sum(1 for n in nodes if r.ps_nodes and n not in r.ps_nodes)
    return Config(max(len(nodes), 1), ps, remote, max(len({n for n in nodes if n}), 1))


def worth(
    model: Speedup,
    c: Config,
    local: bool,
    restart_s: float,
    interval_s: float,
    declared: BatchRange | None = None,
) -> Worth:
    """One more worker for a job in configuration ``c`` (next to a parameter server if
    ``local``), charged its restart over one decision interval. A job that ``declared``
    the batch sizes it can take is worth its gain in goodput, each size at its best batch
    (Pollux's speed-up: ``SpeedupFunction``, simulator/speedup.py)."""
    prior = (1.0 if local else REMOTE) / max(c.workers - c.remote * (1 - REMOTE), REMOTE)
    learned = _gain(model, c, grown(c, remote=not local), declared) if model.informed else None
    informed = learned is not None
    gain = learned if learned is not None else prior
    charged = max(interval_s - restart_s, 0.0) / interval_s if interval_s > 0 else 1.0
    return Worth(gain * charged, informed)


def _gain(
    model: Speedup, before: Config, after: Config, declared: BatchRange | None
) -> float | None:
    """Relative gain of ``after`` over ``before``: in goodput at the best batch of each for
    a job that declared a range, else in speed at its one batch."""
    if declared is not None:
        return model.goodput_gain(before, after, declared)
    return model.relative_gain(before, after)


def grow_by_goodput(ledger: Ledger, candidates: Sequence[tuple[int, Running]]) -> dict[str, Placed]:
    """Spare workers one at a time to the job whose speed grows most, relatively (least
    attained service first; ties: the cycle's order)."""
    rules = ledger.rules
    speedups: Mapping[str, Speedup] = ledger.speedups
    informed = any(speedups.get(r.job.key, PRIOR).informed for _, r in candidates)
    if not informed and not rules.interval:
        return grow_by_gain(ledger, candidates)  # nobody reports: exactly as before
    restart_s, interval_s = rules.restart.total_seconds(), rules.interval.total_seconds()
    out: dict[str, Placed] = {}
    added: dict[str, list[str | None]] = {r.job.key: [] for _, r in candidates}
    active = list(candidates)

    def value(r: Running) -> Worth:
        c = config_of(r, added[r.job.key])
        model = speedups.get(r.job.key, PRIOR)
        local = room_next_to_ps(ledger, r)
        return worth(model, c, local, restart_s, interval_s, r.job.batch_range)

    while active:
        scored = []
        for t in active:
            order, r = t
            w = value(r)
            slower = w.informed and w.value <= 0  # its reports: this worker slows it
            if slower or (w.informed and w.value < rules.min_gain and _borrows(r, added)):
                continue  # (or a borrowed worker is worth too little)
            scored.append(((r.queue, -w.value, order), t))
        if not scored:
            break
        scored.sort(key=lambda s: s[0])
        t = scored[0][1]
        r = t[1]
        n = r.count + len(added[r.job.key])
        index = r.new_indices(n - r.count + 1)[n - r.count :]
        placed = place_for(ledger, r, slots_at(r.job.worker, index)) if index else {}
        if not placed:
            active.remove(t)
            continue
        out.setdefault(r.job.key, {}).update(new_pods(r, placed))
        added[r.job.key].append(next(iter(placed.values())).node)
        assert r.job.worker is not None
        if n + 1 >= r.job.max_workers or (rules.interval and n + 1 > r.job.worker.replicas):
            active.remove(t)  # beyond its tuned size, a step per interval: each is measured
    return out


def _borrows(r: Running, added: Mapping[str, Sequence[object]]) -> bool:
    """One more worker would take the job beyond ``Worker.replicas``: the size its user
    asked for is granted as room allows, whatever the model says (a fit of a few readings
    cannot promise what the user measured)."""
    assert r.job.worker is not None
    return r.count + len(added[r.job.key]) + 1 > r.job.worker.replicas


def give_back(ledger: Ledger, running: Sequence[Running]) -> None:
    """Workers beyond ``Worker.replicas`` that the job's own reports say add less than
    half of ``min_gain`` (uncharged: keeping a worker costs no restart) go back, one per
    decision: the room is worth more to anyone else, and the job loses next to nothing.
    Half, so that a worker given back is not worth growing again (no flapping). At or
    below ``Worker.replicas`` (never below ``min-instances``) only a worker that makes the
    job slower by more than that half goes: one its reports say spreading costs more
    than it adds."""
    rules = ledger.rules
    if not rules.min_gain:
        return
    for r in running:
        model = ledger.speedups.get(r.job.key)
        worker = r.job.worker
        if model is None or worker is None or r.job.key in ledger.victims:
            continue
        if r.count <= r.job.min_workers or r.verdict.restarts:
            continue
        leaving = {p.name for p in r.surplus}
        pods = [p for p in shrinkable(r.job, r.workers, r.ps_nodes) if p.name not in leaving]
        if not pods:
            continue
        pod = pods[0]
        adds = _gain(model, config_of(r, without=pod), config_of(r), r.job.batch_range)
        # At or below the user's size, only a worker that slows the job goes (by more than
        # half of minGainPerWorker: growth refuses one that adds nothing, so no flapping).
        below = r.count <= worker.replicas
        if adds is None or adds >= (-rules.min_gain / 2 if below else rules.min_gain / 2):
            continue
        scale = Scale(
            r.target,
            r.count - 1,
            f"gave back a worker: its reported speed says worker {r.count} "
            + (
                f"slows it by {-adds:.1%}"
                if below
                else f"adds {max(adds, 0.0):.1%}, under half the pool's minGainPerWorker "
                f"({rules.min_gain:.0%})"
            ),
        )
        ledger.shrink(r.job.key, [pod], scale)
