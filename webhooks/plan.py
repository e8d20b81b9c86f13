"""One pool sync for jobs on a cluster with no pods yet, as Metacontroller would call it:
what ``dragonet render`` prints and what ``dragonet simulate`` checks before a run, so a
job that can never run on these nodes is said before anything runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from policy.model.admission import (
    NO_FEASIBLE_NODE,
    NO_KUBESHARE,
    NO_NODES,
    NO_SUCH_POOL,
    TOO_LARGE,
)
from policy.model.kinds import KINDS
from policy.model.request import job_type_key, object_map
from webhooks.app import create_app
from webhooks.config import Settings

# Reasons no event can change while the nodes and the pool stay as they are: the job is
# valid but would wait for ever (exit status 4 of render and simulate).
NEVER_RUNS = frozenset({NO_NODES, NO_FEASIBLE_NODE, TOO_LARGE, NO_KUBESHARE, NO_SUCH_POOL})


def post(client: Any, path: str, request: dict[str, Any]) -> dict[str, Any]:
    """The webhook's answer to one request; an answer other than 200 is a ValueError."""
    response = client.post(path, data=orjson.dumps(request))
    body = response.get_json()
    if response.status_code != 200:
        raise ValueError(f"{path}: {body.get('error')}")
    return body


def plan_pool(
    client: Any, pool: dict[str, Any], nodes: Sequence[dict[str, Any]], jobs: Sequence[Any]
) -> list[dict[str, Any]]:
    """The Admissions the pool's first sync creates for ``jobs`` on empty ``nodes``."""
    related = object_map([*nodes, *jobs], ["Node.v1", "Pod.v1", *map(job_type_key, KINDS)])
    request = {"controller": {}, "parent": pool, "children": {}, "related": related}
    return list(post(client, "/pools/sync", request)["children"])


def never_runs(
    pool: dict[str, Any], nodes: Sequence[dict[str, Any]], jobs: Sequence[dict[str, Any]]
) -> dict[str, str]:
    """Why each job that can never run on ``nodes`` in ``pool`` waits, by
    ``kind/namespace/name``: the pool's own message."""
    client = create_app(Settings()).test_client()
    found: dict[str, str] = {}
    for a in plan_pool(client, pool, nodes, jobs):
        spec = a["spec"]
        if spec.get("reason") in NEVER_RUNS:
            key = f"{spec['job']['kind']}/{a['metadata']['namespace']}/{spec['job']['name']}"
            found[key] = str(spec.get("message") or spec["reason"])
    return found
