"""``dragonet simulate``: run jobs on a simulated cluster under one policy or several.

Every job is checked as the webhook checks it before anything runs: an invalid one stops
the command with its reason (a simulation would only show it never finished)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

# The parser needs only the names of policies and gang schedulers: the simulator, rich and
# the webhook are imported by the functions that run them, so --help and a refused flag
# answer at once.
from policy.model.pool import GANG_SCHEDULER_CHOICES, POLICIES

if TYPE_CHECKING:
    from policy.model.pool import PoolSpec
    from sim.engine import Scenario
    from sim.monitor import MonitorConfig

# examples/scenario.yaml, shipped with the package (sim/data/examples links to examples/), so
# `dragonet simulate` runs it from any folder and from a wheel install.
DEFAULT_SCENARIO = Path(__file__).resolve().parent / "data" / "examples" / "scenario.yaml"
DEFAULT_HORIZON_DAYS = 60.0

EXAMPLES = """\
examples:
  dragonet simulate                    # examples/scenario.yaml, all six policies
  dragonet simulate examples/elastic.yaml --policy dragonet,gang-fifo --plot run.png
  dragonet simulate job-a.yaml job-b.yaml --nodes nodes.yaml --steps 5000
  dragonet simulate --trace philly.csv --start 72500 --jobs 200 --load 2 --json
  dragonet simulate --trace workload-1.csv --jobs 40   # its first 40 jobs by arrival
  dragonet simulate --mc-qps 50 --mc-burst 100 --json  # a faster Metacontroller client
  dragonet simulate --mc-cost-free                    # writes free and instant (the old model)
  dragonet simulate --trace workload-1.csv --pool examples/pollux-tiresias-pool.yaml
  dragonet simulate examples/elastic.yaml --policy dragonet --dump state.json --dump-at 600

policies: dragonet (the product), dragon (DRAGON's rules), gang-fifo (all-or-nothing
FIFO, static sizes), kube-default (no admission: the kube-scheduler places each pod),
dragonet-las (dragonet in least-attained-service order, with preemption) and tiresias
(discretised LAS with preemption, static sizes); 'all' runs each.

nodes file (--nodes): Node objects (kubectl get nodes -o yaml), or the short form
  nodes:
    - {name: big-1, cpu: 24, memory: 64Gi, gpu: 4}          # gpu: nvidia.com/gpu
    - name: spot-1
      pods: 30                                             # allocatable pods (110)
      labels: {pool: spot}                                 # for a pool's nodeSelector
      taints: [{key: spot, value: "true", effect: NoSchedule}]
      unschedulable: true                                  # cordoned
  (cpu 8, memory 32Gi, gpu 0, pods 110 when not given).

On a terminal a live view shows progress; otherwise a plain line every few seconds does.
A run the horizon cuts says so in the table, in --json (stopped_at_horizon) and the plot.

Every flag and file is checked before a run starts; a job given twice is refused; other
kinds in a job file (a ConfigMap in a bundle) are skipped with one line on stderr.

