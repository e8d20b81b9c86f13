"""The ``dragonet`` command: serve the webhook, show what it would create for jobs on a
cluster, simulate a cluster running them, or convert legacy job manifests. Every input it
cannot use ends the command with one line naming the file and the line or field, and a
non-zero status."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

# Only what every command's parser needs is imported here: ``dragonet --help`` and an
# early error must not pay for flask, kubernetes or the simulator (each command imports
# what it runs when it runs it).
from policy.model.pool import GANG_SCHEDULER_CHOICES, POLICIES

if TYPE_CHECKING:
    from webhooks.config import Settings


def serve(settings: Settings) -> None:
    import shutil
    import tempfile

    # The quantity parser (the Kubernetes client) is loaded here, in the arbiter, so that
    # every forked worker has it: create_app would otherwise import it in each worker.
    import kubernetes.utils.quantity  # noqa: F401
    from gunicorn.app.base import BaseApplication
    from prometheus_client import values

    from webhooks import gunicorn_conf, metrics
    from webhooks.app import create_app

    # Every worker writes its metrics to this directory (webhooks/metrics.py). The mode is
    # chosen when prometheus_client is imported, which happened before the variable was
    # set here, so choose again: no metric exists yet (each worker makes its app).
    given = os.environ.get(metrics.MULTIPROC_DIR)
    path = given or tempfile.mkdtemp(prefix="dragonet-metrics-")
    # A worker that exits leaves through this function too (gunicorn forks inside run() and
    # raises SystemExit in the child): only the arbiter that made the directory removes it.
    arbiter = os.getpid()
    os.environ[metrics.MULTIPROC_DIR] = path
    metrics.prepare(path)
    values.ValueClass = values.get_value_class()

    class Server(BaseApplication):
        def load_config(self) -> None:
            for key, value in gunicorn_conf.options(settings).items():
                self.cfg.set(key, value)

        def load(self):
            return create_app(settings)

    try:
        Server().run()
    finally:
        if not given and os.getpid() == arbiter:
            shutil.rmtree(path, ignore_errors=True)


# Exit status of render and simulate for valid jobs that can never run on the nodes and
# pool given (1 is an invalid job, 2 an input it could not use, 3 a bug of ours).
NEVER_RUNS_EXIT = 4


def _prepare_jobs(paths: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Give file-only jobs what the API server would: namespace, uid, creation time
    (in file order, so the first job listed is the oldest). Also where each came from."""
    from datetime import timedelta

    from webhooks.manifests import ManifestError, load_jobs, shown

    skipped: list[str] = []
    located = [(f"{shown(p)}:{line}", doc) for p in paths for line, doc in load_jobs(p, skipped)]
    for said in skipped:
        print(f"dragonet render: {said}", file=sys.stderr)
    first: dict[str, str] = {}
    for where, job in located:
        meta = job.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ManifestError(f"{where}: metadata: must be a mapping")
        meta.setdefault("namespace", "default")
        key = f"{job['kind']} {meta['namespace']}/{meta.get('name')}"
        if key in first:
            raise ManifestError(f"{where}: {key} is given twice (first at {first[key]})")
        first[key] = where
    # Only once the files are read: webhooks.app loads flask and the Kubernetes client.
    from webhooks.app import utc_now

    start = utc_now() - timedelta(seconds=len(located))
    for i, (_, job) in enumerate(located):
        meta = job["metadata"]
        meta.setdefault("uid", f"uid-{meta['namespace']}-{meta.get('name')}")
        meta.setdefault("generation", 1)
        meta.setdefault(
            "creationTimestamp", (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        )
    return [doc for _, doc in located], [where for where, _ in located]


def invalid_reason(status: dict[str, Any]) -> str | None:
    """The message of the webhook's Failed condition for a spec it could not accept."""
    from policy.model.lifecycle import REASON_INVALID

    for c in status.get("conditions") or []:
        if c.get("type") == "Failed" and str(c.get("reason", "")).endswith(REASON_INVALID):
            return str(c.get("message", ""))
    return None


def gang_warning(where: str, admission: dict[str, Any] | None) -> str | None:
    """One line for a job whose pods name a gang scheduler the pool does not use: what
    its Admission's gangNote says (which pools do, or what to change)."""
    note = ((admission or {}).get("spec") or {}).get("gangNote")
    return f"{where}: warning: {note}" if note else None


def _pool(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainingPool the jobs are planned in: a file's, or the default pool."""
    from policy.model.pool import pool_object
    from webhooks.manifests import load_pool

    pool = load_pool(args.pool) if args.pool else pool_object()
    spec = dict(pool.get("spec") or {})
    if args.policy:
        spec["policy"] = args.policy
    if args.binding:
        spec["binding"] = args.binding
    if args.gang_scheduler:
        spec["gangScheduler"] = args.gang_scheduler
    if getattr(args, "kubeshare", None):
        spec["kubeshare"] = args.kubeshare
    meta = {"uid": "uid-pool", "generation": 1, **(pool.get("metadata") or {})}
    return {**pool, "metadata": meta, "spec": spec}


def _stored(admission: dict[str, Any]) -> dict[str, Any]:
    """An Admission as the API server would store it once Metacontroller applied it."""
    meta = {**admission["metadata"], "uid": f"uid-{admission['metadata']['name']}"}
    return {**admission, "metadata": {**meta, "generation": 1}}


def render(args: argparse.Namespace, settings: Settings) -> int:
    """The pool's sync for a cluster with no pods yet, then each job's sync on the
    Admission it got, as Metacontroller would call them."""
    import orjson
    import yaml
    from pydantic import ValidationError

    from policy.model.pool import PoolSpec
    from webhooks.manifests import ManifestError, load_nodes

    jobs, origins = _prepare_jobs(args.jobs)
    pool = _pool(args)
    try:
        selector = PoolSpec.model_validate(pool["spec"]).nodeSelector
    except ValidationError as err:
        raise ManifestError(f"{args.pool or 'the default pool'}: spec.{_one_line(err)}") from None
    nodes = [
        n for n in load_nodes(args.nodes) if selector.matches(n["metadata"].get("labels") or {})
    ]
    from policy.model.admission import NO_KUBESHARE
    from policy.model.admission import TYPE_KEY as ADMISSIONS
    from policy.model.request import object_map
    from webhooks.app import create_app
    from webhooks.plan import NEVER_RUNS, plan_pool, post

    client = create_app(settings).test_client()
    planned = {"children": plan_pool(client, pool, nodes, jobs)}
    admissions = {  # by kind too: a TFJob and an MXJob may share a name
        f"{a['spec']['job']['kind']}/{a['metadata']['namespace']}/{a['spec']['job']['name']}": (
            _stored(a)
        )
        for a in planned["children"]
    }
    documents: list[dict[str, Any]] = list(planned["children"])
    invalid: list[str] = []
    never: list[str] = []
    for where, job in zip(origins, jobs, strict=True):
        key = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
        own = [admissions[f"{job['kind']}/{key}"]] if f"{job['kind']}/{key}" in admissions else []
        warning = gang_warning(where, own[0] if own else None)
        if warning:
            print(f"dragonet render: {warning}", file=sys.stderr)
        request = {
            "controller": {},
            "parent": job,
            "children": object_map([], _child_types(job)),
            "related": object_map(own, [ADMISSIONS]),
            "finalizing": False,
        }
        body = post(client, f"/{job['kind'].lower()}s/sync", request)
        documents.extend(body["children"])
        sched = body["status"].get("scheduling", {})
        pods = sum(1 for c in body["children"] if c["kind"] in ("Pod", "SharePod"))
        line = f"# {key}: {sched.get('phase')}"
        if pods and sched.get("nodes"):
            line += f" - {pods} pods on {', '.join(sched['nodes'])}"
        elif pods:  # kube-default, a gang scheduler: the pods go to a scheduler to place
            line += f" - {pods} pods, to be placed by their scheduler"
        board = body["status"].get("tensorboard") or {}
        if board.get("node"):
            line += f" - TensorBoard on {board['node']}"
        if sched.get("message"):
            line += f" - {sched['message']}"
        print(line, file=sys.stderr)
        reason = invalid_reason(body["status"])
        if reason is not None:
            invalid.append(f"dragonet render: {where}: {reason}")
        elif own and own[0]["spec"].get("reason") == NO_KUBESHARE:
            never.append(
                f"dragonet render: {where}: {job['kind']} {key} asks for fractional GPUs "
                "(KubeShare) and the pool has no KubeShare; it would wait forever (try "
                "--kubeshare v1 or v2)"
            )
        elif own and own[0]["spec"].get("reason") in NEVER_RUNS:
            never.append(
                f"dragonet render: {where}: {job['kind']} {key} can never run here: "
                f"{own[0]['spec'].get('message') or own[0]['spec']['reason']}"
            )
    if args.output == "json":
        sys.stdout.write(orjson.dumps(documents, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False))
    for line in [*invalid, *never]:  # last, so a script's tail shows what failed
        print(line, file=sys.stderr)
    return 1 if invalid else NEVER_RUNS_EXIT if never else 0


def convert_files(args: argparse.Namespace) -> int:
    """Every object of every file in its v1 form on stdout; what could not be carried
    over on stderr, one line per field. Nothing is printed on stdout unless every object
    converted."""
    from webhooks.convert import ConvertError, convert, dump
    from webhooks.manifests import ManifestError, located_documents, skipped_line

    documents: list[dict[str, Any]] = []
    notes: list[str] = []
    seen: dict[str, str] = {}  # where each kind namespace/name was first
    for path in args.files:
        name = "<stdin>" if path == "-" else path
        located = located_documents(path)
        if not located:
            raise ManifestError(f"{name}: no objects in this file (empty?)")
        for line, doc in located:
            if said := skipped_line(name, line, doc):
                print(f"dragonet convert: {said}", file=sys.stderr)
                continue
            try:
                new, dropped = convert(doc)
            except ConvertError as err:
                raise ManifestError(f"{name}:{line}: {err}") from None
            meta = new.get("metadata") or {}
            what = f"{new['kind']} {meta.get('name')}"
            key = f"{new['kind']} {meta.get('namespace') or 'default'}/{meta.get('name')}"
            if key in seen:
                raise ManifestError(f"{name}:{line}: {key} is given twice (first at {seen[key]})")
            seen[key] = f"{name}:{line}"
            notes.extend(f"dragonet convert: {name}:{line}: {what}: {n}" for n in dropped)
            documents.append(new)
    if not documents:
        from policy.model.kinds import kinds_text

        raise ManifestError(f"{', '.join(args.files)}: no {kinds_text()} to convert")
    sys.stdout.write(dump(documents))
    for line in notes:
        print(line, file=sys.stderr)
    return 1 if notes and args.strict else 0


def _child_types(job: dict[str, Any]) -> list[str]:
    """The child types of the job's controller, as Metacontroller lists them."""
    from policy.model.gpushare import SHAREPODS

    tf = job.get("kind") == "TFJob"
    return ["Pod.v1", "Service.v1", SHAREPODS, *(["Deployment.apps/v1"] if tf else [])]


CONVERT_EXAMPLES = """\
examples:
  dragonet convert old-tfjob.yaml > new.yaml
  dragonet convert a.yaml b.yaml > jobs.yaml
  kubectl get tfjobs.tensorflow.org -o yaml | dragonet convert - > new.yaml

converts: tensorflow.org/v1alpha1 and kubeflow.org/v1alpha1 TfJob/TFJob (spec.replicaSpecs
with tfReplicaType MASTER/WORKER/PS) to a kubeflow.org/v1 TFJob (spec.tfReplicaSpecs), and
fioravanzo.org/v1alpha1 and kubeflow.org/v1alpha1 MXJob (mxReplicaType SCHEDULER/SERVER/
WORKER) to a kubeflow.org/v1 MXJob (jobMode MXTrain, spec.mxReplicaSpecs). A kubeflow.org/v1
TFJob or MXJob is printed unchanged, so converting twice is converting once. A PS without
a template gets the old operator's default parameter server (a tf.train.Server on tfImage).

stderr: one line per field that was not carried over, or was moved, by its path:
  dragonet convert: old.yaml:3: TFJob example-job: spec.tensorboard: not carried over: ...

other kinds in a file (a ConfigMap in a bundle) are skipped with one line on stderr.

exit status: 0 when every object converted (lines on stderr are warnings; with --strict, 1
when there is any); 2 for a file it could not read or an object it cannot convert (one
line naming the file and line; nothing on stdout); 3 for an internal error.
"""

RENDER_EXAMPLES = """\
examples:
  dragonet render examples/job1.yaml --nodes examples/nodes.yaml
  dragonet render a.yaml b.yaml --nodes nodes.yaml --binding nodeName --output json

other kinds in a file (a ConfigMap in a bundle) are skipped with one line on stderr; a
job given twice (same kind, namespace and name) is refused.

exit status: 0 when every job was understood and valid; 1 when the webhook found a job
invalid (its Failed condition is printed); 2 for a file or option it could not read or
use; 3 for an internal error (one line; DRAGONET_DEBUG=1 shows the traceback); 4 when
every job is valid but one can never run on these nodes in this pool (too large for
every node, no node it may use, fractional GPUs without KubeShare; the reason is printed).
"""

SERVE_EXAMPLES = """\
settings (environment variables, as the Helm chart sets them):
  DRAGONET_HOST, DRAGONET_PORT     address and port to listen on (0.0.0.0:8080)
  DRAGONET_WORKERS, DRAGONET_THREADS   gunicorn processes and threads each (2, 4)
  DRAGONET_MAX_INFLIGHT, DRAGONET_MAX_REQUEST_BYTES, DRAGONET_REQUEST_TIMEOUT_SECONDS,
  DRAGONET_SHARED_SECRET[_FILE], DRAGONET_TLS_CERT_FILE, DRAGONET_TLS_KEY_FILE,
  DRAGONET_CLUSTER_DOMAIN, DRAGONET_LOG_LEVEL   (README, Configuration)

examples:
  dragonet serve --host 127.0.0.1 --port 9000
  DRAGONET_WORKERS=4 dragonet serve

Metacontroller calls POST /pools/sync and /pools/customize (the TrainingPool controller),
/tfjobs/sync, /tfjobs/customize, /tfjobs/finalize, /mxjobs/sync, /mxjobs/customize,
/mxjobs/finalize and /pytorchjobs/sync, /pytorchjobs/customize, /pytorchjobs/finalize (the
job controllers, one per kind), /migrations/sync and /migrations/customize (the
Migration controller); GET /healthz (alive), /readyz (ready) and /metrics answer probes
and Prometheus. Requests are read in full before a thread takes them: one not received
DRAGONET_REQUEST_TIMEOUT_SECONDS after its first byte is answered 408.
"""


def _serve_settings(args: argparse.Namespace) -> Settings:
    """Environment settings, with the command line's host and port over them."""
    from webhooks.config import Settings

    overrides = {k: v for k in ("host", "port", "workers") if (v := getattr(args, k)) is not None}
    return Settings(**overrides)


def _one_line(err: Exception) -> str:
    """An error as one line: pydantic's first problem with its field, else the message."""
    from pydantic import ValidationError

    if isinstance(err, ValidationError):
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        return f"{field}: {first['msg']}" if field else first["msg"]
    if isinstance(err, OSError) and err.filename:
        return f"{err.filename}: {err.strerror}"
    return " ".join(str(err).split())


def _setting_error(err: ValueError, given: Sequence[str] = ()) -> str:
    """A bad setting named as the user set it: its option, else its environment variable."""
    from pydantic import ValidationError

    if isinstance(err, ValidationError):
        first = err.errors()[0]
        if first["loc"]:
            name = str(first["loc"][0])
            where = f"--{name}" if name in given else f"DRAGONET_{name.upper()}"
            return f"{where}: {first['msg'].removeprefix('Value error, ')}"
        return f"settings: {first['msg'].removeprefix('Value error, ')}"
    return f"settings: {err}"


def _version() -> str:
    """The installed distribution's version (pyproject.toml's), as pip reports it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dragonet")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _add_offline_commands(sub: argparse._SubParsersAction) -> None:
    """The commands that work without a cluster: serve, render, convert."""
    sv = sub.add_parser(
        "serve",
        help="serve the Metacontroller webhooks with gunicorn",
        description="Serve the webhooks Metacontroller calls (gunicorn). Settings come from\n"
        "DRAGONET_* environment variables; --host, --port and --workers override them.",
        epilog=SERVE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sv.add_argument("--host", help="address to listen on (DRAGONET_HOST, default 0.0.0.0)")
    sv.add_argument("--port", type=int, help="port to listen on (DRAGONET_PORT, default 8080)")
    sv.add_argument(
        "--workers", type=int, help="gunicorn worker processes (DRAGONET_WORKERS, default 2)"
    )
    r = sub.add_parser(
        "render",
        help="print the Admissions, Pods and Services Dragonet would create for jobs",
        description="Plan the jobs in a pool (the default pool, or --pool) on the nodes of a\n"
        "cluster file, then render each job's pods, as Metacontroller's two controllers\n"
        "would. One line per job on stderr says where it landed or why it waits.",
        epilog=RENDER_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument(
        "jobs", nargs="+", help="TFJob and MXJob manifests (YAML), oldest first; '-' reads stdin"
    )
    r.add_argument(
        "--nodes",
        required=True,
        help="cluster file: Node objects, or the short form 'nodes: [{name, cpu, memory, "
        "gpu, pods, labels, taints, unschedulable}]' (examples/nodes.yaml; README, Simulate)",
    )
    r.add_argument("--pool", help="a TrainingPool manifest (default: the default pool)")
    r.add_argument("--policy", choices=POLICIES, help="override the pool's spec.policy")
    r.add_argument(
        "--binding",
        choices=["affinity", "nodeName"],
        help="how pods are bound to their planned node: required node affinity, leaving "
        "kube-scheduler the final say (the pool's default), or spec.nodeName directly",
    )
    r.add_argument(
        "--gang-scheduler",
        choices=GANG_SCHEDULER_CHOICES,
        help="override the pool's spec.gangScheduler: an external gang scheduler binds the "
        "pods, and each job gets its PodGroup (docs/gang-schedulers.md)",
    )
    r.add_argument(
        "--kubeshare",
        choices=["none", "v1", "v2"],
        help="override the pool's spec.kubeshare: fractional-GPU pods as KubeShare v1 "
        "SharePods or v2 kubeshare-scheduler pods (docs/kubeshare.md)",
    )
    r.add_argument(
        "--output",
        choices=["yaml", "json"],
        default="yaml",
        help="format of the objects on stdout: YAML documents (default) or one JSON list",
    )
    c = sub.add_parser(
        "convert",
        help="convert legacy v1alpha1 TfJob and MXJob manifests to kubeflow.org/v1",
        description="Print the kubeflow.org/v1 form of legacy tf-operator TfJobs and\n"
        "MXNet-operator MXJobs, every document of every file in order. What cannot be\n"
        "carried over is said on stderr, one line per field, never dropped silently.",
        epilog=CONVERT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("files", nargs="+", help="job manifests (YAML); '-' reads stdin")
    c.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when any field was not carried over (the output is still printed)",
    )


def main(argv: list[str] | None = None) -> int:
    # kubectl dragonet's commands (live/): the same program, against a cluster (the views
    # read; live/control.py's verbs write one object each).
    from live.commands import COMMANDS as LIVE
    from live.commands import add_parsers, program
    from live.control import COMMANDS as CONTROL
    from live.control import add_parsers as add_control

    plugin = program() == "kubectl dragonet"  # kubectl runs us as its plugin
    about = (
        "Dragonet on a live cluster: its pools, queues, jobs and nodes; suspend, resume or "
        "delete a job; hold, drain or release a pool."
        if plugin
        else "Dragonet: gang admission and elastic scaling of TFJobs on Kubernetes. "
        "Serve the Metacontroller webhooks, show what they would create for jobs on a "
        "cluster, simulate a cluster running them, or convert legacy job manifests; on a "
        "live cluster (kubectl dragonet), show pools, queues, jobs and nodes, suspend, "
        "resume or delete jobs, and hold, drain or release pools."
    )
    parser = argparse.ArgumentParser(
        prog=program(),
        description=about,
        epilog=f"run '{program()} COMMAND --help' for a command's options and examples",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("version", help="print the version")
    if not plugin:  # kubectl dragonet lists only what reads a cluster
        _add_offline_commands(sub)
    add_parsers(sub)
    add_control(sub)
    try:  # the image ships the webhook only: serve and render work without the simulator
        from sim.cli import add_parser, run
    except ImportError as missing:
        absent = str(missing)
        if not plugin:
            sub.add_parser("simulate", help="(not installed: pip install 'dragonet[sim]')")
        add_parser = run = None  # type: ignore[assignment]
    else:
        if not plugin:
            add_parser(sub)
        from cli.view import add_parser as add_view
        from cli.view import run as run_view

        add_view(sub)
    args = parser.parse_args(argv)
    if args.command == "version":
        print(f"{program()} {_version()}")
        return 0
    if args.command in LIVE:
        from live.commands import run as run_live

        return _guarded(args.command, lambda: run_live(args))
    if args.command in CONTROL:
        from live.control import run as run_control

        return _guarded(args.command, lambda: run_control(args))
    if args.command == "view":
        return _guarded("view", lambda: run_view(args))
    if args.command == "simulate":
        if run is None:
            print(f"dragonet simulate: the simulator is not installed ({absent})", file=sys.stderr)
            return 2
        return _guarded("simulate", lambda: run(args))
    if args.command == "convert":

        def checked_convert() -> int:
            try:
                return convert_files(args)
            except (OSError, ValueError) as err:
                print(f"dragonet convert: {_one_line(err)}", file=sys.stderr)
                return 2

        return _guarded("convert", checked_convert)
    try:
        from webhooks.config import Settings

        settings = _serve_settings(args) if args.command == "serve" else Settings()
    except ValueError as err:
        given = [k for k in ("host", "port", "workers") if getattr(args, k, None) is not None]
        print(f"dragonet {args.command}: {_setting_error(err, given)}", file=sys.stderr)
        return 2
    if args.command == "serve":
        from webhooks.config import unknown_variable

        if problem := unknown_variable(os.environ) or settings.serving_problem():
            print(f"dragonet serve: {problem}", file=sys.stderr)
            return 2
        serve(settings)
        return 0

    def checked_render() -> int:
        try:
            return render(args, settings)
        except (OSError, ValueError) as err:
            print(f"dragonet render: {_one_line(err)}", file=sys.stderr)
            return 2

    return _guarded("render", checked_render)


def _guarded(command: str, work: Callable[[], int]) -> int:
    """A bug of ours is still one line, and exit status 3, never a traceback (set
    DRAGONET_DEBUG=1 to see it)."""
    try:
        return work()
    except Exception as err:
        if os.environ.get("DRAGONET_DEBUG"):
            raise
        print(
            f"dragonet {command}: internal error: {type(err).__name__}: {_one_line(err)} "
            "(please report it; DRAGONET_DEBUG=1 shows where)",
            file=sys.stderr,
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())
