"""Container migration, measured: container-migration's speed scenarios and a trace.

    python -m benchmarks.migration [--scenarios a,b,c,d,e] [--trace-jobs 60] [--no-trace]
        [--json OUT.json] [--markdown] [--examples] [--mc cost-free|defaults|recommended]

``--mc``: Metacontroller's costs every run is under (``benchmarks.mc_costs``; default:
its defaults, as ``dragonet simulate`` runs).

**The examples, through the CLI** (``--examples``): ``examples/migration/speed-*/``, the
same scenarios as manifests, run as a user runs them, ``dragonet simulate job1.yaml
job2.yaml job3.yaml --nodes examples/migration/nodes.yaml --monitor --policy
dragon,dragonet --json``: the CPU the manifests imply (``sim/cpu.py``), 1 s per step
alone and a 30 s restore (the simulator's defaults). Prints DRAGON's and Dragonet's
average JCT, their ratio and the moves of each.

**Speed scenarios** (dragon-algorithm.md §10, speed-a ... speed-e): three TFJobs of one
parameter server and 1-3 workers (min = max = replicas), requests 250m/500Mi (speed-b:
500m/1Gi, and one job 1 CPU/2Gi), limits 4 CPU/8Gi, on three 4-CPU/16Gi nodes, with a
``node-preference`` that piles them up (a, b, d) or spreads them (c, e). Training is
CPU-bound (a worker runs at the CPU its node's CFS gives it, ``sim/cpu.py``) and a
moved worker restores for ``restore_s`` before it counts again. Each runs under:

* ``dragon``: DRAGON's rules, no migration (no monitor);
* ``dragon+mig``: DRAGON's rules, DRAGON's Container Monitor (converged workers, or those
  of a node overloaded by its pods' limits) and DRAGON's target choice
  (``spec.migration.score: dragon``);
* ``dragonet``: Dragonet's policy, Dragonet's monitor (a node's load is what its pods
  request or use), Dragonet's target choice (the worker's expected speed, a move only when
  it pays ``minGain`` and puts idle CPU to work) and its ``balance`` moves;
* ``dragonet-nomig``: Dragonet's policy without migration (what the policy alone does).

The jobs carry ``dragonet.io/chief-movable: "true"``: container-migration's preemptible
jobs run their chief inside the parameter-server pod, so every worker may move.

**The planner's own moves** (``spec.migration.consolidate``, ``defragment``), each against
``dragonet`` without them: on a Philly slice (GPU jobs, not CPU-bound), and on
``scattered``, a small scenario built for defragmentation (a 4-GPU worker waits while four
one-GPU jobs leave 3 GPUs free on each of four nodes).

Prints average JCT per system side by side, and the ratio to ``dragon`` in the same run.
Not a test: the exit code is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.mc_costs import SETTINGS, configured
from policy.model.migration import CHIEF_MOVABLE_ANNOTATION
from sim.engine import Scenario, SimConfig, Simulation
from sim.kube import node_object
from sim.monitor import MonitorConfig
from sim.spec import JobSpec, TrainingProfile, tfjob_manifest

NODES = ("node-1", "node-2", "node-3")
# CPU-bound training: 0.5 s per step alone on 4 cores; a restarted worker reconnects to
# its parameter server and restores for 20 s (no checkpoint: the state is on the PS).
SPEED = TrainingProfile(name="speed", step_time_s=0.5, restore_s=20.0, cpu_bound=True)


@dataclass(frozen=True)
class SpeedCase:
    workers: tuple[int, int, int]
    preference: tuple[str, str, str]
    steps: int
    requests: tuple[tuple[str, str], tuple[str, str], tuple[str, str]]


_SMALL = ("250m", "500Mi")
# dragon-algorithm.md §10: the table of scenarios.
SPEED_CASES: Mapping[str, SpeedCase] = {
    "a": SpeedCase((1, 1, 1), ("node-1",) * 3, 1000, (_SMALL,) * 3),
    "b": SpeedCase(
        (2, 1, 1),
        ("node-1", "node-1", "node-2"),
        500,
        (("1", "2Gi"), ("500m", "1Gi"), ("500m", "1Gi")),
    ),
    "c": SpeedCase((1, 1, 1), NODES, 1000, (_SMALL,) * 3),
    "d": SpeedCase((3, 3, 3), ("node-1",) * 3, 1000, (_SMALL,) * 3),
    "e": SpeedCase((3, 3, 3), NODES, 1000, (_SMALL,) * 3),
}


def _container(requests: tuple[str, str]) -> dict[str, Any]:
    cpu, memory = requests
    return {
        "name": "tensorflow",
        "image": "haverzard/tf-image:0.0.0",
        "ports": [{"name": "tfjob-port", "containerPort": 2222}],
        "resources": {
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": "4", "memory": "8Gi"},
        },
    }


def speed_job(name: str, workers: int, node: str, requests: tuple[str, str]) -> dict[str, Any]:
    """One of container-migration's speed-test TFJobs (its ``solution`` form)."""

    def replica(n: int) -> dict[str, Any]:
        return {
            "replicas": n,
            "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [_container(requests)]}},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {CHIEF_MOVABLE_ANNOTATION: "true"},
        },
        "spec": {
            "max-instances": workers,
            "min-instances": workers,
            "node-preference": node,
            "cleanPodPolicy": "All",
            "tfReplicaSpecs": {"PS": replica(1), "Worker": replica(workers)},
        },
    }


