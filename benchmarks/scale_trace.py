"""Where a run's scale actions come from: the pool's decisions, rule by rule, and the worker
pods the simulator counts (issue 25: "which of its rules then shrinks and grows again").

    python -m benchmarks.scale_trace [--traces philly|pollux] [--loads 1] [--policies dragonet]
        [--mc cost-free,defaults] [--seeds 0] [--philly-jobs 150] [--pollux-jobs 80]

The summary's ``scale_actions`` counts worker pods, not decisions: a worker created while
its job trains, or one deleted by a shrink. Each cell here splits them:

* ``first size``: workers created after the job first trained whose Admission generation
  (the pod's ``dragonet.io/admission`` annotation) the pool wrote *before* it trained: the
  size the job started with, arriving late, not a decision taken while it trained;
* ``decided adds`` and ``removals``: the rest.

and counts the pool's decisions (each Admission ``lastScale``) by rule: grew into idle
capacity, shrunk to make room for a waiting job, gave back a borrowed worker, and the
reversals among them (a decision against the direction of the job's previous one), with
those that came within 60 s of it. Each cell is a separate simulation (two at a time).
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

from benchmarks.elastic import PHILLY
from benchmarks.mc_costs import POLLUX, SETTINGS, configured
from policy.model.admission import GENERATION_ANNOTATION, TYPE_KEY
from policy.model.pool import PolicyName
from sim.apiserver import Obj
from sim.engine import Scenario, SimConfig, Simulation
from sim.results import JobRecord
from sim.scenario import from_trace
from sim.training import PODS, job_of

RULES = (("grew", "grew"), ("shrunk", "shrunk"), ("gave back", "gave back"))
QUICK_REVERSAL_S = 60.0


@dataclass(frozen=True)
class Cell:
    trace: str
    load: float
    policy: str
    mc: str
    seed: int = 0
    philly_jobs: int = 150
    pollux_jobs: int = 80


def scenario_of(cell: Cell) -> Scenario:
    if cell.trace == "philly":
        return from_trace(PHILLY, start=72500, load=cell.load, jobs=cell.philly_jobs)
    return from_trace(POLLUX, load=cell.load, jobs=cell.pollux_jobs)


def trace(scenario: Scenario, config: SimConfig) -> dict[str, Any]:
    """Run one simulation and split its scale actions (see the module's doc)."""
    sim = Simulation(scenario, config)
    written: dict[tuple[str, int], float] = {}  # (job, Admission generation) -> first seen
    counted: dict[str, int] = {}
    split: Counter[str] = Counter()

    def watch(tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == TYPE_KEY and new is not None:
            meta = new["metadata"]
            name = (new.get("spec", {}).get("job") or {}).get("name")
            key = (f"{meta.get('namespace') or 'default'}/{name}", int(meta["generation"]))
            written.setdefault(key, sim.now)
            return
        pod = new if new is not None else old
        if tkey != PODS or pod is None:
            return
        job = job_of(pod)
        t = sim.programs.jobs.get(job) if job is not None else None
        if job is None or t is None or t.scale_actions == counted.get(job, 0):
            return
        counted[job] = t.scale_actions  # this change was one (the simulator's counter ran)
        if old is not None:
            split["removals"] += 1
            return
        raw = (pod["metadata"].get("annotations") or {}).get(GENERATION_ANNOTATION)
        when = written.get((job, int(raw))) if raw else None
        early = when is not None and t.started_s is not None and when < t.started_s
        split["first size" if early else "decided adds"] += 1

    sim.api.watchers.append(watch)  # after the simulator's own (its counter runs first)
    result = sim.run()
    out: dict[str, Any] = {
        "scale_actions": result.summary["scale_actions"],
        "first size": split["first size"],
        "decided adds": split["decided adds"],
        "removals": split["removals"],
        "pod_restarts": result.summary["pod_restarts"],
        "avg_jct_s": result.summary["avg_jct_s"],
    }
    out.update(decisions(result.jobs))
    return out


def decisions(records: Sequence[JobRecord]) -> dict[str, int]:
    """The pool's scaling decisions by rule, and its reversals."""
    by_rule: Counter[str] = Counter()
    reversals = quick = 0
    for r in records:
        for s in r.scales:
            rule = next((name for name, word in RULES if s.reason.startswith(word)), "other")
            by_rule[rule] += 1
        for a, b in zip(r.scales, r.scales[1:], strict=False):
            if (a.to_workers - a.from_workers) * (b.to_workers - b.from_workers) < 0:
                reversals += 1
                quick += b.t_s - a.t_s < QUICK_REVERSAL_S
    return {
        "decisions": sum(by_rule.values()),
        **{name: by_rule[name] for name, _ in RULES},
        "reversals": reversals,
        f"reversals < {QUICK_REVERSAL_S:g} s": quick,
    }


def run_cell(cell: Cell) -> dict[str, Any]:
    config = configured(SimConfig(policy=cast("PolicyName", cell.policy), seed=cell.seed), cell.mc)
    return {"cell": cell, **trace(scenario_of(cell), config)}


COLUMNS = (
    "scale_actions",
    "first size",
    "decided adds",
    "removals",
    "decisions",
    "grew",
    "shrunk",
    "gave back",
    "reversals",
    f"reversals < {QUICK_REVERSAL_S:g} s",
    "pod_restarts",
    "avg_jct_s",
)


def table(rows: Sequence[dict[str, Any]]) -> str:
    head = ["trace", "load", "policy", "setting", "seed", *COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        c: Cell = row["cell"]
        cells = [c.trace, f"{c.load:g}x", c.policy, c.mc, str(c.seed)]
        cells += [str(row[k]) for k in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--traces", default="philly", help="philly, pollux or both")
    p.add_argument("--loads", default="1")
    p.add_argument("--policies", default="dragonet")
    p.add_argument("--mc", default="cost-free,defaults", help=f"some of {', '.join(SETTINGS)}")
    p.add_argument("--seeds", default="0")
    p.add_argument("--philly-jobs", type=int, default=150)
    p.add_argument("--pollux-jobs", type=int, default=80)
    p.add_argument("--jobs-parallel", type=int, default=2)
    args = p.parse_args(argv)
    cells = [
        Cell(t, float(x), pol, mc, int(seed), args.philly_jobs, args.pollux_jobs)
        for t in args.traces.split(",")
        for x in args.loads.split(",")
        for pol in args.policies.split(",")
        for seed in args.seeds.split(",")
        for mc in args.mc.split(",")
    ]
    unknown = [c.mc for c in cells if c.mc not in SETTINGS]
    unknown += [c.trace for c in cells if c.trace not in ("philly", "pollux")]
    if unknown:
        raise SystemExit(f"unknown {', '.join(sorted(set(unknown)))}")
    if args.jobs_parallel <= 1:
        rows = [run_cell(c) for c in cells]
    else:
        with ProcessPoolExecutor(max_workers=args.jobs_parallel) as pool:
            rows = list(pool.map(run_cell, cells))
    print(table(rows))


if __name__ == "__main__":
    main()
