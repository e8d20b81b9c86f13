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
JSON-schema validator takes milliseconds per pod (benchmarks/README.md). Then the rules of
the API server's own pod validation that no schema states, the ones a template can break:
names, labels, port names, volume mounts, resource names and quantities (``_pod_rules``).

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
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import orjson

from policy.model.resources import to_milli

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
    try:
        content = orjson.dumps(template)
    except TypeError:  # no JSON (an integer beyond 64 bits): checked without the cache
        return _checked(template)
    return _checked_content(content)


@lru_cache(maxsize=512)
def _checked_content(content: bytes) -> str | None:
    """Jobs of one team share their templates: each content is checked once."""
    return _checked(orjson.loads(content))


def _checked(template: Mapping[str, Any]) -> str | None:
    problem = _schema().root(template) or _pod_rules(template)
    if problem is None:
        return None
    where, what = problem
    return f"{path_text(where)}: {what}" if where else what


def writable_status(kind: str, status: Mapping[str, Any]) -> dict[str, Any]:
    """``status`` (a job of ``kind``'s) without what its CRD's status schema refuses: unknown
    fields, values of the wrong type or out of range, list items missing a required field,
    nulls. What an API server stored comes back unchanged."""
    schema, valid = _job_status_schemas()[kind]
    if valid(status) is None:  # what an API server stored: the fast way
        return dict(status)
    pruned = _prune(schema, status)
    return pruned if isinstance(pruned, dict) else {}


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

    def __init__(
        self, definitions: Mapping[str, Any], version: str = "", closed: bool = False
    ) -> None:
        """``closed``: an object that lists its properties has no others (a CRD's structural
        schema, where the API server prunes the rest), else only with
        ``additionalProperties: false``."""
        self.definitions = definitions
        self.version = version
        self.closed = closed
        self.compiled: dict[str, Check] = {}
        self.root: Check = lambda value: None

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
        bounded = any(k in schema for k in ("minimum", "maximum", "maxLength"))

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
            if bounded and not _scalar_fits(schema, value):
                return (), f"must be {expected} within the schema's bounds (got {_got(value)})"
            if type(value) is float and not math.isfinite(value):
                return (), f"must be {expected} (got {value})"
            return inner(value) if inner is not None else None

        return check

    def one_of(self, schema: Mapping[str, Any], expected: str) -> Check:
        options = [self.compile(s) for s in schema["oneOf"]]
        if all(set(s) == {"type"} for s in schema["oneOf"]):  # a quantity, an int-or-string
            shapes = [_shape([t for t in _types(s) if t != "null"]) for s in schema["oneOf"]]
            if None not in shapes:
                return self.one_of_types(shapes, expected)

        def check(value: Any) -> Problem | None:
            # Exactly one, as JSON schema's oneOf: null fits every nullable option, so a
            # quantity or an int-or-string may not be null.
            if sum(option(value) is None for option in options) == 1:
                return None
            return (), f"must be {expected} (got {_got(value)})"

        return check

    def one_of_types(self, shapes: list[Any], expected: str) -> Check:
        """oneOf plain types, none null (null would fit them all)."""

        def check(value: Any) -> Problem | None:
            if value is not None and sum(shape(value) for shape in shapes) == 1:
                return None
            return (), f"must be {expected} (got {_got(value)})"

        return check

    def object(self, schema: Mapping[str, Any], owner: str) -> Check:
        fields = {k: self.compile(s) for k, s in (schema.get("properties") or {}).items()}
        required = tuple(schema.get("required") or ())
        extra = schema.get("additionalProperties", not (self.closed and fields))
        values = self.compile(extra) if isinstance(extra, Mapping) else None
        closed = extra is False
        what = f"in a {owner}" if owner else "here"
        version = f"Kubernetes {self.version}" if self.version else "the schema"

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
                    return (key,), f"unknown field ({version} has no {key!r} {what})"
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


# --- rules of the API server's validation that no schema states -----------------------------
# (k8s.io/kubernetes pkg/apis/core/validation: ValidatePodSpec, ValidateLabels, ...), the ones
# a template can break and a user would hit: a pod made from it would be a 422.

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_IANA_SVC_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# All of a pod's annotations (keys and values), and what Dragonet keeps for its own.
_MAX_ANNOTATIONS = 256 * 1024
_OWN_ANNOTATIONS = 1024
# Resource names without a domain that a container may ask for (the rest need one).
_STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def _pod_rules(template: Mapping[str, Any]) -> Problem | None:
    """The first rule of the API server's pod validation a schema-valid template breaks."""
    meta = template.get("metadata") or {}
    for key, value in (meta.get("labels") or {}).items():
        problem = _label_key(key) or _label_value(value)
        if problem:
            return ("metadata", "labels", key), problem
    annotations = meta.get("annotations") or {}
    for key in annotations:
        problem = _label_key(key)
        if problem:
            return ("metadata", "annotations", key), problem
    size = sum(len(k) + len(v or "") for k, v in annotations.items())
    if size > _MAX_ANNOTATIONS - _OWN_ANNOTATIONS:
        return ("metadata", "annotations"), (
            f"{size} bytes: a pod's annotations may hold {_MAX_ANNOTATIONS} bytes in all, "
            f"{_OWN_ANNOTATIONS} of them kept for Dragonet's own"
        )
    spec = template.get("spec") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        problem = _label_key(key) or _label_value(value)
        if problem:
            return ("spec", "nodeSelector", key), problem
    for field in ("volumes", "initContainers", "containers", "tolerations"):
        problem = _no_null_item(spec.get(field))
        if problem is not None:
            return ("spec", field, *problem[0]), problem[1]
    volumes = {v.get("name") for v in spec.get("volumes") or []}
    names: set[str] = set()
    ports: set[str] = set()
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or []):
            problem = _container_rules(c, volumes, names, ports)
            if problem is not None:
                return ("spec", group, i, *problem[0]), problem[1]
    return None


