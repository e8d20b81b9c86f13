"""``dragonet view``: the web page of a live pool, from a dump of the cluster's objects or
read from the cluster itself (``--live``, as ``kubectl dragonet`` reads it).

It lives in ``cli/``, the one tier that may use both the simulator's web view (``sim/``)
and the live cluster's client (``live/``), which never import each other. The parser
imports nothing heavy: plotly, the renderer and the kubernetes client load when the command
runs, so ``--help`` and a refused argument answer at once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from live.commands import installed
from live.durations import positive_duration, request_timeout
from policy.model.kinds import BY_KIND, kinds_text

if TYPE_CHECKING:
    from http.server import ThreadingHTTPServer

    from live.kube import Kube
    from sim.view.pool import Dump

DUMP = "kubectl get nodes,pods,trainingpools,tfjobs,mxjobs,admissions -A -o json"
LIVE_ONLY = ("context", "kubeconfig", "namespace", "all_namespaces", "serve")
SERVE_ONLY = ("address", "port", "refresh")
PORT = 8002  # next to kubectl proxy's 8001

EXAMPLES = f"""\
examples:
  dragonet view --live --serve
  dragonet view --live --serve --refresh 30s --port 9000
  dragonet view --live --html pool.html
  dragonet view --live --context prod -n team-a --html team-a.html
  {DUMP} > state.json
  dragonet view state.json --html pool.html

The same page as `dragonet simulate --html` draws for a run: every job's timeline (waiting,
admitted with its workers, preempted, moved) and story (its Admission's phase, reason and
message, its pods and their nodes, its conditions), and each node's allocation per resource.
--live reads the cluster of the current kubeconfig context (or --context), read-only, as
`kubectl dragonet` does: every Node and TrainingPool, and the Pods, TFJobs, MXJobs and
Admissions of every namespace (of one with -n); "now" is the moment of the read. A dump has
no clock: "now" is its latest timestamp.

--serve serves the page at http://127.0.0.1:8002/ (--address, --port) and reads the cluster
again every --refresh (10s): the page loads itself again as often, keeping its scroll and
the story you pinned; Ctrl-C stops it. --html writes one snapshot instead.

