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

With ``--large``: the issue-36 shape. ``--pool-names`` pools of ``--nodes`` nodes (and as many
jobs, ~13 MiB a sync at 1,000: ``benchmarks.sync_latency.scenario``), synced in turn (each
sync after one pod event, so every sync plans), each followed by a running job's syncs,
``--rounds`` times, in a worker process of its own started for it (the requests are read
from files one at a time, as a worker reads them; nothing the benchmark built is in its
heap), on the chart's defaults (``Settings()``: ``DRAGONET_MEMORY_CAP_BYTES``). Printed:
the worker's peak RSS (``VmHWM``) against the per-worker share of the chart's limit
(``--limit-mib``), what the memos and the reader are charged, and a warm pool sync's CPU
time (its memo held) against a cold one's, in the same process.

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


def rss_mib(field: str = "VmRSS") -> float:
    """The process's resident memory (``VmHWM``: its peak so far), MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
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


def memo_mib(app: Any) -> float:
    """What the memos are charged against the cap, MiB."""
    pools = app.config["DRAGONET_POOL_MEMOS"]
    held = app.config["DRAGONET_MEMO"].nbytes + sum(m.nbytes for m in pools.values())
    return held / 2**20


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rng = random.Random(args.seed)
    tune_gc()
    clock = Clock()
    app = create_app(Settings(memory_cap_bytes=int(args.cap_mib * 2**20)), clock=clock)
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
                "memo_mib": memo_mib(app),
                "pools": len(app.config["DRAGONET_POOL_MEMOS"]),
                "gc_longest_ms": pauses.longest * 1000,
                "full_gcs": pauses.full,
                "slowest_ms": longest * 1000,
                "seconds": time.monotonic() - started,
            }
            rows.append(row)
            print(
                f"{sent:>7} requests  RSS {row['rss_mib']:7.1f} MiB  memo {row['entries']:>8} "
                f"entries {row['memo_mib']:6.2f} MiB ({row['pools']} pools)  "
                f"longest GC {row['gc_longest_ms']:7.1f} ms  "
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
    for cap in (Settings().memory_cap_bytes, 1 << 40):
        app = create_app(Settings(memory_cap_bytes=cap), clock=Clock())
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
        label = "no cap" if cap == 1 << 40 else f"cap {cap >> 20} MiB"
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


def large(args: argparse.Namespace) -> None:
    """Build the requests here, answer them in a fresh worker process (``--worker``)."""
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from benchmarks.sync_latency import _with_new_pod_version, scenario

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dragonet-memory-") as tmp:
        if args.requests_dir:  # built once, kept for further runs
            tmp = args.requests_dir
            Path(tmp).mkdir(parents=True, exist_ok=True)
        pool, job = ({}, {}) if Path(tmp, "job.json").exists() else scenario(args.nodes, args.nodes)
        for i in range(args.pool_names if pool else 0):
            pool["parent"]["metadata"]["name"] = f"pool-{i:02d}"
            for n in range(2):  # two versions: one pod event apart
                Path(tmp, f"pool-{i:02d}.{n}.json").write_bytes(_with_new_pod_version(pool, n))
        if job:
            Path(tmp, "job.json").write_bytes(orjson.dumps(job))
        size = Path(tmp, "pool-00.0.json").stat().st_size
        print(
            f"{args.pool_names} pools of {args.nodes} nodes, {size / 2**20:.1f} MiB a sync "
            f"(built in {time.perf_counter() - t0:.0f} s); worker:",
            flush=True,
        )
        del pool, job
        command = [sys.executable, "-m", "benchmarks.memory", "--worker", tmp]
        command += ["--rounds", str(args.rounds), "--limit-mib", str(args.limit_mib)]
        command += ["--warm-rounds", str(args.warm_rounds)]
        subprocess.run(command, check=True)


def worker(args: argparse.Namespace) -> None:
    """One webhook process answering the files of ``args.worker`` (see ``large``)."""
    from pathlib import Path

    from werkzeug.test import EnvironBuilder, run_wsgi_app

    tune_gc()
    # The chart's defaults, but no deadline: on a loaded machine a cold sync's wall time
    # says nothing of its memory.
    settings = Settings(request_timeout_seconds=3600)
    app = create_app(settings, clock=Clock())
    memos, reader = app.config["DRAGONET_MEMOS"], app.config["DRAGONET_READER"]
    files = Path(args.worker)
    names = sorted({p.name.split(".")[0] for p in files.glob("pool-*.json")})
    baseline = rss_mib()

    def post(path: str, name: str) -> float:
        # As a server calls the app (Flask's test client keeps a request of its own in a
        # reference cycle with the body, which the shell's Collector would freeze).
        body = (files / name).read_bytes()
        environ = EnvironBuilder(
            path, method="POST", data=body, content_type="application/json"
        ).get_environ()
        del body
        t0 = time.process_time()
        answer, status, _ = run_wsgi_app(app, environ, buffered=True)
        took = time.process_time() - t0
        assert status.startswith("200"), b"".join(answer)[:200]
        return took

    def charged() -> str:
        return (
            f"memos {getattr(memos, 'nbytes', 0) / 2**20:5.1f} MiB ({len(memos.pools)} pools), "
            f"reader {getattr(reader, 'nbytes', 0) / 2**20:5.1f} MiB"
        )

    cap = getattr(settings, "memory_cap_bytes", 0) / 2**20
    print(f"  cap {cap:.0f} MiB; RSS after start {baseline:.0f} MiB", flush=True)
    syncs: list[float] = []
    for r in range(args.rounds):
        for name in names:
            syncs.append(post("/pools/sync", f"{name}.{r % 2}.json"))
            for _ in range(3):
                post("/tfjobs/sync", "job.json")
        print(
            f"  round {r + 1}: {len(names)} pool syncs, CPU p50 "
            f"{sorted(syncs)[len(syncs) // 2] * 1000:.0f} ms; RSS {rss_mib():.0f} MiB, "
            f"peak {rss_mib('VmHWM'):.0f} MiB; {charged()}",
            flush=True,
        )
    # A warm sync (its pool's memo held: synced just before, one pod event since) against
    # a cold one (the memos and the reader forgotten first), alternating, in this process.
    warm: list[float] = []
    cold: list[float] = []
    name = names[0]
    for n in range(args.warm_rounds):
        post("/pools/sync", f"{name}.{n % 2}.json")
        warm.append(post("/pools/sync", f"{name}.{(n + 1) % 2}.json"))
        memos.clear()
        getattr(reader, "clear", getattr(reader, "_last", {}).clear)()
        cold.append(post("/pools/sync", f"{name}.{n % 2}.json"))
    warm.sort()
    cold.sort()
    w, c = warm[len(warm) // 2], cold[len(cold) // 2]
    peak = rss_mib("VmHWM")
    print(
        f"  peak RSS {peak:.0f} MiB against {args.limit_mib:.0f} MiB a worker "
        f"({peak / args.limit_mib:.0%}); warm pool sync p50 {w * 1000:.0f} ms CPU, cold "
        f"{c * 1000:.0f} ms (warm/cold {w / c:.2f}, {len(warm)} each); memos forgot "
        f"{memos.forgotten} pools, reader {getattr(reader, 'forgotten', 0)} requests",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=1800.0)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--max-nodes", type=int, default=200)
    parser.add_argument("--max-jobs", type=int, default=300)
    parser.add_argument(
        "--cap-mib", type=float, default=Settings().memory_cap_bytes / 2**20, help="the cap"
    )
    parser.add_argument(
        "--pool-names", type=int, help="pools are named from so many (1,000; --large: 16)"
    )
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--trace", action="store_true", help="diff tracemalloc snapshots")
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    parser.add_argument(
        "--full-collection", action="store_true", help="time the shell's full collection instead"
    )
    parser.add_argument("--pools", type=int, default=8, help="(--full-collection)")
    parser.add_argument("--nodes", type=int, default=1000, help="(--full-collection)")
    parser.add_argument("--rounds", type=int, default=5, help="(--full-collection, --large)")
    parser.add_argument("--large", action="store_true", help="pools of --nodes, in a worker")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--warm-rounds", type=int, default=5, help="(--large)")
    parser.add_argument(
        "--requests-dir", help="(--large) where the requests are written, and found next time"
    )
    parser.add_argument(
        "--limit-mib", type=float, default=512.0, help="(--large) the chart's limit per worker"
    )
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return
    if args.large:
        args.pool_names = args.pool_names or 16
        if args.quick:
            args.pool_names, args.nodes, args.rounds, args.warm_rounds = 3, 40, 2, 2
        large(args)
        return
    if args.full_collection:
        if args.quick:
            args.pools, args.nodes, args.rounds = 2, 16, 1
        full_collection(args)
        return
    args.pool_names = args.pool_names or 1000
    if args.quick:
        args.requests, args.every, args.max_nodes, args.max_jobs = 120, 40, 12, 20
        args.warmup = 40
    run(args)


if __name__ == "__main__":
    main()
