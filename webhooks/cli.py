"""``dragonet``: serve the webhook, show what it would create for jobs on a cluster, or
simulate a cluster running them."""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import Any

import orjson
import yaml

from policy.model.admission import TYPE_KEY as ADMISSIONS
from policy.model.pool import POLICIES, PoolSpec, pool_object
from policy.pool.observe import KINDS, job_type_key
from webhooks.app import create_app, utc_now
from webhooks.config import Settings
from webhooks.hooks import object_map
from webhooks.manifests import load_documents, load_nodes


def serve(settings: Settings) -> None:
    import os
    import shutil
    import tempfile

    from gunicorn.app.base import BaseApplication
    from prometheus_client import values

    from webhooks import gunicorn_conf, metrics

    # Every worker writes its metrics to this directory (webhooks/metrics.py). The mode is
    # chosen when prometheus_client is imported, which happened before the variable was
    # set here, so choose again: no metric exists yet (each worker makes its app).
    given = os.environ.get(metrics.MULTIPROC_DIR)
    path = given or tempfile.mkdtemp(prefix="dragonet-metrics-")
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
        if not given:
            shutil.rmtree(path, ignore_errors=True)


def _prepare_jobs(paths: list[str]) -> list[dict[str, Any]]:
    """Give file-only jobs what the API server would: namespace, uid, creation time
    (in file order, so the first job listed is the oldest)."""
    jobs = [doc for p in paths for doc in load_documents(p)]
    start = utc_now() - timedelta(seconds=len(jobs))
    for i, job in enumerate(jobs):
        if job.get("kind") not in {k.kind for k in KINDS}:
            names = " or ".join(k.kind for k in KINDS)
            raise SystemExit(f"dragonet render: {job.get('kind')!r} is not a {names}")
        meta = job.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta.setdefault("uid", f"uid-{meta['namespace']}-{meta.get('name')}")
        meta.setdefault("generation", 1)
        meta.setdefault(
            "creationTimestamp", (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        )
    return jobs


def _pool(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainingPool the jobs are planned in: a file's, or the default pool."""
    if args.pool:
        pools = [d for d in load_documents(args.pool) if d.get("kind") == "TrainingPool"]
        if len(pools) != 1:
            raise ValueError(f"{args.pool}: expected one TrainingPool")
        pool = pools[0]
    else:
        pool = pool_object()
    spec = dict(pool.get("spec") or {})
    if args.policy:
        spec["policy"] = args.policy
    if args.binding:
        spec["binding"] = args.binding
    meta = {"uid": "uid-pool", "generation": 1, **(pool.get("metadata") or {})}
    return {**pool, "metadata": meta, "spec": spec}


def _stored(admission: dict[str, Any]) -> dict[str, Any]:
    """An Admission as the API server would store it once Metacontroller applied it."""
    meta = {**admission["metadata"], "uid": f"uid-{admission['metadata']['name']}"}
    return {**admission, "metadata": {**meta, "generation": 1}}


def _post(client: Any, path: str, request: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, data=orjson.dumps(request))
    body = response.get_json()
    if response.status_code != 200:
        raise ValueError(f"{path}: {body.get('error')}")
    return body


def render(args: argparse.Namespace, settings: Settings) -> int:
    """The pool's sync for a cluster with no pods yet, then each job's sync on the
    Admission it got, as Metacontroller would call them."""
    jobs = _prepare_jobs(args.jobs)
    pool = _pool(args)
    selector = PoolSpec.model_validate(pool["spec"]).nodeSelector
    nodes = [
        n for n in load_nodes(args.nodes) if selector.matches(n["metadata"].get("labels") or {})
    ]
    client = create_app(settings).test_client()
    related = object_map([*nodes, *jobs], ["Node.v1", "Pod.v1", *map(job_type_key, KINDS)])
    request = {"controller": {}, "parent": pool, "children": {}, "related": related}
    planned = _post(client, "/pools/sync", request)
    admissions = {  # by kind too: a TFJob and an MXJob may share a name
        f"{a['spec']['job']['kind']}/{a['metadata']['namespace']}/{a['spec']['job']['name']}": (
            _stored(a)
        )
        for a in planned["children"]
    }
    documents: list[dict[str, Any]] = list(planned["children"])
    for job in jobs:
        key = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
        own = [admissions[f"{job['kind']}/{key}"]] if f"{job['kind']}/{key}" in admissions else []
        request = {
            "controller": {},
            "parent": job,
            "children": object_map([], ["Pod.v1", "Service.v1"]),
            "related": object_map(own, [ADMISSIONS]),
            "finalizing": False,
        }
        body = _post(client, f"/{job['kind'].lower()}s/sync", request)
        documents.extend(body["children"])
        sched = body["status"].get("scheduling", {})
        pods = sum(1 for c in body["children"] if c["kind"] == "Pod")
        line = f"# {key}: {sched.get('phase')}"
        if pods:
            line += f" - {pods} pods on {', '.join(sched.get('nodes') or [])}"
        if sched.get("message"):
            line += f" - {sched['message']}"
        print(line, file=sys.stderr)
    if args.output == "json":
        sys.stdout.write(orjson.dumps(documents, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dragonet", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="serve the Metacontroller webhooks with gunicorn")
    r = sub.add_parser(
        "render",
        help="print the Admissions, Pods and Services Dragonet would create for jobs",
        description="Plan the jobs in a pool (the default pool, or --pool) on the nodes of "
        "a cluster file, then render each job's pods, as Metacontroller's two controllers "
        "would. One line per job on stderr says where it landed or why it waits.",
    )
    r.add_argument("jobs", nargs="+", help="TFJob and MXJob manifests (YAML), oldest first")
    r.add_argument("--nodes", required=True, help="cluster file: Node objects or 'nodes:' list")
    r.add_argument("--pool", help="a TrainingPool manifest (default: the default pool)")
    r.add_argument("--policy", choices=POLICIES, help="override the pool's spec.policy")
    r.add_argument(
        "--binding", choices=["affinity", "nodeName"], help="override the pool's spec.binding"
    )
    r.add_argument(
        "--output", choices=["yaml", "json"], default="yaml", help="format of stdout (yaml)"
    )
    from sim.cli import add_parser, run

    add_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "simulate":
        return run(args)
    settings = Settings()
    if args.command == "serve":
        serve(settings)
        return 0
    try:
        return render(args, settings)
    except (OSError, ValueError) as err:
        print(f"dragonet render: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