exit status: 0 when every input was understood and valid; 1 for an invalid job (its
reason is printed) or a simulation error; 2 for a file or option it could not use;
3 for an internal error (one line; DRAGONET_DEBUG=1 shows the traceback); 4 when every
job is valid but one can never run on these nodes in this pool (too large for every
node, no node it may use, fractional GPUs without KubeShare; the reason is printed).
"""


NEVER_RUNS_EXIT = 4  # valid jobs that can never run on these nodes (cli/main.py)


def add_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "simulate",
        help="run jobs on a simulated cluster through the real webhook",
        description="Run a scenario (default: examples/scenario.yaml), TFJob files on a\n"
        "nodes file, or a trace, under Dragonet and the baselines, and compare them.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "inputs",
        nargs="*",
        help="a scenario file, or TFJob manifests (with --nodes); default: examples/scenario.yaml",
    )
    s.add_argument(
        "--nodes",
        help="cluster file for job manifests (needed) or a trace: Node objects or the short "
        "form 'nodes: [{name, cpu, memory, gpu, pods, labels, taints, unschedulable}]'",
    )
    s.add_argument("--trace", help="a Philly CSV or a Pollux workload CSV")
    s.add_argument(
        "--jobs",
        type=int,
        default=1000,
        help="trace jobs to replay, in arrival order (Philly and Pollux; default 1000)",
    )
    s.add_argument(
        "--start", type=int, default=0, help="trace jobs to skip first (Philly and Pollux)"
    )
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
        help=f"one of {', '.join(POLICIES)}, a comma-separated list, or 'all' (the default, "
        "or the --pool file's policy)",
    )
    s.add_argument(
        "--pool",
        metavar="YAML",
        help="a TrainingPool manifest whose spec the default pool takes (each --policy "
        "replaces its policy), e.g. examples/pollux-tiresias-pool.yaml: Pollux's Tiresias",
    )
    s.add_argument(
        "--binding",
        choices=["affinity", "nodeName"],
        default="affinity",
        help="how planned pods are bound: node affinity, the kube-scheduler binds (default), "
        "or spec.nodeName directly",
    )
    s.add_argument(
        "--gang-scheduler",
        choices=GANG_SCHEDULER_CHOICES,
        default="none",
        help="the pool's external gang scheduler, which the run then also runs: it binds "
        "each job's PodGroup all at once (default none; docs/gang-schedulers.md)",
    )
    s.add_argument(
        "--seed",
        type=int,
        default=0,
        help="random seed of the pods' start delays; the same seed gives the same run (0)",
    )
    s.add_argument(
        "--horizon",
        type=float,
        default=DEFAULT_HORIZON_DAYS,
        metavar="DAYS",
        help="stop a run this many simulated days in, and say so (default 60)",
    )
    mc = s.add_argument_group(
        "Metacontroller",
        "one Metacontroller process runs every controller; each flag defaults to "
        "Metacontroller's own default (v4.17.2; docs/simulator.md)",
    )
    mc.add_argument(
        "--mc-workers", type=int, default=5, help="workers per controller (--workers; 5)"
    )
    mc.add_argument(
        "--mc-qps",
        type=float,
        default=5.0,
        help="API requests per second of its one client (--client-go-qps; 5; 0: no limit)",
    )
    mc.add_argument(
        "--mc-burst", type=int, default=10, help="burst of that client (--client-go-burst; 10)"
    )
    mc.add_argument(
        "--mc-resync",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="every parent synced again this often (--cache-flush-interval; 1800; 0: never)",
    )
    mc.add_argument(
        "--mc-customize-ttl",
        type=float,
        default=1200.0,
        metavar="SECONDS",
        help="how long a customize answer is cached (1200; 0: for ever)",
    )
    mc.add_argument(
        "--mc-apply-strategy",
        choices=["dynamic-apply", "server-side-apply"],
        default="dynamic-apply",
        help="how children are written (--apply-strategy): dynamic-apply (default) stamps "
        "each child with a last-applied-configuration copy of itself",
    )
    mc.add_argument(
        "--mc-cost-free",
        action="store_true",
        help="the simulator's old, generous Metacontroller: one worker, free and instant "
        "API writes, no resync, customize cached for ever, minimal objects (overrides the "
        "flags above)",
    )
    mc.add_argument(
        "--object-sizes",
        choices=["real", "minimal"],
        default="real",
        help="nodes, pods and children as a real API server returns them (managedFields, "
        "node images, kubelet status; default) or as small as the simulator needs",
    )
    mc.add_argument("--view-delay", type=float, default=0.0, help="staleness of its view (s)")
    s.add_argument(
        "--sync-cost",
        choices=["model", "measured"],
        default="model",
        help="simulated time a sync takes: a function of its request's size (default; "
        "reproducible) or the webhook's measured wall time (varies run to run)",
    )
    s.add_argument(
        "--kubeshare",
        choices=["none", "v1", "v2"],
        default="none",
        help="fractional GPUs (docs/kubeshare.md): the pool's spec.kubeshare; KubeShare v1 "
        "(SharePods) or v2 (kubeshare-scheduler) is modelled on the simulated nodes",
    )
    s.add_argument(
        "--monitor",
        action="store_true",
        help="run the Container Monitor on every node: training tasks report their metric, "
        "and converged or overloaded workers are asked to move (docs/migration.md); the "
        "JSON summary counts migrations and requests",
    )
    s.add_argument(
        "--dump",
        metavar="JSON",
        help="write the simulated API server's nodes, pods, pools, jobs and Admissions at the "
        "end of the run (or at --dump-at) as a List, as 'kubectl get ... -A -o json' would "
        "(one policy only)",
    )
    s.add_argument(
        "--dump-at",
        type=float,
        metavar="SECONDS",
        help="with --dump: the objects as they stood this many simulated seconds in",
    )
    s.add_argument(
        "--report-throughput",
        action="store_true",
        help="training jobs report their speed to the monitor's writer, which writes each "
        "job's dragonet.io/throughput annotation (docs/speedup.md); the JSON summary counts "
        "reports and writes; the allocation rule of the dragonet policies uses it",
    )
    s.add_argument(
        "--adaptive-batch",
        action="store_true",
        help="with a Pollux workload --trace: every job declares the batch sizes it can take "
        "(dragonet.io/batch-size, the artifact's bounds per application) and trains at the "
        "batch the pool chooses, with Pollux's statistical efficiency; implies "
        "--report-throughput (the pool chooses from the jobs' reports)",
    )
    s.add_argument(
        "--json",
        action="store_true",
        help="print one JSON summary line per policy, with a record per job (job_records)",
    )
    s.add_argument(
        "--html",
        metavar="HTML",
        help="write one web page of the runs (no server needed; docs/simulator.md): every "
        "job's timeline and story, allocation and utilisation, JCT distributions",
    )
    s.add_argument(
        "--plot",
        metavar="PNG",
        help="write a picture of the runs: each job's allocation over time, the jobs' "
        "timeline and the JCT distribution",
    )


# Each numeric flag's least value, and whether it may equal it: checked before anything
# runs, so a bad one is one line naming it, not an internal error an hour in.
NUMERIC_FLAGS: dict[str, tuple[float, bool, str]] = {
    "jobs": (1, True, "a whole number of jobs, at least 1"),
    "start": (0, True, "a whole number of jobs to skip, 0 or more"),
    "load": (0, False, "a factor above 0"),
    "mx_share": (0, True, "a share from 0 to 1"),
    "steps": (0, False, "a number of steps above 0"),
    "horizon": (0, False, "a number of days above 0"),
    "mc_workers": (1, True, "a whole number of workers, at least 1"),
    "mc_qps": (0, True, "requests per second, 0 (no limit) or more"),
    "mc_burst": (1, True, "a whole number of requests, at least 1"),
    "mc_resync": (0, True, "seconds, 0 (never) or more"),
    "mc_customize_ttl": (0, True, "seconds, 0 (for ever) or more"),
    "view_delay": (0, True, "seconds, 0 or more"),
}


def flag_problem(args: argparse.Namespace) -> str | None:
    """The first flag a run cannot use, as one line naming it; None when all are usable."""
    import math

    for name, (least, inclusive, what) in NUMERIC_FLAGS.items():
        value = getattr(args, name)
        ok = math.isfinite(value) and (value >= least if inclusive else value > least)
        if name == "mx_share":
            ok = ok and value <= 1
        if not ok:
            return f"--{name.replace('_', '-')} {value:g}: must be {what}"
    if problem := _dump_problem(args) or output_problem(
        "--html", getattr(args, "html", None), ".html"
    ):
        return problem
    return output_problem("--plot", args.plot, ".png")


def _dump_problem(args: argparse.Namespace) -> str | None:
    import math

    dump, at = getattr(args, "dump", None), getattr(args, "dump_at", None)
    if at is not None and not dump:
        return "--dump-at needs --dump (the file to write)"
    if at is not None and not (math.isfinite(at) and at >= 0):
        return f"--dump-at {at:g}: must be simulated seconds, 0 or more"
    return output_problem("--dump", dump, None)


def output_problem(flag: str, path: str | None, suffix: str | None) -> str | None:
    """Why an output file cannot be written where it is asked for (None: it can)."""
    import os

    if not path:
        return None
    out = Path(path)
    if suffix is not None and out.suffix.lower() != suffix:
        return f"{flag} {path}: only {suffix} is supported"
    if not out.parent.is_dir():
        return f"{flag} {path}: no such directory {str(out.parent)!r}"
    if not os.access(out.parent, os.W_OK):
        return f"{flag} {path}: directory {str(out.parent)!r} is not writable"
    return None


def monitor_config(policy: str) -> MonitorConfig:
    """The Container Monitor of a policy: DRAGON's judges nodes by their pods' limits
    (its ``/cluster-info``), Dragonet's by what they request and use."""
    from sim.monitor import MonitorConfig

    return MonitorConfig(load="limits" if policy == "dragon" else "usage")


