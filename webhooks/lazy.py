"""Reading a hook request lazily: each object stays the bytes it arrived in.

A pool's request holds every Node, Dragonet pod and training job of the pool, and between
two pool syncs almost all of them are unchanged. Parsing all of it into Python objects
(and freeing them again) was most of a warm pool sync's time. msgspec splits the request
into its objects without building them (``msgspec.Raw``); each becomes a
``policy.memo.Encoded``, decoded only if the memo has not seen those exact bytes before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

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


def _encoded(raw: msgspec.Raw, where: str) -> Encoded:
    data = bytes(raw)
    if data[:1] != b"{" and data.lstrip()[:1] != b"{":
        raise _not_a_map(where)
    return Encoded(data)


@dataclass(frozen=True)
class SyncRequest:
    parent: Encoded
    children: ObjectMap
    related: ObjectMap
    finalizing: bool


def _maps(top: dict[str, msgspec.Raw], group: str) -> ObjectMap:
    raw = top.get(group)
    if raw is None or bytes(raw).strip() == b"null":
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
            bucket[key] = _encoded(obj, f"{group}.{tkey}.{key}")
    return out


def read_sync_request(body: bytes) -> SyncRequest:
    try:
        top = _FLAT.decode(body)
    except msgspec.ValidationError as err:
        raise Unreadable("request body must be a JSON object") from err
    except msgspec.DecodeError as err:
        raise Unreadable(f"request body is not valid JSON: {err}") from err
    parent = top.get("parent")
    if parent is None:
        raise Unreadable("not a Metacontroller SyncRequest: parent: Field required")
    if not _is_object(parent):
        raise _not_a_map("parent")
    finalizing = msgspec.json.decode(top["finalizing"]) if "finalizing" in top else False
    if not isinstance(finalizing, bool):
        raise Unreadable(
            "not a Metacontroller SyncRequest: finalizing: Input should be a valid boolean"
        )
    return SyncRequest(
        Encoded(bytes(parent)), _maps(top, "children"), _maps(top, "related"), finalizing
    )