exit status: 0 when the page was written (or served until Ctrl-C); 1 when the cluster cannot
be read (no cluster, no permission: one line); 2 for a file that is not a readable List of
objects, an output that cannot be written, a port that cannot be had, or flags that do not
go together (one line naming the file and field); 3 for an internal error.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser(
        "view",
        help="write a web page of a live pool, read from the cluster or from a dump",
        description="Render a cluster's objects (Nodes, Pods, TrainingPools, TFJobs, MXJobs,\n"
        "Admissions) as one HTML page: read live (--live) or from a dump (a List); served\n"
        "and read again every few seconds (--live --serve), or written once (--html).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.add_argument("dump", nargs="?", help=f"the cluster's objects as a List ({DUMP})")
    v.add_argument("--html", metavar="HTML", help="the page to write (a snapshot)")
    live = v.add_argument_group("a live cluster (instead of a dump)")
    live.add_argument(
        "--live",
        action="store_true",
        help="read the cluster of the kubeconfig's current context (read-only)",
    )
    live.add_argument("--context", help="the kubeconfig context to use")
    live.add_argument("--kubeconfig", help="the kubeconfig file (default: $KUBECONFIG)")
    live.add_argument("-n", "--namespace", help="jobs and pods of this namespace only")
    live.add_argument(
        "-A", "--all-namespaces", action="store_true", help="jobs of every namespace (the default)"
    )
    live.add_argument(
        "--serve",
        action="store_true",
        help="serve the page on a local web server, read again every --refresh",
    )
    live.add_argument(
        "--refresh",
        type=positive_duration,
        metavar="DURATION",
        help="with --serve, how often the page and the cluster are read again (default 10s)",
    )
    live.add_argument(
        "--address", help="with --serve, the address to listen on (default 127.0.0.1)"
    )
    live.add_argument(
        "--port", type=int, help=f"with --serve, the port to listen on (default {PORT})"
    )
    live.add_argument(
        "--request-timeout",
        type=request_timeout,
        default=10.0,
        metavar="DURATION",
        help="give up on a request after this long, as kubectl takes it: 10 (seconds), "
        "5s, 1m30s; 0 waits for ever (default 10s)",
    )


def _refused(args: argparse.Namespace) -> str | None:
    """Flags that do not go together, in one line (None: they do)."""
    if args.live and args.dump:
        return f"give a dump ({args.dump}) or --live, not both"
    if not args.live and not args.dump:
        return f"give a dump ({DUMP}) or --live"
    if not args.live:
        given = [f"--{k.replace('_', '-')}" for k in LIVE_ONLY if getattr(args, k)]
        if given:
            return f"{', '.join(given)}: only with --live (a dump holds what it holds)"
    if not args.serve:
        given = [f"--{k}" for k in SERVE_ONLY if getattr(args, k) is not None]
        if given:
            return f"{', '.join(given)}: only with --serve"
    if args.serve and args.html:
        return "--serve or --html: give one (a page served and read again, or a snapshot)"
    if not args.serve and not args.html:
        return "give --html FILE (a snapshot) or --serve (a page read again every 10s)"
    if args.port is not None and not 0 <= args.port <= 65535:
        return f"--port {args.port}: not a port (0-65535; 0 picks a free one)"
    if args.namespace and args.all_namespaces:
        return "-n and -A: give one"
    return None


def run(args: argparse.Namespace) -> int:
    from sim.cli import output_problem

    problem = _refused(args)
    if problem is None and args.html:
        problem = output_problem("--html", args.html, ".html")
    if problem:
        print(f"dragonet view: {problem}", file=sys.stderr)
        return 2
    from sim.view.pool import DumpError, load, write_html

    if args.serve:
        return _serve(args)
    note = ""
    if args.live:
        from live.kube import LiveError

        note = "A snapshot: dragonet view --live --serve serves this page read again every 10 s"
        try:
            dump, source, unread = _read(args)
        except LiveError as err:
            print(f"dragonet view: {err}", file=sys.stderr)
            return 1
        except DumpError as err:
            print(f"dragonet view: {err}", file=sys.stderr)
            return 2
    else:
        try:
            dump = load(args.dump)
        except DumpError as err:
            print(f"dragonet view: {err}", file=sys.stderr)
            return 2
        source = Path(args.dump).name
    size = write_html(dump, args.html, source, note)
    if args.live and unread:
        print(unread, file=sys.stderr)
    print(
        f"wrote {args.html} ({size / 2**20:.1f} MiB): {len(dump.jobs)} jobs on "
        f"{len(dump.nodes)} nodes",
        file=sys.stderr,
    )
    return 0


def _serve(args: argparse.Namespace) -> int:
    """The page on a local server until Ctrl-C; no cluster is the same one line and status
    1 as for --html (the first read is made before serving)."""
    from cli.view_server import serve
    from live.kube import LiveError
    from sim.view.pool import DumpError

    try:
        server, refresh = live_server(args)
    except LiveError as err:
        print(f"dragonet view: {err}", file=sys.stderr)
        return 1
    except (DumpError, OSError) as err:
        print(f"dragonet view: {err}", file=sys.stderr)
        return 2
    return serve(server, refresh)


def live_server(args: argparse.Namespace) -> tuple[ThreadingHTTPServer, float]:
    """The server of the live page, bound and holding a first read, not yet serving.
    ``LiveError`` when the cluster cannot be read, ``OSError`` (said for the flags) when
    the address cannot be had."""
    from cli.view_server import LivePage, make_server
    from live.kube import Kube

    refresh = args.refresh or 10.0
    kube = Kube(args.kubeconfig, args.context, args.request_timeout)
    dump, source, unread = _read(args, kube)
    if unread:
        print(unread, file=sys.stderr)
    page = LivePage(lambda: _read_live(args, kube), refresh, first=(dump, source))
    address = args.address or "127.0.0.1"
    port = PORT if args.port is None else args.port
    try:
        return make_server(page, address, port), refresh
    except OSError as err:
        raise OSError(f"--address {address} --port {port}: {err.strerror or err}") from None


def _dragonets(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The items without the jobs another controller runs (beside Kubeflow, its
    training-operator's: ``live.explain.runner``), and those jobs, each with who runs it.
    Their pods stay: they take room on the nodes."""
    from live.explain import runner

    pods = [o for o in items if o["kind"] == "Pod"]
    kept, elsewhere = [], []
    for o in items:
        by = runner(o, pods) if o["kind"] in ("TFJob", "MXJob") else None
        if by is None:
            kept.append(o)
        else:
            meta = o["metadata"]
            elsewhere.append(f"{o['kind']} {meta.get('namespace')}/{meta['name']}: {by}")
    return kept, elsewhere


def _read_live(args: argparse.Namespace, kube: Kube | None = None) -> tuple[Dump, str]:
    """The pool as the cluster shows it now, and where it was read."""
    dump, where, _ = _read(args, kube)
    return dump, where


def _read(args: argparse.Namespace, kube: Kube | None = None) -> tuple[Dump, str, str]:
    """The pool as the cluster shows it now, where it was read, and a line saying what the
    caller may not read ("" when it may read everything): a tenant's Role reads its own
    namespace's jobs, without the cluster's Nodes and TrainingPools."""
    from live.kube import Forbidden, Kube, LiveError, NotFound, objects
    from live.views import utc_now
    from sim.view.pool import from_objects

    kube = kube or Kube(args.kubeconfig, args.context, args.request_timeout)
    namespace = None if args.all_namespaces else args.namespace
    try:
        if not installed(kube):
            raise NotFound(
                "Dragonet is not installed here: the API server has no TrainingPools "
                "(trainingpools.dragonet.io)"
            )
    except Forbidden:  # not the caller's to read: objects() says what it left out
        pass
    read = objects(kube, namespace)
    where = f"{kube.host}" + (f", namespace {read.namespace}" if read.namespace else "")
    unread = ""
    if read.unread:
        left = ", ".join(read.unread)
        where += f" (no permission to list {left}: left out)"
        scope = f"namespace {read.namespace}" if read.namespace else "every namespace"
        unread = f"(no permission to list {left}: the page shows {scope} without them)"
    items, elsewhere = _dragonets(read.items)
    if elsewhere:
        left_out = f"({len(elsewhere)} job(s) another controller runs left out: "
        left_out += "; ".join(elsewhere) + ")"
        unread = f"{unread}\n{left_out}" if unread else left_out
    if read.unread and not any(o["kind"] in (*BY_KIND, "Node") for o in items):
        raise LiveError(
            f"nothing to show: no {kinds_text()} jobs in {scope}, and no permission to list {left}"
        )
    return from_objects(items, where, now=utc_now()), where, unread
