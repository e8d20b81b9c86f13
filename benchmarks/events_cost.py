"""What the recorder's Events cost: its API writes against Metacontroller's, and its
CPU against the simulated run's, on the demo and a slice of the Philly trace.

    python -m benchmarks.events_cost [--jobs 200] [--start 72500]

For each run: the Events written, the recorder's writes (creates and series patches) and
Metacontroller's writes (creates, updates, status writes, deletes) over the same run, the
ratio of the two, what client-go's correlator folded and dropped, and the CPU time of the
run with the recorder (it watches the API server: recorder.informer) as a
ratio to the same run without it (timed in this process, one after the other). Not a test:
the CPU ratio depends on the machine's load (record the numbers in benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from sim.engine import SimConfig, Simulation
from sim.recorder import EVENTS, attach
from sim.scenario import from_trace, load_scenario

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent.parent / "shared" / "traces" / "philly_pollux" / "philly.csv"


def run(make, with_recorder: bool) -> tuple[Simulation, object, float]:
    sim = Simulation(make(), SimConfig())
    recorder = attach(sim) if with_recorder else None
    cpu = time.process_time()
    sim.run()
    return sim, recorder, time.process_time() - cpu


def measure(name: str, make) -> dict[str, object]:
    _, _, bare_s = run(make, False)
    sim, recorder, with_s = run(make, True)
    mc = sim.mc.client.requests
    mc_writes = sum(v for k, v in mc.items() if k != "get")
    events = list(sim.api.list(EVENTS))
    return {
        "run": name,
        "jobs": len(sim.scenario.jobs),
        "simulated_h": round(sim.now / 3600, 2),
        "events": len(events),
        "by_reason": dict(Counter(e["reason"] for e in events).most_common()),
        "recorder_writes": recorder.events.writes,
        "metacontroller_writes": mc_writes,
        "writes_ratio": round(recorder.events.writes / mc_writes, 3),
        "recorder_writes_per_h": round(recorder.events.writes / (sim.now / 3600), 1),
        "folded": recorder.tally.folded,
        "dropped": recorder.tally.dropped,
        "cpu_ratio_with_recorder": round(with_s / bare_s, 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace", default=str(TRACE))
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--start", type=int, default=72500)
    args = p.parse_args()
    runs = [("examples/scenario.yaml", lambda: load_scenario(ROOT / "examples" / "scenario.yaml"))]
    if Path(args.trace).exists():
        runs.append(
            (
                f"philly[{args.start}:{args.start + args.jobs}]",
                lambda: from_trace(args.trace, jobs=args.jobs, start=args.start),
            )
        )
    for name, make in runs:
        print(json.dumps(measure(name, make)))


if __name__ == "__main__":
    main()