def _container_rules(
    c: Mapping[str, Any], volumes: set[Any], names: set[str], ports: set[str]
) -> Problem | None:
    for field in ("ports", "volumeMounts", "env", "envFrom"):
        problem = _no_null_item(c.get(field))
        if problem is not None:
            return (field, *problem[0]), problem[1]
    name = c["name"]
    if len(name) > 63 or not _DNS1123_LABEL.match(name):
        return ("name",), f"{name[:80]!r} is not a DNS-1123 label (lower-case letters, digits, '-')"
    if name in names:
        return ("name",), f"{name!r} names two containers of the pod"
    names.add(name)
    for j, port in enumerate(c.get("ports") or []):
        pname = port.get("name")
        if pname:
            if (
                len(pname) > 15
                or not _IANA_SVC_NAME.match(pname)
                or "--" in pname
                or not any(ch.isalpha() for ch in pname)
            ):
                return ("ports", j, "name"), (
                    f"{pname[:80]!r} is not a port name (at most 15 lower-case letters, digits "
                    "and '-', with a letter)"
                )
            if pname in ports:
                return ("ports", j, "name"), f"{pname!r} names two ports of the pod"
            ports.add(pname)
        host = port.get("hostPort")
        if host is not None and not 0 <= host <= 65535:
            return ("ports", j, "hostPort"), f"{host} is not a port number (0 to 65535)"
    for j, mount in enumerate(c.get("volumeMounts") or []):
        if not mount["mountPath"]:
            return ("volumeMounts", j, "mountPath"), "must not be empty"
        if mount["name"] not in volumes:
            return ("volumeMounts", j, "name"), f"{mount['name']!r} names no volume of the pod"
    for j, env in enumerate(c.get("env") or []):
        if not env["name"] or "=" in env["name"]:
            return ("env", j, "name"), f"{env['name']!r} is not a variable name"
    resources = c.get("resources") or {}
    for part in ("limits", "requests"):
        for rname in resources.get(part) or {}:
            if (
                "/" not in rname
                and rname not in _STANDARD_RESOURCES
                and not rname.startswith("hugepages-")
            ):
                return ("resources", part, rname), (
                    "not a standard resource (cpu, memory, ephemeral-storage, hugepages-*): "
                    "any other needs its domain, e.g. nvidia.com/gpu"
                )
            problem = _label_key(rname)
            if problem:
                return ("resources", part, rname), problem
    problem = _resource_rules(resources.get("limits") or {}, resources.get("requests") or {})
    return (("resources", *problem[0]), problem[1]) if problem is not None else None


def _resource_rules(limits: Mapping[str, Any], requests: Mapping[str, Any]) -> Problem | None:
    """ValidateResourceRequirements: a request at most its limit; an extended resource
    (a GPU) whole, and its request equal to its limit (none is overcommitted)."""
    milli = {}
    for part, values in (("limits", limits), ("requests", requests)):
        for name, quantity in values.items():
            try:
                milli[part, name] = to_milli(quantity)
            except (TypeError, ValueError, ArithmeticError):
                return None  # unreadable: the job's parse says so (policy.model.jobs)
            if _extended(name) and milli[part, name] % 1000:
                return (part, name), f"{quantity!r}: {name} comes in whole units"
    for name in requests:
        limit = milli.get(("limits", name))
        if limit is not None and milli["requests", name] > limit:
            return ("requests", name), f"must be at most its limit ({limits[name]!r})"
        if _extended(name) and limit != milli["requests", name]:
            return ("requests", name), (
                f"must equal its limit: an extended resource is never overcommitted (give "
                f"limits[{name!r}] = {requests[name]!r}, or only the limit)"
            )
    return None


def _extended(name: str) -> bool:
    """Not Kubernetes' own (no domain, or kubernetes.io's) and not hugepages."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("hugepages-")


def _no_null_item(items: Any) -> Problem | None:
    """A null in a list of objects: the API server reads it as an empty object, which lacks
    what each needs (a name, a port)."""
    for i, item in enumerate(items or ()):
        if item is None:
            return (i,), "must not be null"
    return None


def _label_key(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return f"the key's prefix {prefix[:80]!r} is not a DNS-1123 subdomain"
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            f"the key {key[:80]!r} is not a qualified name (at most 63 letters, digits, '-', "
            "'_' or '.', starting and ending with a letter or digit, after an optional prefix/)"
        )
    return None


def _label_value(value: Any) -> str | None:
    value = value if isinstance(value, str) else ""  # null: no value (the schema allows it)
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return (
            f"{value[:80]!r} is not a label value (at most 63 letters, digits, '-', '_' or "
            "'.', starting and ending with a letter or digit)"
        )
    return None


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
def _job_status_schemas() -> Mapping[str, tuple[Mapping[str, Any], Check]]:
    """Each kind's status schema, and its compiled check."""
    text = resources.files(__package__).joinpath("schema/job-status.json").read_text()
    kinds = json.loads(text)["kinds"]
    return {
        kind: (schema, _Schema({}, closed=True).compile(schema)) for kind, schema in kinds.items()
    }


@cache
def _schema() -> _Schema:
    text = resources.files(__package__).joinpath("schema/podtemplatespec.json").read_text()
    doc = json.loads(text)
    schema = _Schema(doc["definitions"], ".".join(doc["kubernetesVersion"].split(".")[:2]))
    schema.root = schema.ref(doc["root"])
    return schema
