"""Memoised parsing across syncs, keyed by what an object's bytes are.

Every pool sync reads the whole pool (nodes, pods, jobs), and Metacontroller sends the same
objects again and again: one pod changes between two pool syncs, the other thousands do
not. The webhook's shell hands the policy each object of a request as the exact bytes it
arrived in (``Encoded``), decoded only if something reads it; the memo is keyed by those
bytes, so a hit returns what parsing the very same content returned before, and no request
can make its content stand for another's. Nothing here changes a decision: without the
memo every sync computes the same answer, only slower.

Because a hit returns the very object parsed before, what is computed from parsed objects
alone can be memoised by their identity too (``Memo.derive``): a pool's sync then derives
again only what a changed object touches (``policy.pool.view``, a node's free room, an
untouched job's plan and Admission).

What a value depends on is all in its key: the bytes, the objects' identities and plain
values, ``now`` where a value reads it (a job's verdict under a deadline). What a sync
answers at one time is answered again only while it cannot change (``policy.pool.sync``).

Memory is bounded whatever the traffic: a ``Memo`` never holds more than its ``limit``
entries, and ``Memos`` (a process's: one memo per pool, one for the jobs' syncs) holds at
most ``max_entries`` in all, forgetting first the pools synced least recently.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import orjson

T = TypeVar("T")
_MISSING = object()


class Undecodable(ValueError):
    """An object of the request is not JSON any decoder here can read (whoever reads it
    decides: the parent makes the request malformed, a related object is left out)."""


class Encoded(Mapping[str, Any]):
    """One object of a hook request as the JSON bytes it arrived in, decoded on first use."""

    __slots__ = ("_decoded", "raw")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self._decoded: dict[str, Any] | None = None

    def _object(self) -> dict[str, Any]:
        if self._decoded is None:
            try:
                value = orjson.loads(self.raw)
            except orjson.JSONDecodeError as err:  # e.g. nested deeper than JSON decoders go
                raise Undecodable(f"an object of the request cannot be decoded: {err}") from err
            self._decoded = value if isinstance(value, dict) else {}
        return self._decoded

    def __getitem__(self, key: str) -> Any:
        return self._object()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._object())

    def __len__(self) -> int:
        return len(self._object())

    def get(self, key: str, default: Any = None) -> Any:
        return self._object().get(key, default)


def content_key(kind: str, obj: Mapping[str, Any], *extra: Hashable) -> tuple | None:
    """The memo key of an object that arrived as bytes; None (not memoised) otherwise."""
    return (kind, obj.raw, *extra) if isinstance(obj, Encoded) else None


@dataclass
class Memo:
    """Two generations: what the last syncs used survives a ``rotate``, the rest is dropped,
    so memory follows the working set (a pool's objects, old versions gone soon). Never
    more than ``limit`` entries in both: the older generation goes first (0: no memo)."""

    limit: int = 200_000  # entries held at most, both generations together
    current: dict[Hashable, Any] = field(default_factory=dict)
    previous: dict[Hashable, Any] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    used: int = 0  # look-ups since ``begin`` (about the entries one sync needs)
    # The last answer of the one sync this memo serves (a pool's), and what it answered:
    # a sync whose plan-relevant input equals it answers the same (see policy.pool.sync).
    last: Any = None

    def get(self, key: Hashable | None, make: Callable[[], T]) -> T:
        """What ``make`` returned for an equal key (counted: hits and misses are parses)."""
        if key is None or self.limit <= 0:
            return make()
        self.used += 1
        value = self.current.get(key, _MISSING)
        if value is not _MISSING:
            self.hits += 1
            return value  # type: ignore[no-any-return]
        value = self.previous.get(key, _MISSING)
        if value is _MISSING:
            self.misses += 1
            value = make()
        else:
            self.hits += 1
        self._keep(key, value)
        return value  # type: ignore[no-any-return]

    def parsed(
        self,
        kind: str,
        obj: Mapping[str, Any],
        make: Callable[[Any], T],
        name: str | None = None,
    ) -> T:
        """``make(obj)``, once per content (``get`` by ``content_key``, without a closure
        per object: a pool's sync looks up thousands). With the ``name`` the request maps
        the object under, the entry is found by name and kept only while the bytes are
        equal: comparing bytes costs a third of hashing them, and an object's older
        versions leave the memo as it changes."""
        if self.limit <= 0 or type(obj) is not Encoded:
            return make(obj)
        if name is not None:
            return self._named(kind, name, obj.raw, obj, make)
        key = (kind, obj.raw)
        value = self.current.get(key, _MISSING)
        if value is _MISSING:
            return self.get(key, partial(make, obj))
        self.used += 1
        self.hits += 1
        return value  # type: ignore[no-any-return]

    def parsed_all(
        self,
        kind: str,
        objects: Iterable[tuple[str, Any]],
        make: Callable[[Any], T],
        errors: tuple[type[BaseException], ...],
        failed: Callable[[str, BaseException], None],
    ) -> list[T]:
        """``parsed`` of each (name, object) of a request's map, in one loop (a pool's sync
        reads thousands); an entry that is not an object, or whose ``make`` raises one of
        ``errors``, is handed to ``failed`` and left out."""
        out: list[T] = []
        hits = 0
        for name, obj in objects:
            if type(obj) is Encoded and self.limit > 0:
                entry = self.current.get(("named", kind, name), _MISSING)
                if entry is not _MISSING and entry[0] == obj.raw:
                    hits += 1
                    out.append(entry[1])  # type: ignore[index]
                    continue
            try:
                if not isinstance(obj, Mapping):
                    raise TypeError("not an object")
                out.append(self.parsed(kind, obj, make, name))
            except errors as err:
                failed(name, err)
        self.hits += hits
        self.used += hits
        return out

    def _named(
        self, kind: str, name: str, raw: bytes, obj: Mapping[str, Any], make: Callable[[Any], T]
    ) -> T:
        self.used += 1
        key = ("named", kind, name)
        entry = self.current.get(key, _MISSING)
        if entry is not _MISSING and entry[0] == raw:
            self.hits += 1
            return entry[1]  # type: ignore[index, no-any-return]
        entry = self.previous.get(key, _MISSING)
        if entry is not _MISSING and entry[0] == raw:
            self.hits += 1
        else:
            self.misses += 1
            entry = (raw, make(obj))
        self._keep(key, entry)
        return entry[1]  # type: ignore[index, no-any-return]

    def derive(
        self, tag: str, objects: tuple[Any, ...], make: Callable[[], T], *values: Hashable
    ) -> T:
        """A value computed from ``objects`` (compared by identity: most are what this memo
        parsed, the very same object again when their bytes are) and plain ``values``.
        The entry keeps the objects alive, so no other object can take one's id while it
        exists. (Not counted in hits and misses, which count parses.)"""
        if self.limit <= 0:
            return make()
        self.used += 1
        key = (tag, *map(id, objects), *values)
        entry = self.current.get(key, _MISSING)
        if entry is _MISSING:
            entry = self.previous.get(key, _MISSING)
            if entry is _MISSING:
                entry = (objects, make())
            self._keep(key, entry)
        return entry[1]  # type: ignore[index, no-any-return]

    def _keep(self, key: Hashable, value: Any) -> None:
        if len(self.current) + len(self.previous) >= self.limit:  # the older one goes
            self.previous = self.current if len(self.current) < self.limit else {}
            self.current = {}
        self.current[key] = value

    def begin(self) -> None:
        """A new sync of the one parent this memo serves. Once both generations hold three
        times what a sync uses, the older is dropped (``rotate``): what the last syncs did
        not use goes, and a sync that changes little moves nothing between generations."""
        if self.used and len(self.current) + len(self.previous) > 3 * self.used:
            self.rotate()
        self.used = 0

    def rotate(self) -> None:
        self.previous, self.current = self.current, {}

    def clear(self) -> None:
        """Forget everything (a fresh process's memo)."""
        self.current, self.previous, self.last, self.used = {}, {}, None, 0

    def __len__(self) -> int:
        return len(self.current) + len(self.previous)


NO_MEMO = Memo(limit=0)  # remembers nothing: every value is computed afresh


class Memos:
    """A process's memos: one per pool (a pool's syncs read its whole cluster, the same
    objects again and again) and one for every job's sync (``jobs``, a ``jobs_share`` of
    the entries), holding ``max_entries`` at most together (0: no memo at all).

    After each pool sync (``settle``), while the pools' memos hold more than their share:
    the other pools' older generations go, least recently synced first, then whole pools,
    the same way. A forgotten pool's next sync parses its cluster again (a cold sync: as
    after a restart, the same answer). A pool forgotten while its sync runs on another
    thread keeps its memo until that sync ends."""

    def __init__(self, max_entries: int, jobs_share: float = 0.25) -> None:
        self.max_entries = max(max_entries, 0)
        self.jobs = Memo(limit=int(self.max_entries * jobs_share))
        self.pools: OrderedDict[str, Memo] = OrderedDict()  # least recently synced first
        self.forgotten = 0  # pools' memos dropped to stay under ``max_entries``
        self._lock = threading.Lock()  # (pools sync on several threads at once)

    def pool(self, name: str) -> Memo:
        """The pool's memo, made the most recently used (new: empty)."""
        with self._lock:
            memo = self.pools.pop(name, None)
            if memo is None:
                memo = Memo(limit=self.max_entries - self.jobs.limit)
            self.pools[name] = memo
            return memo

    def settle(self, using: Memo) -> None:
        """Back under ``max_entries``, keeping ``using`` (the memo of the sync just done)."""
        with self._lock:  # (the jobs' memo keeps its share: never over its own limit)
            over = sum(len(m) for m in self.pools.values()) - self.max_entries + self.jobs.limit
            for memo in list(self.pools.values()):
                if over <= 0:
                    return
                if memo is not using and memo.previous:
                    over -= len(memo.previous)
                    memo.previous = {}
            for name, memo in list(self.pools.items()):
                if over <= 0:
                    return
                if memo is not using:
                    over -= len(memo)
                    del self.pools[name]
                    self.forgotten += 1

    def clear(self) -> None:
        """Forget everything (a fresh process's memos)."""
        with self._lock:
            self.pools.clear()
            self.jobs.clear()

    def __len__(self) -> int:
        return len(self.jobs) + sum(len(m) for m in self.pools.values())
