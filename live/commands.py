"""``kubectl dragonet status|queue|explain|nodes``: the parser (cheap to import: ``--help``
loads no client) and the commands, each a few reads and one view.

Every failure is one line on stderr and exit status 1: no cluster, no permission, no such
pool or job, Dragonet not installed. Nothing is written to the cluster.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from live.durations import request_timeout

if TYPE_CHECKING:
    from live.items import Item
    from live.kube import Kube
    from live.printer import Column

COMMANDS = ("status", "queue", "explain", "nodes")
NAMESPACED = ("queue", "explain")  # the commands that read jobs of a namespace

EXAMPLES = {
    "status": "  kubectl dragonet status\n  kubectl dragonet status gpu -o yaml\n"
    "  kubectl dragonet status -w",
    "queue": "  kubectl dragonet queue\n  kubectl dragonet queue default -n team-a -o wide\n"
    "  kubectl dragonet queue -A -l team=research -w --output-watch-events\n"
    "  kubectl dragonet queue -n team-a -o name | xargs kubectl describe -n team-a",
    "explain": "  kubectl dragonet explain job3 -n team-a\n"
    "  kubectl dragonet explain mxjob/mx1 -o json",
    "nodes": "  kubectl dragonet nodes\n  kubectl dragonet nodes gpu -o json\n"
    "  kubectl dragonet nodes -l topology.kubernetes.io/zone=us-central1-a --no-headers",
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


# What -l selects for each verb that lists (explain names one job: no selector).
SELECTS = {
    "status": "TrainingPools",
    "queue": "jobs (TFJobs, MXJobs, PyTorchJobs)",
    "nodes": "nodes",
}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from live.printer import add_output_flags

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
            add_output_flags(p, formats=("json", "yaml", "name"), listing=False)
        else:
            p.add_argument("pool", nargs="?", help="one TrainingPool (default: every pool)")
            add_output_flags(p, selects=SELECTS[name])
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


def run(args: argparse.Namespace) -> int:
    from live.kube import Kube, LiveError
    from live.printer import usage_problem

    if problem := usage_problem(args) or _name_and_selector(args):
        print(f"{program()} {args.command}: {problem}", file=sys.stderr)
        return 2
    try:
        kube = Kube(args.kubeconfig, args.context, args.request_timeout)
        return _COMMANDS[args.command](kube, args)
    except LiveError as err:
        print(f"{program()} {args.command}: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _name_and_selector(args: argparse.Namespace) -> str | None:
    """kubectl refuses a name with a selector; ``status POOL`` names one pool."""
    if args.command == "status" and args.pool and getattr(args, "selector", None):
        return "name cannot be provided when a selector is specified (give POOL or -l)"
    return None


def _show(
    args: argparse.Namespace,
    fetch: Callable[[], tuple[list[Item], list[str]]],
    columns: Callable[[Sequence[Item]], list[Column]],
    empty: str,
    single: bool = False,
) -> int:
    """Print what ``fetch`` reads (items, and lines for stderr) in ``args``' format: once,
    or again as it changes (``-w``)."""
    from live.printer import Printer, watch

    def printer_for(items: Sequence[Item]) -> Printer:
        return Printer(args.output, columns(items), args.no_headers, args.output_watch_events)

    if args.watch or args.watch_only:
        return watch(lambda: fetch()[0], printer_for, args.watch_interval, only=args.watch_only)
    items, notes = fetch()
    printer = printer_for(items)
    if single and len(items) == 1:
        printer.print_one(items[0])
    else:
        printer.print_list(items, empty)
    for line in notes:
        print(line, file=sys.stderr)
    return 0


def _pools(kube: Kube, name: str | None, selector: str | None = None) -> list[dict[str, Any]]:
    from live.kube import POOLS, NotFound

    try:
        if name:
            return [kube.get(f"{POOLS}/{name}")]
        return list(kube.list(POOLS, labelSelector=selector or ""))
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
    from live.items import pool_summary
    from live.printer import Column
    from live.table import resource_label
    from live.views import headline, pool_rows

    def fetch() -> tuple[list[Item], list[str]]:
        rows = pool_rows(_pools(kube, args.pool, args.selector))
        return [pool_summary(r) for r in rows], []

    def columns(items: Sequence[Item]) -> list[Column]:
        shown = headline((i.model_dump() for i in items), "capacity")
        cols = [
            Column("NAME", lambda i: i.metadata.name),
            Column("POLICY", lambda i: i.policy),
            Column("STOP", lambda i: i.stopPolicy),
            Column("NODES", lambda i: i.nodes),
            Column("QUEUED", lambda i: i.queued),
            Column("ADMITTED", lambda i: i.admitted),
            *(
                Column(f"FREE {resource_label(k)}", lambda i, k=k: _free_of(i, k, i.capacity))
                for k in shown
            ),
        ]
        if args.output == "wide":
            cols.append(Column("MESSAGE", lambda i: i.message))
        return cols

    return _show(args, fetch, columns, "No TrainingPools found.", single=bool(args.pool))


def _free_of(item: Any, name: str, total: dict[str, str]) -> str:
    """``free/total`` of resource ``name``, as the pool writes quantities (``31.3Gi``)."""
    from live.views import human_quantity

    return f"{human_quantity(name, item.free.get(name))}/{human_quantity(name, total.get(name))}"


def queue(kube: Kube, args: argparse.Namespace) -> int:
    """The pool's queue, naming only the jobs the caller may read; without access to the
    pools (a tenant's namespaced role), each waiting job's place from its own status."""
    from live.items import queue_entry
    from live.kube import Forbidden
    from live.printer import Column
    from live.views import duration, listed_more, queue_rows, unnamed, utc_now

    namespace = None if args.all_namespaces else args.namespace
    try:
        first = [_pools(kube, args.pool)]
    except Forbidden:
        return _own_queue(kube, args, namespace)
    readable = _readable(kube, namespace)
    # Each job's message (-o wide, and every field for -o json|yaml), and which jobs -l takes.
    reads_jobs = args.output in ("wide", "json", "yaml") or bool(args.selector)

    def fetch() -> tuple[list[Item], list[str]]:
        pools = first.pop() if first else _pools(kube, args.pool)
        messages = _messages(kube, namespace, readable, args.selector) if reads_jobs else None
        rows = queue_rows(pools, utc_now(), namespace, messages)
        if args.selector and messages is not None:
            rows = [r for r in rows if f"{r['kind']}:{r['job']}" in messages]
        if readable is not None:
            rows = unnamed(rows, readable)
        return [queue_entry(r) for r in rows], listed_more(pools)

    def columns(items: Sequence[Item]) -> list[Column]:
        cols = [
            Column("POOL", lambda i: i.pool),
            Column("POSITION", lambda i: i.position),
            Column("JOB", _job_cell),
            Column("KIND", lambda i: i.regarding.kind),
            Column("PRIORITY", lambda i: i.priority),
        ]
        if any(i.lasQueue is not None for i in items):
            cols.append(Column("LAS QUEUE", lambda i: i.lasQueue))
        cols += [
            Column("WAITED", lambda i: duration(i.waitedSeconds)),
            Column("REASON", lambda i: i.reason),
        ]
        if args.output == "wide":
            cols.append(Column("MESSAGE", lambda i: i.message))
        return cols

    where = f" in namespace {namespace}" if namespace else ""
    return _show(args, fetch, columns, f"No jobs wait{where}.")


def _job_cell(item: Item) -> str:
    """A job as ``namespace/name``; one the caller may not read, as it is shown."""
    meta = item.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


def _messages(
    kube: Kube,
    namespace: str | None,
    readable: set[str] | None = None,
    selector: str | None = None,
) -> dict[str, str]:
    """Each job's status message, by ``Kind:namespace/name`` (two lists; of the
    ``readable`` namespaces when the caller may not list every one; only the jobs whose
    labels ``selector`` takes, when given)."""
    out = {}
    for job in _jobs(kube, namespace, readable, selector):
        meta = job.get("metadata") or {}
        said = ((job.get("status") or {}).get("scheduling") or {}).get("message", "")
        out[f"{job['kind']}:{meta.get('namespace')}/{meta.get('name')}"] = said
    return out


def _jobs(
    kube: Kube,
    namespace: str | None,
    readable: set[str] | None = None,
    selector: str | None = None,
) -> list[dict[str, Any]]:
    """The TFJobs and MXJobs of ``namespace`` (of every namespace when None, or of the
    ``readable`` ones), each with its kind. A kind whose CRD is not installed has none."""
    from live.kube import NotFound, job_path

    scopes: list[str | None] = [namespace] if readable is None else sorted(readable)
    out = []
    from policy.model.kinds import KINDS

    for kind, plural in ((k.kind, k.plural) for k in KINDS):
        for scope in scopes:
            path = job_path(plural, scope) if scope else f"/apis/kubeflow.org/v1/{plural}"
            try:
                out += [
                    {**job, "kind": kind} for job in kube.list(path, labelSelector=selector or "")
                ]
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
    from live.items import queue_entry
    from live.kube import Forbidden
    from live.printer import Column
    from live.views import duration, own_queue_rows, place, utc_now

    scope = namespace
    try:
        first = [_jobs(kube, scope, selector=args.selector)]
    except Forbidden:
        if scope is not None:
            raise
        scope = kube.namespace
        first = [_jobs(kube, scope, selector=args.selector)]
    where = f"namespace {scope}" if scope else "every namespace"
    print(
        f"(no permission to read TrainingPools: the places of the jobs of {where}, from "
        "their status)",
        file=sys.stderr,
    )

    def fetch() -> tuple[list[Item], list[str]]:
        jobs = first.pop() if first else _jobs(kube, scope, selector=args.selector)
        rows = own_queue_rows(jobs, utc_now(), args.pool)
        return [queue_entry(r) for r in rows], []

    def columns(items: Sequence[Item]) -> list[Column]:
        cols = [
            Column("POOL", lambda i: i.pool),
            Column("POSITION", lambda i: place(i.place or {}) or "-"),
            Column("OF", lambda i: place(i.place or {}, "length") or "-"),
            Column("IN NAMESPACE", lambda i: place(i.place or {}, "positionInNamespace") or "-"),
            Column("JOB", _job_cell),
            Column("KIND", lambda i: i.regarding.kind),
            Column("WAITED", lambda i: duration(i.waitedSeconds)),
            Column("REASON", lambda i: i.reason),
        ]
        if args.output == "wide":
            cols.append(Column("MESSAGE", lambda i: i.message))
        return cols

    return _show(args, fetch, columns, f"No jobs wait in {where}.")


def _namespace_of(kube: Kube, kinds: list[str], name: str) -> str:
    """``explain -A NAME``: the one namespace that holds a job ``name`` of these kinds (one
    list per kind, selected by name); none or several is a one-line error. A caller who may
    not list them in every namespace (a tenant's Role) is searched where it may read: its
    context's namespace, and told so on stderr."""
    from live.kube import Forbidden, LiveError, NotFound, job_path

    found: set[str] = set()
    scope: str | None = None  # every namespace, until a list across them is refused
    for kind in kinds:
        plural = f"{kind.lower()}s"
        try:
            try:
                path = job_path(plural, scope) if scope else f"/apis/kubeflow.org/v1/{plural}"
                listed = list(kube.list(path, fieldSelector=f"metadata.name={name}"))
            except Forbidden:
                if scope is not None:
                    raise
                scope = kube.namespace
                path = job_path(plural, scope)
                listed = list(kube.list(path, fieldSelector=f"metadata.name={name}"))
        except NotFound:  # that kind's CRD is not installed
            continue
        found.update(str((job.get("metadata") or {}).get("namespace")) for job in listed)
    from live.kube import one_of

    said = one_of(kinds)
    where = f"namespace {scope}" if scope else "any namespace"
    if scope:
        print(
            f"(no permission to list {one_of([k + 's' for k in kinds])} in every namespace: "
            f"looked in namespace {scope}, "
            "the context's)",
            file=sys.stderr,
        )
    if not found:
        raise NotFound(f"no {said} {name!r} in {where}")
    if len(found) > 1:
        raise LiveError(
            f"a {said} {name!r} is in several namespaces ({', '.join(sorted(found))}): "
            "give one with -n"
        )
    return found.pop()


def explain(kube: Kube, args: argparse.Namespace) -> int:
    from live.explain import KINDS, explain, render, runner
    from live.items import job_explanation
    from live.kube import POOLS, LiveError, NotFound, admission_path, events_path, job_path
    from live.printer import Printer
    from live.views import utc_now
    from policy.model.kinds import kinds_text
    from policy.model.pool import admission_name

    namespace = args.namespace or kube.namespace
    kind_word, _, name = args.job.rpartition("/")
    # kubectl's forms: tfjob, tfjobs, TFJob, tfjob.kubeflow.org, tfjobs.kubeflow.org
    resource, _, group = kind_word.lower().partition(".")
    kind_word = resource.removesuffix("s") if group in ("", "kubeflow.org") else kind_word
    if kind_word and kind_word not in KINDS:
        raise LiveError(
            f"{args.job}: not a {kinds_text()} (give NAME, "
            f"{', '.join(k + '/NAME' for k in KINDS)} or tfjobs.kubeflow.org/NAME)"
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
        from live.kube import one_of

        said = one_of([k.kind for k in kinds])
        if not any(_served(kube, k.plural) for k in kinds):
            crds = ", ".join(f"{k.plural}.kubeflow.org" for k in kinds)
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
    # The job's Events, and its Admission's (the pool's, when it leaves the Admission out).
    about = ((job["kind"], name), ("Admission", admission_name(job["kind"], name)))
    try:
        for kind, named in about:
            selector = f"regarding.name={named}"
            events += [
                e
                for e in kube.list(events_path(namespace), fieldSelector=selector)
                if (e.get("regarding") or {}).get("kind") == kind
            ]
    except LiveError as err:  # Events are one part of the story: say why they are missing
        events, unread = [], f"(its Events could not be read: {err})"
    now = utc_now()
    run_by = None if admission is not None else runner(job, _pods_of(kube, namespace, name))
    info = explain(job, admission, pool, events, now, run_by)
    if unread:
        info["eventsUnread"] = unread
    Printer(args.output, ()).print_one(job_explanation(info, now), lambda: render(info))
    return 0


def _pods_of(kube: Kube, namespace: str, job: str) -> list[dict[str, Any]]:
    """The pods labelled for job ``job`` (whoever made them), or none if they cannot be
    read: they only tell who runs a job that has no Admission."""
    from live.kube import LiveError
    from policy.model.cluster import L_JOB

    try:
        path = f"/api/v1/namespaces/{namespace}/pods"
        return list(kube.list(path, labelSelector=f"{L_JOB}={job}"))
    except LiveError:
        return []


def nodes(kube: Kube, args: argparse.Namespace) -> int:
    from live.items import node_usage
    from live.kube import NODES, PODS, NotFound
    from live.printer import Column
    from live.table import resource_label
    from live.views import headline, node_rows

    def fetch() -> tuple[list[Item], list[str]]:
        pools = _pools(kube, None)
        if args.pool and args.pool not in {p["metadata"]["name"] for p in pools}:
            raise NotFound(f"no TrainingPool {args.pool!r} (kubectl get trainingpools)")
        listed = list(kube.list(NODES, labelSelector=args.selector or ""))
        pods = kube.list(PODS, fieldSelector="status.phase!=Succeeded,status.phase!=Failed")
        rows = node_rows(listed, pods, pools)
        if args.pool:
            rows = [r for r in rows if args.pool in r["pools"]]
        return [node_usage(r) for r in rows], []

    def columns(items: Sequence[Item]) -> list[Column]:
        shown = headline((i.model_dump() for i in items), "allocatable")
        cols = [
            Column("NAME", lambda i: i.metadata.name),
            Column("POOLS", lambda i: i.pools),
            Column("PODS", lambda i: i.pods),
            *(
                Column(f"FREE {resource_label(k)}", lambda i, k=k: _free_of(i, k, i.allocatable))
                for k in shown
            ),
            Column("JOBS", lambda i: [f"{j}({n})" for j, n in i.jobs.items()]),
        ]
        if args.output == "wide":
            cols.append(Column("UNSCHEDULABLE", lambda i: i.unschedulable))
        return cols

    return _show(args, fetch, columns, "No nodes found.")


_COMMANDS = {"status": status, "queue": queue, "explain": explain, "nodes": nodes}
