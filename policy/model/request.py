"""The shape of Metacontroller's hook requests (CompositeController, hook ``version: v2``).

Children and related objects come grouped in maps: type key (``Kind.version`` for the
core group, ``Kind.group/version`` otherwise) -> object key (``namespace/name``, or
``name`` for a cluster-scoped object) -> object. These are facts of Metacontroller's
contract, shared by both tiers, the shell, the simulator and the tests: they are written
here once. What cannot be read is a ``MalformedRequest`` (the shell answers HTTP 400).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from policy.model.jobs import JobKind

ObjectMap = Mapping[str, Mapping[str, Mapping[str, Any]]]

# What reading one object of a request may raise: it is then left out (the pool reports it
# in its status, DESIGN §2.8; a job's sync ignores it), never the end of the sync.
UNREADABLE = (KeyError, TypeError, ValueError, ArithmeticError, AttributeError, RecursionError)


class MalformedRequest(ValueError):
    """The request is not a hook request we can read (answered with HTTP 400)."""


def type_key(obj: Mapping[str, Any]) -> str:
    """An object's type key: ``Kind.version`` (core group) or ``Kind.group/version``."""
    return f"{obj['kind']}.{obj['apiVersion']}"


def job_type_key(kind: JobKind) -> str:
    """The type key a job kind's objects are mapped under."""
    return f"{kind.kind}.{kind.api_version}"


def object_key(obj: Mapping[str, Any]) -> str:
    """An object's key in its type's map: ``namespace/name``, or ``name`` when it has no
    namespace (cluster-scoped)."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else meta["name"]


def object_map(
    objects: Iterable[Mapping[str, Any]], types: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """Objects grouped the way Metacontroller sends them; every declared type is present,
    empty if no object has it."""
    out: dict[str, dict[str, Any]] = {t: {} for t in types}
    for obj in objects:
        out.setdefault(type_key(obj), {})[object_key(obj)] = obj
    return out


def items(group: ObjectMap, type_key: str) -> list[tuple[str, Any]]:
    """The (key, object) pairs of one type, as they came (an entry may not be an object)."""
    objs = group.get(type_key) or {}
    if not isinstance(objs, Mapping):
        raise MalformedRequest(f"{type_key} must map names to objects")
    return list(objs.items())


def objects(group: ObjectMap, type_key: str) -> list[Mapping[str, Any]]:
    """The objects of one type; an entry that is not an object is left out."""
    return [o for _, o in items(group, type_key) if isinstance(o, Mapping)]
