"""Dragonet's policies against Pollux's published results, with every batch size fixed.

    python -m benchmarks.pollux_compete [--workloads 1,2,3,4] [--loads 1.0]
        [--policies default,dragonet,tiresias] [--artifact DIR] [--jobs-parallel 2]
        [--no-reports] [--markdown] [--json OUT]
        [--equal-terms | --restart-whole --decision-interval S --remaining on|off] [--both]
        [--adaptive-batch] [--jobs N]

Each cell runs every job of one Pollux workload file (16 nodes x 4 GPUs, each job trained by
Pollux's own model at its row's fixed batch: ``sim.pollux_model``) under one policy, through
the real webhook, with every job reporting its speed as a real one would
(``--report-throughput``: the allocation rule's only signal; ``--no-reports`` for the rule
without it). Printed per cell: average JCT, p95, makespan, and the ratio of the average to
Pollux's published Pollux and Tiresias (``simulator/results-jobload/<policy>-<load>/
summary.json``, ``avgs``, petuum/adaptdl osdi21-artifact @ c793c70), then the mean ratio per
load and policy, then the average JCT per application.

Policies: ``default`` is a pool with nothing in its spec (what a user gets),
``tiresias`` is Pollux's Tiresias (``sim.pollux_model.TIRESIAS_POOL``), any other name is
that policy with the CRD's defaults. Workloads 1-4 at 1.0 are read from
``shared/traces/pollux_workloads/``; the others (workloads 5-8, held out: never tuned on;
loads 0.5, 1.5, 2.0) from a checkout of the artifact's ``simulator/`` (``--artifact``).
Simulated time, deterministic; Pollux's simulator charges nothing for a control plane, so
the runs are cost-free (``--real-costs``: Metacontroller's defaults). Not a test.

Equal terms (issue 37): three things differ in Dragonet's favour unless set. Pollux's
simulator pauses a whole job 30 s on any reallocation, its jobs being all-reduce jobs
(``--restart-whole``; Dragonet's trace jobs are parameter-server jobs, where only a new
worker waits); it decides once a minute (``--decision-interval 60``, the pool's
``decisionIntervalSeconds``); and it does not know a job's length (``--remaining off``,
the pool's ``lasByRemaining``). ``--equal-terms`` sets all three; ``--both`` runs each
cell as it is as well. A cell's policy column names the settings that differ.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.pollux_agreement import workload_file
from benchmarks.pollux_published import POLLUX, TIRESIAS
from policy.model.pool import pool_object
from sim.engine import Scenario, SimConfig, Simulation
from sim.pollux_model import TIRESIAS_POOL
from sim.scenario import from_trace
from sim.throughput import ThroughputConfig

HELD_OUT = (5, 6, 7, 8)


@dataclass(frozen=True)
class Cell:
    policy: str
    workload: int
    load: float
    path: Path
    reports: bool = True
    real_costs: bool = False
    jobs: int = 100_000  # the first this many jobs of the file (a smoke run)
    # Equal terms with Pollux's simulator (issue 37), each off by default (Dragonet as it is):
    restart_whole: bool = False  # any resize restarts every worker (all-reduce jobs)
    decision_interval_s: float | None = None  # the pool's decisionIntervalSeconds
    remaining: bool | None = None  # the pool's lasByRemaining (None: the policy's default)
    # Beyond Pollux (issue 37): every job declares the batch sizes it can take.
    adaptive: bool = False

    @property
    def label(self) -> str:
        """The policy and every setting that differs from Dragonet as it is."""
        terms = []
        if self.restart_whole:
            terms.append("whole restarts")
        if self.decision_interval_s is not None:
            terms.append(f"{self.decision_interval_s:g} s")
        if self.remaining is not None:
            terms.append("remaining " + ("on" if self.remaining else "off"))
        if self.adaptive:
            terms.append("adaptive batch")
        return f"{self.policy} ({', '.join(terms)})" if terms else self.policy


def pool_spec(
    policy: str, decision_interval_s: float | None = None, remaining: bool | None = None
) -> dict[str, Any]:
    """The TrainingPool spec a named cell runs (``default``: an empty spec), with the
    equal-terms settings given (``None``: the spec's own)."""
    if policy == "default":
        spec: dict[str, Any] = {}
    elif policy == "tiresias":
        spec = dict(TIRESIAS_POOL)
    else:
        spec = {"policy": policy}
    if decision_interval_s is not None:
        spec["decisionIntervalSeconds"] = decision_interval_s
    if remaining is not None:
        spec["lasByRemaining"] = remaining
    return spec


def whole_restarts(scenario: Scenario) -> Scenario:
    """Every job restarts whole on any change to its workers, as Pollux's simulator pauses
    an all-reduce job ``RESTART_S`` on every reallocation (``Job.reallocate``)."""
    jobs = tuple(replace(j, profile=replace(j.profile, restarts_whole=True)) for j in scenario.jobs)
    return replace(scenario, jobs=jobs)


def run(cell: Cell) -> dict[str, Any]:
    scenario = from_trace(cell.path, jobs=cell.jobs, adaptive=cell.adaptive)
    if cell.restart_whole:
        scenario = whole_restarts(scenario)
    spec = pool_spec(cell.policy, cell.decision_interval_s, cell.remaining)
    scenario = replace(scenario, objects=(pool_object(**spec),))
    config = SimConfig(policy=spec.get("policy", "dragonet"))
    if cell.reports or cell.adaptive:
        config = replace(config, throughput=ThroughputConfig())
    result = Simulation(scenario, config if cell.real_costs else config.cost_free()).run()
    s = result.summary
    apps: dict[str, list[float]] = defaultdict(list)
    for j in result.jobs:
        if j.jct_s is not None:
            apps[j.key.split("/")[-1].rsplit("-", 1)[0]].append(j.jct_s)
    return {
        "policy": cell.label,
        "workload": cell.workload,
        "load": cell.load,
        "avg": s["avg_jct_s"],
        "p95": s["p95_jct_s"],
        "makespan": s.get("makespan_s"),
        "jobs": s["jobs"],
        "finished": s.get("jobs_finished"),
        "apps": {a: statistics.fmean(v) for a, v in sorted(apps.items())},
    }


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=True)]
    return "\n".join(
        "  ".join(str(c).rjust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]
    )


