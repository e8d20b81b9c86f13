"""Metacontroller's CompositeController, as documented (reference: metacontroller-contract.md).

* Its informer view (:class:`View`) may lag the API server by a fixed delay; every trigger
  fires when the view sees a change, and every request is built from the view.
* A parent is synced when it changes, when one of its children changes (ControllerRef),
  when a related object matching its customize rules changes, or when its
  ``resyncAfterSeconds`` expires. The work queue never holds a key twice.
* Customize answers are cached per (parent uid, generation).
* ``workers`` syncs may be taken off the queue together and built from the same view
  (Metacontroller runs 5 workers); their answers are then applied one after the other.
* Children are applied by name: the missing are created (AlreadyExists is ignored), the
  observed ones left out are deleted (uid precondition), existing ones are never updated
  (``OnDelete``). The status is replaced after a live read, with ``observedGeneration``,
  and not written when unchanged. A deleted parent gets finalize calls until ``finalized``.
* A non-200 answer changes nothing; the key is retried after ``Retry-After`` (429) or an
  exponential backoff (client-go's 5 ms .. 1000 s).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from sim.apiserver import ApiServer, Conflict, Obj, object_key, type_key
from sim.webhook import WebhookClient

Schedule = Callable[[float, Callable[[], None]], None]
RESOURCE_KINDS = {
    "pods": "Pod",
    "services": "Service",
    "nodes": "Node",
    "priorityclasses": "PriorityClass",
}


class View:
    """Metacontroller's informer caches: the API server's objects, ``delay_s`` late."""

    def __init__(self, api: ApiServer, schedule: Schedule, delay_s: float = 0.0) -> None:
        self.api = api
        self.delay_s = delay_s
        self.version = 0
        self.handlers: list[Callable[[str, Obj | None, Obj | None], None]] = []
        self.objects: dict[str, dict[str, Obj]] = api.objects if delay_s <= 0 else {}
        self._schedule = schedule
        api.watchers.append(self._on_api_change)

    def _on_api_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if self.delay_s <= 0:
            self._deliver(tkey, old, new)
        else:
            self._schedule(self.delay_s, lambda: self._apply(tkey, old, new))

    def _apply(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        bucket = self.objects.setdefault(tkey, {})
        key = object_key(new if new is not None else old)
        seen = bucket.get(key)
        if new is None:
            bucket.pop(key, None)
        else:
            bucket[key] = new
        self._deliver(tkey, seen, new)

    def _deliver(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        self.version += 1
        for h in self.handlers:
            h(tkey, old, new)

    def get(self, tkey: str, key: str) -> Obj | None:
        return self.objects.get(tkey, {}).get(key)

    def values(self, tkey: str) -> Iterable[Obj]:
        return self.objects.get(tkey, {}).values()


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector; ``{}`` matches everything."""
    selector = selector or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(op, False)
        if not ok:
            return False
    return True


@dataclass(frozen=True)
class Rule:
    tkey: str
    selector: Mapping[str, Any] = field(hash=False, compare=False)
    selector_key: bytes  # the selector's canonical JSON: rules compare and hash by it
    namespace: str | None
    names: tuple[str, ...]

    def matches(self, obj: Obj) -> bool:
        meta = obj["metadata"]
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if self.names:
            return meta["name"] in self.names
        return selector_matches(self.selector, meta.get("labels") or {})


def _rule(raw: Mapping[str, Any], kinds: Mapping[str, str]) -> Rule:
    api_version, resource = raw["apiVersion"], raw["resource"]
    kind = kinds.get(resource) or RESOURCE_KINDS[resource]
    selector = raw.get("labelSelector") or {}
    return Rule(
        tkey=f"{kind}.{api_version}",
        selector=selector,
        selector_key=orjson.dumps(selector, option=orjson.OPT_SORT_KEYS),
        namespace=raw.get("namespace"),
        names=tuple(raw.get("names") or ()),
    )


def _j(value: Any) -> bytes:
    return orjson.dumps(value)


