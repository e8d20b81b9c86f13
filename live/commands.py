"""``kubectl dragonet status|queue|explain|nodes``: the parser (cheap to import: ``--help``
loads no client) and the commands, each a few reads and one view.

Every failure is one line on stderr and exit status 1: no cluster, no permission, no such
pool or job, Dragonet not installed. Nothing is written to the cluster.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from live.kube import Kube

COMMANDS = ("status", "queue", "explain", "nodes")
NAMESPACED = ("queue", "explain")  # the commands that read jobs of a namespace

EXAMPLES = {
    "status": "  kubectl dragonet status\n  kubectl dragonet status gpu -o yaml",
    "queue": "  kubectl dragonet queue\n  kubectl dragonet queue default -n team-a -o wide",
    "explain": "  kubectl dragonet explain job3 -n team-a\n"
    "  kubectl dragonet explain mxjob/mx1 -o json",
    "nodes": "  kubectl dragonet nodes\n  kubectl dragonet nodes gpu -o json",
}
HELP = {
    "status": "pools: policy, nodes, queued and admitted jobs, free room",
    "queue": "each pool's queue in order: position, priority, LAS queue, wait, why",
    "explain": "why a job waits, shrank or was preempted, what would let it run, its Events",
    "nodes": "what each node holds (pods by job) and has free, per resource",
}


def program() -> str:
    """``kubectl dragonet`` when kubectl runs us as its plugin, else ``dragonet``."""
    return "kubectl dragonet" if os.path.basename(sys.argv[0]) == "kubectl-dragonet" else "dragonet"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    for name in COMMANDS:
        p = sub.add_parser(
            name,
            help=f"(live cluster) {HELP[name]}",
            description=f"{HELP[name][0].upper()}{HELP[name][1:]}, read from the current "
            "kubeconfig context (read-only).",
            epilog="examples:\n" + EXAMPLES[name],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name == "explain":
            p.add_argument("job", help="the job: NAME, tfjob/NAME or mxjob/NAME")
        else:
            p.add_argument("pool", nargs="?", help="one TrainingPool (default: every pool)")
        p.add_argument(
            "-o",
            "--output",
            choices=["table", "wide", "json", "yaml"],
            default="table",
            help="a table (default; wide adds columns), or JSON or YAML",
        )
        if name in NAMESPACED:  # pools and nodes are cluster-scoped: no -n to ignore
            p.add_argument("-n", "--namespace", help="the namespace (default: the context's)")
            p.add_argument(
                "-A",
                "--all-namespaces",
                action="store_true",
                help="jobs of every namespace (queue lists every namespace unless -n is "
                "given; explain finds the job in whichever namespace holds it)",
            )
        p.add_argument("--context", help="the kubeconfig context to use")
        p.add_argument("--kubeconfig", help="the kubeconfig file (default: $KUBECONFIG)")
        p.add_argument(
            "--request-timeout",
            type=request_timeout,
            default=10.0,
            metavar="DURATION",
            help="give up on a request after this long, as kubectl takes it: 10 (seconds), "
            "5s, 1m30s, 250ms; 0 waits for ever (default 10s)",
        )


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def request_timeout(text: str) -> float | None:
    """kubectl's ``--request-timeout``: a whole number of seconds, or a Go duration
    (``5s``, ``1m30s``, ``1.5h``); 0 is no timeout (None). Negative or other: refused with
    kubectl's own words."""
    value = text.strip()
    seconds: float | None = None
    if value.isdigit():
        seconds = float(value)
    elif value and _DURATION_PART.sub("", value) == "":
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(value))
    if seconds is None or not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(
            f"invalid timeout value {text!r}: a single integer in seconds, or an integer "
            "followed by a time unit (e.g. 1s | 2m | 3h)"
        )
    return seconds or None


def run(args: argparse.Namespace) -> int:
    from live.kube import Kube, LiveError

    try:
        kube = Kube(args.kubeconfig, args.context, args.request_timeout)
        return _COMMANDS[args.command](kube, args)
    except LiveError as err:
        print(f"{program()} {args.command}: {err}", file=sys.stderr)
        return 1


