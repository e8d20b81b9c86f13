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

Memory is bounded whatever the traffic, in bytes: each entry is charged when it is kept
(``charge``: the bytes of the JSON it was parsed from, times what parsing makes of them, or
a fixed size for a derived value, both calibrated with ``tracemalloc``), a ``Memo`` never
holds more than its ``limit`` bytes, and ``Memos`` (a process's: one memo per pool, one for
the jobs' syncs) holds at most its ``cap`` in all, forgetting first the pools synced least
recently. What is forgotten is freed by reference counting at once: a memo keeps no
traceback (an exception's frames would tie a whole request into a reference cycle, which
a frozen heap never collects: ``webhooks.shell.Collector``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

T = TypeVar("T")
MISSING: Any = object()  # what ``kept`` returns for an object it holds no parse of

# What keeping an entry costs, charged when it is kept (calibrated with tracemalloc against
# what clearing the memos frees, pools of 3 to 200 nodes and mixed traffic; see
# tests/test_memory_cap.py and benchmarks/README.md, "One memory cap, in bytes"): an entry
# parsed from JSON bytes, per byte of them (the bytes themselves, which the entry keeps to
# compare, and the objects parsed from them) and once (its key and slot); a derived value.
PARSED_PER_BYTE = 4
ENTRY_BYTES = 512
DERIVED_BYTES = 3584


def charge(key: Hashable, value: Any) -> int:
    """What an entry is charged: by the bytes it was parsed from when its key or value says
    (``Memo.parsed``'s keys), else as a derived value. The same for the same entry, so
    what is charged when it is kept is what is given back when it goes."""
    if type(key) is tuple and len(key) > 1:
        if key[0] == "named" and type(value) is tuple and type(value[0]) is bytes:
            return PARSED_PER_BYTE * len(value[0]) + ENTRY_BYTES
        if type(key[1]) is bytes:
            return PARSED_PER_BYTE * len(key[1]) + ENTRY_BYTES
    return DERIVED_BYTES


def _detached(value: T) -> T:
    """``value``, without the traceback of an exception (a job's ``InvalidJob`` is kept as
    a value): its frames hold the request's objects and the exception itself, a cycle only
    a full collection frees."""
    if isinstance(value, BaseException):
        value.__traceback__ = None
        value.__context__ = value.__cause__ = None
    return value


class Undecodable(ValueError):
    """An object of the request is not JSON any decoder here can read (whoever reads it
    decides: the parent makes the request malformed, a related object is left out)."""


class Encoded(Mapping[str, Any]):
    """One object of a hook request as the JSON bytes it arrived in, decoded on first use."""

    __slots__ = ("_decoded", "raw")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self._decoded: dict[str, Any] | None = None

    def decoded(self) -> dict[str, Any]:
        """The object itself (decoded once; ``Undecodable`` if its bytes cannot be)."""
        if self._decoded is None:
            try:
                value = orjson.loads(self.raw)
            except orjson.JSONDecodeError as err:  # e.g. nested deeper than JSON decoders go
                raise Undecodable(f"an object of the request cannot be decoded: {err}") from err
            self._decoded = value if isinstance(value, dict) else {}
        return self._decoded

    def __getitem__(self, key: str) -> Any:
        return self.decoded()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.decoded())

    def __len__(self) -> int:
        return len(self.decoded())

    def get(self, key: str, default: Any = None) -> Any:
        return self.decoded().get(key, default)


def content_key(kind: str, obj: Mapping[str, Any], *extra: Hashable) -> tuple | None:
    """The memo key of an object that arrived as bytes; None (not memoised) otherwise."""
    return (kind, obj.raw, *extra) if isinstance(obj, Encoded) else None


@dataclass
class Memo:
    """Two generations: what the last syncs used survives a ``rotate``, the rest is dropped,
    so memory follows the working set (a pool's objects, old versions gone soon). Never
    more than ``limit`` bytes (``charge``) in both: the older generation goes first (0: no
    memo). An entry found in the older generation moves to the newer one."""

    limit: int = 1 << 30  # bytes held at most, both generations together
    current: dict[Hashable, Any] = field(default_factory=dict)
    previous: dict[Hashable, Any] = field(default_factory=dict)
    current_bytes: int = 0
    previous_bytes: int = 0
    hits: int = 0
    misses: int = 0
    used: int = 0  # look-ups since ``begin`` (about the entries one sync needs)
    # The last answer of the one sync this memo serves (a pool's), and what it answered:
    # a sync whose plan-relevant input equals it answers the same (see policy.pool.sync).
    last: Any = None
    # What changes the generations and their bytes together (the jobs' memo serves
    # syncs on several threads at once; a lost update would let the bytes drift).
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def nbytes(self) -> int:
        """What the entries are charged, both generations."""
        return self.current_bytes + self.previous_bytes

    def get(self, key: Hashable | None, make: Callable[[], T]) -> T:
        """What ``make`` returned for an equal key (counted: hits and misses are parses)."""
        if key is None or self.limit <= 0:
            return make()
        self.used += 1
        value = self.current.get(key, MISSING)
        if value is not MISSING:
            self.hits += 1
            return value  # type: ignore[no-any-return]
        value = self._take_previous(key)
        if value is MISSING:
            self.misses += 1
            value = _detached(make())
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
        per object). With the ``name`` the request maps the object under, as ``kept`` and
        ``keep`` have it. ``make`` is handed the decoded object (one look-up covers a whole
        parse: the parser never comes back here to decode)."""
        if type(obj) is not Encoded:
            return make(obj)
        if self.limit <= 0:
            return make(obj.decoded())
        if name is not None:
            value = self.kept(kind, name, obj.raw)
            if value is MISSING:
                value = self.keep(kind, name, obj.raw, make(obj.decoded()))
            return value  # type: ignore[no-any-return]
        key = (kind, obj.raw)
        value = self.current.get(key, MISSING)
        if value is MISSING:
            return self.get(key, lambda: make(obj.decoded()))
        self.used += 1
        self.hits += 1
        return value  # type: ignore[no-any-return]

    def kept(self, kind: str, name: str, raw: bytes) -> Any:
        """The parse ``keep`` kept of the object a request maps under ``name``, if its bytes
        are still ``raw``; else ``MISSING``, and the caller parses it and keeps that. Found
        by name and compared by bytes: comparing costs a third of hashing them, and an
        object's older versions leave the memo as it changes. (Counted: a hit, or a miss,
        the parse to come.) The memo never sees the object: its reader (the pool's
        ``observe``) hands the decoded object to the parser itself."""
        if self.limit <= 0:
            return MISSING
        self.used += 1
        key = ("named", kind, name)
        entry = self.current.get(key, MISSING)
        if entry is not MISSING and entry[0] == raw:
            self.hits += 1
            return entry[1]
        entry = self._take_previous(key)  # (an older version of it goes either way)
        if entry is not MISSING and entry[0] == raw:
            self.hits += 1
            self._keep(key, entry)
            return entry[1]
        self.misses += 1
        return MISSING

    def keep(self, kind: str, name: str, raw: bytes, value: T) -> T:
        """``value``, kept as the parse of the object mapped under ``name`` while its bytes
        are ``raw`` (``kept`` finds it)."""
        if self.limit > 0:
            self._keep(("named", kind, name), (raw, _detached(value)))
        return value

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
        entry = self.current.get(key, MISSING)
        if entry is MISSING:
            entry = self._take_previous(key)
            if entry is MISSING:
                entry = (objects, _detached(make()))
            self._keep(key, entry)
        return entry[1]  # type: ignore[index, no-any-return]

    def _take_previous(self, key: Hashable) -> Any:
        """The older generation's entry, moved out of it (``_keep`` puts it in the newer)."""
        if not self.previous:
            return MISSING
        with self._lock:
            value = self.previous.pop(key, MISSING)
            if value is not MISSING:
                self.previous_bytes -= charge(key, value)
        return value

    def _keep(self, key: Hashable, value: Any) -> None:
        size = charge(key, value)
        with self._lock:
            old = self.current.pop(key, MISSING)  # (a named entry whose bytes changed)
            if old is not MISSING:
                self.current_bytes -= charge(key, old)
            if self.nbytes + size > self.limit:  # the older generation goes, then the newer
                if self.current_bytes + size <= self.limit:
                    self.previous, self.previous_bytes = self.current, self.current_bytes
                else:
                    self.previous, self.previous_bytes = {}, 0
                self.current, self.current_bytes = {}, 0
                if size > self.limit:  # larger than the whole memo: not kept
                    return
            self.current[key] = value
            self.current_bytes += size

    def begin(self) -> None:
        """A new sync of the one parent this memo serves. Once both generations hold three
        times what a sync uses, the older is dropped (``rotate``): what the last syncs did
        not use goes, and a sync that changes little moves nothing between generations."""
        if self.used and len(self.current) + len(self.previous) > 3 * self.used:
            self.rotate()
        self.used = 0

    def rotate(self) -> None:
        with self._lock:
            self.previous, self.current = self.current, {}
            self.previous_bytes, self.current_bytes = self.current_bytes, 0

    def drop_previous(self) -> int:
        """Forget the older generation; the bytes it was charged."""
        with self._lock:
            freed = self.previous_bytes
            self.previous, self.previous_bytes = {}, 0
        return freed

    def clear(self) -> None:
        """Forget everything (a fresh process's memo)."""
        with self._lock:
            self.current, self.previous, self.last, self.used = {}, {}, None, 0
            self.current_bytes = self.previous_bytes = 0

    def __len__(self) -> int:
        return len(self.current) + len(self.previous)


