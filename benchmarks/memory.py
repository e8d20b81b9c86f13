"""Memory of one webhook process under the fuzz campaign's mixed traffic (issue 24).

Run: ``.venv/bin/python -m benchmarks.memory [--requests N] [--seconds S] [--trace]``
(``--quick`` for a smoke run).

The real app (``webhooks.app.create_app``, with the shell's guards and collector, and
the garbage collector tuned as a gunicorn worker tunes it) answers, through Flask's test
client, what the campaign sent one worker: pools of 3 to 200 nodes and 5 to 300 TFJobs and
MXJobs (``tests.fuzz_requests.two_tier``: every policy, some with a gang scheduler or
KubeShare, a fifth with one job or node mutated), each pool followed by its jobs' syncs,
every pool new content, under a few pool names. The clock advances 1 to 30 s between
requests. It stops after ``--requests`` answers or ``--seconds``, whichever comes first.

Printed every ``--every`` requests: the process's RSS (``/proc/self/status`` VmRSS), what
the memos hold (entries), and the longest pause of the cycle collector so far
(``gc.callbacks``). With ``--trace``, ``tracemalloc`` snapshots are diffed between the
first report after warm-up and the last: the lines that grew most.

With ``--full-collection``: how long a full collection (the shell once ran one after every
1,000 large requests) takes on the heap that pools of 1,000 nodes leave, with the memos'
cap and without, and whether what the shell's ``Collector`` does around large requests
still pays for a cold pool sync.

Not a test: the figures depend on the machine (record them in benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import gc
import random
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson

from tests.conftest import Clock
from tests.fuzz_requests import two_tier
from webhooks.app import create_app
from webhooks.config import Settings
from webhooks.gunicorn_conf import tune_gc


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def traffic(
    rng: random.Random, max_nodes: int, max_jobs: int, names: int
) -> Iterator[tuple[str, bytes]]:
    """Pools of every size, each followed by its jobs' syncs, for ever; each pool is named
    one of ``names`` names ("default" among them)."""
    while True:
        nodes = rng.randint(3, max_nodes)
        jobs = rng.randint(5, max_jobs)
        name = rng.choice(["default", *(f"pool-{i}" for i in range(1, names))])
        yield from two_tier(rng, nodes, jobs, pool=name)


class Pauses:
    """The cycle collector's pauses, from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.total = 0.0
        self.full = 0
        self._started = 0.0
        gc.callbacks.append(self._on)

    def _on(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        self.total += took
        self.longest = max(self.longest, took)
        self.full += info["generation"] == 2


def memo_entries(app: Any) -> int:
    pools = app.config["DRAGONET_POOL_MEMOS"]
    return len(app.config["DRAGONET_MEMO"]) + sum(len(m) for m in pools.values())


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rng = random.Random(args.seed)
    tune_gc()
    clock = Clock()
    app = create_app(Settings(memo_max_entries=args.memo_max_entries), clock=clock)
    client = app.test_client()
    pauses = Pauses()
    codes: Counter[int] = Counter()
    rows: list[dict[str, Any]] = []
    first: tracemalloc.Snapshot | None = None
    if args.trace:
        tracemalloc.start(8)
    started = time.monotonic()
    longest = 0.0
    for sent, (path, body) in enumerate(
        traffic(rng, args.max_nodes, args.max_jobs, args.pool_names), 1
    ):
        clock.advance(rng.uniform(1, 30))
        t0 = time.perf_counter()
        answer = client.post(path, data=body, content_type="application/json", buffered=True)
        longest = max(longest, time.perf_counter() - t0)
        codes[answer.status_code] += 1
        if sent % args.every == 0:
            row = {
                "requests": sent,
                "rss_mib": rss_mib(),
                "entries": memo_entries(app),
                "pools": len(app.config["DRAGONET_POOL_MEMOS"]),
                "gc_longest_ms": pauses.longest * 1000,
                "full_gcs": pauses.full,
                "slowest_ms": longest * 1000,
                "seconds": time.monotonic() - started,
            }
            rows.append(row)
            print(
                f"{sent:>7} requests  RSS {row['rss_mib']:7.1f} MiB  memo {row['entries']:>8} "
                f"entries ({row['pools']} pools)  longest GC {row['gc_longest_ms']:7.1f} ms  "
                f"full GCs {row['full_gcs']:>3}  slowest request {row['slowest_ms']:7.1f} ms",
                flush=True,
            )
            if args.trace and first is None and sent >= args.warmup:
                first = tracemalloc.take_snapshot()
        if sent >= args.requests or time.monotonic() - started > args.seconds:
            break
    print("answers:", dict(sorted(codes.items())))
    gc.unfreeze()  # what nothing can reach any more, frozen or not
    print(f"garbage one full collection finds at the end: {gc.collect()} objects")
    if args.trace and first is not None:
        last = tracemalloc.take_snapshot()
        print("grew most since warm-up (tracemalloc):")
        for stat in last.compare_to(first, "traceback")[:8]:
            print(f"  {stat.size_diff / 2**20:+8.1f} MiB {stat.count_diff:+9} blocks")
            for line in stat.traceback.format()[-6:]:
                print("     ", line)
    return rows


def full_collection(args: argparse.Namespace) -> None:
    """A full collection of everything (which the shell once ran after every 1,000 large
    requests, unfreezing what it had frozen) on the heap that ``--pools`` pools of
    ``--nodes`` nodes leave (``benchmarks.sync_latency.scenario``, one cold sync
    each, frozen as after large requests), under the memos' cap and without one; and
    whether the collector's handling of large requests still pays for a cold pool sync
    (CPU time, the same request, alternating in one process)."""
    from benchmarks.sync_latency import scenario
    from tests.conftest import versioned
    from webhooks import shell

    tune_gc()
    pool, _ = scenario(args.nodes, args.nodes)
    bodies = []
    for i in range(args.pools):
        pool["parent"]["metadata"]["name"] = f"pool-{i}"
        bodies.append(orjson.dumps(versioned(pool)))
    print(f"{args.pools} pools of {args.nodes} nodes, {len(bodies[0]) / 2**20:.1f} MiB each")
    for cap in (Settings().memo_max_entries, 10**9):
        app = create_app(Settings(memo_max_entries=cap), clock=Clock())
        for body in bodies:
            app.test_client().post(
                "/pools/sync", data=body, content_type="application/json", buffered=True
            )
        took = []
        for _ in range(3):  # what the shell once ran after every 1,000 large requests
            t0 = time.perf_counter()
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            took.append(time.perf_counter() - t0)
        label = "no cap" if cap == 10**9 else f"cap {cap:,}"
        print(
            f"  {label:>12}: memo {memo_entries(app):>7} entries, RSS {rss_mib():6.0f} MiB, "
            f"full collection {min(took) * 1000:6.0f} ms (best of 3), "
            f"{max(took) * 1000:6.0f} ms (worst)"
        )
        del app
        gc.unfreeze()
        gc.collect()
    cold = {"collector": [], "plain": []}
    for _ in range(args.rounds):
        for mode in cold:
            big = 4 * 2**20 if mode == "collector" else 10**12  # plain: never "large"
            saved = shell.COLLECTOR
            shell.COLLECTOR = shell.Collector(big=big)
            try:
                app = create_app(Settings(), clock=Clock())
                t0 = time.process_time()
                app.test_client().post(
                    "/pools/sync", data=bodies[0], content_type="application/json", buffered=True
                )
                cold[mode].append(time.process_time() - t0)
            finally:
                shell.COLLECTOR = saved
                del app
                gc.unfreeze()
                gc.collect()
    for mode, times in cold.items():
        times.sort()
        print(
            f"  cold pool sync, {mode:>9}: p50 {times[len(times) // 2] * 1000:6.0f} ms CPU, "
            f"mean {sum(times) / len(times) * 1000:6.0f} ms ({len(times)} rounds)"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=1800.0)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--max-nodes", type=int, default=200)
    parser.add_argument("--max-jobs", type=int, default=300)
    parser.add_argument(
        "--memo-max-entries", type=int, default=Settings().memo_max_entries, help="the cap"
    )
    parser.add_argument("--pool-names", type=int, default=1000, help="pools are named from so many")
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--trace", action="store_true", help="diff tracemalloc snapshots")
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    parser.add_argument(
        "--full-collection", action="store_true", help="time the shell's full collection instead"
    )
    parser.add_argument("--pools", type=int, default=8, help="(--full-collection)")
    parser.add_argument("--nodes", type=int, default=1000, help="(--full-collection)")
    parser.add_argument("--rounds", type=int, default=5, help="(--full-collection)")
    args = parser.parse_args(argv)
    if args.full_collection:
        if args.quick:
            args.pools, args.nodes, args.rounds = 2, 16, 1
        full_collection(args)
        return
    if args.quick:
        args.requests, args.every, args.max_nodes, args.max_jobs = 120, 40, 12, 20
        args.warmup = 40
    run(args)


if __name__ == "__main__":
    main()