def _pool_spec(path: str) -> dict[str, object]:
    """The spec of the one TrainingPool in ``path``, checked as the CRD would."""
    from pydantic import ValidationError

    from policy.model.pool import PoolSpec
    from webhooks.manifests import ManifestError, load_pool

    spec = dict(load_pool(path).get("spec") or {})
    try:
        PoolSpec.model_validate(spec)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in ("spec", *first["loc"]))
        raise ManifestError(f"{path}: {field}: {first['msg']}") from None
    return spec


def _policies(raw: str) -> list[str]:
    from sim.spec import ScenarioError

    if raw == "all":
        return list(POLICIES)
    names = [p.strip() for p in raw.split(",")]
    known = ", ".join(POLICIES)
    if not any(names):
        raise ScenarioError(f"--policy: names no policy (known: {known}, or 'all')")
    if "" in names:
        raise ScenarioError(f"--policy {raw!r}: an empty name in the list (known: {known})")
    unknown = [p for p in names if p not in POLICIES]
    if unknown:
        raise ScenarioError(f"unknown policy {', '.join(unknown)}; known: {known}")
    twice = sorted({p for p in names if names.count(p) > 1})
    if twice:
        raise ScenarioError(f"--policy: {', '.join(twice)} given twice (each runs once)")
    return names