def speed_scenario(letter: str) -> Scenario:
    case = SPEED_CASES[letter]
    nodes = tuple(node_object(n, {"cpu": "4", "memory": "16Gi"}) for n in NODES)
    jobs = tuple(
        JobSpec(speed_job(f"job{i + 1}", w, node, req), float(i), float(case.steps), SPEED)
        for i, (w, node, req) in enumerate(
            zip(case.workers, case.preference, case.requests, strict=True)
        )
    )
    return Scenario(f"speed-{letter}", nodes, jobs)


# The systems compared: (name, SimConfig).
SYSTEMS: Mapping[str, SimConfig] = {
    "dragon": SimConfig(policy="dragon", migration={"enabled": False}),
    "dragon+mig": SimConfig(
        policy="dragon", monitor=MonitorConfig(load="limits"), migration={"score": "dragon"}
    ),
    "dragonet": SimConfig(
        policy="dragonet", monitor=MonitorConfig(), migration={"score": "dragonet"}
    ),
    # Dragonet's policy without migration: what the policy alone changes.
    "dragonet-nomig": SimConfig(policy="dragonet", migration={"enabled": False}),
}


def run_speed(letter: str, system: str, mc: str = "defaults") -> dict[str, Any]:
    result = Simulation(speed_scenario(letter), configured(SYSTEMS[system], mc)).run()
    s = result.summary
    return {
        "scenario": f"speed-{letter}",
        "system": system,
        "avg_jct_s": s["avg_jct_s"],
        "makespan_s": s["makespan_s"],
        "jcts": {r.key: r.jct_s for r in result.jobs},
        "migrations": s.get("migrations", 0),
        "requests": s.get("migration_requests", 0),
    }


# The planner's own moves, each measured against Dragonet without them.
PLANNER: Mapping[str, Mapping[str, Any]] = {
    "dragonet": {},
    "dragonet+consolidate": {"consolidate": True},
    "dragonet+defragment": {"defragment": True},
}


def run_trace(jobs: int, system: str, mc: str = "defaults") -> dict[str, Any]:
    from benchmarks.elastic import PHILLY
    from sim.scenario import from_trace

    scenario = from_trace(PHILLY, jobs=jobs, start=72_500)
    config = configured(SimConfig(policy="dragonet", migration=dict(PLANNER[system])), mc)
    s = Simulation(scenario, config).run().summary
    return {
        "scenario": f"philly-{jobs}",
        "system": system,
        "avg_jct_s": s["avg_jct_s"],
        "makespan_s": s["makespan_s"],
        "migrations": s.get("migrations", 0),
    }


def frag_scenario() -> Scenario:
    """Scattered room: four long one-GPU jobs, one per 4-GPU node (each node keeps 3 GPUs
    free), then a job whose worker needs a whole node's 4 GPUs. No shrink can help (the
    small jobs are not elastic); moving one small worker can."""
    nodes = tuple(
        node_object(f"gpu-{i}", {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "4"})
        for i in range(1, 5)
    )
    small = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}
    jobs = []
    for i in range(1, 5):
        m = tfjob_manifest(f"small-{i}", workers=1, ps=1, worker_resources=small)
        m["spec"]["node-preference"] = f"gpu-{i}"
        m["metadata"]["annotations"] = {CHIEF_MOVABLE_ANNOTATION: "true"}
        jobs.append(JobSpec(m, float(i), 3000.0, TrainingProfile()))
    big = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"}
    jobs.append(JobSpec(tfjob_manifest("big", workers=1, ps=1, worker_resources=big), 60.0, 600.0))
    return Scenario("scattered", nodes, tuple(jobs))


def run_frag(system: str, mc: str = "defaults") -> dict[str, Any]:
    config = configured(SimConfig(policy="dragonet", migration=dict(PLANNER[system])), mc)
    result = Simulation(frag_scenario(), config).run()
    s = result.summary
    return {
        "scenario": "scattered",
        "system": system,
        "avg_jct_s": s["avg_jct_s"],
        "makespan_s": s["makespan_s"],
        "jcts": {r.key: r.jct_s for r in result.jobs},
        "migrations": s.get("migrations", 0),
    }


