"""Does Dragonet's simulator agree with Pollux's on Tiresias? Per workload and load.

    python -m benchmarks.pollux_agreement [--workloads 1,2,3,4] [--loads 1.0]
        [--artifact DIR] [--rerun DIR] [--markdown]

For each Pollux workload file and load level it runs every job under Dragonet's `tiresias`
policy with Pollux's Tiresias settings (``sim.pollux_model.TIRESIAS_POOL``: two queues split
at 16 GPU-hours, no preemption limit) on Pollux's cluster (16 nodes x 4 GPUs), with the jobs
trained by Pollux's own model (``sim.pollux_model``), and prints the average JCT beside
Pollux's published figure (``simulator/results-jobload/tiresias-<load>/summary.json``,
``avgs``) and, with ``--rerun``, the artifact's simulator re-run here
(``benchmarks/pollux_artifact.py`` writes those files). Not a test: a 160-job run takes
about a minute of CPU.

Load 1.0 reads ``shared/traces/pollux_workloads/``; the other loads are other files
(``workloads-0.5``, ``-1.5``, ``-2.0``: 80, 240, 320 jobs over the same 8 hours), read from a
checkout of the artifact's ``simulator/`` folder (``--artifact``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from benchmarks.pollux_published import TIRESIAS
from policy.model.pool import pool_object
from sim.engine import SimConfig, Simulation
from sim.pollux_model import TIRESIAS_POOL
from sim.scenario import from_trace

# shared/traces/ beside the checkout (or beside the folder of worktrees that holds it).
SHARED = next(
    (
        p / "shared" / "traces" / "pollux_workloads"
        for p in Path(__file__).resolve().parents
        if (p / "shared" / "traces").is_dir()
    ),
    Path("shared") / "traces" / "pollux_workloads",
)

# Pollux's published Tiresias average JCT (s), by load and workload.
PUBLISHED = TIRESIAS


def workload_file(workload: int, load: float, artifact: Path | None) -> Path:
    if load == 1.0 and artifact is None:
        return SHARED / f"workload-{workload}.csv"
    if artifact is None:
        raise SystemExit(f"load {load:g}: the artifact's workloads-{load:.1f}/ needs --artifact")
    folder = "workloads" if load == 1.0 else f"workloads-{load:.1f}"
    return artifact / folder / f"workload-{workload}.csv"


def dragonet_tiresias(path: Path, real_costs: bool = False) -> dict[str, float]:
    """Dragonet's simulated Tiresias, Pollux's settings, on every job of ``path``. Cost-free
    by default: Pollux's simulator charges nothing for a control plane, so the workload
    models are compared on equal terms (``real_costs``: under Metacontroller's defaults)."""
    scenario = from_trace(path, jobs=100_000)
    scenario = replace(scenario, objects=(pool_object(**TIRESIAS_POOL),))
    config = SimConfig(policy="tiresias")
    summary = Simulation(scenario, config if real_costs else config.cost_free()).run().summary
    return {
        "avg": summary["avg_jct_s"],
        "p95": summary["p95_jct_s"],
        "jobs": summary["jobs"],
        "finished": summary.get("jobs_finished"),
    }


def rerun_avg(rerun: Path | None, workload: int, load: float) -> float | None:
    if rerun is None:
        return None
    path = rerun / f"tiresias-w{workload}-{load:g}.json"
    return json.loads(path.read_text())["avg"] if path.exists() else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="1,2,3,4")
    p.add_argument("--loads", default="1.0")
    p.add_argument("--artifact", type=Path, help="a checkout of the artifact's simulator/")
    p.add_argument("--rerun", type=Path, help="benchmarks/pollux_artifact.py's output folder")
    p.add_argument("--markdown", action="store_true")
    p.add_argument(
        "--real-costs", action="store_true", help="Dragonet under Metacontroller's defaults"
    )
    args = p.parse_args()
    cells = [
        (float(load), int(w)) for load in args.loads.split(",") for w in args.workloads.split(",")
    ]
    head = ["load", "workload", "Pollux published", "artifact re-run", "Dragonet", "ratio"]
    rows = []
    for load, w in cells:
        ours = dragonet_tiresias(workload_file(w, load, args.artifact), args.real_costs)
        published = PUBLISHED.get(load, {}).get(w)
        rerun = rerun_avg(args.rerun, w, load)
        rows.append(
            [
                f"{load:g}x",
                str(w),
                f"{published:,.0f} s" if published else "-",
                f"{rerun:,.0f} s" if rerun is not None else "-",
                f"{ours['avg']:,.0f} s",
                f"{ours['avg'] / published:.3f}" if published else "-",
            ]
        )
        print(json.dumps({"load": load, "workload": w, "published": published,
                          "rerun": rerun, **ours}), file=sys.stderr, flush=True)  # fmt: skip
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        for r in [head, *rows]:
            print("  ".join(f"{c:>16}" for c in r))


if __name__ == "__main__":
    main()
