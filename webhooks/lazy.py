"""Reading a hook request lazily: each object stays the bytes it arrived in.

A pool's request holds every Node, Dragonet pod and training job of the pool, and between
two pool syncs almost all of them are unchanged. Parsing all of it into Python objects
(and freeing them again) was most of a warm pool sync's time. msgspec splits the request
into its objects without building them (``msgspec.Raw``); each becomes a
``policy.memo.Encoded``, decoded only if the memo has not seen those exact bytes before.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import msgspec
import orjson

from policy.memo import Encoded, Undecodable

ObjectMap = dict[str, dict[str, Any]]
_FLAT = msgspec.json.Decoder(dict[str, msgspec.Raw])
_MAPS = msgspec.json.Decoder(dict[str, dict[str, msgspec.Raw]])


class Unreadable(ValueError):
    """Not a hook request (answered 400)."""


def _not_a_map(where: str) -> Unreadable:
    return Unreadable(
        f"not a Metacontroller SyncRequest: {where}: Input should be a valid dictionary"
    )


def _is_object(raw: msgspec.Raw | bytes) -> bool:
    return bytes(raw).lstrip()[:1] == b"{"


def _encoded(raw: msgspec.Raw) -> Encoded | Any:
    """An object stays its bytes; anything else (no API server sends one) is decoded, so
    whoever reads the map finds it is not an object and leaves that one entry out. A
    number JSON allows and no decoder holds (``1e400``) stays bytes too: reading it raises
    ``Undecodable``, so that one entry is left out and named (DESIGN §2.8)."""
    data = bytes(raw)
    if data[:1] == b"{" or data.lstrip()[:1] == b"{":
        return Encoded(data)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return Encoded(data)


@dataclass(frozen=True)
class SyncRequest:
    parent: Encoded
    children: ObjectMap
    related: ObjectMap
    finalizing: bool


def _maps(top: dict[str, msgspec.Raw], group: str) -> ObjectMap:
    raw = top.get(group)
    if raw is None or (len(raw) == 4 and bytes(raw) == b"null"):  # (a Raw has no padding)
        return {}
    try:
        maps = _MAPS.decode(raw)
    except msgspec.DecodeError:  # say where: one type map or one object is not a map
        if not _is_object(raw):
            raise _not_a_map(group) from None
        for tkey, objs in _FLAT.decode(raw).items():
            if not _is_object(objs):
                raise _not_a_map(f"{group}.{tkey}") from None
        raise _not_a_map(group) from None
    out: ObjectMap = {}
    for tkey, objs in maps.items():
        out[tkey] = {}
        bucket = out[tkey]
        for key, obj in objs.items():
            bucket[key] = _encoded(obj)
    return out


class _Request(msgspec.Struct):
    """A well-formed request, split in one pass (anything else takes the careful path
    below, which says what is wrong)."""

    parent: msgspec.Raw
    children: dict[str, dict[str, msgspec.Raw]] | None = None
    related: dict[str, dict[str, msgspec.Raw]] | None = None
    finalizing: bool = False


_REQUEST = msgspec.json.Decoder(_Request)


def _encoded_maps(maps: dict[str, dict[str, msgspec.Raw]] | None) -> ObjectMap:
    return {t: {k: _encoded(o) for k, o in objs.items()} for t, objs in (maps or {}).items()}


def read_sync_request(body: bytes) -> SyncRequest:
    try:
        fast = _REQUEST.decode(body)
    except (msgspec.DecodeError, RecursionError):
        pass
    else:
        if _is_object(fast.parent):
            return SyncRequest(
                Encoded(bytes(fast.parent)),
                _encoded_maps(fast.children),
                _encoded_maps(fast.related),
                fast.finalizing,
            )
    try:
        top = _FLAT.decode(body)
    except msgspec.ValidationError as err:
        raise Unreadable("request body must be a JSON object") from err
    except msgspec.DecodeError as err:
        raise Unreadable(f"request body is not valid JSON: {err}") from err
    except RecursionError:
        return _request(*_split_deep(body))
    parent = top.get("parent")
    if parent is None:
        raise Unreadable("not a Metacontroller SyncRequest: parent: Field required")
    try:
        children, related = _maps(top, "children"), _maps(top, "related")
    except RecursionError:
        return _request(*_split_deep(body))
    return _request(top, children, related)


def _request(top: dict[str, Any], children: ObjectMap, related: ObjectMap) -> SyncRequest:
    parent = top.get("parent")
    if parent is None:
        raise Unreadable("not a Metacontroller SyncRequest: parent: Field required")
    if not _is_object(parent):
        raise _not_a_map("parent")
    # Read as a literal, not parsed: a value nested deeper than the parser recurses (only
    # such bodies get here) is simply not a boolean, a 400 like any other.
    raw = bytes(top["finalizing"]).strip() if "finalizing" in top else b"false"
    finalizing = raw == b"true"
    if raw not in (b"true", b"false"):
        raise Unreadable(
            "not a Metacontroller SyncRequest: finalizing: Input should be a valid boolean"
        )
    return SyncRequest(Encoded(bytes(parent)), children, related, finalizing)


# A JSON string (with its escapes), or one of the characters that give a value its place.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]:,]', re.S)
_GROUPS = (b'"children"', b'"related"')


def _split_deep(body: bytes) -> tuple[dict[str, Any], ObjectMap, ObjectMap]:
    """The request split into its objects without a recursive parser: a request may hold
    one object nested deeper than any parser recurses (a job's template, say), and that
    object alone must be unreadable, not the whole request (DESIGN §2.8). Only top-level
    values and the objects of ``children``/``related`` are cut out; each is decoded (or
    found unreadable) when something reads it. Slower than msgspec: only for such bodies."""
    top: dict[str, Any] = {}
    maps: dict[bytes, dict[str, dict[str, Any]]] = {g: {} for g in _GROUPS}
    stack: list[bytes] = []  # b"{" or b"[" per open container
    keys: list[bytes | None] = [None]  # the key being read at each depth
    starts: list[int | None] = [None]
    last = b""
    for m in _TOKEN.finditer(body):
        tok = m.group()
        depth = len(stack)
        if tok[:1] == b'"':
            last = tok
        elif tok == b":":
            keys[depth], starts[depth] = last, m.end()
        elif tok in (b"{", b"["):
            stack.append(tok)
            keys.append(None)
            starts.append(None)
        else:  # "," "}" "]": a value at this depth (or the container itself) ends
            if tok != b"," or (stack and stack[-1] == b"{"):
                _ended(body, depth, keys, starts, m.start(), top, maps)
            if tok in (b"}", b"]"):
                if not stack:
                    raise Unreadable("request body is not valid JSON")
                stack.pop()
                keys.pop()
                starts.pop()
    if stack or not top:
        raise Unreadable("request body must be a JSON object")
    return top, *(_typed(maps[g]) for g in _GROUPS)


def _ended(
    body: bytes,
    depth: int,
    keys: list[bytes | None],
    starts: list[int | None],
    end: int,
    top: dict[str, Any],
    maps: dict[bytes, dict[str, dict[str, Any]]],
) -> None:
    start, key = starts[depth], keys[depth]
    if start is None or key is None:
        return
    starts[depth] = None
    raw = body[start:end].strip()
    if depth == 1:
        top[orjson.loads(key)] = raw
    elif depth == 3 and keys[1] in maps:
        maps[keys[1]].setdefault(keys[2] or b'""', {})[orjson.loads(key)] = raw


def _typed(group: dict[bytes, dict[str, Any]]) -> ObjectMap:
    out: ObjectMap = {}
    for tkey, objs in group.items():
        name = orjson.loads(tkey)
        out[name] = {}
        for key, raw in objs.items():
            out[name][key] = _encoded(msgspec.Raw(raw))
    return out


# --- reading a pool's next request from its last one -------------------------------------

_STR = msgspec.json.Decoder(str)
_VALUE = msgspec.json.Decoder(msgspec.Raw)  # one complete JSON value, checked
_SCAN = json.JSONDecoder()
_TOP = frozenset({"controller", "parent", "children", "related", "finalizing"})
# What follows a changed parent or controller in the order Metacontroller writes them.
_NEXT = {"controller": b',"parent":{', "parent": b',"children":{'}
# type key -> (its name, object key -> (its name, its bytes), the type's whole map's bytes)
Group = dict[bytes, tuple[str, dict[bytes, tuple[str, bytes]], memoryview | None]]


class _Miss(Exception):
    """Not readable from the last split: the whole request is read as usual."""


@dataclass(frozen=True)
class _Split:
    """What a request was split into: each top-level value's bytes, and each object's (by
    its group, its type's and its own key as they appear in the body, with their names)."""

    top: dict[bytes, bytes]  # controller, parent
    groups: dict[bytes, Group]  # b"children", b"related"
    # The parent as read (decoded once: the same bytes again are the same parent; like
    # the memos' objects, nothing that reads it changes it).
    parent: Encoded | None = None
    charged: int = 0  # what the reader charged it (``nbytes`` when it was kept)

    def nbytes(self) -> int:
        """The bytes it keeps alive: every object's and top-level value's, and each body a
        type's map is a view of (once per body)."""
        size = sum(map(len, self.top.values()))
        bodies: dict[int, int] = {}
        for group in self.groups.values():
            for _, objs, span in group.values():
                size += sum(len(raw) for _, raw in objs.values())
                if span is not None:
                    whole = span.obj
                    bodies[id(whole)] = len(whole)
        return size + sum(bodies.values())


class IncrementalReader:
    """``read_sync_request`` for large requests, reading each one against the last request
    of the same parent on the same path: an object whose bytes are the same, at the same
    key, is recognised by comparing bytes (``memcmp``), and only the objects that changed or
    are new are parsed. Between two syncs of a pool of hundreds of objects a few change,
    and the whole split (msgspec scanning every byte) was the largest part of its read.

    Anything not laid out as Metacontroller sends it (no whitespace between the values of
    the maps, no escapes in keys, every object a JSON object), or any doubt, and the
    request is read by ``read_sync_request``: so the result is always exactly that
    function's (each new value is checked by msgspec on its own bytes, and a value that
    ends where an identical earlier one did is the same JSON value). The same bytes
    objects as before are handed on, so the memos' byte comparisons are identity checks.

    Holds the last split of each parent read (per hook path) while they are charged at
    most ``limit`` bytes in all, forgetting the least recently read first: a split is
    charged the bytes it keeps alive (each object's bytes, shared with the memos' keys but
    charged here too, and the whole last body once a type's map is compared against it:
    about twice the request), ``_Split.nbytes``. Requests under ``least`` bytes are not
    kept (small ones are cheap to read anyway); 0 bytes: nothing is kept."""

    def __init__(self, limit: int = 64 << 20, least: int = 64 * 1024) -> None:
        self.limit = limit
        self.least = least
        # (hook path, parent) -> its last split, least recently read first
        self._last: OrderedDict[tuple[str, str], _Split] = OrderedDict()
        self.nbytes = 0  # what the splits held are charged
        self._lock = threading.Lock()
        self.hits = 0  # requests read against a last split
        self.forgotten = 0  # splits dropped to stay under ``limit``

    def read(self, path: str, body: bytes) -> SyncRequest:
        if len(body) < self.least or self.limit <= 0:
            return read_sync_request(body)
        with self._lock:
            candidates = [s for (p, _), s in reversed(self._last.items()) if p == path]
        try:
            req, split = _walk(body, candidates, lambda name: self._slot(path, name))
            self.hits += 1
        except (_Miss, IndexError):  # (IndexError: the body ends where a value cannot)
            req = read_sync_request(body)
            split = _split_of(body, req)
        name = _parent_name(req.parent)
        if split is not None and name is not None:
            self._keep((path, name), split)
        return req

    def _keep(self, key: tuple[str, str], split: _Split) -> None:
        size = split.nbytes()
        with self._lock:
            old = self._last.pop(key, None)
            if old is not None:
                self.nbytes -= old.charged
            if size > self.limit:
                return
            object.__setattr__(split, "charged", size)
            self._last[key] = split
            self.nbytes += size
            while self.nbytes > self.limit:
                _, gone = self._last.popitem(last=False)
                self.nbytes -= gone.charged
                self.forgotten += 1

    def _slot(self, path: str, name: str) -> _Split | None:
        with self._lock:
            return self._last.get((path, name))

    def clear(self) -> None:
        """Forget every split (a fresh process's reader)."""
        with self._lock:
            self._last.clear()
            self.nbytes = 0


def _parent_name(parent: Encoded) -> str | None:
    try:
        meta = parent.get("metadata")
    except Undecodable:
        return None
    if not isinstance(meta, dict):
        return None
    ns, name = meta.get("namespace"), meta.get("name")
    if not isinstance(name, str) or not isinstance(ns, str | None):
        return None
    return f"{ns or ''}/{name}"


def _split_of(body: bytes, req: SyncRequest) -> _Split | None:
    """The split of a request read as usual, if it was laid out as ``_walk`` reads it."""
    groups: dict[bytes, Group] = {}
    for gname, maps in ((b"children", req.children), (b"related", req.related)):
        group: Group = {}
        for tname, objs in maps.items():
            bucket: dict[bytes, tuple[str, bytes]] = {}
            for key, obj in objs.items():
                if type(obj) is not Encoded:
                    return None
                if key.isprintable() and '"' not in key and "\\" not in key:
                    bucket[key.encode()] = (key, obj.raw)  # (as the key is written)
            group[tname.encode()] = (tname, bucket, None)
        groups[gname] = group
    return _Split({b"parent": req.parent.raw}, groups, req.parent)


def _walk(
    body: bytes, candidates: list[_Split], slot: Callable[[str], _Split | None]
) -> tuple[SyncRequest, _Split]:
    """The request read against a last split: ``candidates`` (this path's, the most recent
    first) until the parent is read, then the parent's own (``slot``). ``_Miss`` if it
    cannot be."""
    if body[:1] != b"{" or not candidates:
        raise _Miss
    budget = [max(len(body) // 8, 16 * 1024)]
    last = candidates[0] if candidates else _Split({}, {})
    top: dict[bytes, bytes] = {}
    groups: dict[bytes, Group] = {}
    maps: dict[bytes, ObjectMap] = {}
    finalizing = False
    parent: Encoded | None = None
    p = 1
    while True:
        kb, key, p = _key(body, p, None)
        if key not in _TOP or kb in top or kb in groups:
            raise _Miss
        if key == "finalizing":
            if body.startswith(b"true", p):
                finalizing, p = True, p + 4
            elif body.startswith(b"false", p):
                p += 5
            else:
                raise _Miss
            top[kb] = b""
        elif key in ("controller", "parent"):
            olds = [s.top[kb] for s in candidates if kb in s.top]
            raw = _value(body, p, olds, budget, _NEXT[key])
            top[kb] = raw
            p += len(raw)
            if key == "parent":
                same = (c.parent for c in candidates if c.top.get(kb) is raw)
                parent = next(same, None) or Encoded(raw)
                own = slot(_parent_name(parent) or "")
                if own is None:  # read against another parent's, all of it would be new
                    raise _Miss
                last = own
        else:
            p, maps[kb], groups[kb] = _group(body, p, last.groups.get(kb, {}), budget)
        c = body[p : p + 1]
        p += 1
        if c == b"}":
            break
        if c != b",":
            raise _Miss
    if p != len(body) or parent is None:
        raise _Miss
    top.pop(b"finalizing", None)
    req = SyncRequest(parent, maps.get(b"children", {}), maps.get(b"related", {}), finalizing)
    return req, _Split(top, groups, parent)


def _key(
    body: bytes, p: int, known: Mapping[bytes, tuple[str, Any]] | None
) -> tuple[bytes, str, int]:
    """The key at ``p`` (its bytes and its string) and where its value starts."""
    if body[p : p + 1] != b'"':
        raise _Miss
    q = body.find(b'"', p + 1)
    if q < 0 or body[q + 1 : q + 2] != b":":
        raise _Miss
    kb = body[p + 1 : q]
    hit = known.get(kb) if known is not None else None
    if hit is not None:
        return kb, hit[0], q + 2
    if b"\\" in kb:
        raise _Miss
    try:
        return kb, _STR.decode(body[p : q + 1]), q + 2
    except msgspec.DecodeError:
        raise _Miss from None


def _value(
    body: bytes, p: int, olds: list[bytes], budget: list[int], follow: bytes | None = None
) -> bytes:
    """The JSON object at ``p``: one of ``olds`` if it is there, byte for byte (an object
    ends where its bytes do), else its bytes, checked by msgspec. ``follow``: what likely
    comes right after it (the next key as last time), to find its end without a parser.
    ``budget``: how many bytes may still be parsed here; past it, reading the whole request
    is cheaper."""
    if body[p : p + 1] != b"{":
        raise _Miss
    for old in olds:
        if body.startswith(old, p):
            return old
    end = body.find(follow, p) if follow is not None else -1
    if end < 0 or not _one_value(body[p:end]):  # (an object is followed by nothing else)
        size = max(2 * max(map(len, olds), default=0), 16 * 1024)
        while True:  # where it ends (latin-1: one character per byte, so the same offsets)
            try:
                end = p + _SCAN.raw_decode(body[p : p + size].decode("latin-1"))[1]
                break
            except RecursionError:  # nested deeper than parsers go: read as usual
                raise _Miss from None
            except ValueError:
                if p + size >= len(body):
                    raise _Miss from None
                size *= 4
        if not _one_value(body[p:end]):
            raise _Miss
    budget[0] -= end - p
    if budget[0] < 0:
        raise _Miss
    return body[p:end]


def _one_value(raw: bytes) -> bool:
    """Whether ``raw`` is exactly one JSON object, as msgspec reads JSON, and nothing
    around it (not even whitespace)."""
    if raw[-1:] != b"}":
        return False
    try:
        _VALUE.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return False
    return True


def _group(body: bytes, p: int, last: Group, budget: list[int]) -> tuple[int, ObjectMap, Group]:
    """``children`` or ``related`` at ``p``: type -> key -> object. A type's map whose bytes
    are all the same as last time is taken whole."""
    if body.startswith(b"null", p):
        return p + 4, {}, {}
    if body[p : p + 1] != b"{":
        raise _Miss
    out: ObjectMap = {}
    group: Group = {}
    p += 1
    if body[p : p + 1] == b"}":
        return p + 1, out, group
    while True:
        tb, tname, p = _key(body, p, last)
        if tname in out or body[p : p + 1] != b"{":
            raise _Miss
        _, old, span = last.get(tb, ("", {}, None))
        start = p
        if span is not None and body.startswith(span, p):
            out[tname] = {key: Encoded(raw) for key, raw in old.values()}
            group[tb] = (tname, old, memoryview(body)[p : p + len(span)])
            p += len(span)
        else:
            p, out[tname], split = _objects(body, p + 1, old, budget)
            group[tb] = (tname, split, memoryview(body)[start:p])
        c = body[p : p + 1]
        p += 1
        if c == b"}":
            return p, out, group
        if c != b",":
            raise _Miss


def _objects(
    body: bytes, p: int, old: dict[bytes, tuple[str, bytes]], budget: list[int]
) -> tuple[int, dict[str, Any], dict[bytes, tuple[str, bytes]]]:
    """One type's map from just after its ``{``: key -> object, and their split."""
    bucket: dict[str, Any] = {}
    split: dict[bytes, tuple[str, bytes]] = {}
    after: dict[bytes, bytes] | None = None  # last time's keys: each one's next
    if body[p : p + 1] == b"}":
        return p + 1, bucket, split
    while True:
        q = body.find(b'"', p + 1)
        kb = body[p + 1 : q]
        hit = old.get(kb)
        if (
            hit is not None
            and body[p] == 0x22  # "
            and body[q + 1] == 0x3A  # :
            and body.startswith(hit[1], q + 2)
        ):  # the same object as last time: its bytes end where they did
            key, raw = hit
            p = q + 2
        else:
            kb, key, p = _key(body, p, old)
            hit = old.get(kb)
            follow = None
            if hit is not None:  # changed: the next key is most likely last time's
                if after is None:
                    keys = list(old)
                    after = dict(pairwise(keys))
                following = after.get(kb)
                follow = b',"' + following + b'":{' if following is not None else None
            raw = _value(body, p, [hit[1]] if hit is not None else [], budget, follow)
            hit = (key, raw)
        if key in bucket:
            raise _Miss
        bucket[key] = Encoded(raw)
        split[kb] = hit
        p += len(raw) + 1
        c = body[p - 1 : p]
        if c == b"}":
            return p, bucket, split
        if c != b",":
            raise _Miss
