"""Before/after: the pool's and a job's sync, this checkout against another, as CPU-time ratios.

    git archive main | tar -x -C /tmp/base
    python -m benchmarks.compare_sync --base /tmp/base [--sizes 256x500,1000x500] [--rounds 5]

Each round runs the same measurement (``sync_latency``'s scenarios, pure policy, no Flask) in a
fresh process of each checkout, alternately, so both see the same machine. CPU time
(``time.process_time``) rather than wall time: on a shared machine it is much less noisy.
Printed: per size, the medians over rounds of a cold pool sync (nothing parsed before), a
warm one (everything parsed, the plan made again) and a job's sync, and this/base ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

MEASURE = """
import gc, statistics, sys, time
from benchmarks.sync_latency import scenario
from policy.job.sync import sync as job_sync
from policy.memo import Memo
from policy.pool.sync import sync as pool_sync
from tests.conftest import NOW
nodes, jobs, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
req, jreq = scenario(nodes, jobs)
cold, warm, job = [], [], []
memo = Memo()
pool_sync(req["parent"], req["children"], req["related"], NOW, memo)
for _ in range(n):
    gc.collect()
    t = time.process_time()
    pool_sync(req["parent"], req["children"], req["related"], NOW)
    cold.append(time.process_time() - t)
    memo.last = None
    t = time.process_time()
    pool_sync(req["parent"], req["children"], req["related"], NOW, memo)
    warm.append(time.process_time() - t)
    t = time.process_time()
    for _ in range(20):
        job_sync(jreq["parent"], jreq["children"], jreq["related"], NOW)
    job.append((time.process_time() - t) / 20)
print(" ".join(str(statistics.median(x) * 1000) for x in (cold, warm, job)))
"""


def _measure(root: Path, nodes: int, jobs: int, repeats: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(nodes), str(jobs), str(repeats)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [float(x) for x in out.split()]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="the other checkout (e.g. git archive main)")
    p.add_argument("--sizes", default="256x500,1000x500", help="NODESxJOBS,...")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3, help="syncs per process")
    args = p.parse_args()
    base = Path(args.base).resolve()
    print(f"{'size':>9} {'':>5} {'cold ms':>8} {'warm ms':>8} {'job ms':>7}")
    for size in args.sizes.split(","):
        nodes, jobs = (int(x) for x in size.split("x"))
        runs: dict[str, list[list[float]]] = {"base": [], "this": []}
        for _ in range(args.rounds):
            runs["base"].append(_measure(base, nodes, jobs, args.repeats))
            runs["this"].append(_measure(HERE, nodes, jobs, args.repeats))
        med = {k: [statistics.median(r[i] for r in v) for i in range(3)] for k, v in runs.items()}
        for name in ("base", "this"):
            c, w, j = med[name]
            print(f"{size:>9} {name:>5} {c:>8.1f} {w:>8.1f} {j:>7.2f}")
        ratios = [t / b for t, b in zip(med["this"], med["base"], strict=True)]
        print(f"{size:>9} {'ratio':>5} {ratios[0]:>8.2f} {ratios[1]:>8.2f} {ratios[2]:>7.2f}")


if __name__ == "__main__":
    main()
