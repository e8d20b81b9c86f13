"""Filter phase: may this node take a new pod from this template at all?

The same predicates kube-scheduler applies to a pod's own constraints (schedulable node,
taints and tolerations, ``nodeSelector``, required node affinity), so a plan never pins a
pod to a node the scheduler would refuse. Each rejection is a short phrase for users.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from policy.model.cluster import Node, Taint

_BLOCKING = ("NoSchedule", "NoExecute")
# What the kube-scheduler's label selector accepts as a requirement's value (a label value)
# and as a Gt/Lt number (Go's strconv.ParseInt: a sign and decimal digits, no "1_0").
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _tolerates(tolerations: list[Mapping[str, Any]], taint: Taint) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.effect:
            continue
        if tol.get("operator", "Equal") == "Exists":
            if not tol.get("key") or tol.get("key") == taint.key:
                return True
        elif tol.get("key") == taint.key and tol.get("value", "") == taint.value:
            return True
    return False


def _integer(text: Any) -> int | None:
    if not isinstance(text, str) or not _INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _parses(expr: Mapping[str, Any]) -> bool:
    """The kube-scheduler parses a requirement only if its values are label values (the
    API server does not check them): one that does not parse makes its term match no node."""
    values = expr.get("values") or []
    if not all(isinstance(v, str) and len(v) <= 63 and _LABEL_VALUE.fullmatch(v) for v in values):
        return False
    return expr.get("operator") not in ("Gt", "Lt") or (
        len(values) == 1 and _integer(values[0]) is not None
    )


def _match_expression(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        have, want = _integer(labels[key]), _integer(values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _match_term(node: Node, term: Mapping[str, Any]) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches nothing
    return all(_parses(e) and _match_expression(node.labels, e) for e in exprs) and all(
        _match_expression({"metadata.name": node.name}, f) for f in fields
    )


def rejection(node: Node, pod_spec: Mapping[str, Any]) -> str | None:
    """Why ``node`` cannot take a new pod with ``pod_spec``, or None if it can."""
    if node.unschedulable_reason:
        return f"{node.name} is {node.unschedulable_reason}"
    tolerations = pod_spec.get("tolerations") or []
    for taint in node.taints:
        if taint.effect in _BLOCKING and not _tolerates(tolerations, taint):
            shown = f"{taint.key}={taint.value}" if taint.value else taint.key
            return f"{node.name} has taint {shown}:{taint.effect}"
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if node.labels.get(key) != value:
            return f"{node.name} does not match nodeSelector {key}={value}"
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if terms and not any(_match_term(node, t) for t in terms):
        return f"{node.name} does not match the required node affinity"
    return None