def _scenario(args: argparse.Namespace) -> Scenario:
    # sim.scenario loads the simulator (a second): a file refused here must not wait for it.
    from sim.spec import ScenarioError

    if args.trace:
        from sim.scenario import from_trace

        return from_trace(
            args.trace,
            jobs=args.jobs,
            start=args.start,
            load=args.load,
            nodes_path=args.nodes,
            mx_share=args.mx_share,
            adaptive=args.adaptive_batch,
        )
    inputs = args.inputs or [str(DEFAULT_SCENARIO)]
    if len(inputs) == 1 and not args.nodes:
        if not Path(inputs[0]).exists():
            raise ScenarioError(f"{inputs[0]}: no such file")
        if _holds_objects(inputs[0]):
            raise ScenarioError(
                f"{inputs[0]}: job manifests need --nodes (a cluster file, e.g. "
                "examples/nodes.yaml); a scenario file (examples/scenario.yaml) needs none"
            )
        from sim.scenario import load_scenario

        return load_scenario(inputs[0])
    if not args.nodes:
        raise ScenarioError("TFJob manifests need --nodes (a cluster file)")
    from sim.scenario import from_manifests

    skipped: list[str] = []
    scenario = from_manifests(inputs, args.nodes, steps=args.steps, skipped=skipped)
    for said in skipped:
        print(f"dragonet simulate: {said}", file=sys.stderr)
    return scenario


def _holds_objects(path: str) -> bool:
    """Whether a file holds Kubernetes objects (job manifests), not a scenario."""
    from webhooks.manifests import load_documents

    return any("kind" in doc for doc in load_documents(path))


def origins(args: argparse.Namespace) -> dict[str, str]:
    """Where each job of plain manifest files was written (``path:line``), by its key."""
    from webhooks.manifests import load_jobs

    if args.trace or not args.nodes:
        return {}
    found: dict[str, str] = {}
    for path in args.inputs:
        for line, doc in load_jobs(path, []):  # other kinds: said by _scenario
            meta = doc.get("metadata") or {}
            if isinstance(meta, dict):
                found[f"{meta.get('namespace') or 'default'}/{meta.get('name')}"] = f"{path}:{line}"
    return found


def check_jobs(
    scenario: Scenario,
    where_of: Mapping[str, str] | None = None,
    fallback: str | None = None,
    pool: PoolSpec | None = None,
    kubeshare: str = "none",
) -> tuple[list[str], list[str], list[str]]:
    """(problems, warnings, never): each job as the webhook would judge it, one line each,
    naming its file and line where known, else ``fallback`` (the scenario file or trace).
    A job asking for fractional GPUs in a pool without KubeShare would wait for ever: it
    is valid, but never runs."""
    from pydantic import ValidationError

    from policy.model.jobs import InvalidJob, parse_job
    from policy.model.kinds import BY_KIND, TFJOB
    from policy.model.pool import DEFAULT_POOL, PoolSpec
    from policy.pool.gang_backends import note

    problems: list[str] = []
    warnings: list[str] = []
    never: list[str] = []
    pool = pool or PoolSpec()
    for spec in scenario.jobs:
        kind = BY_KIND.get(str(spec.manifest.get("kind"))) or TFJOB
        origin = (where_of or {}).get(spec.key, fallback or scenario.name)
        where = f"{origin}: {kind.kind} {spec.key}"
        try:
            job = parse_job(spec.manifest, kind)
        except InvalidJob as err:
            problems.append(f"{where} is invalid: {err}")
            continue
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(p) for p in ("metadata", *first["loc"]))
            problems.append(f"{where} is invalid: {field}: {first['msg']}")
            continue
        if job.wants_kubeshare and kubeshare == "none":
            never.append(
                f"{where} asks for fractional GPUs (KubeShare), and the pool has no KubeShare: "
                "it would wait forever; run with --kubeshare v1 or v2"
            )
            continue
        said = note(job, DEFAULT_POOL, pool, ())
        if said:
            warnings.append(f"{where}: warning: {said}")
    return problems, warnings, never


