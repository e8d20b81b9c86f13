"""What the speed-up estimates cost the pool's ``observe()``, as ratios (docs/speedup.md).

    python -m benchmarks.speedup_cost [--jobs 20] [--nodes 16] [--rounds 5]

One pool request of ``--jobs`` jobs, each once without and once with a full throughput
history (16 readings; 8 distinct texts, so 8 fits when nothing is memoised). Printed, per
round: ``observe()`` with a fresh memo (every history fitted) and with a warm one (each
history already fitted), with and without histories, and the ratios. CPU time
(``time.process_time``): on a shared machine it is much less noisy than wall time.
"""

from __future__ import annotations

import argparse
import copy
import random
import time
from typing import Any

from policy.memo import Memo
from policy.model.throughput import ANNOTATION, MAX_READINGS, Config, History, Reading
from policy.pool.observe import observe
from tests import metacontroller as mc


def _history(seed: int) -> History:
    rng = random.Random(seed)
    h = History()
    for w in range(1, 10):
        for remote, nodes in ((0, 1), (w // 2, 2)) if w > 1 else ((0, 1),):
            speed = w / (1 + 0.1 * w + 0.2 * remote) * rng.uniform(0.9, 1.1)
            h = h.put(Reading(Config(w, 2, remote, nodes), speed, 1 + rng.randrange(8)))
    assert len(h.readings) == MAX_READINGS
    return h


def _request(jobs: list[dict[str, Any]], nodes: int) -> dict[str, Any]:
    node_objs = [mc.node(f"n-{i}", cpu="64", memory="256Gi") for i in range(nodes)]
    return mc.pool_request(mc.world(jobs[0], node_objs, jobs=jobs))


def _cpu(request: dict[str, Any], memo: Memo | None, times: int) -> float:
    start = time.process_time()
    for _ in range(times):
        observe(
            request["parent"],
            request["children"],
            request["related"],
            Memo() if memo is None else memo,
        )
    return (time.process_time() - start) / times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    plain = [mc.tfjob("dragon-job1-cpu.yaml", name=f"j{i}") for i in range(args.jobs)]
    rich = copy.deepcopy(plain)
    for i, job in enumerate(rich):
        job["metadata"].setdefault("annotations", {})[ANNOTATION] = _history(i % 8).text()
    without, with_ = _request(plain, args.nodes), _request(rich, args.nodes)
    snap = observe(with_["parent"], with_["children"], with_["related"], Memo())
    assert len(snap.speedups) == args.jobs and not snap.problems, snap.problems
    _cpu(without, None, 2)  # imports and first-call costs out of the way
    for r in range(args.rounds):
        cold = (_cpu(without, None, 3), _cpu(with_, None, 3))
        warm_memo, rich_memo = Memo(), Memo()
        _cpu(without, warm_memo, 1), _cpu(with_, rich_memo, 1)
        warm = (_cpu(without, warm_memo, 20), _cpu(with_, rich_memo, 20))
        print(
            f"round {r + 1}: cold {cold[0] * 1000:.1f} ms -> {cold[1] * 1000:.1f} ms "
            f"({cold[1] / cold[0]:.1f}x); memoised {warm[0] * 1000:.2f} ms -> "
            f"{warm[1] * 1000:.2f} ms ({warm[1] / warm[0]:.2f}x)"
        )


if __name__ == "__main__":
    main()