@dataclass
class Metacontroller:
    controller: Mapping[str, Any]  # the CompositeController object
    api: ApiServer
    view: View
    webhook: WebhookClient
    schedule: Schedule
    workers: int = 1
    queue: dict[str, None] = field(default_factory=dict)
    sync_calls: int = 0
    errors: int = 0
    _customized: dict[tuple[str, int], tuple[Rule, ...]] = field(default_factory=dict)
    _groups: dict[tuple[Rule, ...], set[str]] = field(default_factory=dict)
    _related: dict[tuple[Rule, ...], tuple[int, bytes]] = field(default_factory=dict)
    _failures: dict[str, int] = field(default_factory=dict)
    _owned: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    _parents: dict[str, str] = field(default_factory=dict)  # uid -> parent key

    def __post_init__(self) -> None:
        spec = self.controller["spec"]
        parent = spec["parentResource"]
        self.parent_kind = "TFJob" if parent["resource"] == "tfjobs" else "MXJob"
        self.parent_tkey = f"{self.parent_kind}.{parent['apiVersion']}"
        self.child_tkeys = [
            f"{RESOURCE_KINDS[c['resource']]}.{c['apiVersion']}" for c in spec["childResources"]
        ]
        self.kinds = {parent["resource"]: self.parent_kind}
        self.finalizer = (
            f"metacontroller.io/compositecontroller-{self.controller['metadata']['name']}"
        )
        self._ctrl = _j(self.controller)
        hooks = spec["hooks"]
        self.paths = {name: hooks[name]["webhook"]["url"].split("/", 3)[3] for name in hooks}
        self.view.handlers.append(self._on_change)
        for obj in self.view.values(self.parent_tkey):
            self._parents[obj["metadata"]["uid"]] = object_key(obj)
        for tkey in self.child_tkeys:
            for obj in self.view.values(tkey):
                self._index(tkey, None, obj)

    # --- triggers --------------------------------------------------------------------

    def enqueue(self, key: str) -> None:
        self.queue[key] = None

    def _owner_uid(self, obj: Obj | None) -> str | None:
        if obj is None:
            return None
        for ref in obj["metadata"].get("ownerReferences") or ():
            if ref.get("controller"):
                return ref.get("uid")
        return None

    def _index(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        for obj, add in ((old, False), (new, True)):
            uid = self._owner_uid(obj)
            if uid is None:
                continue
            keys = self._owned.setdefault(uid, {}).setdefault(tkey, set())
            (keys.add if add else keys.discard)(object_key(obj))

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == self.parent_tkey:
            key = object_key(new if new is not None else old)
            if new is None:
                self._parents.pop(old["metadata"]["uid"], None)
            else:
                self._parents[new["metadata"]["uid"]] = key
            self.enqueue(key)
        if tkey in self.child_tkeys:
            self._index(tkey, old, new)
            uid = self._owner_uid(new) or self._owner_uid(old)
            parent = self._parent_by_uid(uid)
            if parent is not None:
                self.enqueue(parent)
        if (
            old is not None
            and new is not None
            and old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion")
        ):
            return  # a resync of an unchanged object triggers nothing
        for rules, parents in self._groups.items():
            if any(
                r.tkey == tkey and any(o is not None and r.matches(o) for o in (old, new))
                for r in rules
            ):
                for p in sorted(parents):
                    self.enqueue(p)

    def _parent_by_uid(self, uid: str | None) -> str | None:
        return None if uid is None else self._parents.get(uid)

    # --- one batch of syncs ----------------------------------------------------------

    def run_batch(self) -> int:
        """Take up to ``workers`` keys, build their requests on one view, then apply."""
        keys = list(self.queue)[: self.workers]
        for k in keys:
            del self.queue[k]
        calls = [(k, *self._request(k)) for k in keys]
        answers = [
            (k, parent, kind, self.webhook.post(self.paths[kind], body))
            for k, parent, kind, body in calls
            if body is not None
        ]
        for key, parent, kind, answer in answers:
            self.sync_calls += 1
            self._apply(key, parent, kind, answer)
        return len(answers)

    def _rules(self, parent: Obj) -> tuple[Rule, ...]:
        meta = parent["metadata"]
        ck = (meta["uid"], int(meta.get("generation", 0)))
        rules = self._customized.get(ck)
        if rules is None:
            body = b'{"controller":' + self._ctrl + b',"parent":' + _j(parent) + b"}"
            answer = self.webhook.post(self.paths["customize"], body, measure=False)
            if answer.status != 200:
                raise RuntimeError(f"customize hook answered {answer.status}: {answer.body}")
            raw = answer.body.get("relatedResources") or []
            rules = tuple(_rule(r, self.kinds) for r in raw)
            self._customized[ck] = rules
        for group, members in self._groups.items():
            if group != rules:
                members.discard(object_key(parent))
        self._groups.setdefault(rules, set()).add(object_key(parent))
        return rules

    def _related_bytes(self, rules: tuple[Rule, ...]) -> bytes:
        hit = self._related.get(rules)
        if hit is not None and hit[0] == self.view.version:
            return hit[1]
        by_type: dict[str, list[bytes]] = {}
        for rule in rules:
            items = by_type.setdefault(rule.tkey, [])
            for key, obj in sorted(self.view.objects.get(rule.tkey, {}).items()):
                if rule.matches(obj):
                    items.append(_j(key) + b":" + self.api.serialized(obj))
        body = b"{" + b",".join(_j(t) + b":{" + b",".join(v) + b"}" for t, v in by_type.items())
        body += b"}"
        self._related[rules] = (self.view.version, body)
        return body

    def _children_bytes(self, parent: Obj) -> bytes:
        owned = self._owned.get(parent["metadata"]["uid"], {})
        parts = []
        for tkey in self.child_tkeys:
            items = []
            for key in sorted(owned.get(tkey, ())):
                obj = self.view.get(tkey, key)
                if obj is not None:
                    items.append(_j(key) + b":" + self.api.serialized(obj))
            parts.append(_j(tkey) + b":{" + b",".join(items) + b"}")
        return b"{" + b",".join(parts) + b"}"

    def _request(self, key: str) -> tuple[Obj | None, str, bytes | None]:
        parent = self.view.get(self.parent_tkey, key)
        if parent is None:
            return None, "sync", None
        meta = parent["metadata"]
        finalizing = bool(meta.get("deletionTimestamp"))
        if finalizing and self.finalizer not in (meta.get("finalizers") or ()):
            return None, "sync", None
        if not finalizing:
            self._ensure_finalizer(key)
        rules = self._rules(parent)
        body = (
            b'{"controller":'
            + self._ctrl
            + b',"parent":'
            + self.api.serialized(parent)
            + b',"children":'
            + self._children_bytes(parent)
            + b',"related":'
            + self._related_bytes(rules)
            + b',"finalizing":'
            + (b"true" if finalizing else b"false")
            + b"}"
        )
        return parent, ("finalize" if finalizing else "sync"), body

    def _ensure_finalizer(self, key: str) -> None:
        live = self.api.get(self.parent_tkey, key)
        if live is None or "finalize" not in self.paths:
            return
        finalizers = list(live["metadata"].get("finalizers") or ())
        if self.finalizer not in finalizers:
            meta = {**live["metadata"], "finalizers": [*finalizers, self.finalizer]}
            self.api.update({**live, "metadata": meta}, status_only=True)

    # --- applying an answer ----------------------------------------------------------

    def _apply(self, key: str, parent: Obj, kind: str, answer) -> None:
        if answer.status != 200:
            self.errors += 1
            if answer.status == 429:
                delay = float(answer.headers.get("Retry-After", "0") or 0)
            else:
                n = self._failures.get(key, 0)
                self._failures[key] = n + 1
                delay = min(0.005 * 2**n, 1000.0)
            self.schedule(delay, lambda: self.enqueue(key))
            return
        self._failures.pop(key, None)
        body = answer.body
        self._manage_children(parent, body.get("children") or [])
        self._write_status(key, parent, body.get("status"))
        resync = body.get("resyncAfterSeconds")
        if isinstance(resync, int | float) and resync > 0:
            self.schedule(float(resync), lambda: self.enqueue(key))
        if kind == "finalize" and body.get("finalized"):
            self._remove_finalizer(key, parent)

    def _manage_children(self, parent: Obj, desired: Sequence[Mapping[str, Any]]) -> None:
        meta = parent["metadata"]
        wanted: dict[tuple[str, str], Mapping[str, Any]] = {}
        for child in desired:
            cmeta = {"namespace": meta.get("namespace"), **child["metadata"]}
            labels = {**(cmeta.get("labels") or {})}
            if self.controller["spec"].get("generateSelector"):
                labels["controller-uid"] = meta["uid"]
            cmeta["labels"] = labels
            cmeta["ownerReferences"] = [
                {
                    "apiVersion": parent["apiVersion"],
                    "kind": parent["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
            obj = {**child, "metadata": cmeta}
            wanted[(type_key(obj), object_key(obj))] = obj
        owned = self._owned.get(meta["uid"], {})
        for tkey in self.child_tkeys:
            for ckey in sorted(owned.get(tkey, ())):
                observed = self.view.get(tkey, ckey)
                if observed is None or (tkey, ckey) in wanted:
                    continue
                if observed["metadata"].get("deletionTimestamp"):
                    continue
                with contextlib.suppress(Conflict):
                    self.api.delete(tkey, ckey, uid=observed["metadata"]["uid"])
        for (tkey, ckey), obj in wanted.items():
            if self.view.get(tkey, ckey) is not None:
                continue  # OnDelete: never updated in place
            with contextlib.suppress(Conflict):  # AlreadyExists: the view was stale
                self.api.create(obj)

    def _write_status(self, key: str, parent: Obj, status: Any) -> None:
        live = self.api.get(self.parent_tkey, key)
        if live is None or live["metadata"]["uid"] != parent["metadata"]["uid"]:
            return
        new = dict(status or {})
        new["observedGeneration"] = live["metadata"].get("generation", 0)
        if new != live.get("status"):
            self.api.patch(self.parent_tkey, key, status=new)

    def _remove_finalizer(self, key: str, parent: Obj) -> None:
        live = self.api.get(self.parent_tkey, key)
        if live is None or live["metadata"]["uid"] != parent["metadata"]["uid"]:
            return
        finalizers = [f for f in live["metadata"].get("finalizers") or () if f != self.finalizer]
        if finalizers:
            self.api.update({**live, "metadata": {**live["metadata"], "finalizers": finalizers}})
        else:
            self.api.remove(self.parent_tkey, key)
