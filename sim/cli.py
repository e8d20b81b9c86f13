"""``dragonet simulate``: run jobs on a simulated cluster under one policy or several."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson
from rich.console import Console

from policy.model.pool import POLICIES
from sim.engine import SimConfig, Simulation, SimulationError
from sim.results import SimResult
from sim.scenario import ScenarioError, from_manifests, from_trace, load_scenario

DEFAULT_SCENARIO = Path("examples/scenario.yaml")


def add_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "simulate",
        help="run jobs on a simulated cluster through the real webhook",
        description="Run a scenario (default: examples/scenario.yaml), TFJob files on a "
        "nodes file, or a trace, under Dragonet and the baselines, and compare.",
    )
    s.add_argument(
        "inputs",
        nargs="*",
        help=f"a scenario file, or TFJob manifests (with --nodes); default: {DEFAULT_SCENARIO}",
    )
    s.add_argument("--nodes", help="cluster file for TFJob manifests or a trace")
    s.add_argument("--trace", help="a Philly CSV or a Pollux workload CSV")
    s.add_argument("--jobs", type=int, default=1000, help="trace rows to replay (Philly)")
    s.add_argument("--start", type=int, default=0, help="trace rows to skip (Philly)")
    s.add_argument("--load", type=float, default=1.0, help="arrival-rate factor (2 = twice)")
    s.add_argument(
        "--mx-share",
        type=float,
        default=0.0,
        help="share of the trace's jobs replayed as MXJobs of the same shape (0.5 = half)",
    )
    s.add_argument("--steps", type=float, default=1000, help="steps per job for plain manifests")
    s.add_argument(
        "--policy",
        default="all",
        help=f"one of {', '.join(POLICIES)}, a comma-separated list, or 'all' (default)",
    )
    s.add_argument("--binding", choices=["affinity", "nodeName"], default="affinity")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument(
        "--mc-workers", type=int, default=1, help="Metacontroller workers per controller"
    )
    s.add_argument("--view-delay", type=float, default=0.0, help="staleness of its view (s)")
    s.add_argument(
        "--sync-cost",
        choices=["model", "measured"],
        default="model",
        help="simulated time a sync takes: a function of its request's size (default; "
        "reproducible) or the webhook's measured wall time (varies run to run)",
    )
    s.add_argument("--json", action="store_true", help="one JSON summary per policy")
    s.add_argument("--plot", help="write allocation and job timelines to this PNG")


def _policies(raw: str) -> list[str]:
    names = list(POLICIES) if raw == "all" else [p.strip() for p in raw.split(",") if p.strip()]
    unknown = [p for p in names if p not in POLICIES]
    if unknown or not names:
        raise ScenarioError(f"unknown policy {', '.join(unknown)}; known: {', '.join(POLICIES)}")
    return names


def _scenario(args: argparse.Namespace):
    if args.trace:
        return from_trace(
            args.trace,
            jobs=args.jobs,
            start=args.start,
            load=args.load,
            nodes_path=args.nodes,
            mx_share=args.mx_share,
        )
    inputs = args.inputs or [str(DEFAULT_SCENARIO)]
    if len(inputs) == 1 and not args.nodes:
        if not Path(inputs[0]).exists():
            raise ScenarioError(f"{inputs[0]}: no such file (run from the repository root?)")
        return load_scenario(inputs[0])
    if not args.nodes:
        raise ScenarioError("TFJob manifests need --nodes (a cluster file)")
    return from_manifests(inputs, args.nodes, steps=args.steps)


def run(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    try:
        policies = _policies(args.policy)
        scenario = _scenario(args)
    except (OSError, ValueError) as e:
        print(f"dragonet simulate: {e}", file=sys.stderr)
        return 2
    from sim.report import LiveView, print_summary

    results: list[SimResult] = []
    with LiveView(err, enabled=not args.json) as live:
        for policy in policies:
            config = SimConfig(
                policy=policy,
                binding=args.binding,
                seed=args.seed,
                mc_workers=args.mc_workers,
                view_delay_s=args.view_delay,
                sync_cost=args.sync_cost,
            )
            try:
                results.append(Simulation(scenario, config, on_progress=live.update).run())
            except SimulationError as e:
                print(f"dragonet simulate: {policy}: {e}", file=sys.stderr)
                return 1
    if args.json:
        for r in results:
            sys.stdout.write(orjson.dumps(dict(r.summary)).decode() + "\n")
    else:
        print_summary(results, Console())
    if args.plot:
        from sim.plot import plot

        plot(results, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0
