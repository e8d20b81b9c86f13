"""What a waiting job's place in line costs in API writes (issue 39): every write of an
Admission and of a job's status, and every pool and job sync, in the same simulated run
with three ways of writing the place (``policy.pool.queue_status``):

* ``none``: no place in the Admission or the job's status (before issue 39);
* ``exact``: each place and length exact, so a job admitted ahead rewrites every job
  behind it, and every arrival or admission rewrites every waiting job (the length);
* ``ranges`` (what Dragonet writes): exact up to 10, then the range of the 1-2-5 series.

    python -m benchmarks.queue_churn [--jobs 200] [--start 72500] [--load 1.0]

Each run's counts come from the simulated API server (an Admission written: its spec
changed; a job's status written: its status changed) and from Metacontroller (its writes
of every kind, its pool syncs). Not a test: record the numbers in benchmarks/README.md and
docs/architecture.md.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import policy.pool.queue_status as queue_status
import policy.pool.sync as pool_sync
from sim.engine import Scenario, SimConfig, Simulation
from sim.metacontroller import WRITES
from sim.scenario import from_trace, load_scenario

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent.parent / "shared" / "traces" / "philly_pollux" / "philly.csv"
ADMISSIONS = "Admission.dragonet.io/v1alpha1"
JOBS = ("TFJob.kubeflow.org/v1", "MXJob.kubeflow.org/v1")


@contextmanager
def mode(name: str) -> Iterator[None]:
    """Write places as ``name`` says for the duration (the pool's sync reads the module's
    ``places`` and ``EXACT_UP_TO`` at each call)."""
    places, exact = pool_sync.places, queue_status.EXACT_UP_TO
    if name == "none":
        pool_sync.places = lambda queued: {}  # type: ignore[assignment]
    elif name == "exact":
        queue_status.EXACT_UP_TO = 2**31 - 1
    try:
        yield
    finally:
        pool_sync.places, queue_status.EXACT_UP_TO = places, exact


def measure(name: str, make: Callable[[], Scenario], how: str) -> dict[str, Any]:
    counts = {"admission_writes": 0, "job_status_writes": 0, "queued_status_writes": 0}

    def watch(tkey: str, old: Any, new: Any) -> None:
        if old is None or new is None:
            return
        if tkey == ADMISSIONS and old.get("spec") != new.get("spec"):
            counts["admission_writes"] += 1
        elif tkey in JOBS and old.get("status") != new.get("status"):
            counts["job_status_writes"] += 1
            if ((new.get("status") or {}).get("scheduling") or {}).get("phase") == "Queued":
                counts["queued_status_writes"] += 1

    with mode(how):
        sim = Simulation(make(), SimConfig())
        sim.api.watchers.append(watch)
        sim.run()
    client = sim.mc.client
    pool_syncs = sim.mc["dragonet-pools"].sync_calls
    mc_writes = sum(client.requests[v] for v in WRITES) if client else 0
    return {
        "run": name,
        "places": how,
        "jobs": len(sim.scenario.jobs),
        "simulated_h": round(sim.now / 3600, 2),
        "pool_syncs": pool_syncs,
        **counts,
        "admission_writes_per_pool_sync": round(counts["admission_writes"] / pool_syncs, 3),
        "metacontroller_writes": mc_writes,
        "job_syncs": sim.mc["dragonet-tfjobs"].sync_calls,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace", default=str(TRACE))
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--start", type=int, default=72500)
    p.add_argument("--load", type=float, default=1.0)
    p.add_argument("--modes", default="none,exact,ranges")
    args = p.parse_args()
    runs: list[tuple[str, Callable[[], Scenario]]] = [
        ("examples/scenario.yaml", lambda: load_scenario(ROOT / "examples" / "scenario.yaml"))
    ]
    if Path(args.trace).exists():
        runs.append(
            (
                f"philly[{args.start}:{args.start + args.jobs}] x{args.load:g}",
                lambda: from_trace(args.trace, jobs=args.jobs, start=args.start, load=args.load),
            )
        )
    for name, make in runs:
        for how in args.modes.split(","):
            print(json.dumps(measure(name, make, how)), flush=True)


if __name__ == "__main__":
    main()
