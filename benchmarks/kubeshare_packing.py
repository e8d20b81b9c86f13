"""What fractional GPUs buy on a trace of small jobs: whole GPUs vs KubeShare shares.

    python -m benchmarks.kubeshare_packing [--jobs 60] [--seed 1] [--gpus 8]

The same trace runs three times through the real webhook in the simulator: every worker
on a whole GPU (``nvidia.com/gpu: 1``, pool ``kubeshare: none``), then every worker on the
share of one GPU it needs (``kubeshare/gpu_request``) with KubeShare v1 and v2 modelled.

The trace: jobs arrive as a Poisson process (mean gap ``--gap`` s), each one parameter
server (cpu) and 1-3 workers that need 0.25 or 0.5 of a GPU (a small model does not fill
a GPU, so it trains as fast on its share as on a whole device; that is the premise of
fractional GPUs and of this benchmark). Steps are drawn from 200-1,200.

Printed per run:
* JCT (mean, p95) and makespan;
* GPU allocation: device-seconds held (whole GPUs, or KubeShare's vGPUs) over capacity;
* GPU use: the shares the training workers actually need, integrated, over capacity (what
  a GPU's compute does: the same work in every run, so shorter runs use the GPUs more).

Not a test: record the numbers in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
from typing import Any

from sim.engine import Scenario, SimConfig, Simulation
from sim.kube import node_object
from sim.results import SimResult
from sim.spec import JobSpec, TrainingProfile, tfjob_manifest

SMALL = TrainingProfile(name="small", restore_s=2.0)


def trace(jobs: int, seed: int, gap_s: float) -> list[tuple[float, str, int, float, float]]:
    """(arrival, name, workers, share, steps) of each job."""
    rng = random.Random(seed)
    t = 0.0
    out = []
    for i in range(jobs):
        t += rng.expovariate(1 / gap_s)
        out.append(
            (
                t,
                f"small-{i:03d}",
                rng.randint(1, 3),
                rng.choice([0.25, 0.5]),
                float(rng.randint(200, 1200)),
            )
        )
    return out


def _job(name: str, workers: int, share: float, fractional: bool) -> dict[str, Any]:
    resources = {"cpu": "2", "memory": "4Gi"}
    if not fractional:
        resources["nvidia.com/gpu"] = "1"
    manifest = tfjob_manifest(
        name,
        workers=workers,
        ps=1,
        worker_resources=resources,
        ps_resources={"cpu": "1", "memory": "2Gi"},
    )
    if fractional:
        worker = manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]
        worker["metadata"] = {
            "annotations": {
                "kubeshare/gpu_request": str(share),
                "kubeshare/gpu_limit": "1.0",
                "kubeshare/gpu_mem": str(2 * 2**30),
            }
        }
    return manifest


def scenario(
    items: list[tuple[float, str, int, float, float]], gpus: int, fractional: bool
) -> Scenario:
    per_node = 4
    nodes = tuple(
        node_object(f"gpu-{i}", {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": str(per_node)})
        for i in range(1, gpus // per_node + 1)
    )
    for n in nodes:
        n["metadata"]["annotations"] = {
            "kubeshare/gpu_info": ",".join(
                f"GPU-{n['metadata']['name']}-{i}:11178" for i in range(per_node)
            )
            + ","
        }
    specs = tuple(
        JobSpec(_job(name, w, share, fractional), at, steps, SMALL)
        for at, name, w, share, steps in items
    )
    return Scenario("small-jobs", nodes, specs)


def gpu_use(result: SimResult, shares: dict[str, float], capacity: float) -> float:
    """Share-seconds the training workers need, over GPU-seconds of the run (the jobs are
    not elastic: a training job runs all its workers)."""
    span = result.summary["makespan_s"] or 1.0
    used = 0.0
    for r in result.jobs:
        share = shares[r.key.split("/")[-1]]
        for seg in r.segments:
            if seg.state == "training" and seg.end_s != float("inf"):
                used += (seg.workers or r.workers_requested) * share * (seg.end_s - seg.start_s)
    return used / (capacity * span)


def run(items: list, gpus: int, mode: str) -> dict[str, Any]:
    fractional = mode != "whole"
    sim = Simulation(
        scenario(copy.deepcopy(items), gpus, fractional),
        SimConfig(kubeshare="none" if mode == "whole" else mode),  # type: ignore[arg-type]
    )
    result = sim.run()
    s = result.summary
    shares = {name: share for _, name, _, share, _ in items}
    jcts = sorted(r.jct_s for r in result.jobs if r.jct_s is not None)
    devices = s["utilization"].get("nvidia.com/gpu", 0.0)
    return {
        "mode": mode,
        "finished": len(jcts),
        "avg_jct_s": statistics.fmean(jcts) if jcts else None,
        "p95_jct_s": jcts[int(0.95 * (len(jcts) - 1))] if jcts else None,
        "makespan_s": s["makespan_s"],
        "gpu_allocated": devices if mode != "v2" else None,  # v2 holds no device pods
        "gpu_use": gpu_use(result, shares, gpus),
        "kubeshare_refused": sim.kubeshare.failed,
        "kubelet_rejections": s["kubelet_rejections"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=60)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--gpus", type=int, default=8, help="a multiple of 4 (4 GPUs per node)")
    p.add_argument("--gap", type=float, default=20.0, help="mean seconds between arrivals")
    args = p.parse_args()
    items = trace(args.jobs, args.seed, args.gap)
    rows = [run(items, args.gpus, mode) for mode in ("whole", "v1", "v2")]
    base = rows[0]
    print(
        f"{args.jobs} small jobs (1-3 workers of 0.25/0.5 GPU), {args.gpus} GPUs, "
        f"mean arrival gap {args.gap:.0f} s, seed {args.seed}"
    )
    print(
        f"{'mode':<6} {'done':>5} {'avg JCT s':>10} {'p95 JCT s':>10} {'makespan s':>11}"
        f" {'JCT ratio':>9} {'GPU alloc':>9} {'GPU use':>8} {'refused':>7}"
    )
    for r in rows:
        ratio = r["avg_jct_s"] / base["avg_jct_s"] if r["avg_jct_s"] and base["avg_jct_s"] else 0
        alloc = f"{r['gpu_allocated']:.1%}" if r["gpu_allocated"] is not None else "-"
        print(
            f"{r['mode']:<6} {r['finished']:>5} {r['avg_jct_s']:>10.0f} {r['p95_jct_s']:>10.0f}"
            f" {r['makespan_s']:>11.0f} {ratio:>9.2f} {alloc:>9} {r['gpu_use']:>8.1%}"
            f" {r['kubeshare_refused'] + r['kubelet_rejections']:>7}"
        )


if __name__ == "__main__":
    main()
