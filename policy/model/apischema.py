"""What the API server accepts, checked without one: pod templates once per job, statuses
as they are read.

The TFJob and MXJob CRDs keep templates schemaless (``x-kubernetes-preserve-unknown-fields``),
so a template's ``command`` may be a string, its ``resources`` a list, a field misspelt; all
of it would be copied into the job's pods, and the API server would refuse each pod (422)
while Metacontroller retried forever. Checked here instead (``check_template``), the job
fails with the exact field named, and the pods Dragonet renders from a template that passed
are valid by construction (what Dragonet adds to them is its own).

The schema is the real one: ``schema/podtemplatespec.json`` is trimmed from the OpenAPI
schemas ``kubernetes-validate`` ships (``scripts/trim_schemas.py``), as strict as the tests'
validator (types, required fields, unknown fields, int32/int64 ranges). It is compiled once
into plain Python checks: a template is checked in tens of microseconds, where a general
JSON-schema validator takes milliseconds per pod (benchmarks/README.md).

A job's status is Dragonet's own memory, echoed into the status it writes; ``writable_status``
keeps of it only what its CRD's status schema (``schema/job-status.json``) accepts, so an
edited status can never make the written one a 422.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

# A problem: where (keys and indices from the checked value down) and what is wrong.
Problem = tuple[tuple[str | int, ...], str]
Check = Callable[[Any], Problem | None]

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Definitions that read better by what they mean than by their Go type's name.
_NAMED = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": (
        'a quantity (a string such as "500m" or "2Gi", or a number)',
        "quantities",
    ),
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": (
        "an integer or a string",
        "integers or strings",
    ),
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": (
        'an RFC 3339 time such as "2026-01-02T03:04:05Z"',
        "RFC 3339 times",
    ),
}
_TYPE_WORDS = {
    "string": ("a string", "strings"),
    "integer": ("an integer", "integers"),
    "number": ("a number", "numbers"),
    "boolean": ("true or false", "booleans"),
    "object": ("an object", "objects"),
    "array": ("a list", "lists"),
}


def check_template(template: Any) -> str | None:
    """The first problem of a pod template as ``path: what is wrong`` (path from the
    template down, e.g. ``spec.containers[0].command``), or None if Kubernetes would accept
    pods made from it."""
    if not isinstance(template, Mapping):
        return f"must be a PodTemplateSpec object (got {_got(template)})"
    problem = _schema().root(template)
    if problem is None:
        return None
    where, what = problem
    return f"{path_text(where)}: {what}" if where else what


def writable_status(kind: str, status: Mapping[str, Any]) -> dict[str, Any]:
    """``status`` (a job of ``kind``'s) without what its CRD's status schema refuses: unknown
    fields, values of the wrong type or out of range, list items missing a required field,
    nulls. What an API server stored comes back unchanged."""
    pruned = _prune(_job_status_schemas()[kind], status)
    return pruned if isinstance(pruned, dict) else {}


def kubernetes_version() -> str:
    """The Kubernetes version whose schema templates are checked against."""
    return _schema().version


def path_text(where: tuple[str | int, ...]) -> str:
    """``spec.containers[0].resources.limits['nvidia.com/gpu']``."""
    out = ""
    for step in where:
        if isinstance(step, int):
            out += f"[{step}]"
        elif _IDENTIFIER.match(step):
            out += f".{step}" if out else step
        else:
            out += f"[{step!r}]"
    return out


class _Schema:
    """The definitions, compiled on first use (one check per definition)."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.definitions: Mapping[str, Any] = doc["definitions"]
        self.version = ".".join(str(doc["kubernetesVersion"]).split(".")[:2])
        self.compiled: dict[str, Check] = {}
        self.root = self.ref(doc["root"])

    def ref(self, name: str) -> Check:
        compiled = self.compiled

        def check(value: Any) -> Problem | None:  # resolved at the first call: refs may loop
            return compiled[name](value)

        if name not in compiled:
            compiled[name] = check  # a placeholder while the definition compiles
            expected = self.words({"$ref": name})[0]
            compiled[name] = self.compile(self.definitions[name], _short(name), expected)
        return compiled[name]

    def words(self, schema: Mapping[str, Any]) -> tuple[str, str]:
        """What a value of this schema is, in words: (one, many)."""
        if "$ref" in schema:
            name = schema["$ref"]
            if name in _NAMED:
                return _NAMED[name]
            return self.words_of_object(name)
        if "oneOf" in schema:
            parts = [self.words(s) for s in schema["oneOf"]]
            return " or ".join(p[0] for p in parts), " or ".join(p[1] for p in parts)
        types = [t for t in _types(schema) if t != "null"]
        if types == ["array"] and isinstance(schema.get("items"), Mapping):
            many = self.words(schema["items"])[1]
            return f"a list of {many}", f"lists of {many}"
        if types == ["object"] and isinstance(schema.get("additionalProperties"), Mapping):
            many = self.words(schema["additionalProperties"])[1]
            return f"a map of {many}", f"maps of {many}"
        if not types:
            return "a value", "values"
        one = " or ".join(_TYPE_WORDS.get(t, (t, t))[0] for t in types)
        return one, " or ".join(_TYPE_WORDS.get(t, (t, t))[1] for t in types)

    def words_of_object(self, name: str) -> tuple[str, str]:
        short = _short(name)
        article = "an" if short[0] in "AEIOU" else "a"
        return f"{article} {short} object", f"{short} objects"

    def compile(self, schema: Mapping[str, Any], owner: str = "", expected: str = "") -> Check:
        """``owner``: the definition's name, ``expected``: what it is in words (for the
        messages of a definition)."""
        if "$ref" in schema:
            return self.ref(schema["$ref"])
        expected = expected or self.words(schema)[0]
        if "oneOf" in schema:
            return self.one_of(schema, expected)
        types = _types(schema)
        nullable = "null" in types or not types
        shape = _shape(types)
        inner: Check | None = None
        if "object" in types:
            inner = self.object(schema, owner)
        elif "array" in types and isinstance(schema.get("items"), Mapping):
            inner = self.array(self.compile(schema["items"]))
        limits = _INT_RANGES.get(schema.get("format", ""))
        is_time = schema.get("format") == "date-time"
        enum = tuple(schema.get("enum") or ())

        def check(value: Any) -> Problem | None:
            if value is None:
                return None if nullable else ((), f"must be {expected}")
            if shape is not None and not shape(value):
                return (), f"must be {expected} (got {_got(value)})"
            if limits is not None and not limits[0] <= value <= limits[1]:
                return (), f"{value} is out of range (at most {limits[1]})"
            if is_time and not _is_time(value):
                return (), f"must be {expected} (got {value!r})"
            if enum and value not in enum:
                return (), f"must be one of {', '.join(map(repr, enum))} (got {value!r})"
            return inner(value) if inner is not None else None

        return check

    def one_of(self, schema: Mapping[str, Any], expected: str) -> Check:
        options = [self.compile(s) for s in schema["oneOf"]]

        def check(value: Any) -> Problem | None:
            # Exactly one, as JSON schema's oneOf: null fits every nullable option, so a
            # quantity or an int-or-string may not be null.
            if sum(option(value) is None for option in options) == 1:
                return None
            return (), f"must be {expected} (got {_got(value)})"

        return check

    def object(self, schema: Mapping[str, Any], owner: str) -> Check:
        fields = {k: self.compile(s) for k, s in (schema.get("properties") or {}).items()}
        required = tuple(schema.get("required") or ())
        extra = schema.get("additionalProperties", True)
        values = self.compile(extra) if isinstance(extra, Mapping) else None
        closed = extra is False
        what = f"in a {owner}" if owner else "here"
        version = self.version

        def check(value: Mapping[str, Any]) -> Problem | None:
            for key in required:
                if key not in value:
                    return (key,), "required"
            for key, item in value.items():
                field = fields.get(key)
                if field is not None:
                    problem = field(item)
                elif values is not None:
                    problem = values(item)
                elif closed:
                    return (key,), f"unknown field (Kubernetes {version} has no {key!r} {what})"
                else:
                    continue
                if problem is not None:
                    return (key, *problem[0]), problem[1]
            return None

        return check

    def array(self, items: Check) -> Check:
        def check(value: list[Any]) -> Problem | None:
            for i, item in enumerate(value):
                problem = items(item)
                if problem is not None:
                    return (i, *problem[0]), problem[1]
            return None

        return check


def _is_time(value: str) -> bool:
    """RFC 3339, and a real date and time (not month 13)."""
    if not _RFC3339.match(value):
        return False
    try:
        datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _types(schema: Mapping[str, Any]) -> list[str]:
    t = schema.get("type")
    return [t] if isinstance(t, str) else list(t or [])


def _shape(types: list[str]) -> Callable[[Any], bool] | None:
    """A test of the JSON type (None: any). Booleans are not integers, floats not integers."""
    tests = []
    for t in types:
        if t == "string":
            tests.append(lambda v: isinstance(v, str))
        elif t == "integer":
            tests.append(lambda v: type(v) is int)
        elif t == "number":
            tests.append(lambda v: type(v) in (int, float))
        elif t == "boolean":
            tests.append(lambda v: type(v) is bool)
        elif t == "object":
            tests.append(lambda v: isinstance(v, Mapping))
        elif t == "array":
            tests.append(lambda v: isinstance(v, list | tuple))
    if not tests:
        return None
    if len(tests) == 1:
        return tests[0]
    return lambda v: any(test(v) for test in tests)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _got(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return f"the string {value[:40]!r}" + ("..." if len(value) > 40 else "")
    if isinstance(value, float):
        return f"the number {value:g}"
    return f"the number {value}" if isinstance(value, int) else type(value).__name__


_DROP = object()  # what ``_prune`` returns for a value its schema refuses


def _prune(schema: Mapping[str, Any], value: Any) -> Any:
    """The part of ``value`` that ``schema`` (a structural CRD schema: no refs) accepts, or
    ``_DROP``. Unknown fields go, as the API server prunes them."""
    if value is None:
        return _DROP
    types = _types(schema)
    shape = _shape(types)
    if shape is not None and not shape(value):
        return _DROP
    if isinstance(value, Mapping):
        fields = schema.get("properties")
        extra = schema.get("additionalProperties")
        out = {}
        for key, item in value.items():
            sub = fields.get(key) if fields else None
            sub = sub if sub is not None else (extra if isinstance(extra, Mapping) else None)
            if sub is None:
                continue
            kept = _prune(sub, item)
            if kept is not _DROP:
                out[key] = kept
        if any(key not in out for key in schema.get("required") or ()):
            return _DROP
        return out
    if isinstance(value, list | tuple):
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return list(value)
        return [kept for v in value if (kept := _prune(items, v)) is not _DROP]
    if not _scalar_fits(schema, value):
        return _DROP
    return value


def _scalar_fits(schema: Mapping[str, Any], value: Any) -> bool:
    limits = _INT_RANGES.get(schema.get("format", ""))
    if limits is not None and isinstance(value, int) and not limits[0] <= value <= limits[1]:
        return False
    if schema.get("format") == "date-time" and not _is_time(value):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    if "minimum" in schema and value < schema["minimum"]:
        return False
    if "maximum" in schema and value > schema["maximum"]:
        return False
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return False
    return not (isinstance(value, float) and not math.isfinite(value))  # not a JSON number


@cache
def _job_status_schemas() -> Mapping[str, Any]:
    text = resources.files(__package__).joinpath("schema/job-status.json").read_text()
    return json.loads(text)["kinds"]


@cache
def _schema() -> _Schema:
    text = resources.files(__package__).joinpath("schema/podtemplatespec.json").read_text()
    return _Schema(json.loads(text))