def report(results: Sequence[Mapping[str, Any]], markdown: bool) -> str:
    out = []
    rows = []
    ratios: dict[tuple[float, str, bool], list[float]] = defaultdict(list)
    for r in sorted(results, key=lambda r: (r["load"], r["workload"], r["policy"])):
        load, w = r["load"], r["workload"]
        pollux, tiresias = POLLUX[load][w], TIRESIAS[load][w]
        ratios[(load, r["policy"], w in HELD_OUT)].append(r["avg"] / pollux)
        rows.append(
            [
                f"{load:g}x",
                f"{w}{' (held out)' if w in HELD_OUT else ''}",
                r["policy"],
                f"{r['avg']:,.0f} s",
                f"{r['p95']:,.0f} s",
                f"{r['makespan'] / 3600:.1f} h" if r["makespan"] else "-",
                f"{pollux:,.0f} s",
                f"{r['avg'] / pollux:.3f}",
                f"{tiresias:,.0f} s",
                f"{r['avg'] / tiresias:.3f}",
            ]
        )
    head = ["load", "workload", "policy", "avg JCT", "p95", "makespan", "Pollux", "/ Pollux",
            "Tiresias", "/ Tiresias"]  # fmt: skip
    out.append(_table(head, rows, markdown))
    means = [
        [f"{load:g}x", "5-8 (held out)" if held else "1-4", policy, f"{statistics.fmean(v):.3f}",
         str(len(v))]
        for (load, policy, held), v in sorted(ratios.items())
    ]  # fmt: skip
    out.append(_table(["load", "workloads", "policy", "mean avg JCT / Pollux", "cells"], means,
                      markdown))  # fmt: skip
    apps = sorted({a for r in results for a in r["apps"]})
    per_app = [
        [f"{r['load']:g}x", str(r["workload"]), r["policy"],
         *(f"{r['apps'][a]:,.0f}" if a in r["apps"] else "-" for a in apps)]
        for r in sorted(results, key=lambda r: (r["load"], r["workload"], r["policy"]))
    ]  # fmt: skip
    out.append(_table(["load", "workload", "policy", *apps], per_app, markdown))
    return "\n\n".join(out)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="1,2,3,4")
    p.add_argument("--loads", default="1.0")
    p.add_argument("--policies", default="default,dragonet,tiresias")
    p.add_argument("--artifact", type=Path, help="a checkout of the artifact's simulator/")
    p.add_argument("--jobs-parallel", type=int, default=2)
    p.add_argument("--no-reports", action="store_true", help="jobs report nothing")
    p.add_argument("--real-costs", action="store_true", help="Metacontroller's defaults")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--json", type=Path, help="write every cell's result here")
    terms = p.add_argument_group("equal terms with Pollux's simulator (issue 37)")
    terms.add_argument(
        "--restart-whole", action="store_true",
        help="every job restarts whole on any resize (all-reduce jobs, as Pollux models them)",
    )  # fmt: skip
    terms.add_argument(
        "--decision-interval", type=float, metavar="S",
        help="the pool's decisionIntervalSeconds (Pollux: 60)",
    )  # fmt: skip
    terms.add_argument(
        "--remaining", choices=["on", "off"],
        help="the pool's lasByRemaining (Pollux does not use a job's length: off)",
    )  # fmt: skip
    terms.add_argument(
        "--equal-terms", action="store_true",
        help="all three as Pollux: --restart-whole --decision-interval 60 --remaining off",
    )  # fmt: skip
    terms.add_argument(
        "--both", action="store_true", help="run every cell as it is too, beside these settings"
    )
    p.add_argument(
        "--adaptive-batch", action="store_true",
        help="every job declares the batch sizes it can take (the artifact's bounds) and "
        "trains at the batch the pool chooses (issue 37, beyond Pollux)",
    )  # fmt: skip
    p.add_argument("--jobs", type=int, default=100_000, help="the first this many jobs")
    args = p.parse_args(argv)
    if args.equal_terms:
        args.restart_whole, args.decision_interval = True, 60.0
        args.remaining = "off"
    remaining = None if args.remaining is None else args.remaining == "on"
    settings = [(args.restart_whole, args.decision_interval, remaining)]
    if args.both and settings[0] != (False, None, None):
        settings.insert(0, (False, None, None))
    cells = [
        Cell(policy, int(w), float(load), workload_file(int(w), float(load), args.artifact),
             not args.no_reports, args.real_costs, restart_whole=whole,
             decision_interval_s=interval, remaining=rem, jobs=args.jobs,
             adaptive=args.adaptive_batch)
        for load in args.loads.split(",")
        for w in args.workloads.split(",")
        for policy in args.policies.split(",")
        for whole, interval, rem in settings
    ]  # fmt: skip
    results = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs_parallel)) as pool:
        for got in pool.map(run, cells):
            print(json.dumps(got), file=sys.stderr, flush=True)
            results.append(got)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(report(results, args.markdown))
    return results


if __name__ == "__main__":
    main()
