"""How far a reader travels to follow the pool's request into its snapshot (issue 40).

Run: ``.venv/bin/python -m benchmarks.walk [--show]``.

The request: ``benchmarks.sync_latency``'s pool cut down to one object of each kind (one
Node, one Pod, one TFJob, one PriorityClass as related objects; the job's Admission as a
child), read by the webhook's own reader (``webhooks.lazy``: each object the bytes it
arrived in), into a fresh memo (a cold sync: every object parsed). ``sys.setprofile``
follows every call and return; each event is charged to the innermost frame of our own
code (``policy/``, ``webhooks/``: a library's frames count as the caller's), and a
*stay* is a run of consecutive events in one module. Printed, for two walks:

* *related objects*: from ``policy/pool/sync.py`` into ``observe()`` and back with the
  snapshot (the walk issue 40 asks to be at most 12 stays with at most 4 returns);
* *request into plan()*: from the request's bytes (``webhooks.lazy``) through the pool's
  ``sync`` until ``plan()`` is called;

each as stays, modules, and *returns* (stays in a module the walk had already left), and
the modules entered more than once. Then the ``parse_time`` call sites in ``policy/`` and
``webhooks/`` (times re-parsed from strings downstream, rather than once at the edge).

Deterministic for a given tree (no timing); not a test.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import orjson

from benchmarks.sync_latency import scenario
from policy.memo import Encoded, Memo
from policy.model.admission import TYPE_KEY as ADMISSIONS
from policy.pool import sync as pool_sync_module
from policy.pool.observe import observe
from tests.conftest import NOW
from webhooks.lazy import read_sync_request

ROOT = Path(__file__).resolve().parent.parent
OURS = ("policy", "webhooks")
# Our stand-in for a library's machinery is passed through as the library's would be
# (policy/model/once.py is functools.cached_property without its lock).
THROUGH = frozenset({"policy.model.once"})


def fixture_body() -> bytes:
    """The pool's sync request with one object of each kind, as Metacontroller sends it."""
    request, _ = scenario(3, 2)  # 3 nodes, 2 jobs: one running (11 pods), one queued
    related = request["related"]
    pod_key, pod = next(iter(related["Pod.v1"].items()))
    job = pod["metadata"]["labels"]["training.kubeflow.org/job-name"]
    ns = pod["metadata"]["namespace"]
    node_name = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0]
    cut: dict[str, dict[str, Any]] = {}
    for tkey, objs in related.items():
        if tkey == "Pod.v1":
            cut[tkey] = {pod_key: pod}
        elif tkey == "Node.v1":
            cut[tkey] = {k: o for k, o in objs.items() if o["metadata"]["name"] == node_name}
        elif tkey.startswith("TFJob."):
            cut[tkey] = {k: o for k, o in objs.items() if k == f"{ns}/{job}"}
        else:
            cut[tkey] = dict(list(objs.items())[:1])
    cut.setdefault("PriorityClass.scheduling.k8s.io/v1", {})
    if not cut["PriorityClass.scheduling.k8s.io/v1"]:
        cut["PriorityClass.scheduling.k8s.io/v1"] = {
            "high": {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "high"},
                "value": 1000,
            }
        }
    children = {
        ADMISSIONS: {
            k: o
            for k, o in request["children"].get(ADMISSIONS, {}).items()
            if o["spec"]["job"]["name"] == job
        }
    }
    return orjson.dumps({**request, "related": cut, "children": children})


@dataclass
class Walk:
    stays: list[str]

    @property
    def returns(self) -> int:
        seen: set[str] = set()
        back = 0
        for m in self.stays:
            back += m in seen
            seen.add(m)
        return back

    @property
    def modules(self) -> int:
        return len(set(self.stays))

    def again(self) -> dict[str, int]:
        """Modules entered more than once, and how often."""
        return {m: n for m, n in Counter(self.stays).most_common() if n > 1}


@dataclass
class _Call:
    code: Any
    module: str | None  # ours, else None (a library's frame counts as its caller's)
    calls: list[_Call]
    codes: frozenset = frozenset()  # every function of ours in this call and below it


