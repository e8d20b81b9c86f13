"""Writes tests/fixtures/view/*.json: a cluster's objects as a Kubernetes ``List``, exactly
as ``kubectl get nodes,pods,trainingpools,tfjobs,mxjobs,admissions -A -o json`` returns
them, taken from a simulated run's API server by ``ApiServer.dump`` (what ``dragonet
simulate --dump`` writes; the web view's live-pool input).

Run ``python -m tests.make_view_fixture`` after changing the scenario; the JSON is committed
so a reader sees the exact input ``dragonet view`` renders.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sim.engine import SimConfig, Simulation
from sim.scenario import load_scenario

OUT = Path(__file__).parent / "fixtures" / "view"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def elastic_at(seconds: float) -> dict[str, Any]:
    """examples/elastic.yaml under dragonet, stopped ``seconds`` in: resnet-elastic shrunk
    for bert (8 to 4 workers at 120 s, to 3 at 330 s), bert training, cifar-elastic (arrived
    at 300 s) waiting for that shrink (WaitingForShrink) until 332 s."""
    config = SimConfig(policy="dragonet", max_time_s=seconds, object_sizes="minimal")
    sim = Simulation(load_scenario(EXAMPLES / "elastic.yaml"), config)
    sim.run()
    return sim.api.dump()


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "elastic-pool.json"
    path.write_text(json.dumps(elastic_at(331.5), indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
