"""Pollux's own policy with every job's batch size fixed: what Pollux's allocator gets
under the constraint a parameter-server job has (the outside reference for issue 26).

    <artifact venv>/python benchmarks/pollux_fixed_batch.py SIMULATOR_DIR WORKLOAD_CSV

SIMULATOR_DIR is a checkout of ``simulator/`` from ``petuum/adaptdl`` branch
``osdi21-artifact`` (never vendored here), with its dependencies and pymoo 0.4.2.2 (it
builds from its sdist on Python 3.11 with ``pip install wheel`` first and
``--no-build-isolation``; pure Python, about 5 minutes of CPU per simulated hour here).
The artifact runs unmodified but for three things, each stated:

* numpy's removed aliases (``np.int``, ``np.float``, ``np.bool``) that its 2021 code
  uses are put back as the builtins they were;
* every job trains at its row's ``batch_size``, as the artifact's Tiresias and Optimus
  jobs do (``Job.target_batch_size``; Pollux's own ncf jobs are fixed the same way);
* the policy's speed-up function is Pollux's learned goodput evaluated at that fixed
  batch, split over the replicas exactly as ``Job.update_local_bsz`` splits it, relative
  to one replica; replicas whose share of the batch falls under the application's
  smallest local batch are not offered (the cap the artifact gives its Optimus jobs).

Prints JSON ``{"workload", "avg", "jcts"}`` (as the artifact's ``summary.json``), and a
line per simulated hour on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import sys
import time
from pathlib import Path
from typing import Any


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("simulator", type=Path)
    p.add_argument("workload", type=Path)
    args = p.parse_args()
    sys.path.insert(0, str(args.simulator))
    import numpy as np

    for name, kind in (("int", int), ("float", float), ("bool", bool)):
        setattr(np, name, kind)  # the aliases numpy 1.24 removed
    import simulator as sim  # the artifact's simulator.py, from SIMULATOR_DIR

    _fix_batches(sim, np)
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
    print(json.dumps({"workload": str(args.workload), "avg": avg, "jcts": jcts}))


def _fix_batches(sim: Any, np: Any) -> None:
    """Every job at its row's batch size, and Pollux's speed-up function at that batch."""
    init = sim.Cluster.__init__

    def fixed_init(self: Any, workload: Any, policy: Any, *rest: Any, **kw: Any) -> None:
        init(self, workload, policy, *rest, **kw)
        rows = {r.name: r for r in workload.itertuples()}
        for job in self.jobs:
            job.target_batch_size = int(rows[job.name].batch_size)

    def speedup_fn(self: Any) -> Any:
        if self.perf_params is None:
            return lambda n, r: r  # as the artifact: linear until the job is profiled
        app, goodput, batch = self.application, self.get_goodput_fn(), self.target_batch_size

        def one(nodes: float, replicas: float) -> float:
            if replicas <= 0:
                return 0.0
            local = math.ceil(batch / replicas - 1e-8)  # Job.update_local_bsz's split
            accum = math.ceil(local / app.max_local_bsz - 1e-8) - 1
            if replicas == 1 and batch > app.init_batch_size:
                accum = max(1, accum)
            atomic = math.ceil(local / (accum + 1) - 1e-8)
            atomic = min(atomic, int(app.max_batch_size / (replicas * (accum + 1))))
            if atomic < app.min_local_bsz:
                return 0.0
            return float(goodput(nodes, replicas, atomic, accum))

        base = one(1, 1) or max(one(1, k) for k in range(1, 9)) or 1.0

        def speedup(nodes: Any, replicas: Any) -> Any:
            n, r = np.broadcast_arrays(np.asarray(nodes), np.asarray(replicas))
            out = np.zeros(n.shape)
            for i in np.ndindex(n.shape):
                out[i] = one(float(n[i]), float(r[i])) / base
            return out if out.shape else out.item()

        return speedup

    info = sim.Cluster.get_pollux_job_info

    def capped_info(self: Any, job: Any) -> Any:
        got = info(self, job)
        smallest = job.application.min_local_bsz
        got.max_replicas = max(1, min(got.max_replicas, job.target_batch_size // smallest))
        return got

    sim.Cluster.__init__ = fixed_init
    sim.Job.get_speedup_fn = speedup_fn
    sim.Cluster.get_pollux_job_info = capped_info


if __name__ == "__main__":
    main()