def never_running(
    scenario: Scenario, pool: PoolSpec, where_of: Mapping[str, str], fallback: str
) -> dict[str, str]:
    """One line (by ``kind/namespace/name``) per valid job the pool says can never run on
    the scenario's nodes (too large for every node, no node it may use), from one pool sync
    before the run."""
    from policy.model.pool import pool_object
    from webhooks.plan import never_runs

    jobs = []
    for i, spec in enumerate(scenario.jobs):
        meta = dict(spec.manifest.get("metadata") or {})
        meta.setdefault("uid", f"uid-{i}")
        meta.setdefault("generation", 1)
        meta.setdefault("creationTimestamp", "2020-01-01T00:00:00Z")
        jobs.append({**spec.manifest, "metadata": meta})
    own = pool_object(**pool.model_dump(mode="json", exclude_defaults=True))
    own["metadata"] = {"uid": "uid-pool", "generation": 1, **own.get("metadata", {})}
    lines = {}
    for key, why in never_runs(own, list(scenario.nodes), jobs).items():
        kind, _, name = key.partition("/")
        origin = where_of.get(name, fallback)
        lines[key] = f"{origin}: {kind} {name} can never run here: {why}"
    return lines


def never_under(
    scenario: Scenario,
    pool: PoolSpec,
    policies: Sequence[str],
    where_of: Mapping[str, str],
    fallback: str,
) -> tuple[list[str], list[str]]:
    """``never_running`` under each policy compared: (jobs no policy can run, jobs only some
    cannot, each line naming those). A gang that fits at its ``min-instances`` but not
    whole runs under an elastic policy and never under a static one: the comparison still
    runs, and shows it."""
    from policy.pool.policies import rules_for
    from policy.pool.rules import Behaviour

    found: dict[str, list[tuple[str, str]]] = {}
    # kube-default leaves placement to the kube-scheduler: its pool never judges a job.
    judging = 0
    for policy in policies:
        own = pool.model_copy(update={"policy": policy})
        if Behaviour.KUBE_SCHEDULER_PLACES in rules_for(own).does:
            continue
        judging += 1
        for key, line in never_running(scenario, own, where_of, fallback).items():
            found.setdefault(key, []).append((policy, line))
    never, some = [], []
    for said in found.values():
        if len(said) == judging:
            never.append(said[0][1])  # under every policy: the first one's words
        else:
            under = ", ".join(p for p, _ in said)
            some.append(f"warning: {said[0][1]} (under {under}; it runs under the others)")
    return never, some


