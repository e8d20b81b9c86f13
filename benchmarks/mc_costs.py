"""Dragonet under Metacontroller's real costs: cost-free vs its defaults vs the settings we
recommend (issue 25; docs/simulator.md, chart/README.md).

Run: ``.venv/bin/python -m benchmarks.mc_costs [--runs demo,philly,pollux] [--philly-jobs N]``.

Each run replays one input under the three Metacontroller settings and prints, per setting:
average and p95 JCT, makespan, the time from a pool decision to the job's next pod existing
(p50 / p95 / max), the time from a sync's decision to each of its writes (p50 / p95 / max),
writes per second over the run and at the busiest second, API requests by verb, each
controller's queue depth (max, time-weighted mean), syncs, and the wall time of the run.

* ``demo``: ``examples/scenario.yaml`` (``make demo``'s), policy dragonet.
* ``philly``: the replay's slice of Philly (``benchmarks.philly_replay``), 16 nodes x 4 GPUs.
* ``pollux``: all 160 jobs of Pollux workload-1 on its 16 x 4-GPU cluster.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from sim.engine import Scenario, SimConfig, Simulation
from sim.scenario import from_trace, load_scenario

# shared/traces next to the checkout (/work/main), or next to the worktrees' folder.
TRACES = next(
    (
        p / "shared" / "traces"
        for p in Path(__file__).resolve().parents[2:4]
        if (p / "shared").is_dir()
    ),
    Path("shared/traces"),
)
PHILLY = TRACES / "philly_pollux" / "philly.csv"
POLLUX = TRACES / "pollux_workloads" / "workload-1.csv"
# What chart/README.md recommends: a faster client for the one process that serves every
# controller, and server-side apply (children without a copy of themselves).
RECOMMENDED = replace(SimConfig(), mc_qps=50.0, mc_burst=100, mc_apply_strategy="server-side-apply")
SETTINGS = {
    "cost-free": SimConfig().cost_free(),
    "defaults": SimConfig(),
    "recommended": RECOMMENDED,
}
# The Metacontroller fields a setting decides (the rest of a benchmark's config is its own).
_MC_FIELDS = (
    "mc_workers",
    "mc_qps",
    "mc_burst",
    "mc_resync_s",
    "mc_customize_ttl_s",
    "mc_apply_strategy",
    "mc_charged",
    "object_sizes",
)


def configured(config: SimConfig, setting: str) -> SimConfig:
    """``config`` under one of ``SETTINGS`` (its Metacontroller flags and object sizes),
    everything else kept: how the other benchmarks (gang, elastic, migration) run their own
    configs cost-free, on Metacontroller's defaults or on the recommended flags."""
    if setting not in SETTINGS:
        raise SystemExit(f"unknown setting {setting!r}: {', '.join(SETTINGS)}")
    chosen = SETTINGS[setting]
    return replace(config, **{f: getattr(chosen, f) for f in _MC_FIELDS})


def _inputs(names: list[str], philly_jobs: int) -> list[Scenario]:
    out = []
    for name in names:
        if name == "demo":
            out.append(load_scenario("examples/scenario.yaml"))
        elif name == "philly":
            out.append(from_trace(str(PHILLY), jobs=philly_jobs, start=72500))
        elif name == "pollux":
            out.append(from_trace(str(POLLUX), jobs=160))
        else:
            raise SystemExit(f"unknown run {name!r}: demo, philly, pollux")
    return out


def _fmt_spread(s: dict) -> str:
    if s["p50"] is None:
        return "-"
    return f"{s['p50']:.2f} / {s['p95']:.2f} / {s['max']:.1f}"


def run(scenario: Scenario, name: str, config: SimConfig) -> dict:
    sim = Simulation(scenario, replace(config, policy="dragonet"))
    started = time.perf_counter()
    s = dict(sim.run().summary)
    s["wall"] = time.perf_counter() - started
    per_second = Counter(int(t) for t, verb in sim.mc.client.sent if verb != "get")
    s["peak_writes"] = max(per_second.values(), default=0)
    s["setting"] = name
    return s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", default="demo,philly,pollux")
    p.add_argument("--philly-jobs", type=int, default=300)
    p.add_argument("--settings", default=",".join(SETTINGS))
    args = p.parse_args()
    for scenario in _inputs(args.runs.split(","), args.philly_jobs):
        print(f"\n### {scenario.name} ({len(scenario.jobs)} jobs)\n")
        print(
            "| setting | avg JCT | p95 JCT | makespan | decision to pod s (p50 / p95 / max) "
            "| decision to write s (p50 / p95 / max) | writes/s (run, peak) | requests "
            "| queue depth max / mean | syncs | wall s |"
        )
        print("|---|---:|---:|---:|---|---|---|---|---|---:|---:|")
        for name in args.settings.split(","):
            s = run(scenario, name, SETTINGS[name])
            req = s["api_requests"]
            depth = ", ".join(
                f"{c.removeprefix('dragonet-')} {d['max']} / {d['mean']:.2f}"
                for c, d in s["queue_depth_by_controller"].items()
            )
            print(
                f"| {name} | {s['avg_jct_s']:.0f} | {s['p95_jct_s']:.0f} | {s['makespan_s']:.0f} "
                f"| {_fmt_spread(s['decision_to_pod_s'])} | {_fmt_spread(s['write_latency_s'])} "
                f"| {s['writes_per_s']:.2f}, {s['peak_writes']} "
                f"| {sum(req.values())} ({req['get']} GET, {req['create']} create, "
                f"{req['update']} update, {req['update_status']} status, {req['delete']} delete) "
                f"| {depth} | {s['sync_calls']} | {s['wall']:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
