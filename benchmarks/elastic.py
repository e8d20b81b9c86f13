"""Compare the scheduling policies on public traces, at the trace's arrival rate and doubled.

    python -m benchmarks.elastic [--traces philly,pollux] [--loads 1,2] [--policies all|a,b]
        [--philly-jobs 150] [--philly-start 72500] [--pollux-workload 1[,2,3,4]]
        [--pollux-jobs 120] [--jobs-parallel K] [--json OUT.json] [--markdown]

Every (trace, load, policy) cell is one simulation in its own process: runs are CPU-bound
and share nothing, so K processes finish about K times sooner. Per (trace, load) it prints
one column per policy, then whether ``dragonet`` meets its targets: average JCT at least
30 % below gang-fifo and 10 % below dragon, below the Tiresias-like baseline, no deadlocked
resources, and within 2x of the average-JCT lower bound. Not a test: a missed target
prints MISS, the exit code stays 0.

The defaults keep the 16 cells of the full table near 20 minutes on the 2-core machine.
A run costs about jobs x jobs-alive syncs, and a doubled arrival rate keeps more jobs
alive at once. So Philly is rows 72,500-72,649 (offered load 0.72 of 64 GPUs, see
philly_replay). Pollux workload-1 is cut to its first 120 jobs by arrival (offered load
1.4): all 160 take about 20 minutes for kube-default at 2x load alone. The first 120 hold
one of the four imagenet jobs (320 GPU-h each); the last 40 hold the other three.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from benchmarks.mc_costs import SETTINGS, TRACES, configured
from policy.model.pool import POLICIES, PolicyName
from sim.engine import SimConfig, Simulation
from sim.report import (
    GPU,
    NONE,
    format_count,
    format_duration,
    format_percent,
    format_resource_hours,
)
from sim.scenario import from_trace

PHILLY = TRACES / "philly_pollux" / "philly.csv"
TRACE_NAMES = ("philly", "pollux")

# dragonet's targets: minimum avg-JCT reduction against a policy, and the bound's factor.
REDUCTION_TARGETS: Mapping[str, float] = {"gang-fifo": 0.30, "dragon": 0.10, "tiresias": 0.0}
BOUND_FACTOR = 2.0

Summary = dict[str, Any]


@dataclass(frozen=True)
class Cell:
    """One simulation: a trace slice at an arrival-rate factor under one policy."""

    trace: str  # "philly" or "pollux": the table's name for it
    path: Path
    jobs: int | None  # keep the first N jobs by arrival (None: every job)
    start: int  # Philly rows to skip; ignored for Pollux workloads
    load: float
    policy: PolicyName
    mc: str = "defaults"  # Metacontroller's setting (benchmarks.mc_costs.SETTINGS)


def run_cell(cell: Cell) -> Summary:
    """Simulate one cell (in a worker process) and return its summary plus its coordinates."""
    window = {} if cell.jobs is None else {"jobs": cell.jobs}
    scenario = from_trace(cell.path, start=cell.start, load=cell.load, **window)
    config = configured(SimConfig(policy=cell.policy), cell.mc)
    summary = dict(Simulation(scenario, config).run().summary)
    return {"trace": cell.trace, "load": cell.load, **summary}


def _lost(s: Summary) -> str:
    lost = _at(s, "lost_gpu_s")
    return NONE if lost is None else format_resource_hours(GPU, lost)


# --- the table -------------------------------------------------------------------------------


def _at(summary: Summary, *keys: str) -> Any:
    value: Any = summary
    for k in keys:
        value = value.get(k) if isinstance(value, Mapping) else None
    return value


def _ratio(summary: Summary) -> float | None:
    """Average JCT over its lower bound: how far from optimal, 1.0 at best."""
    jct, bound = _at(summary, "avg_jct_s"), _at(summary, "lower_bounds", "avg_jct_s")
    return jct / bound if jct is not None and bound else None


def _times(x: float | None) -> str:
    return NONE if x is None else f"{x:.2f}x"


def _finished(s: Summary) -> str:
    return f"{format_count(_at(s, 'jobs_finished'))} / {format_count(_at(s, 'jobs'))}"


ROWS: tuple[tuple[str, Callable[[Summary], str]], ...] = (
    ("Jobs finished", _finished),
    ("Avg JCT", lambda s: format_duration(_at(s, "avg_jct_s"))),
    ("p95 JCT", lambda s: format_duration(_at(s, "p95_jct_s"))),
    ("Makespan", lambda s: format_duration(_at(s, "makespan_s"))),
    ("Avg queueing", lambda s: format_duration(_at(s, "avg_queue_s"))),
    ("GPU utilization", lambda s: format_percent(_at(s, "utilization", GPU))),
    (
        "Deadlocked GPU",
        lambda s: format_resource_hours(GPU, _at(s, "deadlocked_resource_seconds", GPU)),
    ),
    ("Scale actions", lambda s: format_count(_at(s, "scale_actions"))),
    ("Pod restarts", lambda s: format_count(_at(s, "pod_restarts"))),
    ("Preemptions (PS state lost)", lambda s: format_count(_at(s, "state_losses"))),
    ("GPU lost to preemption", _lost),
    ("Sync calls", lambda s: format_count(_at(s, "sync_calls"))),
    ("Wall time", lambda s: format_duration(_at(s, "wall_time_s"))),
    ("Lower bound: avg JCT", lambda s: format_duration(_at(s, "lower_bounds", "avg_jct_s"))),
    ("Lower bound: makespan", lambda s: format_duration(_at(s, "lower_bounds", "makespan_s"))),
    ("Avg JCT / lower bound", lambda s: _times(_ratio(s))),
)


def render(header: Sequence[str], body: Sequence[Sequence[str]], markdown: bool) -> str:
    """A GitHub markdown table, or the same columns aligned as plain text for a terminal."""
    lines = [header, *body]
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "| " + " | ".join(cells) + " |" if markdown else "  ".join(cells)

    if markdown:
        dashes = ["-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)]
        rule = "|" + "|".join(dashes) + "|"
    else:
        rule = line(["-" * w for w in widths])
    return "\n".join([line(header), rule, *(line(r) for r in body)])


def table(cells: Mapping[str, Summary], markdown: bool) -> str:
    """One column per policy (failed runs show their error), one row per metric."""
    header = ["Metric", *cells]
    body = [
        [label, *(NONE if "error" in s else fmt(s) for s in cells.values())] for label, fmt in ROWS
    ]
    errors = [f"{p}: {s['error']}" for p, s in cells.items() if "error" in s]
    return render(header, body, markdown) + "".join(f"\nFAILED {e}" for e in errors)


# --- dragonet's targets ----------------------------------------------------------------------


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def targets(cells: Mapping[str, Summary]) -> list[str]:
    """One line per target dragonet can be judged on here (none if dragonet did not run).

    An average over finished jobs flatters a policy that left its slow jobs unfinished, so
    dragonet only passes a comparison if it finished at least as many jobs.
    """
    ours = cells.get("dragonet")
    if ours is None or "error" in ours:
        return []
    lines: list[str] = []
    jct = _at(ours, "avg_jct_s")
    for other, target in REDUCTION_TARGETS.items():
        theirs = cells.get(other)
        if theirs is None or "error" in theirs:
            continue
        base = _at(theirs, "avg_jct_s")
        if jct is None or not base:
            lines.append(f"avg JCT >= {target:.0%} below {other}: no average JCT -> MISS")
            continue
        cut = 1.0 - jct / base
        fewer = (_at(ours, "jobs_finished") or 0) < (_at(theirs, "jobs_finished") or 0)
        note = " (but dragonet finished fewer jobs)" if fewer else ""
        ahead = cut > target if target == 0 else cut >= target  # 0: strictly ahead
        verdict = _verdict(ahead and not fewer)
        lines.append(
            f"avg JCT >= {target:.0%} below {other}: {format_duration(jct)} vs "
            f"{format_duration(base)}, {cut:.1%} below{note} -> {verdict}"
        )
    stuck = {r: v for r, v in (_at(ours, "deadlocked_resource_seconds") or {}).items() if v}
    detail = ", ".join(f"{format_resource_hours(r, v)}" for r, v in stuck.items()) or "none"
    lines.append(f"no deadlocked resources: {detail} -> {_verdict(not stuck)}")
    ratio = _ratio(ours)
    lines.append(
        f"avg JCT within {BOUND_FACTOR:g}x of its lower bound: {_times(ratio)} -> "
        f"{_verdict(ratio is not None and ratio <= BOUND_FACTOR)}"
    )
    return lines


def report(trace: str, load: float, cells: Mapping[str, Summary], markdown: bool) -> str:
    """The section of one (trace, load): title, table, then dragonet's targets."""
    scenario = next((s["scenario"] for s in cells.values() if "scenario" in s), trace)
    title = f"{trace} x{load:g} load ({scenario})"
    lines = targets(cells)
    if markdown:
        head = f"### {title}\n"
        tail = "\n\nTargets for dragonet:\n\n" + "\n".join(f"- {t}" for t in lines)
    else:
        head = f"== {title}\n"
        tail = "\n\nTargets for dragonet:\n" + "\n".join(f"  {t}" for t in lines)
    return head + "\n" + table(cells, markdown) + (tail if lines else "")