def _pools(kube: Kube, name: str | None) -> list[dict[str, Any]]:
    from live.kube import POOLS, NotFound

    try:
        if name:
            return [kube.get(f"{POOLS}/{name}")]
        return list(kube.list(POOLS))
    except NotFound:
        if name and installed(kube):
            raise NotFound(f"no TrainingPool {name!r} (kubectl get trainingpools)") from None
        raise NotFound(
            "Dragonet is not installed here: the API server has no TrainingPools "
            "(trainingpools.dragonet.io)"
        ) from None


def _served(kube: Kube, plural: str) -> bool:
    """Whether the API server serves kubeflow.org/v1 ``plural`` at all (its CRD exists)."""
    from live.kube import NotFound

    try:
        kube.get(f"/apis/kubeflow.org/v1/{plural}", limit=1)
    except NotFound:
        return False
    return True


def installed(kube: Kube) -> bool:
    """Whether the API server serves TrainingPools (Dragonet's CRDs are installed)."""
    from live.kube import POOLS, NotFound

    try:
        kube.get(POOLS, limit=1)
    except NotFound:
        return False
    return True


def status(kube: Kube, args: argparse.Namespace) -> int:
    from live.table import emit, resource_label, table
    from live.views import headline, pool_rows

    rows = pool_rows(_pools(kube, args.pool))
    shown = headline(rows, "capacity")
    cols = [
        ("NAME", lambda r: r["name"]),
        ("POLICY", lambda r: r["policy"]),
        ("NODES", lambda r: r["nodes"]),
        ("QUEUED", lambda r: r["queued"]),
        ("ADMITTED", lambda r: r["admitted"]),
        *((f"FREE {resource_label(k)}", lambda r, k=k: _free_of(r, k, "capacity")) for k in shown),
    ]
    if args.output == "wide":
        cols.append(("MESSAGE", lambda r: r.get("message", "")))
    emit(rows, args.output, lambda: table(rows, cols) if rows else ["No TrainingPools found."])
    return 0


def _free_of(row: dict[str, Any], name: str, total: str) -> str:
    """``free/total`` of resource ``name`` in a pool's or a node's row."""
    return f"{row['free'].get(name, '0')}/{row[total].get(name, '0')}"


def queue(kube: Kube, args: argparse.Namespace) -> int:
    """The pool's queue, naming only the jobs the caller may read; without access to the
    pools (a tenant's namespaced role), each waiting job's place from its own status."""
    from live.kube import Forbidden
    from live.table import emit, table
    from live.views import listed_more, queue_rows, unnamed, utc_now

    namespace = None if args.all_namespaces else args.namespace
    try:
        pools = _pools(kube, args.pool)
    except Forbidden:
        return _own_queue(kube, args, namespace)
    readable = _readable(kube, namespace)
    messages = _messages(kube, namespace, readable) if args.output == "wide" else None
    rows = queue_rows(pools, utc_now(), namespace, messages)
    if readable is not None:
        rows = unnamed(rows, readable)
    cols = [
        ("POOL", lambda r: r["pool"]),
        ("POSITION", lambda r: r["position"]),
        ("JOB", lambda r: r["job"]),
        ("KIND", lambda r: r["kind"]),
        ("PRIORITY", lambda r: r["priority"]),
    ]
    if any(r["lasQueue"] is not None for r in rows):
        cols.append(("LAS QUEUE", lambda r: r["lasQueue"]))
    cols += [("WAITED", lambda r: r["waited"]), ("REASON", lambda r: r["reason"])]
    if messages is not None:
        cols.append(("MESSAGE", lambda r: r["message"]))
    where = f" in namespace {namespace}" if namespace else ""

    def lines() -> list[str]:
        return [*table(rows, cols), *listed_more(pools)] if rows else [f"No jobs wait{where}."]

    emit(rows, args.output, lines)
    return 0


def _messages(
    kube: Kube, namespace: str | None, readable: set[str] | None = None
) -> dict[str, str]:
    """Each job's status message, by ``Kind:namespace/name`` (two lists; of the
    ``readable`` namespaces when the caller may not list every one)."""
    out = {}
    for job in _jobs(kube, namespace, readable):
        meta = job.get("metadata") or {}
        said = ((job.get("status") or {}).get("scheduling") or {}).get("message", "")
        out[f"{job['kind']}:{meta.get('namespace')}/{meta.get('name')}"] = said
    return out


