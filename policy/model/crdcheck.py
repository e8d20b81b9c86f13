"""Objects of Dragonet's CRDs checked as ``kubectl apply`` with strict field validation would
have the API server check them: against the CRDs' own ``openAPIV3Schema`` (``crd/*.yaml``,
shipped as package data: one source of truth, no second hand-written model), their
``metadata`` against ``ObjectMeta``.

A CRD's schema is structural: an object that lists its properties has no others (the API
server prunes or, strictly, refuses the rest), except under
``x-kubernetes-preserve-unknown-fields`` (a job's pod templates, checked on their own by
``apischema.check_template``). A misspelt field (``maxInstances`` for ``max-instances``,
``starvationSecond``) is refused with the known fields and the closest one, never ignored.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import yaml

from policy.model.apischema import Check, Problem, _Schema, _schema, path_text

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


class _CrdSchema(_Schema):
    """A CRD's structural schema: closed objects, open under preserve-unknown-fields, and an
    unknown field's message lists the known ones and the closest."""

    def object(self, schema: Mapping[str, Any], owner: str) -> Check:
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            schema = {**schema, "additionalProperties": True}
        check = super().object(schema, owner)
        known = list(schema.get("properties") or {})

        def with_hint(value: Mapping[str, Any]) -> Problem | None:
            problem = check(value)
            if problem is None or len(problem[0]) != 1 or not problem[1].startswith("unknown"):
                return problem
            return problem[0], unknown_field(str(problem[0][-1]), known)

        return with_hint


def unknown_field(name: str, known: list[str]) -> str:
    """``unknown field "maxInstances" (did you mean "max-instances"?; known: ...)``."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if not close:  # camelCase for kebab-case and back: compare without separators and case
        plain = {k.replace("-", "").replace("_", "").lower(): k for k in known}
        hit = plain.get(name.replace("-", "").replace("_", "").lower())
        close = [hit] if hit else []
    hint = f'did you mean "{close[0]}"? ' if close else ""
    return f'unknown field "{name}" ({hint}known: {", ".join(known)})'


@cache
def _checks() -> dict[tuple[str, str], Check]:
    """(apiVersion, kind) -> the check of one object, for every served version."""
    out: dict[tuple[str, str], Check] = {}
    folder = resources.files(__package__).joinpath("schema/crd")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        crd = yaml.safe_load(entry.read_text(encoding="utf-8"))
        spec = crd["spec"]
        for version in spec["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            check = _CrdSchema({}, closed=True).compile(schema, spec["names"]["kind"])
            out[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = check
    return out


def known_kind(api_version: Any, kind: Any) -> bool:
    return (api_version, kind) in _checks()


def problem_of(obj: Mapping[str, Any]) -> Problem | None:
    """The first problem of an object of one of our CRDs (where, what), or None if the API
    server would take it as it is. Not one of our CRDs' objects: None."""
    check = _checks().get((obj.get("apiVersion"), obj.get("kind")))
    if check is None:
        return None
    return check(obj) or _metadata(obj.get("metadata"))


def check_object(obj: Mapping[str, Any]) -> str | None:
    """``problem_of`` as ``path: what is wrong``."""
    problem = problem_of(obj)
    if problem is None:
        return None
    where, what = problem
    return f"{path_text(where)}: {what}" if where else what


def _metadata(meta: Any) -> Problem | None:
    if meta is None:
        return None
    problem = _schema().ref(OBJECT_META)(meta)
    if problem is None:
        return None
    where, what = problem
    if len(where) == 1 and what.startswith("unknown field"):
        what = unknown_field(str(where[0]), list(_schema().definitions[OBJECT_META]["properties"]))
    return ("metadata", *where), what


def line_of(text: str, first_line: int, where: tuple[str | int, ...]) -> int:
    """The line a field (``("spec", "tfReplicaSpecs", "Worker", "replicas")``) is on in the
    YAML document that starts on ``first_line``: the deepest part of the path found."""
    for root in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if root is None or root.start_mark.line + 1 != first_line:
            continue
        node, line = root, first_line
        for step in where:
            found = _child(node, step)
            if found is None:
                break
            node, line = found
        return line
    return first_line


def _child(node: yaml.Node, step: str | int) -> tuple[yaml.Node, int] | None:
    if isinstance(node, yaml.MappingNode) and isinstance(step, str):
        for key, value in node.value:
            if key.value == step:
                return value, key.start_mark.line + 1
    if isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
        item = node.value[step]
        return item, item.start_mark.line + 1
    return None
