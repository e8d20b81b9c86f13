"""A long fuzz campaign against the real server: realistic two-tier traffic, some of it broken.

    python -m benchmarks.fuzz_campaign [--requests 20000] [--workers 2] [--clients 6]

1. **Capture.** Simulations of varied pools (3 to 200 nodes; 5 to 300 TFJobs and MXJobs;
   Dragonet, its LAS variant and Tiresias; a Volcano gang pool, a KubeShare pool) record
   every hook request they make, as the bytes Metacontroller would POST: each pool sync
   followed by its jobs' syncs. A reservoir keeps a bounded, ordered sample of each.
2. **Mutate.** Most requests are sent as they are; the rest have one object inside a
   healthy request broken, by one of the classes the campaigns found dangerous: a field
   replaced, deleted or nested (``tests/fuzz_requests.mutate``); a bare JSON token no
   parser should turn into a number (``1e400``, ``NaN``, ``-Infinity``); a deep echo (a
   condition message nested 300 deep); an absurd pool value; an absurd job annotation.
3. **Send** them to ``dragonet serve`` (real gunicorn, on 127.0.0.1 only) from a few
   client threads, and check every answer: no 5xx, none later than the request deadline,
   and every child and status of a 200 valid against the Kubernetes schemas and our CRDs
   (``tests/kube_schema.py``; identical objects are validated once). Each worker's RSS is
   read from /proc as the campaign goes.

4. **Stop and recycle** (issue 36), optionally, while it sends: workers recycled every
   ``--max-requests`` requests, a worker sent SIGTERM every ``--sigterm-every`` seconds, the
   master SIGHUP every ``--sighup-every`` seconds; ``--tls`` serves HTTPS (a self-signed
   certificate made with openssl). A request without an answer is counted as such (a
   connection idle past the keep-alive and closed as the request went out is sent again
   once, as Go's client does, and counted apart). ``--old-checkout PATH`` runs the server
   from another checkout (the worker before, to compare in the same session).

Bounded in count and time (``--max-seconds``). Not a test: record the numbers in
benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import requests

from benchmarks.load import _children
from sim.engine import Scenario, SimConfig, Simulation
from sim.scenario import from_trace, gpu_cluster, load_scenario
from tests import fuzz_requests
from tests import kube_schema as schema

ROOT = Path(__file__).resolve().parents[1]
# The shared traces beside the main checkout (DRAGONET_TRACES from a worktree elsewhere).
TRACES = Path(os.environ.get("DRAGONET_TRACES") or ROOT.parent / "shared" / "traces")
PHILLY = TRACES / "philly_pollux" / "philly.csv"
POLLUX = ROOT / "tests" / "fixtures" / "traces" / "workload-1.csv"

# Pool values the CRD accepts and no sane admin writes, and annotation values a tenant can.
POOL_VALUES: dict[str, tuple[Any, ...]] = {
    "starvationSeconds": (1e12, 1e18, 1e308),
    "idleSeconds": (1e18, 1e308),
    "lasThresholdsGPUHours": ([1e18], [1e308, 1e308], [0.0]),
    "maxPreemptions": (2**63 - 1, 2**64 - 1),
    "preemptionGraceSeconds": (2**63 - 1, 2**64 - 1),
    "migration": ({"minIntervalSeconds": 1e18}, {"maxMoves": 10**9}, {"minGain": 1e308}),
}
ANNOTATIONS = (
    "dragonet.io/checkpoint-interval-seconds",
    "dragonet.io/tensorboard",
    "dragonet.io/gpu-share",
    "dragonet.io/gpu-memory",
    "DRAGON_KUBESHARE",
)
ANNOTATION_VALUES = ("1e12", "3e11", "1e308", "1e400", "nan", "inf", "-1", "0", "9" * 400, "x")
TOKENS = (b"1e400", b"-1e400", b"NaN", b"Infinity", b"-Infinity")
SENTINEL = "__dragonet_fuzz_token__"


# -- 1. capture ---------------------------------------------------------------------------


@dataclass
class Reservoir:
    """An ordered, bounded, uniform sample of a stream (Vitter's algorithm R)."""

    size: int
    rng: random.Random
    seen: int = 0
    kept: list[tuple[int, str, bytes]] = field(default_factory=list)

    def offer(self, path: str, body: bytes) -> None:
        self.seen += 1
        if len(self.kept) < self.size:
            self.kept.append((self.seen, path, body))
            return
        j = self.rng.randrange(self.seen)
        if j < self.size:
            self.kept[j] = (self.seen, path, body)

    def ordered(self) -> list[tuple[str, bytes]]:
        return [(p, b) for _, p, b in sorted(self.kept)]


def scenarios() -> Iterator[tuple[Scenario, SimConfig]]:
    """Pools of 3 to 200 nodes, 5 to 300 jobs, every policy family and backend."""
    yield load_scenario(ROOT / "examples" / "scenario.yaml"), SimConfig()
    yield load_scenario(ROOT / "examples" / "kubeshare.yaml"), SimConfig(kubeshare="v1")
    yield load_scenario(ROOT / "examples" / "elastic.yaml"), SimConfig(policy="dragon")
    yield (
        from_trace(POLLUX, jobs=40, mx_share=0.25),
        SimConfig(policy="dragonet-las", gang_scheduler="volcano"),
    )
    yield from_trace(POLLUX, jobs=80), SimConfig(policy="tiresias")
    philly = from_trace(PHILLY, jobs=300, start=72500)
    yield philly, SimConfig()
    big = Scenario("philly on 200 nodes", gpu_cluster(200, 4), philly.jobs[:150])
    yield big, SimConfig(policy="dragonet-las")


def capture(
    per_scenario: int, seed: int, say: Callable[[str], None], most: int | None = None
) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for i, (scenario, config) in enumerate(scenarios()):
        if most is not None and i >= most:
            break
        sample = Reservoir(per_scenario, random.Random(seed + i))
        sim = Simulation(scenario, config)
        post = sim.webhook.post

        def recorded(path: str, body: bytes, *, measure: bool = True, _s=sample, _p=post):
            _s.offer(path, body)
            return _p(path, body, measure=measure)

        sim.webhook.post = recorded  # type: ignore[method-assign]
        started = time.monotonic()
        sim.run()
        out.extend(sample.ordered())
        say(
            f"captured {len(sample.kept):>5} of {sample.seen:>6} requests from "
            f"{scenario.name} ({config.policy}, {len(scenario.nodes)} nodes, "
            f"{len(scenario.jobs)} jobs) in {time.monotonic() - started:.0f} s"
        )
    return out


# -- 2. mutate ----------------------------------------------------------------------------


def _objects(request: dict[str, Any]) -> list[tuple[tuple, Any]]:
    """Paths to the objects inside a request: its parent, and each related or child object."""
    found: list[tuple[tuple, Any]] = [(("parent",), request.get("parent"))]
    for top in ("related", "children", "attachments"):
        for type_key, by_name in (request.get(top) or {}).items():
            if isinstance(by_name, dict):
                found.extend(((top, type_key, name), obj) for name, obj in by_name.items())
    return [(p, o) for p, o in found if isinstance(o, dict)]


def _leaves(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    for path in fuzz_requests.paths(value, prefix):
        if path:
            yield path


def _set(root: Any, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        root = root[key]
    root[path[-1]] = value


def mutate(body: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One object of a request broken in one of the campaign's ways (or none)."""
    request = orjson.loads(body)
    objects = _objects(request)
    if not objects:
        return body, "clean"
    where, obj = rng.choice(objects)
    cls = rng.choice(("field", "field", "token", "deep", "pool", "annotation"))
    if cls == "pool" and request.get("parent", {}).get("kind") == "TrainingPool":
        spec = request["parent"].setdefault("spec", {})
        name = rng.choice(sorted(POOL_VALUES))
        spec[name] = rng.choice(POOL_VALUES[name])
        return fuzz_requests.encode(request), f"pool spec.{name}"
    if cls == "annotation" or cls == "pool":
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            return body, "clean"
        key = rng.choice(ANNOTATIONS)
        annotations = meta.get("annotations")
        if not isinstance(annotations, dict):
            annotations = meta["annotations"] = {}
        annotations[key] = rng.choice(ANNOTATION_VALUES)
        return fuzz_requests.encode(request), f"annotation {key} on {'/'.join(map(str, where))}"
    if cls == "deep":
        status = obj.setdefault("status", {})
        if not isinstance(status, dict):
            return body, "clean"
        status["conditions"] = [
            {"type": "Running", "status": "True", "message": fuzz_requests.Deep(300)}
        ]
        return fuzz_requests.encode(request), f"deep condition in {'/'.join(map(str, where))}"
    leaves = list(_leaves(obj))
    if not leaves:
        return body, "clean"
    path = rng.choice(leaves)
    if cls == "token":
        _set(obj, path, SENTINEL)
        raw = orjson.dumps(request).replace(f'"{SENTINEL}"'.encode(), rng.choice(TOKENS), 1)
        return raw, "bare token"
    broken, what = fuzz_requests.mutate({"x": obj}, rng, rng.random())
    _set(request, where, broken.get("x"))  # the whole object may be what was replaced
    return fuzz_requests.encode(request), f"field: {what[:80]}"


# -- 3. send and check --------------------------------------------------------------------


def _rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


@dataclass
class Checker:
    """Validates what a 200 answers, each distinct object once."""

    seen: set[bytes] = field(default_factory=set)
    invalid: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _once(self, obj: Any, check: Callable[[Any], None], what: str) -> None:
        key = what.encode() + orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
        with self.lock:
            if key in self.seen:
                return
            self.seen.add(key)
        try:
            check(obj)
        except AssertionError as err:
            with self.lock:
                self.invalid.append(f"{what}: {str(err)[:300]}")

    def answer(self, path: str, parent_kind: str, body: Any) -> None:
        if not isinstance(body, dict) or not path.endswith("/sync"):
            return
        for child in body.get("children") or []:
            kind = child.get("kind") if isinstance(child, dict) else None
            if kind in ("Admission", "TrainingPool"):
                self._once(child, schema.validate_custom, f"{path} child {kind}")
            elif kind == "PodGroup":
                self._once(child, schema.validate_pod_group, f"{path} child PodGroup")
            else:
                self._once(child, schema.validate_child, f"{path} child {kind}")
        status = body.get("status")
        if status is None:
            return
        if parent_kind == "TrainingPool":
            self._once(status, schema.validate_pool_status, f"{path} pool status")
        elif parent_kind in ("TFJob", "MXJob"):
            self._once(
                status,
                lambda s, k=parent_kind: schema.validate_job_status(k, s),
                f"{path} {parent_kind} status",
            )


def _certificate(tmp: Path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1: (certificate, key)."""
    cert, key = tmp / "tls.crt", tmp / "tls.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return str(cert), str(key)


def start_server(
    env: dict[str, str], log: Path, checkout: str | None, verify: str | bool
) -> tuple[subprocess.Popen, str]:
    """``dragonet serve`` (from ``checkout`` if given) on a free local port, once it answers
    /healthz with every worker up."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**env, "DRAGONET_HOST": "127.0.0.1", "DRAGONET_PORT": str(port)}
    code = "import sys; from cli.main import main; sys.exit(main(['serve']))"
    if checkout:
        code = f"import sys; sys.path.insert(0, {checkout!r}); " + code
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=err
        )
    url = f"{'https' if verify is not True else 'http'}://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"dragonet serve exited:\n{log.read_text()[-2000:]}")
        try:
            up = requests.get(f"{url}/healthz", timeout=1, verify=verify).ok
            if up and len(_children(proc.pid)) >= int(env["DRAGONET_WORKERS"]):
                return proc, url
        except requests.RequestException:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("dragonet serve did not answer /healthz within 30 s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=20000)
    p.add_argument("--per-scenario", type=int, default=2500, help="requests kept per scenario")
    p.add_argument("--broken", type=float, default=0.35, help="share of requests mutated")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--clients", type=int, default=6)
    p.add_argument("--deadline", type=float, default=8.0, help="the server's request deadline")
    p.add_argument("--max-seconds", type=float, default=3600)
    p.add_argument("--idle-seconds", type=float, default=5.0, help="the server's keep-alive")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", help="write the summary (and RSS samples) as JSON here")
    p.add_argument("--server-log", default="/tmp/dragonet-fuzz-server.log")
    p.add_argument("--cache", help="keep the captured requests in this file (reused if there)")
    p.add_argument("--simulations", type=int, help="capture from the first N simulations only")
    p.add_argument("--tls", action="store_true", help="serve HTTPS (a self-signed certificate)")
    p.add_argument("--max-requests", type=int, help="recycle each worker after ~N requests")
    p.add_argument("--sigterm-every", type=float, help="SIGTERM a worker every S seconds")
    p.add_argument("--sighup-every", type=float, help="SIGHUP the master every S seconds")
    p.add_argument("--old-checkout", help="run the server from this checkout instead")
    args = p.parse_args()

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    cache = Path(args.cache) if args.cache else None
    if cache and cache.exists():
        base = pickle.loads(cache.read_bytes())
        say(f"{len(base)} captured requests from {cache}")
    else:
        base = capture(args.per_scenario, args.seed, say, args.simulations)
        if cache:
            cache.write_bytes(pickle.dumps(base))
    kinds = {}
    for _, body in base:  # the parent's kind, for the status schema
        parent = orjson.loads(body).get("parent") or {}
        kinds[id(body)] = parent.get("kind", "")
    env = {"DRAGONET_LOG_LEVEL": "warning", **os.environ, "DRAGONET_WORKERS": str(args.workers)}
    verify: str | bool = True
    if args.tls:
        cert, key = _certificate(Path(tempfile.mkdtemp(prefix="dragonet-fuzz-tls-")))
        env.update(DRAGONET_TLS_CERT_FILE=cert, DRAGONET_TLS_KEY_FILE=key)
        verify = cert
    if args.max_requests:
        env["DRAGONET_MAX_REQUESTS"] = str(args.max_requests)
    log = Path(args.server_log)
    server, url = start_server(env, log, args.old_checkout, verify)
    say(f"dragonet serve on {url}, its log in {log}")
    signals: Counter[str] = Counter()
    workers_seen: set[int] = set(_children(server.pid))
    done = threading.Event()

    def stopper() -> None:
        """SIGTERM a worker and SIGHUP the master on their periods; note every worker."""
        last = {"term": time.monotonic(), "hup": time.monotonic()}
        while not done.wait(0.2):
            workers = _children(server.pid)
            workers_seen.update(workers)
            now = time.monotonic()
            if args.sigterm_every and now - last["term"] >= args.sigterm_every and workers:
                os.kill(min(workers), signal.SIGTERM)
                signals["SIGTERM to a worker"] += 1
                last["term"] = now
            if args.sighup_every and now - last["hup"] >= args.sighup_every:
                os.kill(server.pid, signal.SIGHUP)
                signals["SIGHUP to the master"] += 1
                last["hup"] = now

    watcher = threading.Thread(target=stopper, daemon=True)
    watcher.start()
    codes: Counter[int] = Counter()
    late: list[float] = []
    failures: list[str] = []
    latencies: list[float] = []
    classes: Counter[str] = Counter()
    rss: list[dict[str, Any]] = []
    checker = Checker()
    lock = threading.Lock()
    t0 = time.monotonic()
    stop_at = t0 + args.max_seconds
    local = threading.local()
    reconnects: list[float] = []

    def one(n: int) -> None:
        if time.monotonic() > stop_at:
            return
        path, body = base[n % len(base)]
        kind = kinds[id(body)]
        r = random.Random(args.seed * 1_000_003 + n)
        what = "clean"
        if r.random() < args.broken:
            body, what = mutate(body, r)
        session = getattr(local, "session", None) or requests.Session()
        session.verify = verify
        local.session = session
        # Validating a large answer's new objects can keep this thread away for seconds; a
        # connection idle past the server's keep-alive (DRAGONET_IDLE_SECONDS, 5 s) is
        # closed by it, and a request sent on it as it closes gets no answer. Go's client
        # (Metacontroller's) drops such a connection and sends again on a new one: so do we.
        idle = time.monotonic() - getattr(local, "last", time.monotonic())
        started = time.monotonic()
        for attempt in (1, 2):
            try:
                resp = session.post(
                    url + path,
                    data=body,
                    verify=verify,  # (per request: REQUESTS_CA_BUNDLE would win over the session's)
                    timeout=args.deadline + 30,
                    headers={"Content-Type": "application/json"},
                )
                status, answer = resp.status_code, resp.content
                break
            except requests.ConnectionError as err:
                status, answer = 0, str(err).encode()
                if attempt == 2 or idle < args.idle_seconds - 0.5:
                    break
                with lock:
                    reconnects.append(round(idle, 1))
                session = local.session = requests.Session()
                session.verify = verify
                started = time.monotonic()
            except requests.RequestException as err:
                status, answer = 0, str(err).encode()
                break
        local.last = time.monotonic()
        took = local.last - started
        with lock:
            codes[status] += 1
            classes[what.split(":")[0].split(" on ")[0].split(" in ")[0]] += 1
            latencies.append(took)
            if took > args.deadline + 0.5:
                late.append(took)
            if status >= 500 or status == 0:
                failures.append(
                    f"{status} #{n} at {time.monotonic() - t0:.1f} s {path} ({what}): "
                    f"{answer[:200]!r}"
                )
        if status == 200:
            checker.answer(path, kind, orjson.loads(answer))

    started = time.monotonic()
    try:
        with ThreadPoolExecutor(args.clients) as pool:
            batch = 500
            for first in range(0, args.requests, batch):
                list(pool.map(one, range(first, min(first + batch, args.requests))))
                sample = {
                    "requests": min(first + batch, args.requests),
                    "seconds": round(time.monotonic() - started, 1),
                }
                for pid in _children(server.pid):
                    sample[f"worker {pid} MiB"] = _rss_mib(pid)
                rss.append(sample)
                say(json.dumps(sample))
                if time.monotonic() > stop_at:
                    say("stopped at --max-seconds")
                    break
    finally:
        done.set()
        watcher.join()
        server.terminate()
        server.wait(timeout=30)

    lat = sorted(latencies)
    summary = {
        "requests": sum(codes.values()),
        "by_status": dict(sorted(codes.items())),
        "by_class": dict(classes.most_common()),
        "5xx": sum(n for code, n in codes.items() if code >= 500),
        "no_answer": codes.get(0, 0),
        "server": args.old_checkout or "this checkout",
        "tls": args.tls,
        "max_requests": args.max_requests,
        "signals": dict(signals),
        "workers_seen": len(workers_seen),
        "sent_again_after_idle_close": len(reconnects),
        "past_deadline": len(late),
        "invalid_objects": len(checker.invalid),
        "distinct_objects_validated": len(checker.seen),
        "latency_s": {
            "p50": round(statistics.median(lat), 3),
            "p99": round(lat[int(len(lat) * 0.99) - 1], 3),
            "max": round(lat[-1], 3),
        }
        if lat
        else {},
        "wall_s": round(time.monotonic() - started, 1),
        "rss": rss,
        "failures": failures[:20],
        "invalid": checker.invalid[:20],
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "rss"}, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