def _jobs(
    kube: Kube, namespace: str | None, readable: set[str] | None = None
) -> list[dict[str, Any]]:
    """The TFJobs and MXJobs of ``namespace`` (of every namespace when None, or of the
    ``readable`` ones), each with its kind. A kind whose CRD is not installed has none."""
    from live.kube import NotFound, job_path

    scopes: list[str | None] = [namespace] if readable is None else sorted(readable)
    out = []
    for kind, plural in (("TFJob", "tfjobs"), ("MXJob", "mxjobs")):
        for scope in scopes:
            path = job_path(plural, scope) if scope else f"/apis/kubeflow.org/v1/{plural}"
            try:
                out += [{**job, "kind": kind} for job in kube.list(path)]
            except NotFound:  # that kind's CRD is not installed
                break
    return out


def _readable(kube: Kube, namespace: str | None) -> set[str] | None:
    """The namespaces whose jobs the caller may read, if not every one the command shows
    (None): one small list tells. A job the caller may not read is never named."""
    from live.kube import Forbidden, NotFound, job_path

    scopes = [namespace] if namespace else [None, kube.namespace]
    for scope in scopes:
        path = job_path("tfjobs", scope) if scope else "/apis/kubeflow.org/v1/tfjobs"
        try:
            kube.get(path, limit=1)
        except Forbidden:
            continue
        except NotFound:  # no TFJob CRD: the permission cannot be read from it
            pass
        return None if scope == namespace else {scope}
    return set()


def _own_queue(kube: Kube, args: argparse.Namespace, namespace: str | None) -> int:
    """``queue`` for a caller who may not read the pools: its jobs' places, each from the
    job's own status (of every namespace with -A when it may list them, else of -n or the
    context's namespace)."""
    from live.kube import Forbidden
    from live.table import emit, table
    from live.views import own_queue_rows, utc_now

    scope = namespace
    try:
        jobs = _jobs(kube, scope)
    except Forbidden:
        if scope is not None:
            raise
        scope = kube.namespace
        jobs = _jobs(kube, scope)
    rows = own_queue_rows(jobs, utc_now(), args.pool)
    where = f"namespace {scope}" if scope else "every namespace"
    print(
        f"(no permission to read TrainingPools: the places of the jobs of {where}, from "
        "their status)",
        file=sys.stderr,
    )
    cols = [
        ("POOL", lambda r: r["pool"]),
        ("POSITION", lambda r: r["position"]),
        ("OF", lambda r: r["length"]),
        ("IN NAMESPACE", lambda r: r["inNamespace"]),
        ("JOB", lambda r: r["job"]),
        ("KIND", lambda r: r["kind"]),
        ("WAITED", lambda r: r["waited"]),
        ("REASON", lambda r: r["reason"]),
    ]
    if args.output == "wide":
        cols.append(("MESSAGE", lambda r: r["message"]))
    else:
        rows = [{k: v for k, v in r.items() if k != "message"} for r in rows]

    def lines() -> list[str]:
        return table(rows, cols) if rows else [f"No jobs wait in {where}."]

    emit(rows, args.output, lines)
    return 0


def _namespace_of(kube: Kube, kinds: list[str], name: str) -> str:
    """``explain -A NAME``: the one namespace that holds a job ``name`` of these kinds (one
    list per kind, selected by name); none or several is a one-line error."""
    from live.kube import LiveError, NotFound

    found: set[str] = set()
    for kind in kinds:
        path = f"/apis/kubeflow.org/v1/{kind.lower()}s"
        try:
            for job in kube.list(path, fieldSelector=f"metadata.name={name}"):
                found.add(str((job.get("metadata") or {}).get("namespace")))
        except NotFound:  # that kind's CRD is not installed
            continue
    said = " or ".join(kinds)
    if not found:
        raise NotFound(f"no {said} {name!r} in any namespace")
    if len(found) > 1:
        raise LiveError(
            f"a {said} {name!r} is in several namespaces ({', '.join(sorted(found))}): "
            "give one with -n"
        )
    return found.pop()


