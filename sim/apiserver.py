"""The simulated API server: objects, resourceVersions, deletion and garbage collection.

Objects are plain dicts in their wire shape and are never mutated after they are stored:
every write stores a new dict, so a stale view may keep holding an old version safely.
Watchers see every change as (type key, old, new), in order. Owner references are indexed,
so removing an owner garbage-collects its dependents of every type, namespaced dependents
of a cluster-scoped owner included (as Kubernetes allows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import orjson

from policy.model.kinds import KINDS
from policy.model.request import job_type_key, object_key, type_key

Obj = Mapping[str, Any]
Watcher = Callable[[str, Obj | None, Obj | None], None]

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

# What ``dump`` writes, in this order: what ``kubectl get nodes,pods,trainingpools,tfjobs,
# mxjobs,...,admissions,events.events.k8s.io -A -o json`` returns, every job kind in KINDS
# (Events only if the run has any).
DUMPED_TYPES = (
    "Node.v1",
    "Pod.v1",
    "TrainingPool.dragonet.io/v1alpha1",
    *(job_type_key(k) for k in KINDS),
    "Admission.dragonet.io/v1alpha1",
    "Event.events.k8s.io/v1",
)


def stamp(t: float) -> str:
    """A Kubernetes timestamp (whole seconds) for simulated time ``t``."""
    return _stamp(int(t))


@lru_cache(maxsize=1024)
def _stamp(seconds: int) -> str:
    # Many writes share a second (formatting a datetime is slow).
    return (EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _list_order(key: str) -> tuple[str, str]:
    namespace, _, name = key.rpartition("/")
    return (namespace, name)


class Conflict(Exception):
    """AlreadyExists, or a failed UID or resourceVersion precondition."""


def _owner_uids(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    return {r["uid"] for r in obj["metadata"].get("ownerReferences") or () if r.get("uid")}


@dataclass
class ApiServer:
    """Truth. ``now`` is read from the simulation clock for timestamps."""

    clock: Callable[[], float]
    objects: dict[str, dict[str, Obj]] = field(default_factory=dict)
    # What the stored object becomes (old version, new one): real objects' extra fields
    # (sim/sizes.py), or None to store them as written.
    dress: Callable[[Obj | None, dict[str, Any]], dict[str, Any]] | None = None
    watchers: list[Watcher] = field(default_factory=list)
    _rv: int = 0
    _uid: int = 0
    _bytes: dict[tuple[str, str], tuple[str, bytes]] = field(default_factory=dict)
    # owner uid -> (type key, key) of the objects that name it in their ownerReferences
    _dependents: dict[str, set[tuple[str, str]]] = field(default_factory=dict)

    # --- reads -------------------------------------------------------------------------

    def get(self, tkey: str, key: str) -> Obj | None:
        return self.objects.get(tkey, {}).get(key)

    def list(self, tkey: str) -> Iterator[Obj]:
        return iter(list(self.objects.get(tkey, {}).values()))

    def serialized(self, obj: Obj) -> bytes:
        """The object's JSON, computed once per resourceVersion."""
        k = (type_key(obj), object_key(obj))
        rv = obj["metadata"]["resourceVersion"]
        hit = self._bytes.get(k)
        if hit is None or hit[0] != rv:
            hit = (rv, orjson.dumps(obj))
            self._bytes[k] = hit
        return hit[1]

    def dump(
        self,
        types: tuple[str, ...] = DUMPED_TYPES,
        undo: tuple[str, Obj | None, Obj | None] | None = None,
    ) -> dict[str, Any]:
        """The stored objects of ``types`` as one Kubernetes ``List`` (apiVersion v1, kind
        List, items): each type in turn, each by namespace and name, as the API server lists
        them. ``undo`` (a watcher's change: type key, old, new) is left out, so a watcher
        sees the objects as they were just before that change."""
        items: list[Obj] = []
        for tkey in types:
            bucket = dict(self.objects.get(tkey, {}))
            if undo is not None and undo[0] == tkey:
                _, old, new = undo
                key = object_key(new or old or {"metadata": {"name": ""}})
                if old is None:
                    bucket.pop(key, None)
                else:
                    bucket[key] = old
            items += (bucket[k] for k in sorted(bucket, key=_list_order))
        return {
            "apiVersion": "v1",
            "kind": "List",
            "metadata": {"resourceVersion": ""},
            "items": items,
        }

    # --- writes ------------------------------------------------------------------------

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _store(self, tkey: str, key: str, old: Obj | None, new: Obj | None) -> None:
        bucket = self.objects.setdefault(tkey, {})
        if new is None:
            bucket.pop(key, None)
            self._bytes.pop((tkey, key), None)
        else:
            bucket[key] = new
        was, now = _owner_uids(old), _owner_uids(new)
        for uid in was - now:
            deps = self._dependents.get(uid)
            if deps is not None:
                deps.discard((tkey, key))
                if not deps:
                    del self._dependents[uid]
        for uid in now - was:
            self._dependents.setdefault(uid, set()).add((tkey, key))
        for w in self.watchers:
            w(tkey, old, new)

    def create(self, obj: Obj) -> Obj:
        tkey, key = type_key(obj), object_key(obj)
        if key in self.objects.get(tkey, {}):
            raise Conflict(f"{tkey} {key} already exists")
        self._uid += 1
        meta = {
            **obj["metadata"],
            "uid": f"{self._uid:08x}-0000-4000-8000-000000000000",
            "resourceVersion": self._next_rv(),
            "creationTimestamp": stamp(self.clock()),
        }
        if "spec" in obj and obj["kind"] not in ("Pod", "Service", "Node"):
            meta["generation"] = 1
        new = {**obj, "metadata": meta}
        if obj["kind"] == "Pod" and not obj.get("status"):
            new["status"] = {"phase": "Pending"}  # the API server's default
        if self.dress is not None:
            new = self.dress(None, new)
        self._store(tkey, key, None, new)
        return new

    def update(
        self, obj: Obj, *, status_only: bool = False, resource_version: str | None = None
    ) -> Obj:
        """Replace an object; a spec change bumps ``generation`` (status writes never do).
        With ``resource_version``, the write is refused (:class:`Conflict`, HTTP 409) unless
        the stored object still has that version, as a PUT of a cached copy is."""
        tkey, key = type_key(obj), object_key(obj)
        old = self.get(tkey, key)
        if old is None:
            raise KeyError(f"{tkey} {key} not found")
        if resource_version is not None and old["metadata"]["resourceVersion"] != resource_version:
            raise Conflict(f"{tkey} {key}: the object has been modified")
        meta = {**obj["metadata"], "resourceVersion": self._next_rv()}
        if (
            not status_only
            and "generation" in old["metadata"]
            and obj.get("spec") != old.get("spec")
        ):
            meta["generation"] = old["metadata"]["generation"] + 1
        new = {**obj, "metadata": meta}
        if self.dress is not None:
            new = self.dress(old, new)
        self._store(tkey, key, old, new)
        return new

    def patch(self, tkey: str, key: str, **top: Any) -> Obj | None:
        """Replace top-level fields (``status=...``, ``metadata=...``) of a stored object."""
        old = self.get(tkey, key)
        if old is None:
            return None
        return self.update({**old, **top}, status_only="status" in top and "spec" not in top)

    def delete(self, tkey: str, key: str, *, uid: str | None = None) -> Obj | None:
        """Mark for deletion (finalizers hold it) or remove. Pods are removed by their
        kubelet (``remove``) once they have stopped."""
        old = self.get(tkey, key)
        if old is None:
            return None
        if uid is not None and old["metadata"]["uid"] != uid:
            raise Conflict(f"{tkey} {key}: uid precondition failed")
        if old["metadata"].get("deletionTimestamp"):
            return old
        if not old["metadata"].get("finalizers") and not tkey.startswith("Pod."):
            self.remove(tkey, key)
            return None
        meta = {**old["metadata"], "deletionTimestamp": stamp(self.clock())}
        return self.update({**old, "metadata": meta}, status_only=True)

    def remove(self, tkey: str, key: str) -> None:
        """The object is gone; its dependents are garbage-collected (background)."""
        old = self.get(tkey, key)
        if old is None:
            return
        self._store(tkey, key, old, None)
        for dtkey, dkey in sorted(self._dependents.get(old["metadata"]["uid"], ())):
            self.delete(dtkey, dkey)
