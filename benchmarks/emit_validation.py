"""What checking the webhook's output against the Kubernetes schema costs, per job sync.

Run: ``.venv/bin/python -m benchmarks.emit_validation`` (``--quick`` for a smoke run; needs
the test extras, for ``kubernetes-validate`` and ``jsonschema``).

The job: a running TFJob of 1 PS and 10 workers with its 11 pods and its Admission
(``benchmarks/sync_latency.py``'s), synced through the real Flask app. Measured in one run,
in CPU time, each as a ratio to the job's warm sync (its parse memoised, as in steady
state):

* the sync itself, warm and cold (a fresh process: the job is parsed, its pod templates
  checked against the schema once);
* ``check_template`` of the job's templates: what the webhook does, once per spec (and
  once per template content: jobs that share a template share the check), and the same
  for templates never seen before;
* ``writable_status`` of the status the sync wrote: what every sync does to the status
  it reads back;
* full validation of every child the sync answers (11 Pods, 11 Services) with
  ``kubernetes-validate`` as the tests call it, and with a ``jsonschema`` validator built
  once and reused (the fastest way a general validator could run in the webhook).

Not a test: record the numbers in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

import jsonschema
import kubernetes_validate
import orjson
from referencing import Registry, Resource

from benchmarks.sync_latency import scenario
from policy.model import apischema
from policy.model.apischema import check_template, writable_status
from tests.conftest import Clock
from tests.kube_schema import K8S_VERSION
from webhooks.app import create_app


def _timed(n: int, call: Callable[[], Any]) -> float:
    """Median CPU time of a call, in ms."""
    out = []
    for _ in range(n):
        t0 = time.process_time()
        call()
        out.append((time.process_time() - t0) * 1000)
    return statistics.median(out)


def _reused_validators() -> dict[str, jsonschema.Validator]:
    """A Draft 2020-12 validator per kind over kubernetes-validate's own schema files, built
    once (kubernetes-validate reads and parses them again on every call)."""
    folder = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    folder = folder / f"v{K8S_VERSION}-local-strict"
    definitions = json.loads((folder / "_definitions.json").read_text())
    registry = Resource.from_contents(definitions) @ Registry()
    out = {}
    for kind, file in (("Pod", "pod-v1.json"), ("Service", "service-v1.json")):
        schema = json.loads((folder / file).read_text())
        out[kind] = jsonschema.Draft202012Validator(
            schema, registry=Resource.from_contents(schema) @ registry
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="few repeats")
    args = parser.parse_args()
    repeats = 20 if args.quick else 200
    _, job_request = scenario(16, 40)
    body = orjson.dumps(job_request)
    client = create_app(clock=Clock()).test_client()
    answer = client.post("/tfjobs/sync", data=body).get_json()
    children = answer["children"]
    stored = answer["status"]  # what the next sync reads back
    parent = job_request["parent"]
    templates = [r["template"] for r in parent["spec"]["tfReplicaSpecs"].values()]
    validators = _reused_validators()

    def cold() -> None:
        fresh = create_app(clock=Clock()).test_client()
        assert fresh.post("/tfjobs/sync", data=body).status_code == 200

    def full_library() -> None:
        for child in children:
            kubernetes_validate.validate(child, K8S_VERSION, strict=True)

    def full_reused() -> None:
        for child in children:
            validators[child["kind"]].validate(child)

    def templates_checked() -> None:
        for template in templates:
            check_template(template)

    def templates_checked_afresh() -> None:
        apischema._checked_content.cache_clear()
        templates_checked()

    def status_pruned() -> None:
        writable_status("TFJob", stored)

    warm = _timed(repeats * 5, lambda: client.post("/tfjobs/sync", data=body))
    n = len(children)
    rows = [
        ("job sync, warm (baseline)", warm),
        ("job sync, cold (fresh process)", _timed(repeats, cold)),
        ("check_template, the job's templates", _timed(repeats * 5, templates_checked)),
        ("  the same, never seen before", _timed(repeats * 5, templates_checked_afresh)),
        ("writable_status, the status it wrote", _timed(repeats * 5, status_pruned)),
        (f"kubernetes-validate, {n} children", _timed(max(repeats // 10, 3), full_library)),
        (f"jsonschema reused, {n} children", _timed(repeats, full_reused)),
    ]
    print(f"{'what':<42} {'CPU ms':>9} {'x warm sync':>12}")
    for name, ms in rows:
        print(f"{name:<42} {ms:>9.3f} {ms / warm:>12.2f}")


if __name__ == "__main__":
    main()