# --- the run ---------------------------------------------------------------------------------


def _list(raw: str, known: Sequence[str], what: str) -> list[str]:
    names = list(known) if raw == "all" else [x.strip() for x in raw.split(",") if x.strip()]
    unknown = [x for x in names if x not in known]
    if unknown or not names:
        raise SystemExit(f"unknown {what} {', '.join(unknown)}; known: {', '.join(known)}")
    return names


def _loads(raw: str) -> list[float]:
    try:
        loads = [float(x) for x in raw.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--loads: {raw!r} is not a comma-separated list of numbers") from None
    if not loads or any(x <= 0 for x in loads):
        raise SystemExit("--loads: give positive arrival-rate factors, e.g. 1,2")
    return loads


def _cost(cell: Cell) -> float:
    """A rough relative cost, to start the slowest cells first and finish the pool sooner.

    Syncs grow with jobs x jobs alive; Pollux's workload overloads the cluster (more jobs
    alive per job) and kube-default's pending pods cause the most changes.
    """
    jobs = cell.jobs or 160
    weight = 2.0 if cell.trace.startswith("pollux") else 1.0
    if cell.policy == "kube-default":
        weight *= 2.0
    return cell.load * jobs * jobs * weight


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--traces", default=",".join(TRACE_NAMES), help="philly, pollux or both")
    p.add_argument("--loads", default="1,2", help="arrival-rate factors (2 = twice as fast)")
    p.add_argument("--policies", default="all", help=f"all, or some of {', '.join(POLICIES)}")
    p.add_argument("--philly-jobs", type=int, default=150)
    p.add_argument("--philly-start", type=int, default=72500)
    p.add_argument("--pollux-workload", default="1", help="Pollux workloads 1-4, e.g. 1 or 1,2,3,4")
    p.add_argument(
        "--pollux-jobs", type=int, default=120, help="keep the first N jobs; 0 keeps all 160"
    )
    p.add_argument("--jobs-parallel", type=int, default=os.cpu_count() or 1)
    p.add_argument(
        "--mc", default="defaults", choices=list(SETTINGS), help="Metacontroller's costs"
    )
    p.add_argument("--json", metavar="OUT.json", help="write every cell's summary here")
    p.add_argument("--markdown", action="store_true", help="markdown tables (default: text)")
    args = p.parse_args()

    traces = _list(args.traces, TRACE_NAMES, "trace")
    loads = _loads(args.loads)
    policies = cast("list[PolicyName]", _list(args.policies, POLICIES, "policy"))
    workloads = _list(args.pollux_workload, ("1", "2", "3", "4"), "Pollux workload")
    where: dict[str, tuple[Path, int | None, int]] = {}
    for t in traces:
        if t == "philly":
            where["philly"] = (PHILLY, args.philly_jobs, args.philly_start)
            continue
        for w in workloads:
            name = "pollux" if workloads == ["1"] else f"pollux-{w}"
            path = TRACES / "pollux_workloads" / f"workload-{w}.csv"
            where[name] = (path, args.pollux_jobs or None, 0)
    traces = list(where)
    cells = [
        Cell(t, *where[t], load=x, policy=pol, mc=args.mc)
        for t in traces
        for x in loads
        for pol in policies
    ]

    md = args.markdown
    results: dict[Cell, Summary] = {}
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(args.jobs_parallel, 1)) as pool:
        futures = {pool.submit(run_cell, c): c for c in sorted(cells, key=_cost, reverse=True)}
        for done, future in enumerate(as_completed(futures), 1):
            c = futures[future]
            try:
                results[c] = future.result()
                s = results[c]
                status = (
                    f"{s['jobs_finished']}/{s['jobs']} jobs, {s['sync_calls']:,} syncs, "
                    f"{s['wall_time_s']:.0f} s wall"
                )
            except Exception as e:  # one broken cell must not cost the other runs
                results[c] = {"trace": c.trace, "load": c.load, "policy": c.policy}
                results[c]["error"] = f"{type(e).__name__}: {e}"
                status = results[c]["error"]
            elapsed = time.perf_counter() - started
            if args.json:  # as cells finish: a run cut short keeps what it measured
                done_cells = [results[c] for c in cells if c in results]
                Path(args.json).write_text(json.dumps(done_cells, indent=2) + "\n")
            print(
                f"[{done}/{len(cells)} {elapsed:.0f} s] {c.trace} x{c.load:g} {c.policy}: {status}",
                file=sys.stderr,
                flush=True,
            )

    sections = [
        report(t, x, {c.policy: results[c] for c in cells if (c.trace, c.load) == (t, x)}, md)
        for t in traces
        for x in loads
    ]
    print("\n\n".join(sections))
    if args.json:
        Path(args.json).write_text(json.dumps([results[c] for c in cells], indent=2) + "\n")
        print(f"\nwrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