def trace(
    call: Callable[[], Any],
    start: str,
    until: str | None = None,
    carries: Callable[[FrameType], bool] | None = None,
) -> Walk:
    """The stays of ``call`` (beginning in module ``start``), up to the first call of a
    function named ``until`` if given. As a reader follows code: a call is followed unless
    everything it runs (it and all it calls) was read before (the next object of a loop,
    a helper read already), so each function counts once, where it is first met. With
    ``carries``, only calls it is true of are stays (the others are passed through, as a
    library's are): a reader following one thing, e.g. the request's objects."""
    root = _Call(None, start, [])
    stack = [root]
    done = False

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal done
        if done:
            return
        if event == "call":
            if until is not None and frame.f_code.co_name == until:
                done = True
                return
            module = _module_of(frame.f_code.co_filename)
            if module is not None and carries is not None and not carries(frame):
                module = None
            node = _Call(frame.f_code, module, [])
            stack[-1].calls.append(node)
            stack.append(node)
        elif event == "return" and len(stack) > 1:
            stack.pop()

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    _codes(root)
    stays = [start]
    read: set[Any] = set()

    def visit(node: _Call, here: str) -> None:
        for sub in node.calls:
            if sub.codes <= read:
                continue  # nothing in it is new to the reader
            if sub.module is not None:
                read.add(sub.code)
            inner = sub.module or here
            if inner != stays[-1]:
                stays.append(inner)
            visit(sub, inner)
            if here != stays[-1]:
                stays.append(here)

    visit(root, start)
    if stays[-1] == start and len(stays) > 1:
        stays.pop()  # (the return into the caller, which is where the walk began)
    return Walk(stays)


def _codes(node: _Call) -> frozenset:
    own = {node.code} if node.module is not None and node.code is not None else set()
    node.codes = frozenset(own.union(*(_codes(sub) for sub in node.calls)))
    return node.codes


def _module_of(filename: str) -> str | None:
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    module = ".".join(rel.with_suffix("").parts)
    return module if rel.parts[0] in OURS and module not in THROUGH else None


def carrier(*roots: Any) -> Callable[[FrameType], bool]:
    """Whether a call is handed any of ``roots`` or what is inside them (a related object,
    its decoded form, any part of it), or a list or tuple of such (a map's pairs)."""
    ids: set[int] = set()

    def add(value: Any) -> None:
        if isinstance(value, Encoded):
            ids.add(id(value))
            len(value)  # (decoded now, once: what any reader of it is handed)
            value = value._decoded
        if isinstance(value, dict | list):
            ids.add(id(value))
            for v in value.values() if isinstance(value, dict) else value:
                add(v)

    for root in roots:
        add(root)

    def held(value: Any, depth: int = 0) -> bool:
        if id(value) in ids:
            return True
        if depth < 2 and isinstance(value, list | tuple):
            return any(held(v, depth + 1) for v in value[:3])
        return False

    def carries(frame: FrameType) -> bool:
        code = frame.f_code
        n = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04)
        local = frame.f_locals
        return any(held(local.get(name)) for name in code.co_varnames[:n])

    return carries


def parse_time_calls() -> Counter[str]:
    """``parse_time(...)`` call sites per module of ``policy/`` and ``webhooks/``."""
    out: Counter[str] = Counter()
    for top in OURS:
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    f = node.func
                    name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                    if name == "parse_time":
                        out[str(path.relative_to(ROOT))] += 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--show", action="store_true", help="print each walk's stays")
    args = parser.parse_args()
    body = fixture_body()

    def related() -> Walk:
        req = read_sync_request(body)
        return trace(
            lambda: observe(req.parent, req.children, req.related, Memo()),
            "policy.pool.sync",
            carries=carrier(req.related),
        )

    def related_code() -> Walk:
        req = read_sync_request(body)
        return trace(
            lambda: observe(req.parent, req.children, req.related, Memo()),
            "policy.pool.sync",
        )

    def into_plan() -> Walk:
        def run() -> None:
            req = read_sync_request(body)
            pool_sync_module.sync(req.parent, req.children, req.related, NOW, Memo())

        return trace(run, "webhooks.app", until="plan")

    print(f"{'walk':<20} {'stays':>5} {'modules':>7} {'returns':>7}  entered more than once")
    walks = (
        ("related objects", related()),
        ("all of observe()", related_code()),
        ("request into plan()", into_plan()),
    )
    for name, walk in walks:
        again = ", ".join(f"{m.rsplit('.', 1)[-1]} {n}" for m, n in walk.again().items())
        print(f"{name:<20} {len(walk.stays):>5} {walk.modules:>7} {walk.returns:>7}  {again}")
        if args.show:
            print("  " + " > ".join(m.rsplit(".", 1)[-1] for m in walk.stays))
    calls = parse_time_calls()
    print(f"\nparse_time call sites: {sum(calls.values())} in {len(calls)} modules")
    for path, n in sorted(calls.items()):
        print(f"  {path:<36} {n}")


if __name__ == "__main__":
    main()
