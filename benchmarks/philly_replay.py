"""Replay a slice of the Philly trace on a 64-GPU cluster through the real webhook.

    python -m benchmarks.philly_replay [--jobs 1000] [--start 72500] [--load 1.0]
        [--policy dragonet] [--decision-interval SECONDS]

Prints the simulation's summary plus what the run cost: wall time, sync calls per second,
the webhook's latency and the size of its requests, and the run's CPU time in *reference
loops*: a pure-Python loop of 10^7 additions timed in the same process, before and after
the run (the faster of the two). That ratio, not seconds, is what to compare between
machines and days: the machine is shared and its speed varies by 3x. Not a test: the
numbers depend on the machine (record them in benchmarks/README.md).

The default slice is the 1,000 consecutive filtered Philly jobs starting at row 72,500
(sorted by submit time): the last such window whose offered load fits 64 GPUs (0.68).
Most windows of Philly, a cluster of thousands of GPUs, offer 64 GPUs 3-15x their capacity.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

from policy.model.pool import pool_object
from sim.engine import SimConfig, Simulation
from sim.scenario import from_trace

TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "philly_pollux" / "philly.csv"


def reference_loop_s() -> float:
    """CPU seconds of 10^7 additions in a plain Python loop: the unit of simulator cost."""
    started = time.process_time()
    total = 0
    for i in range(10_000_000):
        total += i
    return time.process_time() - started


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace", default=str(TRACE))
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--start", type=int, default=72500)
    p.add_argument("--load", type=float, default=1.0)
    p.add_argument("--policy", default="dragonet")
    p.add_argument(
        "--decision-interval",
        type=float,
        default=0.0,
        help="the pool's decisionIntervalSeconds (0: it decides at every event)",
    )
    args = p.parse_args()
    scenario = from_trace(args.trace, jobs=args.jobs, start=args.start, load=args.load)
    if args.decision_interval:
        pool = pool_object(policy=args.policy, decisionIntervalSeconds=args.decision_interval)
        scenario = replace(scenario, objects=(*scenario.objects, pool))
    sim = Simulation(scenario, SimConfig(policy=args.policy))
    sizes: list[int] = []
    post = sim.webhook.post

    def measured(path: str, body: bytes, *, measure: bool = True):
        sizes.append(len(body))
        return post(path, body, measure=measure)

    sim.webhook.post = measured  # type: ignore[method-assign]
    reference = reference_loop_s()
    cpu = time.process_time()
    result = sim.run()
    cpu = time.process_time() - cpu
    reference = min(reference, reference_loop_s())
    s = result.summary
    wall = s["wall_time_s"]
    print(json.dumps(s, indent=2))
    print(
        f"\n{scenario.name}: {s['jobs']} jobs, {s['sync_calls']} syncs in {wall:.1f} s wall "
        f"({s['sync_calls'] / wall:.0f} syncs/s); webhook p50 {s['sync_latency_ms']['p50']} ms, "
        f"p99 {s['sync_latency_ms']['p99']} ms; request p50 "
        f"{statistics.median(sizes) / 1024:.0f} KiB, max {max(sizes) / 1024:.0f} KiB; "
        f"simulated {s['makespan_s'] / 3600:.1f} h; CPU {cpu:.1f} s = "
        f"{cpu / reference:.0f} reference loops (one: {reference:.2f} s)"
    )


if __name__ == "__main__":
    main()
