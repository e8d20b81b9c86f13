"""What the pools' metrics add to a recorder pass: ``RecorderMetrics`` reading the pass's
listings (and one scrape of them), as a CPU-time ratio to the story's own derivation of
the facts from the same objects, which the recorder does anyway.

    python -m benchmarks.metrics_cost [--nodes 1000] [--jobs 500] [--rounds 20]

The objects: ``sync_latency``'s pool at that size, decided once by the real pool sync (its
Admissions and status), its TFJobs. Per round, each timed with ``time.process_time``: the
story (``admission_facts``, ``job_facts``, ``pool_facts`` over every object), then the
metrics (each listing handed to ``RecorderMetrics``, then ``generate_latest``). The first
round is the recorder's first listing (the past, not counted) and is left out; half the
jobs are admitted anew in each later round (a later ``admittedTime``), so counting and
queue waits are paid for. Printed: the medians and their ratio. Not a test: record the
numbers in benchmarks/README.md. (The webhook no longer counts anything per pool: each pool
sync's 0.9 ms of counting at 1,000 nodes is gone from it.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import timedelta
from typing import Any

import orjson
from prometheus_client import generate_latest

from benchmarks.sync_latency import scenario
from policy.memo import Memo
from policy.model.timeutil import format_time
from policy.pool.sync import sync as pool_sync
from recorder.metrics import RecorderMetrics
from recorder.story import admission_facts, job_facts, pool_facts
from tests.conftest import NOW
from webhooks.lazy import read_sync_request

TFJOBS = "TFJob.kubeflow.org/v1"


def objects(nodes: int, jobs: int) -> tuple[list[dict], list[dict], dict[str, Any]]:
    body = scenario(nodes, jobs)[0]
    req = read_sync_request(orjson.dumps(body))
    decision = pool_sync(req.parent, req.children, req.related, NOW, Memo())
    tfjobs = [
        {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", **j}
        for j in body["related"][TFJOBS].values()
    ]
    pool = {**body["parent"], "status": decision.status}
    return decision.children, tfjobs, pool


def readmitted(admissions: list[dict], round_: int) -> list[dict]:
    """Half of the Admitted ones admitted anew at a later time in this round."""
    out = []
    stamp = format_time(NOW + timedelta(seconds=60 * round_))
    for i, a in enumerate(admissions):
        if i % 2 == 0 and a["spec"].get("admittedTime"):
            a = {**a, "spec": {**a["spec"], "admittedTime": stamp}}
        out.append(a)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=500)
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args()
    admissions, tfjobs, pool = objects(args.nodes, args.jobs)
    metrics = RecorderMetrics()
    stories, counts = [], []
    for round_ in range(args.rounds + 1):
        listed = readmitted(admissions, round_)
        t = time.process_time()
        for a in listed:
            admission_facts(a)
        for j in tfjobs:
            job_facts(j)
        pool_facts(pool)
        stories.append(time.process_time() - t)
        t = time.process_time()
        metrics.resource_listed("Admission", "admissions", listed)
        metrics.resource_listed("TFJob", "tfjobs", tfjobs)
        metrics.resource_listed("TrainingPool", "trainingpools", [pool])
        generate_latest(metrics.registry)
        counts.append(time.process_time() - t)
    story_s, count_s = statistics.median(stories[1:]), statistics.median(counts[1:])
    admitted = sum(1 for a in admissions if a["spec"].get("admittedTime"))
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "jobs": len(tfjobs),
                "admitted": admitted,
                "story_ms": round(story_s * 1000, 2),
                "metrics_ms": round(count_s * 1000, 2),
                "ratio": round(count_s / story_s, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