def _table(rows: Sequence[Mapping[str, Any]], systems: Sequence[str], markdown: bool) -> str:
    by: dict[str, dict[str, Mapping[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["scenario"], {})[r["system"]] = r
    third = systems[min(2, len(systems) - 1)]
    head = ["scenario", *(f"{s} avg JCT" for s in systems), "moves", f"{third} / {systems[0]}"]
    lines = []
    for scenario, cells in by.items():
        base = cells.get(systems[0], {}).get("avg_jct_s")
        row = [scenario]
        for s in systems:
            v = cells.get(s, {}).get("avg_jct_s")
            row.append(f"{v:.0f} s" if isinstance(v, (int, float)) else "-")
        row.append(" / ".join(str(cells.get(s, {}).get("migrations", "-")) for s in systems))
        last = cells.get(systems[min(2, len(systems) - 1)], {}).get("avg_jct_s")
        row.append(f"{last / base:.2f}x" if base and last else "-")
        lines.append(row)
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(r) + " |" for r in lines]
        return "\n".join(out)
    widths = [max(len(x) for x in col) for col in zip(head, *lines, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r) for r in (head, *lines))


EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "migration"
EXAMPLE_STEPS = {"b": 500}  # speed-b's global_steps; the others' 1000, the CLI's default
# The CLI's flags for each of benchmarks.mc_costs.SETTINGS.
EXAMPLE_MC_FLAGS: Mapping[str, list[str]] = {
    "cost-free": ["--mc-cost-free"],
    "defaults": [],
    "recommended": [
        *("--mc-qps", "50", "--mc-burst", "100"),
        *("--mc-apply-strategy", "server-side-apply"),
    ],
}


def run_example(letter: str, mc: str = "defaults") -> dict[str, Any]:
    """One scenario of ``examples/migration`` through ``dragonet simulate``, both policies."""
    from cli.main import main as dragonet

    jobs = sorted(str(p) for p in (EXAMPLES / f"speed-{letter}").glob("job*.yaml"))
    argv = ["simulate", *jobs, "--nodes", str(EXAMPLES / "nodes.yaml"), "--monitor"]
    argv += ["--policy", "dragon,dragonet", "--json"]
    argv += ["--steps", str(EXAMPLE_STEPS.get(letter, 1000)), *EXAMPLE_MC_FLAGS[mc]]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = dragonet(argv)
    if code != 0:
        raise RuntimeError(f"dragonet {' '.join(argv)}: exit {code}")
    runs = {s["policy"]: s for s in map(json.loads, out.getvalue().splitlines())}
    dragon, dragonet_ = runs["dragon"], runs["dragonet"]
    return {
        "scenario": f"speed-{letter}",
        "dragon_jct_s": dragon["avg_jct_s"],
        "dragonet_jct_s": dragonet_["avg_jct_s"],
        "ratio": dragonet_["avg_jct_s"] / dragon["avg_jct_s"],
        "dragon_moves": dragon.get("migrations", 0),
        "dragonet_moves": dragonet_.get("migrations", 0),
    }


def _examples_table(rows: Sequence[Mapping[str, Any]]) -> str:
    out = [
        "| scenario | DRAGON avg JCT | Dragonet avg JCT | Dragonet / DRAGON "
        "| moves (DRAGON / Dragonet) |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['scenario']} | {r['dragon_jct_s']:.0f} s | {r['dragonet_jct_s']:.0f} s | "
            f"{r['ratio']:.2f}x | {r['dragon_moves']} / {r['dragonet_moves']} |"
        )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", default="a,b,c,d,e")
    p.add_argument("--trace-jobs", type=int, default=60)
    p.add_argument("--no-trace", action="store_true")
    p.add_argument("--json", help="write every cell's numbers here")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--jobs-parallel", type=int, default=2)
    p.add_argument(
        "--examples",
        action="store_true",
        help="run examples/migration through 'dragonet simulate --monitor' instead",
    )
    p.add_argument("--mc", default="defaults", choices=list(SETTINGS))
    args = p.parse_args(argv)
    letters = [x for x in args.scenarios.split(",") if x]
    unknown = [x for x in letters if x not in SPEED_CASES]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)} (a-e)", file=sys.stderr)
        return 2
    if args.examples:
        with ProcessPoolExecutor(max_workers=max(1, args.jobs_parallel)) as pool:
            rows = list(pool.map(run_example, letters, [args.mc] * len(letters)))
        print(_examples_table(rows))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"examples": rows}, f, indent=2)
        return 0
    with ProcessPoolExecutor(max_workers=max(1, args.jobs_parallel)) as pool:
        speed = [pool.submit(run_speed, x, s, args.mc) for x in letters for s in SYSTEMS]
        trace = (
            []
            if args.no_trace
            else [pool.submit(run_trace, args.trace_jobs, p, args.mc) for p in PLANNER]
        )
        frag = [pool.submit(run_frag, p, args.mc) for p in PLANNER]
        speed_rows = [f.result() for f in speed]
        trace_rows = [f.result() for f in frag] + [f.result() for f in trace]
    print(_table(speed_rows, list(SYSTEMS), args.markdown))
    if trace_rows:
        print()
        print(_table(trace_rows, list(PLANNER), args.markdown))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"speed": speed_rows, "trace": trace_rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
