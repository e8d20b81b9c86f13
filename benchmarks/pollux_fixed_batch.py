"""Pollux's own policy with every job's batch size fixed: what Pollux's allocator gets
under the constraint a parameter-server job has (the outside reference for issues 26, 37).

    <artifact venv>/python benchmarks/pollux_fixed_batch.py SIMULATOR_DIR WORKLOAD_CSV \
        [--seed N] [--max-hours H]
    <artifact venv>/python benchmarks/pollux_fixed_batch.py SIMULATOR_DIR --selfcheck
    python benchmarks/pollux_fixed_batch.py --summarize RUN.json [RUN.json ...]

SIMULATOR_DIR is a checkout of ``simulator/`` from ``petuum/adaptdl`` branch
``osdi21-artifact`` (c793c70; never vendored here), with its dependencies and pymoo
0.4.2.2 (it builds from its sdist on Python 3.11 with ``pip install wheel`` first and
``--no-build-isolation``; benchmarks/README.md says how). The artifact runs unmodified
but for three things, each stated:

* numpy's removed aliases (``np.int``, ``np.float``, ``np.bool``) that its 2021 code
  uses are put back as the builtins they were;
* every job trains at its row's ``batch_size``, as the artifact's Tiresias and Optimus
  jobs do (``Job.target_batch_size``; Pollux's own ncf jobs are fixed the same way);
* the policy's speed-up function is the artifact's own ``SpeedupFunction`` around
  Pollux's learned goodput evaluated at that fixed batch, split over the replicas
  exactly as ``Job.update_local_bsz`` splits it; replicas whose share of the batch falls
  under the application's smallest local batch are not offered (the cap the artifact
  gives its Optimus jobs).

Why ``SpeedupFunction`` and not a plain function: ``pollux.py``'s ``Problem.__init__``
replaces any speed-up function without a ``_goodput_fn`` attribute by the straight line
``r / fair_replicas`` it uses for jobs not yet profiled. An earlier version of this
script handed it a plain function, so the allocator believed every job scaled linearly
and placement did not matter; its figures (issue 37) are withdrawn. Every time the
allocator builds its problem, :func:`check_speedup` now verifies, for every profiled job,
that the speed-up the allocator will use at 2 and 4 replicas is the fixed-batch model's
and not a line, and stops the run if not. ``--selfcheck`` shows it failing on the old
wrapping and passing on this one.

Prints JSON ``{"workload", "seed", "avg", "jcts"}`` (as the artifact's ``summary.json``),
and a line per simulated hour on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Speedup = Callable[[Any, Any], Any]

#: The replica counts at which the allocator's speed-up is checked against the model.
CHECKED_REPLICAS = (2, 4)


class LinearSpeedupError(AssertionError):
    """The allocator's speed-up at some replica count is not the job's model."""


def check_speedup(
    name: str, allocator: Speedup, model: Speedup, cap: int, rel: float = 1e-6
) -> None:
    """Fail loudly unless ``allocator`` (what Pollux's allocator will evaluate) scales as
    ``model`` (the fixed-batch goodput) from 1 to 2 and 4 replicas on one node.

    Only the ratios are compared: the allocator rescales a speed-up to the job's fair
    share, which changes its unit, not its shape. Counts above ``cap`` (replicas the job
    is never offered) are skipped.
    """
    one, base = float(allocator(1, 1)), float(model(1, 1))
    if one <= 0 or base <= 0:
        raise LinearSpeedupError(f"{name}: speed-up at 1 replica is {one} (model {base})")
    for r in CHECKED_REPLICAS:
        if r > cap:
            continue
        got, want = float(allocator(1, r)) / one, float(model(1, r)) / base
        if abs(got - want) > rel * max(abs(want), 1.0):
            linear = " (a straight line)" if abs(got - r) < 1e-9 else ""
            raise LinearSpeedupError(
                f"{name}: the allocator's speed-up at {r} replicas is {got:.4f}x one"
                f"{linear}, the fixed-batch model's is {want:.4f}x"
            )


def fixed_batch_goodput(job: Any, np: Any) -> tuple[Speedup, int]:
    """The job's goodput at its fixed batch as a function of (nodes, replicas), and the
    most replicas its batch can be split over (local batch >= the smallest allowed)."""
    app, goodput, batch = job.application, job.get_goodput_fn(), job.target_batch_size
    cap = max(1, batch // app.min_local_bsz)

    def at(nodes: Any, replicas: Any) -> Any:
        n, r = np.broadcast_arrays(np.asarray(nodes, float), np.asarray(replicas, float))
        n, r = n.astype(float).ravel(), r.astype(float).ravel()
        local = np.ceil(batch / np.maximum(r, 1) - 1e-8)  # Job.update_local_bsz's split
        accum = np.ceil(local / app.max_local_bsz - 1e-8) - 1
        accum = np.where((r == 1) & (batch > app.init_batch_size), np.maximum(1, accum), accum)
        atomic = np.ceil(local / (accum + 1) - 1e-8)
        atomic = np.minimum(atomic, np.floor(app.max_batch_size / (np.maximum(r, 1) * (accum + 1))))
        ok = (r >= 1) & (atomic >= app.min_local_bsz)
        out = np.zeros(n.shape)
        if ok.any():
            out[ok] = goodput(n[ok], r[ok], atomic[ok].astype(int), accum[ok].astype(int))
        shape = np.broadcast(np.asarray(nodes), np.asarray(replicas)).shape
        return out.reshape(shape) if shape else out.item()

    return at, cap


class FixedBatchGoodput:
    """Stands in for ``GoodputFunction`` inside the artifact's ``SpeedupFunction``: its
    ``optimize`` answers at the job's fixed batch instead of searching batch sizes.

    Replica counts above the job's cap are answered at the cap (on at most as many nodes):
    only the allocator's fair-share rescaling asks there, since the job is never offered
    more than its cap, and a fair share the job cannot use is worth what the cap gives.
    """

    def __init__(self, at: Speedup, cap: int) -> None:
        self._at, self._cap = at, cap  # no module here: the allocator deep-copies its jobs

    def optimize(self, num_nodes: Any, num_replicas: Any, **_: Any) -> tuple[Any, Any, Any]:
        import numpy as np

        r = np.minimum(np.asarray(num_replicas, float), self._cap)
        n = np.minimum(np.asarray(num_nodes, float), r)
        good = self._at(n, r)
        return good, None, None


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Runs (this script's JSON lines, any seeds) by workload: how many, mean average JCT,
    its spread (lowest, highest, sample standard deviation) and each application's mean."""
    by: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by.setdefault(Path(run["workload"]).stem, []).append(run)
    out: dict[str, dict[str, Any]] = {}
    for workload, got in sorted(by.items()):
        avgs = [float(r["avg"]) for r in got]
        apps: dict[str, list[float]] = {}
        for r in got:
            per: dict[str, list[float]] = {}
            for job, jct in r["jcts"].items():
                per.setdefault(job.rsplit("-", 1)[0], []).append(float(jct))
            for app, jcts in per.items():
                apps.setdefault(app, []).append(statistics.fmean(jcts))
        out[workload] = {
            "runs": len(got),
            "seeds": [r.get("seed") for r in got],
            "mean": statistics.fmean(avgs),
            "min": min(avgs),
            "max": max(avgs),
            "stdev": statistics.stdev(avgs) if len(avgs) > 1 else None,
            "apps": {a: statistics.fmean(v) for a, v in sorted(apps.items())},
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("simulator", type=Path)
    p.add_argument("workload", type=Path, nargs="?")
    p.add_argument("--seed", type=int, default=None, help="numpy's seed (the GA is random)")
    p.add_argument(
        "--selfcheck",
        action="store_true",
        help="show the allocator check failing on the old wrapping and passing on this one",
    )
    p.add_argument(
        "--summarize",
        action="store_true",
        help="SIMULATOR_DIR and WORKLOAD_CSV are instead files of earlier runs' JSON lines: "
        "print each workload's runs, mean, spread and per-application means",
    )
    args, extra = p.parse_known_args()
    if args.summarize:
        files = [args.simulator, *([args.workload] if args.workload else []), *map(Path, extra)]
        runs = [json.loads(line) for f in files for line in f.read_text().splitlines() if line]
        print(json.dumps(summarize(runs), indent=1))
        return
    if extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    sys.path.insert(0, str(args.simulator))
    import numpy as np

    for name, kind in (("int", int), ("float", float), ("bool", bool)):
        setattr(np, name, kind)  # the aliases numpy 1.24 removed
    import pollux  # the artifact's pollux.py, from SIMULATOR_DIR
    import simulator as sim  # the artifact's simulator.py, from SIMULATOR_DIR

    if args.selfcheck:
        sys.exit(_selfcheck(sim, pollux, np))
    if args.workload is None:
        p.error("WORKLOAD_CSV is required (or --selfcheck)")
    if args.seed is not None:
        np.random.seed(args.seed)
    _fix_batches(sim, np)
    _check_allocator(pollux)
    started = time.monotonic()
    step = sim.Cluster.step

    def logged(self: Any, seconds: int = 60) -> None:
        step(self, seconds)
        if int(self.current_time) % 3600 == 0:
            done = sum(j.completion_time is not None for j in self.jobs)
            elapsed = time.monotonic() - started
            print(
                f"{self.current_time / 3600:.0f} h simulated, {done}/{len(self.jobs)} done, "
                f"{elapsed:.0f} s",
                file=sys.stderr,
                flush=True,
            )

    sim.Cluster.step = logged
    options = argparse.Namespace(
        workload=str(args.workload), policy="pollux", min_nodes=16, max_nodes=None,
        interval=60, interference=0.0, num_gpus=4, low_util=None, high_util=None,
        output=None,
    )  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):  # the simulator prints every minute
        _, jcts = sim.simulate(options)
    avg = sum(jcts.values()) / len(jcts)
    out = {"workload": str(args.workload), "seed": args.seed, "avg": avg, "jcts": jcts}
    print(json.dumps(out))


def _speedup_fn(job: Any, sim: Any, np: Any) -> Any:
    """The artifact's ``SpeedupFunction`` around the job's goodput at its fixed batch."""
    if job.perf_params is None:
        return lambda n, r: r  # as the artifact: linear until the job is profiled
    at, cap = fixed_batch_goodput(job, np)
    fn = sim.SpeedupFunction(FixedBatchGoodput(at, cap))
    fn.fixed_model, fn.fixed_cap = at, cap  # what the allocator check compares against
    return fn


def _fix_batches(sim: Any, np: Any) -> None:
    """Every job at its row's batch size, and Pollux's speed-up function at that batch."""
    init = sim.Cluster.__init__

    def fixed_init(self: Any, workload: Any, policy: Any, *rest: Any, **kw: Any) -> None:
        init(self, workload, policy, *rest, **kw)
        rows = {r.name: r for r in workload.itertuples()}
        for job in self.jobs:
            job.target_batch_size = int(rows[job.name].batch_size)

    info = sim.Cluster.get_pollux_job_info

    def capped_info(self: Any, job: Any) -> Any:
        got = info(self, job)
        got.speedup_fn = _speedup_fn(job, sim, np)
        got.fixed_model = getattr(got.speedup_fn, "fixed_model", None)
        smallest = job.application.min_local_bsz
        got.max_replicas = max(1, min(got.max_replicas, job.target_batch_size // smallest))
        got.fixed_name = job.name
        return got

    sim.Cluster.__init__ = fixed_init
    sim.Cluster.get_pollux_job_info = capped_info


def _check_allocator(pollux: Any) -> None:
    """After the allocator builds its problem (and has rescaled or replaced each job's
    speed-up), check every profiled job's against its fixed-batch model."""
    init = pollux.Problem.__init__

    def checked(self: Any, jobs: Any, nodes: Any, base_state: Any) -> None:
        init(self, jobs, nodes, base_state)
        for job in jobs:
            model = getattr(job, "fixed_model", None)
            if model is not None:
                name = getattr(job, "fixed_name", "job")
                check_speedup(name, job.speedup_fn, model, job.max_replicas)

    pollux.Problem.__init__ = checked


def _selfcheck(sim: Any, pollux: Any, np: Any) -> int:
    """Build the allocator's problem for two profiled jobs, once with the old plain
    function and once with ``SpeedupFunction``; the check must reject the first only."""
    from applications import APPLICATIONS
    from utils import JobInfo, NodeInfo

    def profiled(app: str, batch: int) -> Any:
        job = sim.Job(f"{app}-selfcheck", APPLICATIONS[app], 0, target_batch_size=batch)
        for placement in ((1,), (2,), (4,), (2, 2)):  # profiled as a running job would be
            local = min(batch // sum(placement), APPLICATIONS[app].max_local_bsz)
            step, sync = APPLICATIONS[app].get_throughput(placement, local)
            job.update_params(len(placement), sum(placement), local, step, sync, 1.0, 1.0)
        return job

    nodes = [NodeInfo({"nvidia.com/gpu": 4}, preemptible=False) for _ in range(16)]
    _check_allocator(pollux)
    failures = 0
    for wrapping in ("plain", "SpeedupFunction"):
        infos = []
        for app, batch in (("yolov3", 64), ("deepspeech2", 80)):
            job = profiled(app, batch)
            at, cap = fixed_batch_goodput(job, np)
            if wrapping == "plain":
                base = at(1, 1)
                fn: Any = lambda n, r, at=at, base=base: at(n, r) / base  # noqa: E731
            else:
                fn = _speedup_fn(job, sim, np)
            info = JobInfo({"nvidia.com/gpu": 1}, fn, 0, 0, 0, cap)
            info.fixed_model, info.fixed_name = at, job.name
            infos.append(info)
        base_state = np.zeros((len(infos), len(nodes)), dtype=int)
        try:
            pollux.Problem(infos, nodes, base_state)
        except LinearSpeedupError as e:
            print(f"{wrapping}: check FAILED: {e}")
            failures += wrapping != "plain"
        else:
            print(f"{wrapping}: check passed")
            failures += wrapping == "plain"
    return 1 if failures else 0


if __name__ == "__main__":
    main()
