"""Re-run Pollux's own simulator (the reference) on its workload files; our code, their simulator.

    <artifact venv>/python benchmarks/pollux_artifact.py SIMULATOR_DIR OUT_DIR \
        [--policy tiresias] [--workloads 1,2,3,4] [--loads 1.0,0.5,1.5,2.0] [--nodes 16]

SIMULATOR_DIR is a checkout of ``simulator/`` from ``petuum/adaptdl`` branch
``osdi21-artifact`` (Apache-2.0; never vendored here), run unmodified with its own
dependencies (numpy, pandas < 2, scipy, autograd; benchmarks/README.md says how). Its
``pollux.py`` needs pymoo 0.4, which does not install on Python 3.11: the baselines never
use it, so a placeholder module stands in for it. Writes ``OUT_DIR/<policy>-w<N>-<load>.json``
(``avg`` and per-job ``jcts``, as the artifact's ``summary.json``), which
``benchmarks/pollux_agreement.py --rerun OUT_DIR`` reads.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import types
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("simulator", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--policy", default="tiresias", choices=["tiresias", "optimus"])
    p.add_argument("--workloads", default="1,2,3,4")
    p.add_argument("--loads", default="1.0")
    p.add_argument("--nodes", type=int, default=16)
    args = p.parse_args()
    sys.path.insert(0, str(args.simulator))
    placeholder = types.ModuleType("pollux")
    placeholder.PolluxPolicy = type("PolluxPolicy", (), {})  # type: ignore[attr-defined]
    sys.modules["pollux"] = placeholder
    import simulator  # the artifact's simulator.py, from SIMULATOR_DIR

    args.out.mkdir(parents=True, exist_ok=True)
    for load in args.loads.split(","):
        folder = "workloads" if float(load) == 1.0 else f"workloads-{float(load):.1f}"
        for w in args.workloads.split(","):
            run = argparse.Namespace(
                workload=str(args.simulator / folder / f"workload-{w}.csv"),
                policy=args.policy,
                min_nodes=args.nodes,
                max_nodes=None,
                interval=60,
                interference=0.0,
                num_gpus=4,
                low_util=None,
                high_util=None,
                output=None,
            )
            with contextlib.redirect_stdout(io.StringIO()):
                _, jcts = simulator.simulate(run)
            avg = sum(jcts.values()) / len(jcts)
            out = args.out / f"{args.policy}-w{w}-{float(load):g}.json"
            out.write_text(json.dumps({"avg": avg, "jcts": jcts}, indent=1))
            print(f"{args.policy} workload-{w} {float(load):g}x: {avg:.2f} s ({len(jcts)} jobs)")


if __name__ == "__main__":
    main()
