"""Kubeflow's job-condition bookkeeping (``pkg/util/status.go``), timestamps kept stable.

Re-asserting a condition with the same type, status and reason changes nothing, so an
identical sync yields an identical status and Metacontroller does not hot-loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CREATED = "Created"
RUNNING = "Running"
RESTARTING = "Restarting"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
SUSPENDED = "Suspended"
TERMINAL = (SUCCEEDED, FAILED)

Condition = dict[str, Any]


def find(conditions: Sequence[Mapping[str, Any]], ctype: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == ctype), None)


def is_true(conditions: Sequence[Mapping[str, Any]], ctype: str) -> bool:
    c = find(conditions, ctype)
    return c is not None and c.get("status") == "True"


def terminal(conditions: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first terminal condition that holds: first terminal wins."""
    return next(
        (c for c in conditions if c.get("type") in TERMINAL and c.get("status") == "True"), None
    )


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    ctype: str,
    status: str,
    reason: str,
    message: str,
    now: str,
) -> list[Condition]:
    """Record a condition the way Kubeflow does; returns a new list."""
    current = [dict(c) for c in conditions]
    if is_true(current, FAILED):
        return current
    old = find(current, ctype)
    if old and old.get("status") == status and old.get("reason") == reason:
        return current
    kept = old.get("lastTransitionTime") if old and old.get("status") == status else None
    transition = kept or now  # a condition someone wrote without one gets one now
    out: list[Condition] = []
    for c in current:
        if c.get("type") == ctype:
            continue
        if {ctype, c.get("type")} == {RUNNING, RESTARTING}:
            continue
        if ctype in TERMINAL and c.get("type") == RUNNING:
            c["status"] = "False"
        out.append(c)
    out.append(
        {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message,
            "lastUpdateTime": now,
            "lastTransitionTime": transition,
        }
    )
    return out