def explain(kube: Kube, args: argparse.Namespace) -> int:
    from live.explain import KINDS, explain, render
    from live.kube import POOLS, LiveError, NotFound, admission_path, events_path, job_path
    from live.table import emit
    from live.views import utc_now
    from policy.model.pool import admission_name

    namespace = args.namespace or kube.namespace
    kind_word, _, name = args.job.rpartition("/")
    # kubectl's forms: tfjob, tfjobs, TFJob, tfjob.kubeflow.org, tfjobs.kubeflow.org
    resource, _, group = kind_word.lower().partition(".")
    kind_word = resource.removesuffix("s") if group in ("", "kubeflow.org") else kind_word
    if kind_word and kind_word not in KINDS:
        raise LiveError(
            f"{args.job}: not a TFJob or MXJob (give NAME, tfjob/NAME, mxjob/NAME or "
            "tfjobs.kubeflow.org/NAME)"
        )
    kinds = [KINDS[kind_word]] if kind_word else list(KINDS.values())
    if args.all_namespaces:
        namespace = _namespace_of(kube, [k.kind for k in kinds], name)
    job = None
    for kind in kinds:
        try:
            job = kube.get(job_path(kind.kind.lower() + "s", namespace, name))
            job = {"apiVersion": kind.api_version, "kind": kind.kind, **job}
            break
        except NotFound:
            continue
    if job is None:
        said = " or ".join(k.kind for k in kinds)
        if not any(_served(kube, k.kind.lower() + "s") for k in kinds):
            crds = ", ".join(f"{k.kind.lower()}s.kubeflow.org" for k in kinds)
            raise NotFound(f"the API server has no {said}s ({crds}): the CRDs are not installed")
        raise NotFound(f"no {said} {name!r} in namespace {namespace}")
    try:
        admission = kube.get(admission_path(namespace, admission_name(job["kind"], name)))
    except NotFound:
        admission = None
    from live.views import job_pool

    pool_name = ((job.get("status") or {}).get("scheduling") or {}).get("pool") or job_pool(job)
    try:
        pool = kube.get(f"{POOLS}/{pool_name}")
    except LiveError:  # none, or not the caller's to read: the job's status has its place
        pool = None
    events, unread = [], ""
    try:
        selector = f"regarding.name={name}"
        events = [
            e
            for e in kube.list(events_path(namespace), fieldSelector=selector)
            if (e.get("regarding") or {}).get("kind") == job["kind"]
        ]
    except LiveError as err:  # Events are one part of the story: say why they are missing
        unread = f"(its Events could not be read: {err})"
    info = explain(job, admission, pool, events, utc_now())
    if unread:
        info["eventsUnread"] = unread

    def lines() -> list[str]:
        return render(info)

    emit(info, args.output, lines)
    return 0


def nodes(kube: Kube, args: argparse.Namespace) -> int:
    from live.kube import NODES, PODS
    from live.table import emit, resource_label, table
    from live.views import headline, node_rows

    pools = _pools(kube, None)
    if args.pool and args.pool not in {p["metadata"]["name"] for p in pools}:
        from live.kube import NotFound

        raise NotFound(f"no TrainingPool {args.pool!r} (kubectl get trainingpools)")
    listed = list(kube.list(NODES))
    pods = kube.list(PODS, fieldSelector="status.phase!=Succeeded,status.phase!=Failed")
    rows = node_rows(listed, pods, pools)
    if args.pool:
        rows = [r for r in rows if args.pool in r["pools"]]
    shown = headline(rows, "allocatable")
    cols = [
        ("NAME", lambda r: r["name"]),
        ("POOLS", lambda r: r["pools"]),
        ("PODS", lambda r: r["pods"]),
        *(
            (f"FREE {resource_label(k)}", lambda r, k=k: _free_of(r, k, "allocatable"))
            for k in shown
        ),
        ("JOBS", lambda r: [f"{j}({n})" for j, n in r["jobs"].items()]),
    ]
    if args.output == "wide":
        cols.append(("UNSCHEDULABLE", lambda r: r.get("unschedulable", "")))
    emit(rows, args.output, lambda: table(rows, cols) if rows else ["No nodes found."])
    return 0


_COMMANDS = {"status": status, "queue": queue, "explain": explain, "nodes": nodes}