NO_MEMO = Memo(limit=0)  # remembers nothing: every value is computed afresh


class Memos:
    """A process's memos: one per pool (a pool's syncs read its whole cluster, the same
    objects again and again) and one for every job's sync (``jobs``, a ``jobs_share`` of
    the bytes), holding ``cap`` bytes at most together (``charge``; 0: no memo at all).
    (The process's other keeper, the webhook's request reader, has a share of the same
    cap: ``webhooks.config.Settings.memory_cap_bytes``.)

    After each pool sync (``settle``), while the pools' memos hold more than their share:
    the other pools' older generations go, least recently synced first, then whole pools,
    the same way. A forgotten pool's next sync parses its cluster again (a cold sync: as
    after a restart, the same answer). A pool forgotten while its sync runs on another
    thread keeps its memo until that sync ends."""

    def __init__(self, cap: int, jobs_share: float = 0.125) -> None:
        self.cap = max(cap, 0)
        self.jobs = Memo(limit=int(self.cap * jobs_share))
        self.pools: OrderedDict[str, Memo] = OrderedDict()  # least recently synced first
        self.forgotten = 0  # pools' memos dropped to stay under ``cap``
        self._lock = threading.Lock()  # (pools sync on several threads at once)

    @property
    def pools_limit(self) -> int:
        """The pools' share of the cap, together."""
        return self.cap - self.jobs.limit

    def pool(self, name: str) -> Memo:
        """The pool's memo, made the most recently used (new: empty)."""
        with self._lock:
            memo = self.pools.pop(name, None)
            if memo is None:
                memo = Memo(limit=self.pools_limit)
            self.pools[name] = memo
            return memo

    def settle(self, using: Memo) -> None:
        """Back under ``cap``, keeping ``using`` (the memo of the sync just done)."""
        with self._lock:  # (the jobs' memo keeps its share: never over its own limit)
            over = sum(m.nbytes for m in self.pools.values()) - self.pools_limit
            for memo in list(self.pools.values()):
                if over <= 0:
                    return
                if memo is not using and memo.previous:
                    over -= memo.drop_previous()
            for name, memo in list(self.pools.items()):
                if over <= 0:
                    return
                if memo is not using:
                    over -= memo.nbytes
                    del self.pools[name]
                    self.forgotten += 1

    def clear(self) -> None:
        """Forget everything (a fresh process's memos)."""
        with self._lock:
            self.pools.clear()
            self.jobs.clear()

    @property
    def nbytes(self) -> int:
        """What all the memos' entries are charged."""
        with self._lock:
            return self.jobs.nbytes + sum(m.nbytes for m in self.pools.values())

    def __len__(self) -> int:
        return len(self.jobs) + sum(len(m) for m in self.pools.values())
