"""Job priority: the value of the PriorityClass a job names, as the kube-scheduler reads it.

A TFJob names its class in ``runPolicy.schedulingPolicy.priorityClass`` (Kubeflow), or its
pods do in ``priorityClassName``. Values come from the cluster's PriorityClass objects,
which every sync sees as related objects; the two system classes exist in every cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from policy.model.bounds import MAX_INT32

SYSTEM_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}


@dataclass(frozen=True)
class Priorities:
    classes: Mapping[str, int] = field(default_factory=lambda: MappingProxyType(SYSTEM_CLASSES))
    default: int = 0  # the globalDefault class's value, else 0

    @classmethod
    def observe(cls, objects: Iterable[Mapping[str, Any]]) -> Priorities:
        return cls.of(entry(obj) for obj in objects)

    @classmethod
    def of(cls, entries: Iterable[Entry | None]) -> Priorities:
        """From each PriorityClass's ``entry`` (None: one that is left out)."""
        classes = dict(SYSTEM_CLASSES)
        default = 0
        for name, value, is_default in sorted((e for e in entries if e), key=_first):
            classes[name] = value
            if is_default:
                default = value
        return cls(MappingProxyType(classes), default)

    def value(self, name: str | None) -> int | None:
        """The class's value; None for a class the cluster does not have."""
        if not name:
            return self.default
        return self.classes.get(name)


Entry = tuple[str, int, bool]  # a PriorityClass's name, value, and whether it is the default


def entry(obj: Mapping[str, Any]) -> Entry | None:
    """What a PriorityClass says (None for one without a name or an int32 value: the API
    server stores an int32; a user's class is at most 10^9)."""
    name = _name(obj)
    value = obj.get("value")
    if not name or type(value) is not int or not -MAX_INT32 - 1 <= value <= MAX_INT32:
        return None
    return name, value, obj.get("globalDefault") is True


def _first(e: Entry) -> str:
    return e[0]


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""
