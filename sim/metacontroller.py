"""Metacontroller, as documented (metacontroller-contract.md §1-3, pools-and-backends.md §1).

One :class:`Controller` per CompositeController (``metacontroller/*.yaml``), all sharing one
informer view (:class:`View`, which may lag the API server) and one webhook, as one
Metacontroller process hosts them:

* **Workqueue** (client-go's): each controller has its own queue and ``workers``. A key is
  never processed concurrently with itself; adds for a queued key collapse into one; an add
  for a key being processed gives exactly one more pass once it is done.
* **Syncs take time.** A sync started at simulated time ``t`` builds its request from the
  view at ``t`` and calls the webhook then (the webhook's clock reads ``t``); its effects
  (child creates, updates and deletes, the status write, ``resyncAfterSeconds``, finalizer
  removal) land at ``t + cost``, and only then is the key done. ``cost`` is
  :class:`SyncCost` of the request's size, or the measured wall time of the call.
* **Triggers**: a parent add or delete, a parent update (with ``ignoreStatusChanges`` only a
  change of generation, labels or annotations, or a deletionTimestamp), a child event
  (ControllerRef), a related object matching the parent's customize rules (old or new
  state; name rules are looked up in an index, selector rules matched), and
  ``resyncAfterSeconds``. Updates that keep the resourceVersion trigger nothing.
* **Customize** answers are cached per (parent uid, generation).
* **Children** are keyed ``namespace/name`` (cluster-scoped: ``name``). A desired child
  must be of a declared child type; a namespaced child of a cluster-scoped parent must name
  its namespace (a namespaced parent's children default to its own); with
  ``generateSelector`` each gets the ``controller-uid`` label. An answer that breaks these
  rules is a sync error and nothing of it is applied. Observed children (those of the
  request) left out are deleted (uid precondition); missing ones are created
  (AlreadyExists ignored) with a controller ownerReference; an observed child that differs
  is left alone (``OnDelete``), updated (``InPlace``: a PUT of the cached copy, so a 409 if
  it changed since, ignored), or deleted (``Recreate``).
* **Status** is replaced after a live read, with ``observedGeneration`` (the synced
  parent's generation), and not written when unchanged. The finalizer is added before the
  first sync of a controller with a finalize hook; a deleted parent gets finalize calls
  until it answers ``finalized: true``.
* **API requests cost time** (:class:`Client`; Metacontroller v4.17.2,
  ``pkg/cmd/metacontroller/main.go``, ``pkg/dynamic/clientset/clientset.go``): one
  client-go client per process, shared by every controller, takes a token of a
  ``--client-go-qps`` / ``--client-go-burst`` bucket (5 / 10) per request. A sync's
  writes go one request at a time after its answer
  (``pkg/controller/common/manage_children.go``: deletes, then creates and updates),
  then ``AtomicStatusUpdate``: a live GET of the parent, and an ``UpdateStatus`` only
  when the status (with ``observedGeneration``) differs from the live one (a 409 reads
  it again: ``RetryOnConflict``). The key is done when its last request is. Adding or
  removing the finalizer is a GET and an update.
* **Customize is charged and expires** (``pkg/controller/common/customize/manager.go``):
  its answer is cached per (uid, generation) for ``customize_ttl_s`` (20 min) from when it
  was called. A related object's event walks every parent of the controller and calls
  customize, inside the informer's event handler, for each whose answer expired; the
  parents it finds are enqueued only once those calls are done, and a parent whose call
  failed is dropped from that trigger.
* **Periodic resync**: every parent is enqueued every ``--cache-flush-interval`` (30 min).
* **Children carry what the apply strategy stamps**: ``dynamic-apply`` (the default,
  ``pkg/dynamic/apply/apply.go``) writes the child as answered into its
  ``metacontroller.k8s.io/last-applied-configuration`` annotation before the owner
  reference is added; ``server-side-apply`` does not.
* **Errors**: a non-200 answer changes nothing; the key is retried after ``Retry-After``
  (429) or client-go's per-item exponential backoff (5 ms doubling, at most 1000 s).
  Delayed adds (these and ``resyncAfterSeconds``) keep one waiting entry per key, the
  soonest, as client-go's delaying queue does.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import orjson

from policy.model.kinds import KINDS
from sim.apiserver import ApiServer, Conflict, Obj, object_key, type_key
from sim.webhook import HookResponse, WebhookClient

Schedule = Callable[[float, Callable[[], None]], None]
Handler = Callable[[str, Obj | None, Obj | None], None]
HookKind = Literal["sync", "finalize"]
Desired = dict[tuple[str, str], dict[str, Any]]  # (type key, key) -> a desired child
Observed = dict[tuple[str, str], Obj]  # (type key, key) -> a child in a sync's request
_Made = dict[bytes, dict[str, Any]]  # an answered child's JSON -> the child placed

# plural resource -> (Kind, namespaced): what API discovery tells Metacontroller.
RESOURCES: dict[str, tuple[str, bool]] = {
    "pods": ("Pod", True),
    "services": ("Service", True),
    "configmaps": ("ConfigMap", True),
    "deployments": ("Deployment", True),
    "nodes": ("Node", False),
    "namespaces": ("Namespace", False),
    "priorityclasses": ("PriorityClass", False),
    **{k.plural: (k.kind, True) for k in KINDS},
    "trainingpools": ("TrainingPool", False),
    "admissions": ("Admission", True),
    "podgroups": ("PodGroup", True),  # kube-batch's, Volcano's, scheduler-plugins'
    "migrations": ("Migration", True),
    "sharepods": ("SharePod", True),  # KubeShare v1
}
UPDATE_METHODS = ("OnDelete", "InPlace", "Recreate")
BACKOFF_BASE_S, BACKOFF_MAX_S = 0.005, 1000.0
LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"
ApplyStrategy = Literal["dynamic-apply", "server-side-apply"]
Verb = Literal["get", "create", "update", "update_status", "delete"]
WRITES: tuple[Verb, ...] = ("create", "update", "update_status", "delete")
# One API request of a sync: its verb, and what it does when its token comes (it may return
# the request that must follow it, as AtomicStatusUpdate's GET returns its UpdateStatus).
Request = tuple[Verb, Callable[[], "Request | None"]]


@dataclass(frozen=True)
class Costs:
    """What one Metacontroller process charges, and its flags (v4.17.2's defaults:
    ``pkg/cmd/metacontroller/main.go``, ``customize/manager.go``'s ``newResponseCache``).
    :data:`COST_FREE` is the simulator's old behaviour: writes free and instant, one
    worker, no resync, customize answers that never expire and cost nothing."""

    qps: float = 5.0  # --client-go-qps (0: no limit)
    burst: int = 10  # --client-go-burst
    workers: int = 5  # --workers, per controller
    resync_s: float = 1800.0  # --cache-flush-interval (0: never)
    customize_ttl_s: float = 1200.0  # the customize cache's expiry (0: never)
    apply_strategy: ApplyStrategy = "dynamic-apply"  # --apply-strategy
    charged: bool = True  # API requests take tokens and time; customize calls take time


COST_FREE = Costs(
    qps=0.0,
    workers=1,
    resync_s=0.0,
    customize_ttl_s=0.0,
    apply_strategy="server-side-apply",  # children without the last-applied copy, as before
    charged=False,
)


class Client:
    """Metacontroller's one client-go client: each request takes a token of a bucket of
    ``burst`` tokens refilled at ``qps`` (client-go's ``NewTokenBucketRateLimiter``,
    golang.org/x/time/rate: a request reserves the next token, waiting until it exists).
    Requests of one sync go one at a time; syncs of every controller interleave."""

    def __init__(self, schedule: Schedule, clock: Callable[[], float], costs: Costs) -> None:
        self.schedule, self.clock, self.costs = schedule, clock, costs
        self._tokens, self._last = float(costs.burst), 0.0
        self.requests: dict[str, int] = dict.fromkeys(("get", *WRITES), 0)
        self.write_latencies_s: list[float] = []  # decision (sync start) -> write, each
        self.sent: list[tuple[float, Verb]] = []  # (when, verb) of every request
        self.decision_s: float | None = None  # the decision of the write being made

    def ready_at(self, now: float) -> float:
        """When the next request may go (and reserve its token)."""
        qps = self.costs.qps
        if not self.costs.charged or qps <= 0:
            return now
        tokens = min(float(self.costs.burst), self._tokens + (now - self._last) * qps) - 1
        self._tokens, self._last = tokens, now
        return now if tokens >= 0 else now - tokens / qps

    def run(self, requests: Sequence[Request], decided_s: float, done: Callable[[], None]) -> None:
        """Send ``requests`` in order, each when its token comes, then call ``done``."""
        pending = deque(requests)

        def send() -> None:
            while pending:
                now = self.clock()
                at = self.ready_at(now)
                if at > now:
                    self.schedule(at - now, lambda: go(pending.popleft()))
                    return
                go(pending.popleft(), loop=True)
            done()

        def go(request: Request, loop: bool = False) -> None:
            verb, act = request
            self.requests[verb] += 1
            self.sent.append((self.clock(), verb))
            if verb != "get":
                self.write_latencies_s.append(self.clock() - decided_s)
            self.decision_s = decided_s
            try:
                follow = act()
            finally:
                self.decision_s = None
            if follow is not None:
                pending.appendleft(follow)
            if not loop:
                send()

        send()

    def charge(self, verbs: Sequence[Verb]) -> float:
        """Reserve requests made at once now (the finalizer's GET and update before a
        sync): how long the caller waits for them."""
        now = self.clock()
        at = now
        for verb in verbs:
            self.requests[verb] += 1
            at = self.ready_at(now)
            self.sent.append((at, verb))
            if verb != "get":
                self.write_latencies_s.append(at - now)
        return at - now


def resource_type(api_version: str, resource: str) -> tuple[str, bool]:
    """The v2 type key (``Kind.apiVersion``) of a resource, and whether it is namespaced."""
    if resource not in RESOURCES:
        raise KeyError(f"unknown resource {resource!r} ({api_version})")
    kind, namespaced = RESOURCES[resource]
    return f"{kind}.{api_version}", namespaced


class View:
    """Metacontroller's informer caches: the API server's objects, ``delay_s`` late."""

    def __init__(self, api: ApiServer, schedule: Schedule, delay_s: float = 0.0) -> None:
        self.api = api
        self.delay_s = delay_s
        self.handlers: list[Handler] = []
        self.objects: dict[str, dict[str, Obj]] = api.objects if delay_s <= 0 else {}
        self._schedule = schedule
        # (type key, key) -> (object, its JSON map entry): what requests are assembled from
        self._entries: dict[tuple[str, str], tuple[Obj, bytes]] = {}
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
        if new is None and old is not None:
            self._entries.pop((tkey, object_key(old)), None)
        for h in self.handlers:
            h(tkey, old, new)

    def get(self, tkey: str, key: str) -> Obj | None:
        return self.objects.get(tkey, {}).get(key)

    def values(self, tkey: str) -> Iterable[Obj]:
        return self.objects.get(tkey, {}).values()

    def entry(self, tkey: str, key: str) -> tuple[Obj, bytes] | None:
        """The object at ``key`` and its request map entry (``"key":{...}``), encoded once
        per stored object: objects are never mutated, so the same dict has the same bytes."""
        obj = self.objects.get(tkey, {}).get(key)
        if obj is None:
            return None
        hit = self._entries.get((tkey, key))
        if hit is None or hit[0] is not obj:
            hit = (obj, _j(key) + b":" + self.api.serialized(obj))
            self._entries[(tkey, key)] = hit
        return hit


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
    """One related-resource rule of a customize answer."""

    tkey: str
    namespaced: bool  # the related type
    selector: Mapping[str, Any] = field(hash=False, compare=False)
    selector_key: bytes  # the selector's canonical JSON: rules compare and hash by it
    namespace: str | None
    names: tuple[str, ...]

    @property
    def direct(self) -> bool:
        """Answered by looking the names up, not by scanning the type."""
        return bool(self.names) and (self.namespace is not None or not self.namespaced)

    def lookup_keys(self) -> list[str]:
        ns = self.namespace if self.namespaced else None
        return [f"{ns}/{n}" if ns else n for n in self.names]

    def matches(self, obj: Obj) -> bool:
        meta = obj["metadata"]
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if self.names:
            return meta["name"] in self.names
        return selector_matches(self.selector, meta.get("labels") or {})


def _rule(raw: Mapping[str, Any], parent: Obj) -> Rule:
    tkey, namespaced = resource_type(raw["apiVersion"], raw["resource"])
    selector = raw.get("labelSelector") or {}
    names = tuple(raw.get("names") or ())
    namespace = raw.get("namespace") or None
    if names and namespace is None and namespaced:
        # A name rule of a namespaced parent looks in the parent's namespace.
        namespace = parent["metadata"].get("namespace") or None
    return Rule(
        tkey=tkey,
        namespaced=namespaced,
        selector=selector,
        selector_key=orjson.dumps(selector, option=orjson.OPT_SORT_KEYS),
        namespace=namespace,
        names=names,
    )


def _hook_path(webhook: Mapping[str, Any]) -> str:
    """The HTTP path of a hook (``url``, or ``service`` + ``path``)."""
    url = webhook.get("url")
    return urlsplit(url).path if url else webhook["path"]


def _j(value: Any) -> bytes:
    return orjson.dumps(value)


def _separated(items: Sequence[bytes]) -> list[bytes]:
    """``items`` with a comma between each two (list slicing: no loop in Python)."""
    if not items:
        return []
    out = [b","] * (2 * len(items) - 1)
    out[::2] = items
    return out


def _type_map(tkey: str, entries: Sequence[bytes]) -> list[bytes]:
    """One type's entry of a ``children`` or ``related`` map, ``"Kind.v1":{...}``, as pieces
    (:func:`_pieces`): the objects' cached bytes are copied once, by the request's join."""
    return [_j(tkey) + b":{", *_separated(entries), b"}"]


def _pieces(members: Sequence[Sequence[bytes]]) -> list[bytes]:
    """The JSON object of these members (each ``"key":value``, as pieces), as pieces for
    the request's one join: a request can be hundreds of KiB, and each concatenation would
    copy it again."""
    pieces = [b"{"]
    for m in members:
        pieces += m
        pieces.append(b",")
    if members:
        pieces.pop()
    pieces.append(b"}")
    return pieces


class _RelatedSet:
    """The related objects of one rule set with selector rules (a pool's: every Dragonet
    pod and job), followed from the view's events, so a sync joins cached bytes instead of
    matching every object of each related type. Each type's map is rebuilt only after one
    of its objects changed, re-encoding only those. Shared by the parents with these rules."""

    def __init__(self, rules: tuple[Rule, ...], view: View) -> None:
        self.view = view
        self.parents: set[str] = set()
        # type key -> its rules, in the order the types first appear (the map's order)
        self.rules_of: dict[str, tuple[Rule, ...]] = {}
        for r in rules:
            self.rules_of[r.tkey] = (*self.rules_of.get(r.tkey, ()), r)
        self._names = {r: frozenset(r.lookup_keys()) for r in rules if r.direct}
        # type key -> member key -> its map entry; keys changed since: to encode again
        self._members: dict[str, dict[str, bytes]] = {t: {} for t in self.rules_of}
        self._changed: dict[str, set[str]] = {t: set() for t in self.rules_of}
        self._order: dict[str, list[str]] = {}  # type key -> sorted member keys
        self._maps: dict[str, list[bytes]] = {}  # type key -> its map, while none changed
        self._pieces: list[bytes] | None = None
        for tkey in self.rules_of:
            for key in list(view.objects.get(tkey, {})):
                self.update(tkey, key)

    def _wants(self, tkey: str, key: str, obj: Obj) -> bool:
        # A name rule Metacontroller answers by lookup holds exactly the objects stored
        # under its keys; any other rule is matched.
        return any(
            key in self._names[r] if r.direct else r.matches(obj) for r in self.rules_of[tkey]
        )

    def update(self, tkey: str, key: str) -> None:
        """Follow a change at ``key``: membership mirrors the view's current object (so
        events delivered out of order still end in the right state)."""
        obj = self.view.get(tkey, key)
        members = self._members[tkey]
        if obj is not None and self._wants(tkey, key, obj):
            if key not in members:
                members[key] = b""
                self._order.pop(tkey, None)
            self._changed[tkey].add(key)
        elif key in members:
            del members[key]
            self._changed[tkey].discard(key)
            self._order.pop(tkey, None)
        else:
            return  # not related before or now: nothing of the request changed
        self._maps.pop(tkey, None)
        self._pieces = None

    def _map(self, tkey: str) -> list[bytes]:
        members = self._members[tkey]
        order = self._order.get(tkey)
        if order is None:
            order = self._order[tkey] = sorted(members)
        changed = self._changed[tkey]
        for key in changed:
            hit = self.view.entry(tkey, key)
            assert hit is not None  # members mirror the view
            members[key] = hit[1]
        changed.clear()
        return _type_map(tkey, [members[k] for k in order])

    def pieces(self) -> list[bytes]:
        """The request's ``related`` map (:func:`_pieces`)."""
        if self._pieces is None:
            maps = []
            for tkey in self.rules_of:
                part = self._maps.get(tkey)
                if part is None:
                    part = self._maps[tkey] = self._map(tkey)
                maps.append(part)
            self._pieces = _pieces(maps)
        return self._pieces


