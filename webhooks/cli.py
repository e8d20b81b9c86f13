"""``dragonet``: serve the webhook, show what it would create for jobs on a cluster, or
simulate a cluster running them."""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import Any

import orjson
import yaml

from policy.model.jobs import TFJOB
from webhooks.app import create_app, utc_now
from webhooks.config import Settings
from webhooks.hooks import object_map
from webhooks.manifests import load_documents, load_nodes


def serve(settings: Settings) -> None:
    from gunicorn.app.base import BaseApplication

    from webhooks import gunicorn_conf

    class Server(BaseApplication):
        def load_config(self) -> None:
            for key, value in gunicorn_conf.options(settings).items():
                self.cfg.set(key, value)

        def load(self):
            return create_app(settings)

    Server().run()


def _prepare_jobs(paths: list[str]) -> list[dict[str, Any]]:
    """Give file-only jobs what the API server would: namespace, uid, creation time
    (in file order, so the first job listed is the oldest)."""
    jobs = [doc for p in paths for doc in load_documents(p)]
    start = utc_now() - timedelta(seconds=len(jobs))
    for i, job in enumerate(jobs):
        if job.get("kind") != TFJOB.kind:
            raise SystemExit(f"dragonet render: {job.get('kind')!r} is not a TFJob")
        meta = job.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta.setdefault("uid", f"uid-{meta['namespace']}-{meta.get('name')}")
        meta.setdefault("generation", 1)
        meta.setdefault(
            "creationTimestamp", (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        )
    return jobs


def render(args: argparse.Namespace, settings: Settings) -> int:
    """Each job's sync, as Metacontroller would send it for a cluster with no pods yet."""
    jobs = _prepare_jobs(args.jobs)
    nodes = load_nodes(args.nodes)
    client = create_app(settings).test_client()
    related = object_map([*nodes, *jobs], ["Node.v1", "Pod.v1", "TFJob.kubeflow.org/v1"])
    documents: list[dict[str, Any]] = []
    for job in jobs:
        request = {
            "controller": {},
            "parent": job,
            "children": object_map([], ["Pod.v1", "Service.v1"]),
            "related": related,
            "finalizing": False,
        }
        response = client.post("/tfjobs/sync", data=orjson.dumps(request))
        body = response.get_json()
        if response.status_code != 200:
            print(f"dragonet render: {body.get('error')}", file=sys.stderr)
            return 1
        documents.extend(body["children"])
        sched = body["status"].get("scheduling", {})
        pods = sum(1 for c in body["children"] if c["kind"] == "Pod")
        line = f"# {job['metadata']['namespace']}/{job['metadata']['name']}: {sched.get('phase')}"
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
    r = sub.add_parser("render", help="print the Pods and Services a sync would create")
    r.add_argument("jobs", nargs="+", help="TFJob manifests (YAML), oldest first")
    r.add_argument("--nodes", required=True, help="cluster file: Node objects or 'nodes:' list")
    r.add_argument("--binding", choices=["affinity", "nodeName"], help="override DRAGONET_BINDING")
    r.add_argument("--output", choices=["yaml", "json"], default="yaml")
    from sim.cli import add_parser, run

    add_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "simulate":
        return run(args)
    settings = Settings()
    if getattr(args, "binding", None):
        settings = settings.model_copy(update={"binding": args.binding})
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
