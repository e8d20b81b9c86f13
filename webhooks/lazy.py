"""Reading a hook request lazily: each object stays the bytes it arrived in.

A pool's request holds every Node, Dragonet pod and training job of the pool, and between
two pool syncs almost all of them are unchanged. Parsing all of it into Python objects
(and freeing them again) was most of a warm pool sync's time. msgspec splits the request
into its objects without building them (``msgspec.Raw``); each becomes a
``policy.memo.Encoded``, decoded only if the memo has not seen those exact bytes before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec
import orjson

from policy.memo import Encoded

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