def _owner_uid(obj: Obj | None) -> str | None:
    if obj is None:
        return None
    for ref in obj["metadata"].get("ownerReferences") or ():
        if ref.get("controller"):
            return ref.get("uid")
    return None


def _same_version(old: Obj | None, new: Obj | None) -> bool:
    return (
        old is not None
        and new is not None
        and old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion")
    )


def _meaningful_parent_change(old: Obj | None, new: Obj) -> bool:
    """``ignoreStatusChanges``: what still enqueues a parent on update (controller.go's
    updateParentObject)."""
    if old is None:
        return True
    om, nm = old["metadata"], new["metadata"]
    return (
        om.get("generation") != nm.get("generation")
        or (om.get("labels") or {}) != (nm.get("labels") or {})
        or (om.get("annotations") or {}) != (nm.get("annotations") or {})
        or bool(nm.get("deletionTimestamp"))
    )


def _merged(observed: Obj, desired: Obj) -> Obj | None:
    """The object an in-place update writes, or None when nothing differs. Metacontroller's
    dynamic-apply is a 3-way merge; every field we return is ours, so it replaces labels,
    annotations and every top-level field but metadata and status."""
    om, dm = observed["metadata"], desired["metadata"]
    top_o = {k: v for k, v in observed.items() if k not in ("metadata", "status")}
    top_d = {k: v for k, v in desired.items() if k not in ("metadata", "status")}
    labels, annotations = dm.get("labels") or {}, dm.get("annotations") or {}
    if (
        top_o == top_d
        and (om.get("labels") or {}) == labels
        and (om.get("annotations") or {}) == annotations
    ):
        return None
    meta = {**om, "labels": labels}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    new: dict[str, Any] = {**top_d, "metadata": meta}
    if "status" in observed:
        new["status"] = observed["status"]
    return new