def run(args: argparse.Namespace) -> int:
    if problem := flag_problem(args):
        print(f"dragonet simulate: {problem}", file=sys.stderr)
        return 2
    try:  # the files first: one refused here is said before the simulator is imported
        pool_spec = _pool_spec(args.pool) if getattr(args, "pool", None) else None
        default = str((pool_spec or {}).get("policy", "dragonet")) if pool_spec else "all"
        policies = _policies(default if args.policy is None else args.policy)
        scenario = _scenario(args)
    except OSError as e:
        where = f"{e.filename}: {e.strerror}" if e.filename else str(e)
        print(f"dragonet simulate: {where}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"dragonet simulate: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    from dataclasses import replace

    import orjson
    from pydantic import ValidationError
    from rich.console import Console

    from policy.model.pool import PoolSpec, pool_object
    from sim.dump import StateDump
    from sim.engine import DAY, SimConfig, Simulation, SimulationError
    from sim.results import SimResult
    from sim.throughput import ThroughputConfig

    err = Console(stderr=True)
    if not scenario.jobs:
        print(f"dragonet simulate: {scenario.name}: no jobs to run", file=sys.stderr)
        return 2
    dump_path = getattr(args, "dump", None)
    if dump_path and len(policies) > 1:
        print(
            f"dragonet simulate: --dump {dump_path}: one policy's objects at a time "
            f"(add --policy, e.g. --policy {policies[0]})",
            file=sys.stderr,
        )
        return 2
    fallback = args.trace or (args.inputs[0] if args.inputs else str(DEFAULT_SCENARIO))
    kubeshare = getattr(args, "kubeshare", "none")
    try:
        spec = {**(pool_spec or {}), "policy": policies[0]}
        flags = {  # an option given on the command line wins over the --pool file
            "gangScheduler": (args.gang_scheduler, "none"),
            "binding": (args.binding, "affinity"),
            "kubeshare": (kubeshare, "none"),
        }
        for key, (value, default) in flags.items():
            if value != default or key not in spec:
                spec[key] = value
        pool = PoolSpec.model_validate(spec)
    except ValidationError as err:
        why = str(err.errors()[0]["msg"]).removeprefix("Value error, ")
        print(f"dragonet simulate: --gang-scheduler {args.gang_scheduler}: {why}", file=sys.stderr)
        return 2
    where_of = origins(args)
    problems, warnings, never = check_jobs(scenario, where_of, fallback, pool, kubeshare)
    if not problems and not never:
        never, some = never_under(scenario, pool, policies, where_of, fallback)
        warnings += some
    for line in [*warnings, *problems, *never]:
        print(f"dragonet simulate: {line}", file=sys.stderr)
    if problems:
        return 1
    if never:
        return NEVER_RUNS_EXIT
    from sim.report import LiveView, horizon_note, print_summary

    results: list[SimResult] = []
    dump: StateDump | None = None
    with LiveView(err, enabled=True, policies=len(policies)) as live:
        for policy in policies:
            config = SimConfig(
                policy=policy,
                binding=args.binding,
                gang_scheduler=args.gang_scheduler,
                seed=args.seed,
                mc_workers=args.mc_workers,
                mc_qps=args.mc_qps,
                mc_burst=args.mc_burst,
                mc_resync_s=args.mc_resync,
                mc_customize_ttl_s=args.mc_customize_ttl,
                mc_apply_strategy=args.mc_apply_strategy,
                object_sizes=args.object_sizes,
                view_delay_s=args.view_delay,
                sync_cost=args.sync_cost,
                max_time_s=args.horizon * DAY,
                kubeshare=kubeshare,
                monitor=monitor_config(policy) if args.monitor else None,
                throughput=ThroughputConfig()
                if args.report_throughput or args.adaptive_batch
                else None,
            )
            if args.mc_cost_free:
                config = config.cost_free()
            run_on = scenario
            if pool_spec is not None:  # the file's pool, under this run's policy
                own = pool.model_dump(mode="json", exclude_defaults=True) | {"policy": policy}
                run_on = replace(scenario, objects=(*scenario.objects, pool_object(**own)))
            try:
                sim = Simulation(run_on, config, on_progress=live.update)
                dump = (
                    StateDump(sim.api, lambda s=sim: s.now, getattr(args, "dump_at", None))
                    if dump_path
                    else None
                )
                results.append(sim.run())
            except SimulationError as e:
                print(f"dragonet simulate: {policy}: {e}", file=sys.stderr)
                return 1
    if dump is not None:
        cut = results[-1].summary.get("stopped_at_horizon")
        shown = dump.write(dump_path, args.horizon * DAY if cut else None)
        at = getattr(args, "dump_at", None)
        late = at is not None and shown < at
        when = f"{shown:g} s, where the horizon cut the run" if late else f"{shown:g} s"
        print(f"wrote {dump_path} (the objects at simulated time {when})", file=sys.stderr)
    if args.json:
        for r in results:
            line = {**r.summary, "job_records": [j.as_json() for j in r.jobs]}
            sys.stdout.write(orjson.dumps(line).decode() + "\n")
        for r in results:  # the table's caption says it; say it here too
            if note := horizon_note(r.summary):
                print(f"dragonet simulate: {note}", file=sys.stderr)
    else:
        print_summary(results, Console())
    if args.plot:
        from sim.plot import plot

        plot(results, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    if getattr(args, "html", None):
        from sim.view.run import write_html

        size = write_html(results, args.html)
        print(f"wrote {args.html} ({size / 2**20:.1f} MiB)", file=sys.stderr)
    return 0
