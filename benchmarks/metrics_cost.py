"""What the pool's metrics add to a pool sync: ``queue_waits`` and ``Metrics.pool_answer``
on a large pool's answer, as a CPU-time ratio to the warm pool sync they follow.

    python -m benchmarks.metrics_cost [--nodes 1000] [--jobs 500] [--rounds 20]

The pool request of ``sync_latency``'s scenario, read as the server reads it
(``webhooks.lazy``: objects stay bytes); the pool's answer made once; then, per round, the
warm sync and the counting of its answer, each timed with ``time.process_time``. Printed:
the medians and their ratio. Not a test: record the numbers in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import orjson

from benchmarks.sync_latency import scenario
from policy.memo import Memo
from policy.pool.sync import sync as pool_sync
from tests.conftest import NOW
from webhooks.lazy import read_sync_request
from webhooks.metrics import Metrics, queue_waits


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=500)
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args()
    body = orjson.dumps(scenario(args.nodes, args.jobs)[0])
    memo, metrics = Memo(), Metrics()
    syncs, counts = [], []
    for _ in range(args.rounds + 1):
        req = read_sync_request(body)
        t = time.process_time()
        decision = pool_sync(req.parent, req.children, req.related, NOW, memo)
        syncs.append(time.process_time() - t)
        t = time.process_time()
        waits = queue_waits(decision.children, req.children, req.related, NOW)
        metrics.pool_answer("default", decision.scaled, decision.status, waits)
        counts.append(time.process_time() - t)
    sync_s, count_s = statistics.median(syncs[1:]), statistics.median(counts[1:])
    admitted = sum(1 for c in decision.children if c["spec"]["phase"] == "Admitted")
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "jobs": args.jobs,
                "admitted": admitted,
                "newly_admitted_per_sync": len(waits),
                "warm_sync_ms": round(sync_s * 1000, 2),
                "counting_ms": round(count_s * 1000, 3),
                "ratio": round(count_s / sync_s, 4),
            }
        )
    )


if __name__ == "__main__":
    main()
