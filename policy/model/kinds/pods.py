"""What the kinds' modules share in writing a pod: its main container, and environment
variables appended to every container as Kubeflow's controllers append them."""

from __future__ import annotations

from typing import Any

from policy.model.jobs import Job


def main_container(pod_spec: dict[str, Any], job: Job) -> dict[str, Any]:
    """The container the kind's cluster spec goes into (``JobKind.container``); parsing
    the job made sure every template has it."""
    return next(c for c in pod_spec["containers"] if c.get("name") == job.kind.container)


def append_env(pod_spec: dict[str, Any], env: list[dict[str, str]]) -> None:
    """Append ``env`` to every container, as Kubeflow does; an entry of the same name that
    the template gave is dropped first (the later one would win anyway)."""
    names = {e["name"] for e in env}
    for c in pod_spec["containers"]:
        c["env"] = [*(e for e in c.get("env") or [] if e.get("name") not in names), *env]