@dataclass(frozen=True)
class SyncCost:
    """Simulated time one hook call takes: ``base_ms + per_kib_ms * request KiB``."""

    base_ms: float
    per_kib_ms: float

    def seconds(self, request_bytes: int) -> float:
        return (self.base_ms + self.per_kib_ms * request_bytes / 1024) / 1000


class HotLoop(RuntimeError):
    """A parent synced more often than ``max_syncs_per_second`` within one simulated second."""


class InvalidAnswer(ValueError):
    """A 200 answer Metacontroller refuses to apply (a child it cannot place)."""


@dataclass
class _Sync:
    """One sync in flight: what it saw at its start, and the webhook's answer."""

    key: str
    parent: Obj
    kind: HookKind
    observed: Observed
    answer: HookResponse
    started_s: float  # when the webhook decided (its clock)


@dataclass
class _ChildType:
    namespaced: bool
    method: str


class Controller:
    """One CompositeController: its workqueue and workers, customize cache, children."""

    def __init__(
        self,
        controller: Mapping[str, Any],
        api: ApiServer,
        view: View,
        webhook: WebhookClient,
        schedule: Schedule,
        *,
        workers: int = 1,
        cost: SyncCost | None = None,
        max_syncs_per_second: int = 0,
        client: Client | None = None,
        costs: Costs = COST_FREE,
    ) -> None:
        self.controller = controller
        self.costs = costs
        self.client = client or Client(schedule, api.clock, costs)
        self.name: str = controller["metadata"]["name"]
        self.api, self.view, self.webhook, self.schedule = api, view, webhook, schedule
        self.workers = max(int(workers), 1)
        self.cost = cost  # None: charge the measured wall time of each call
        self.max_syncs_per_second = max_syncs_per_second
        spec = controller["spec"]
        parent = spec["parentResource"]
        self.parent_tkey, self.parent_namespaced = resource_type(
            parent["apiVersion"], parent["resource"]
        )
        self.parent_kind = self.parent_tkey.split(".", 1)[0]
        self.ignore_status_changes = bool(parent.get("ignoreStatusChanges"))
        # parentResource.labelSelector (absent: every parent): a parent it does not match,
        # without the controller's finalizer, is never synced (controller.go,
        # enqueueParentObject and syncParentObject).
        self.parent_selector: Mapping[str, Any] | None = parent.get("labelSelector")
        self.generate_selector = bool(spec.get("generateSelector"))
        self.child_types: dict[str, _ChildType] = {}
        for c in spec.get("childResources") or ():
            tkey, namespaced = resource_type(c["apiVersion"], c["resource"])
            method = (c.get("updateStrategy") or {}).get("method") or "OnDelete"
            if method not in UPDATE_METHODS:
                raise ValueError(f"{self.name}: update strategy {method} is not simulated")
            self.child_types[tkey] = _ChildType(namespaced, method)
        self.finalizer = f"metacontroller.io/compositecontroller-{self.name}"
        hooks = spec["hooks"]
        self.paths = {name: _hook_path(hooks[name]["webhook"]) for name in hooks}
        self._ctrl = _j(controller)

        # the workqueue
        self.queue: dict[str, None] = {}  # insertion-ordered set: FIFO
        self.processing: set[str] = set()
        self.dirty: set[str] = set()  # added while being processed: one more pass
        self._waiting: dict[str, float] = {}  # AddAfter: key -> when it is added
        # counters
        self.sync_calls = 0  # sync + finalize calls (customize is not counted)
        self.errors = 0  # failed syncs (not 429: Metacontroller does not count those)
        self.throttled = 0  # 429 answers: retried after Retry-After, no error backoff
        self.latencies_s: list[float] = []  # wall time of each sync/finalize call
        self.customize_calls = 0
        # queue depth over simulated time: (max, depth * seconds, since)
        self.depth_max = 0
        self._depth_area, self._depth_since = 0.0, 0.0
        self.busy_s = 0.0  # simulated time charged to hook calls
        self.error_log: list[tuple[float, str, str]] = []  # (t, parent key, why)
        # indexes
        self._parents: dict[str, str] = {}  # uid -> parent key
        self._owned: dict[str, dict[str, set[str]]] = {}  # parent uid -> type -> child keys
        # uid -> (generation, rules, when customize answered them)
        self._customized: dict[str, tuple[int, tuple[Rule, ...], float]] = {}
        self._expires = float("inf")  # the soonest a cached customize answer expires
        self._handler_free = 0.0  # when the related informers' event handler is free
        self._rules_of: dict[str, tuple[Rule, ...]] = {}  # parent key -> registered rules
        self._groups: dict[tuple[Rule, ...], set[str]] = {}  # selector rules -> parents
        self._by_name: dict[tuple[str, str | None, str], set[str]] = {}  # name rules
        self._related_types: set[str] = set()  # informers started for related types
        self._related: dict[tuple[Rule, ...], _RelatedSet] = {}  # rules with selectors
        self._failures: dict[str, int] = {}
        self._starts: dict[str, deque[float]] = {}
        # Memos by identity (objects are never mutated, and the webhook client hands back
        # the same body for an answer the same as the last one), which make a pool's sync
        # that changes nothing cheap:
        # parent uid -> its request's children map and the objects in it (_children);
        self._children_of: dict[str, tuple[list[bytes], Observed]] = {}
        # parent key -> (children answered, what of the parent they depend on, desired, its
        # in-place children by their answered JSON);
        self._wanted: dict[str, tuple[Sequence[Any], tuple[Any, ...], Desired, _Made]] = {}
        # parent key -> the observed and desired children of its last sync, if they needed
        # no write: the same two again need none either.
        self._settled: dict[str, tuple[Observed, Desired]] = {}
        # parent key -> its children that its last sync found as desired (observed, desired):
        # the same two objects again need no diff (_merged) either.
        self._alike: dict[str, dict[tuple[str, str], tuple[Obj, Obj]]] = {}

        view.handlers.append(self._on_change)
        for obj in view.values(self.parent_tkey):
            if self._selects(obj):
                self._parents[obj["metadata"]["uid"]] = object_key(obj)
        for tkey in self.child_types:
            for obj in view.values(tkey):
                self._index(tkey, None, obj)

    # --- the workqueue -----------------------------------------------------------------

    def enqueue(self, key: str) -> None:
        if key in self.processing:
            self.dirty.add(key)
        elif key not in self.queue:
            self._depth()
            self.queue[key] = None
            self.depth_max = max(self.depth_max, len(self.queue))

    def _depth(self) -> None:
        """Account the queue's depth until now (before it changes)."""
        now = self.api.clock()
        self._depth_area += len(self.queue) * (now - self._depth_since)
        self._depth_since = now

    def mean_depth(self, until: float) -> float:
        """The queue's time-weighted mean depth from 0 to ``until``."""
        area = self._depth_area + len(self.queue) * (until - self._depth_since)
        return area / until if until > 0 else 0.0

    def enqueue_after(self, delay_s: float, key: str) -> None:
        """client-go's AddAfter: a key waits once, for the soonest time it was asked for."""
        if delay_s <= 0:
            self.enqueue(key)
            return
        ready = self.api.clock() + delay_s
        if self._waiting.get(key, float("inf")) <= ready:
            return
        self._waiting[key] = ready

        def fire() -> None:
            if self._waiting.get(key) == ready:
                del self._waiting[key]
                self.enqueue(key)

        self.schedule(delay_s, fire)

    def _done(self, key: str) -> None:
        self.processing.discard(key)
        if key in self.dirty:
            self.dirty.discard(key)
            self._depth()
            self.queue[key] = None
            self.depth_max = max(self.depth_max, len(self.queue))

    @property
    def idle(self) -> bool:
        return not self.queue and not self.processing

    def start_syncs(self) -> int:
        """Hand queued keys to free workers; returns how many keys were taken."""
        taken = 0
        while self.queue and len(self.processing) < self.workers:
            key = next(iter(self.queue))
            self._depth()
            del self.queue[key]
            self.processing.add(key)
            taken += 1
            self._start(key)
        return taken

    # --- triggers ----------------------------------------------------------------------

    def _index(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        for obj, add in ((old, False), (new, True)):
            uid = _owner_uid(obj)
            if uid is None:
                continue
            keys = self._owned.setdefault(uid, {}).setdefault(tkey, set())
            (keys.add if add else keys.discard)(object_key(obj))

    def _on_change(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == self.parent_tkey:
            self._on_parent(old, new)
        if tkey in self.child_types:
            self._on_child(tkey, old, new)
        if self._related:
            key = object_key(new if new is not None else old)
            for related in self._related.values():
                if tkey in related.rules_of:
                    related.update(tkey, key)
        if tkey in self._related_types and not _same_version(old, new):
            delay, failed = self._customize_expired()
            for p in sorted(self._related_parents(tkey, old, new) - failed):
                self.enqueue_after(delay, p)

    def _customize_expired(self) -> tuple[float, set[str]]:
        """``findRelatedParents``: customize every parent whose cached answer expired, in
        the informer's event handler (one at a time: later events wait for it). How long
        until the handler is done, and the parents whose call failed (that trigger is
        dropped for them)."""
        now = self.api.clock()
        failed: set[str] = set()
        if self.costs.customize_ttl_s > 0 and now >= self._expires:
            spent = 0.0
            for key in sorted(self._parents.values()):
                parent = self.view.get(self.parent_tkey, key)
                if parent is None or self._cached_rules(parent) is not None:
                    continue
                rules, cost, _ = self._customize(parent)
                spent += cost
                if rules is None:
                    failed.add(key)
                else:
                    self._register(key, rules)
            ttl = self.costs.customize_ttl_s
            self._expires = min((t + ttl for *_, t in self._customized.values()), default=now + ttl)
            if self.costs.charged:
                self._handler_free = max(self._handler_free, now) + spent
        return max(self._handler_free - now, 0.0), failed

    def _on_parent(self, old: Obj | None, new: Obj | None) -> None:
        if new is None:
            assert old is not None
            key = object_key(old)
            self._forget(old)
            self.enqueue(key)  # the sync finds it gone and does nothing
            return
        key = object_key(new)
        if not self._selects(new):
            if old is not None and self._selects(old):
                self._forget(old)
            return
        self._parents[new["metadata"]["uid"]] = key
        quiet = self.ignore_status_changes and not _meaningful_parent_change(old, new)
        if old is None or not quiet:
            self.enqueue(key)

    def _on_child(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        for obj in (old, new):
            uid = _owner_uid(obj)
            if uid is not None:
                self._children_of.pop(uid, None)
        if _same_version(old, new):
            return
        self._index(tkey, old, new)
        uid = _owner_uid(new) or _owner_uid(old)
        parent = None if uid is None else self._parents.get(uid)
        if parent is not None:
            self.enqueue(parent)

    def _selects(self, parent: Obj) -> bool:
        """The parent is this controller's: it matches ``parentResource.labelSelector``, or
        it still carries the controller's finalizer."""
        meta = parent["metadata"]
        return (
            self.parent_selector is None
            or selector_matches(self.parent_selector, meta.get("labels") or {})
            or self.finalizer in (meta.get("finalizers") or ())
        )

    def _related_parents(self, tkey: str, old: Obj | None, new: Obj | None) -> set[str]:
        parents: set[str] = set()
        for obj in (old, new):
            if obj is None:
                continue
            meta = obj["metadata"]
            for ns in {meta.get("namespace"), None}:
                parents |= self._by_name.get((tkey, ns, meta["name"]), set())
        for rules, members in self._groups.items():
            if any(
                r.tkey == tkey and any(o is not None and r.matches(o) for o in (old, new))
                for r in rules
            ):
                parents |= members
        return parents

    def _register(self, key: str, rules: tuple[Rule, ...]) -> None:
        if self._rules_of.get(key) == rules:
            return
        self._unregister(key)
        self._rules_of[key] = rules
        selecting = tuple(r for r in rules if not r.names)
        if selecting:
            self._groups.setdefault(selecting, set()).add(key)
            related = self._related.get(rules)
            if related is None:
                related = self._related[rules] = _RelatedSet(rules, self.view)
            related.parents.add(key)
        for r in rules:
            for n in r.names:
                self._by_name.setdefault((r.tkey, r.namespace, n), set()).add(key)
        self._related_types.update(r.tkey for r in rules)

    def _unregister(self, key: str) -> None:
        rules = self._rules_of.pop(key, None)
        if rules is None:
            return
        related = self._related.get(rules)
        if related is not None:
            related.parents.discard(key)
            if not related.parents:
                del self._related[rules]
        selecting = tuple(r for r in rules if not r.names)
        members = self._groups.get(selecting)
        if members is not None:
            members.discard(key)
            if not members:
                del self._groups[selecting]
        for r in rules:
            for n in r.names:
                index = (r.tkey, r.namespace, n)
                parents = self._by_name.get(index)
                if parents is not None:
                    parents.discard(key)
                    if not parents:
                        del self._by_name[index]

    def parent_keys(self) -> list[str]:
        """Every parent the informer holds."""
        return list(self._parents.values())

    def _forget(self, parent: Obj) -> None:
        meta = parent["metadata"]
        key = object_key(parent)
        if self._parents.get(meta["uid"]) == key:
            del self._parents[meta["uid"]]
        self._customized.pop(meta["uid"], None)
        self._unregister(key)
        self._failures.pop(key, None)
        self._starts.pop(key, None)
        self._wanted.pop(key, None)
        self._settled.pop(key, None)
        self._alike.pop(key, None)
        self._children_of.pop(meta["uid"], None)

    # --- starting a sync ---------------------------------------------------------------

    def _charge(self, request_bytes: int, answer: HookResponse) -> float:
        cost = answer.elapsed_s if self.cost is None else self.cost.seconds(request_bytes)
        self.busy_s += cost
        return cost

    def _guard(self, key: str, now: float) -> None:
        limit = self.max_syncs_per_second
        if limit <= 0:
            return
        times = self._starts.get(key)
        if times is None:
            times = self._starts[key] = deque(maxlen=limit)
        if len(times) == limit and now - times[0] < 1.0:
            raise HotLoop(
                f"{self.name}: {key} synced more than {limit} times within one simulated "
                "second (a status or a child that never settles?)"
            )
        times.append(now)

    def _start(self, key: str) -> None:
        parent = self.view.get(self.parent_tkey, key)
        if parent is None:
            self._done(key)  # deleted: nothing to do
            return
        meta = parent["metadata"]
        finalizing = bool(meta.get("deletionTimestamp"))
        if not self._selects(parent) or (
            finalizing and self.finalizer not in (meta.get("finalizers") or ())
        ):
            self._done(key)
            return
        started = self.api.clock()
        self._guard(key, started)
        cost = 0.0
        if not finalizing and self._ensure_finalizer(key):
            cost += self.client.charge(("get", "update"))
        rules = self._cached_rules(parent)
        if rules is None:
            rules, spent, failure = self._customize(parent)
            cost += spent
            if failure is not None:
                answer, why = failure
                self.schedule(cost, lambda: self._fail(key, answer, why))
                return
            assert rules is not None
        self._register(key, rules)
        children, observed = self._children(parent)
        kind: HookKind = "finalize" if finalizing else "sync"
        body = b"".join(
            [
                b'{"controller":',
                self._ctrl,
                b',"parent":',
                self.api.serialized(parent),
                b',"children":',
                *children,
                b',"related":',
                *self._related_pieces(rules),
                b',"finalizing":',
                b"true" if finalizing else b"false",
                b"}",
            ]
        )
        answer = self.webhook.post(self.paths[kind], body)
        self.sync_calls += 1
        self.latencies_s.append(answer.elapsed_s)
        cost += self._charge(len(body), answer)
        sync = _Sync(key, parent, kind, observed, answer, started)
        self.schedule(cost, lambda: self._finish(sync))

    def _customize(
        self, parent: Obj
    ) -> tuple[tuple[Rule, ...] | None, float, tuple[HookResponse, str] | None]:
        """Call the customize hook: its rules (cached), the simulated time it took, and on
        failure the answer and why."""
        body = b'{"controller":' + self._ctrl + b',"parent":' + _j(parent) + b"}"
        answer = self.webhook.post(self.paths["customize"], body, measure=False)
        self.customize_calls += 1
        cost = self._charge(len(body), answer)
        try:
            return self._parse_rules(parent, answer), cost, None
        except (InvalidAnswer, KeyError, TypeError) as err:
            return None, cost, (answer, f"customize: {err}")

    def _cached_rules(self, parent: Obj) -> tuple[Rule, ...] | None:
        meta = parent["metadata"]
        hit = self._customized.get(meta["uid"])
        if hit is None or hit[0] != int(meta.get("generation", 0)):
            return None
        ttl = self.costs.customize_ttl_s
        if ttl > 0 and self.api.clock() >= hit[2] + ttl:
            return None
        return hit[1]

    def _parse_rules(self, parent: Obj, answer: HookResponse) -> tuple[Rule, ...]:
        if answer.status != 200 or not isinstance(answer.body, Mapping):
            raise InvalidAnswer(f"HTTP {answer.status}")
        rules = tuple(_rule(r, parent) for r in answer.body.get("relatedResources") or ())
        meta = parent["metadata"]
        now = self.api.clock()
        self._customized[meta["uid"]] = (int(meta.get("generation", 0)), rules, now)
        if self.costs.customize_ttl_s > 0:
            self._expires = min(self._expires, now + self.costs.customize_ttl_s)
        return rules

    def _children(self, parent: Obj) -> tuple[list[bytes], Observed]:
        """The request's ``children`` map (:func:`_pieces`), and the objects in it; kept
        until one of the parent's children changes."""
        uid = parent["metadata"]["uid"]
        hit = self._children_of.get(uid)
        if hit is not None:
            return hit
        owned = self._owned.get(uid, {})
        maps, observed = [], {}
        for tkey in self.child_types:
            entries = []
            for ckey in sorted(owned.get(tkey, ())):
                entry = self.view.entry(tkey, ckey)
                if entry is not None:
                    observed[(tkey, ckey)] = entry[0]
                    entries.append(entry[1])
            maps.append(_type_map(tkey, entries))
        hit = self._children_of[uid] = (_pieces(maps), observed)
        return hit

    def _related_pieces(self, rules: tuple[Rule, ...]) -> list[bytes]:
        """The request's ``related`` map (:func:`_pieces`): kept current for rules with
        selectors, else looked up (name rules: the few objects they name)."""
        related = self._related.get(rules)
        if related is not None:
            return related.pieces()
        by_type: dict[str, set[str]] = {}
        for rule in rules:
            keys = by_type.setdefault(rule.tkey, set())
            stored = self.view.objects.get(rule.tkey, {})
            if rule.direct:
                keys.update(k for k in rule.lookup_keys() if k in stored)
            else:
                keys.update(k for k, obj in stored.items() if rule.matches(obj))
        return _pieces(
            [
                _type_map(tkey, [e[1] for k in sorted(keys) if (e := self.view.entry(tkey, k))])
                for tkey, keys in by_type.items()
            ]
        )

    def _ensure_finalizer(self, key: str) -> bool:
        """Add the finalizer (a GET and an update); whether it had to be added."""
        if "finalize" not in self.paths:
            return False
        live = self.api.get(self.parent_tkey, key)
        if live is None:
            return False
        finalizers = list(live["metadata"].get("finalizers") or ())
        if self.finalizer in finalizers:
            return False
        meta = {**live["metadata"], "finalizers": [*finalizers, self.finalizer]}
        self.api.update({**live, "metadata": meta}, status_only=True)
        return True

    # --- finishing a sync: its effects land ----------------------------------------------

    def _fail(self, key: str, answer: HookResponse, why: str) -> None:
        if answer.status == 429:
            self.throttled += 1
            delay = float(answer.headers.get("Retry-After", "0") or 0)
        else:
            self.errors += 1
            self.error_log.append((self.api.clock(), key, why))
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
            delay = min(BACKOFF_BASE_S * 2**n, BACKOFF_MAX_S)
        self.enqueue_after(delay, key)
        self._done(key)

    def _finish(self, sync: _Sync) -> None:
        key, answer = sync.key, sync.answer
        if answer.status != 200 or not isinstance(answer.body, Mapping):
            self._fail(key, answer, f"{sync.kind} hook answered HTTP {answer.status}")
            return
        body = answer.body
        try:
            desired = self._desired(sync.parent, body.get("children") or [])
        except InvalidAnswer as err:
            self._fail(key, answer, str(err))
            return
        self._failures.pop(key, None)
        resync = body.get("resyncAfterSeconds")
        if isinstance(resync, int | float) and not isinstance(resync, bool) and resync > 0:
            self.enqueue_after(float(resync), key)
        requests: list[Request] = []
        if sync.kind == "finalize" and body.get("finalized") is True:
            requests.append(("get", lambda: self._remove_finalizer(key, sync.parent)))
        requests += self._manage_children(sync, desired)
        status = body.get("status")
        requests.append(("get", lambda: self._write_status(key, sync.parent, status)))
        self.client.run(requests, sync.started_s, lambda: self._done(key))

    def _desired(self, parent: Obj, children: Sequence[Any]) -> Desired:
        """The answer's children as Metacontroller applies them (namespace, labels, owner
        reference), by (type key, key); an :class:`InvalidAnswer` if it breaks the rules."""
        meta = parent["metadata"]
        selector = None if self.generate_selector else (parent.get("spec") or {}).get("selector")
        # all of the parent that the result depends on
        placed = (
            parent["apiVersion"],
            parent["kind"],
            meta["name"],
            meta["uid"],
            meta.get("namespace"),
            selector,
        )
        key = object_key(parent)
        hit = self._wanted.get(key)
        same_parent = hit is not None and hit[1] == placed
        if same_parent and hit[0] is children:
            return hit[2]
        made: _Made = {}
        wanted = self._place(parent, children, selector, hit[3] if same_parent else {}, made)
        self._wanted[key] = (children, placed, wanted, made)
        return wanted

    def _place(
        self, parent: Obj, children: Sequence[Any], selector: Any, before: _Made, made: _Made
    ) -> Desired:
        """Place each child. An in-place child answered as before (the same JSON, for the
        same parent) is the object placed then (``before``): a new answer is parsed anew, and
        sharing the unchanged children's objects with what their last write stored makes
        the diff against them (:func:`_merged`) an identity check. Equal JSON, not equal
        values (``1 == 1.0``), so a reused object writes the same bytes. Every in-place
        child placed goes to ``made``, by its JSON."""
        meta = parent["metadata"]
        ref = {
            "apiVersion": parent["apiVersion"],
            "kind": parent["kind"],
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        if not self.generate_selector and not selector:
            raise InvalidAnswer(".spec.selector must have either matchLabels, matchExpressions")
        wanted: Desired = {}
        for child in children:
            if not (
                isinstance(child, Mapping)
                and isinstance(child.get("metadata"), Mapping)
                and child["metadata"].get("name")
                and child.get("kind")
                and child.get("apiVersion")
            ):
                raise InvalidAnswer("a desired child lacks apiVersion, kind or metadata.name")
            tkey = type_key(child)
            ctype = self.child_types.get(tkey)
            name = child["metadata"]["name"]
            if ctype is None:
                raise InvalidAnswer(f"{tkey} {name} is not a child resource of {self.name}")
            raw = None
            if ctype.method == "InPlace":
                raw = orjson.dumps(child)
                reused = before.get(raw)
                if reused is not None:
                    made[raw] = reused
                    wanted[(tkey, object_key(reused))] = reused
                    continue
            cmeta = dict(child["metadata"])
            if ctype.namespaced and not cmeta.get("namespace"):
                if not meta.get("namespace"):
                    raise InvalidAnswer(
                        f"{tkey} {name}: a child of a cluster-scoped parent must set "
                        "metadata.namespace"
                    )
                cmeta["namespace"] = meta["namespace"]
            labels = dict(cmeta.get("labels") or {})
            if self.generate_selector:
                labels.setdefault("controller-uid", meta["uid"])
                ok = labels["controller-uid"] == meta["uid"]
            else:
                ok = selector_matches(selector, labels)
            if not ok:
                raise InvalidAnswer(f"labels on desired child {tkey} {name} don't match parent")
            cmeta["labels"] = labels
            if self.costs.apply_strategy == "dynamic-apply":
                # SetLastApplied before claimOwnership: the child as answered, labelled.
                applied = orjson.dumps(
                    {**child, "metadata": {**cmeta}}, option=orjson.OPT_SORT_KEYS
                ).decode()
                cmeta["annotations"] = {**(cmeta.get("annotations") or {}), LAST_APPLIED: applied}
            cmeta["ownerReferences"] = [*(cmeta.get("ownerReferences") or ()), ref]
            obj = {**child, "metadata": cmeta}
            wanted[(tkey, object_key(obj))] = obj
            if raw is not None:
                made[raw] = obj
        return wanted

    def _manage_children(self, sync: _Sync, desired: Desired) -> list[Request]:
        """The requests that make the children as answered, one each."""
        settled = self._settled.get(sync.key)
        if settled is not None and settled[0] is sync.observed and settled[1] is desired:
            return []  # what the parent's last sync saw and answered, which needed no write
        alike: dict[tuple[str, str], tuple[Obj, Obj]] = {}
        requests = self._apply_children(
            sync.observed, desired, self._alike.get(sync.key, {}), alike
        )
        self._alike[sync.key] = alike
        if not requests:
            self._settled[sync.key] = (sync.observed, desired)
        return requests

    def _apply_children(
        self,
        observed_children: Observed,
        desired: Desired,
        was_alike: Mapping[tuple[str, str], tuple[Obj, Obj]],
        alike: dict[tuple[str, str], tuple[Obj, Obj]],
    ) -> list[Request]:
        """The requests that delete, create and update children, in that order. Which
        depends on nothing but the two maps (and the constant update strategies). The
        pairs found alike go to ``alike``; those of ``was_alike`` are not diffed again."""
        requests: list[Request] = []
        for tkey, ckey in sorted(observed_children):
            observed = observed_children[(tkey, ckey)]
            if (tkey, ckey) in desired or observed["metadata"].get("deletionTimestamp"):
                continue
            requests.append(("delete", self._deleter(tkey, ckey, observed["metadata"]["uid"])))
        for (tkey, ckey), obj in desired.items():
            observed = observed_children.get((tkey, ckey))
            if observed is None:
                requests.append(("create", self._creator(obj)))
                continue
            method = self.child_types[tkey].method
            if method == "OnDelete" or observed["metadata"].get("deletionTimestamp"):
                continue
            pair = was_alike.get((tkey, ckey))
            if pair is not None and pair[0] is observed and pair[1] is obj:
                alike[(tkey, ckey)] = pair
                continue
            merged = _merged(observed, obj)
            if merged is None:
                alike[(tkey, ckey)] = (observed, obj)
                continue
            rv, uid = observed["metadata"]["resourceVersion"], observed["metadata"]["uid"]
            if method == "InPlace":
                requests.append(("update", self._updater(merged, rv)))
            else:  # Recreate: delete now, create on a later sync once it is gone
                requests.append(("delete", self._deleter(tkey, ckey, uid)))
        return requests

    def _deleter(self, tkey: str, ckey: str, uid: str) -> Callable[[], None]:
        def delete() -> None:
            with contextlib.suppress(Conflict):  # NotFound is a None: also ignored
                self.api.delete(tkey, ckey, uid=uid)

        return delete

    def _creator(self, obj: Obj) -> Callable[[], None]:
        def create() -> None:
            with contextlib.suppress(Conflict):  # AlreadyExists: the view was stale
                self.api.create(obj)

        return create

    def _updater(self, merged: Obj, rv: str) -> Callable[[], None]:
        def update() -> None:
            with contextlib.suppress(Conflict, KeyError):  # retried on the next event
                self.api.update(merged, resource_version=rv)

        return update

    def _write_status(self, key: str, parent: Obj, status: Any) -> Request | None:
        """AtomicStatusUpdate: after the live GET, an UpdateStatus if the status differs."""
        live = self.api.get(self.parent_tkey, key)
        if live is None or live["metadata"]["uid"] != parent["metadata"]["uid"]:
            return None
        new = dict(status) if isinstance(status, Mapping) else {}
        new["observedGeneration"] = parent["metadata"].get("generation", 0)
        if new == live.get("status"):
            return None

        def update_status() -> Request | None:
            # The UpdateStatus of the copy just read: a 409 if it changed since, and then
            # RetryOnConflict reads it again.
            now = self.api.get(self.parent_tkey, key)
            if now is None:
                return None
            if now["metadata"]["resourceVersion"] != rv:
                return ("get", lambda: self._write_status(key, parent, status))
            self.api.patch(self.parent_tkey, key, status=new)
            return None

        rv = live["metadata"]["resourceVersion"]
        return ("update_status", update_status)

    def _remove_finalizer(self, key: str, parent: Obj) -> Request | None:
        """RemoveFinalizer: after the live GET, an update without it."""
        live = self.api.get(self.parent_tkey, key)
        if live is None or live["metadata"]["uid"] != parent["metadata"]["uid"]:
            return None

        def update() -> None:
            live = self.api.get(self.parent_tkey, key)  # RetryOnConflict: the latest copy
            if live is None:
                return
            meta = live["metadata"]
            finalizers = [f for f in meta.get("finalizers") or () if f != self.finalizer]
            if not finalizers and meta.get("deletionTimestamp"):
                self.api.remove(self.parent_tkey, key)
            else:
                meta = {**live["metadata"], "finalizers": finalizers}
                self.api.update({**live, "metadata": meta}, status_only=True)

        return ("update", update)


class Metacontroller:
    """One Metacontroller process: its CompositeControllers (``--workers`` each)."""

    def __init__(self, controllers: Sequence[Controller], client: Client | None = None) -> None:
        self.controllers: dict[str, Controller] = {c.name: c for c in controllers}
        self.client = client

    def start_resync(self, every_s: float, goes_on: Callable[[], bool]) -> None:
        """``--cache-flush-interval``: every ``every_s`` each informer relists, and every
        parent is synced again (while ``goes_on``)."""
        if every_s <= 0 or not self.controllers:
            return
        schedule = next(iter(self.controllers.values())).schedule

        def flush() -> None:
            for c in self.controllers.values():
                for key in sorted(c.parent_keys()):
                    c.enqueue(key)
            if goes_on():
                schedule(every_s, flush)

        schedule(every_s, flush)

    def __getitem__(self, name: str) -> Controller:
        return self.controllers[name]

    def start_syncs(self) -> int:
        """Give every controller's free workers their next keys; how many were taken."""
        return sum(c.start_syncs() for c in self.controllers.values())

    @property
    def idle(self) -> bool:
        return all(c.idle for c in self.controllers.values())

    @property
    def sync_calls(self) -> int:
        return sum(c.sync_calls for c in self.controllers.values())

    @property
    def errors(self) -> int:
        return sum(c.errors for c in self.controllers.values())

    @property
    def throttled(self) -> int:
        return sum(c.throttled for c in self.controllers.values())
