"""What delegating the binding to an external gang scheduler costs (docs/gang-schedulers.md).

Run: ``.venv/bin/python -m benchmarks.gang`` (``--quick`` for a smoke run; ``--mc
cost-free|defaults|recommended``: Metacontroller's costs, ``benchmarks.mc_costs``).

Each workload runs in the simulator with a stale informer view (2 s) and 5 workers per
Metacontroller controller (under every ``--mc`` setting), once with the kube-scheduler
binding Dragonet's required affinity (``none``, the baseline) and once per backend (the
simulated gang scheduler binding PodGroups, Dragonet's placement only preferred). Printed
per workload: average JCT and makespan (with the ratio to the baseline of the same run),
hook calls (the PodGroups are one more child per job, so a few more events) and the jobs
finished. Dragonet's queue decides what runs in every case, so the times should match.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from benchmarks.mc_costs import SETTINGS, configured
from sim.engine import Scenario, SimConfig, Simulation
from sim.scenario import from_trace, load_scenario

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ("none", "kube-batch", "volcano", "coscheduling")


def workloads(quick: bool) -> dict[str, Scenario]:
    out: dict[str, Scenario] = {
        name: load_scenario(ROOT / "examples" / f"{name}.yaml")
        for name in ("scenario", "elastic", "mixed")
    }
    if not quick:
        trace = ROOT / "tests" / "fixtures" / "traces" / "workload-1.csv"
        out["pollux-40"] = from_trace(trace, jobs=40)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the examples only")
    parser.add_argument("--mc", default="defaults", choices=list(SETTINGS))
    args = parser.parse_args()
    config = dataclasses.replace(
        configured(SimConfig(view_delay_s=2.0), args.mc), view_delay_s=2.0, mc_workers=5
    )
    base: tuple[float, float, int] | None
    header = f"{'workload':<10} {'backend':<13} {'avg JCT':>9} {'ratio':>6} {'makespan':>9} "
    print(header + f"{'ratio':>6} {'hook calls':>10} {'ratio':>6} {'finished':>9}")
    for name, sc in workloads(args.quick).items():
        base = None
        for backend in BACKENDS:
            run = dataclasses.replace(config, gang_scheduler=backend)
            result = Simulation(sc, run).run()
            s = result.summary
            row = (s["avg_jct_s"], s["makespan_s"], s["sync_calls"])
            base = base or row
            done = sum(1 for r in result.jobs if r.finish_s is not None)
            print(
                f"{name:<10} {backend:<13} {row[0]:>8.0f}s {row[0] / base[0]:>6.3f} "
                f"{row[1]:>8.0f}s {row[1] / base[1]:>6.3f} {row[2]:>10} {row[2] / base[2]:>6.3f} "
                f"{done:>4} / {len(result.jobs):<3}"
            )


if __name__ == "__main__":
    main()
