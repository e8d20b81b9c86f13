"""The incremental request reader (webhooks/lazy.py, ``IncrementalReader``) reads every
request exactly as ``read_sync_request`` does: a changed, added or removed object is seen,
whatever the last request of that parent was, and it holds a bounded number of them."""

from __future__ import annotations

import random
from typing import Any

import orjson

from policy.memo import Encoded
from tests.conftest import Hook, load_fixture, versioned
from tests.test_memo import POOL_FIXTURES
from webhooks.lazy import IncrementalReader, SyncRequest, Unreadable, read_sync_request

PATH = "/pools/sync"


def _body(
    parent: str = "pool-a",
    pods: dict[str, Any] | None = None,
    status: Any = None,
    finalizing: bool = False,
) -> bytes:
    pods = {"default/p1": {"v": 1}, "default/p2": {"v": 2}} if pods is None else pods
    return orjson.dumps(
        {
            "controller": {"kind": "CompositeController", "metadata": {"name": "pools"}},
            "parent": {"kind": "TrainingPool", "metadata": {"name": parent}, "status": status},
            "children": {"Admission.dragonet.io/v1alpha1": {}},
            "related": {
                "Node.v1": {"n1": {"kind": "Node", "metadata": {"name": "n1"}}},
                "Pod.v1": {
                    k: {"kind": "Pod", "metadata": {"name": k}, "spec": v} for k, v in pods.items()
                },
            },
            "finalizing": finalizing,
        }
    )


def _seen(req: SyncRequest) -> Any:
    """Everything a hook reads of a request, in order (objects as their bytes)."""

    def maps(m: dict[str, dict[str, Any]]) -> list[Any]:
        return [
            (t, [(k, o.raw if type(o) is Encoded else o) for k, o in objs.items()])
            for t, objs in m.items()
        ]

    return (req.parent.raw, maps(req.children), maps(req.related), req.finalizing)


def _read(reader: IncrementalReader, body: bytes) -> Any:
    try:
        got = _seen(reader.read(PATH, body))
    except Unreadable as err:
        got = ("unreadable", str(err))
    try:
        want = _seen(read_sync_request(body))
    except Unreadable as err:
        want = ("unreadable", str(err))
    assert got == want
    return got


def test_a_changed_object_in_an_otherwise_identical_request_is_seen() -> None:
    reader = IncrementalReader(least=0)
    _read(reader, _body())
    changed = _read(reader, _body(pods={"default/p1": {"v": 1}, "default/p2": {"v": 3}}))
    pods = dict(changed[2][1][1])
    assert orjson.loads(pods["default/p2"])["spec"] == {"v": 3}
    assert reader.hits == 1  # read against the first request, not anew


def test_added_removed_and_reordered_objects_and_a_new_parent_state_are_seen() -> None:
    reader = IncrementalReader(least=0)
    bodies = [
        _body(),
        _body(pods={"default/p1": {"v": 1}, "default/p2": {"v": 2}, "default/p3": {"v": 3}}),
        _body(pods={"default/p3": {"v": 3}, "default/p1": {"v": 1}}),
        _body(pods={}),
        _body(pods={"default/p1": {"v": 1}}, status={"phase": "Ready"}),
        _body(pods={"default/p1": {"v": 1}}, status={"phase": "Ready"}, finalizing=True),
        _body(pods={"default/p1": {"s": 'a "}" in a string, and ,"default/p2":{'}}),
        # the next key inside a changed object (its end is not where that key is)
        _body(pods={"default/p1": {"x": 1, "default/p2": {"v": 2}}, "default/p2": {"v": 2}}),
        _body(pods={"default/p1": {"x": 2, "default/p2": {"v": 2}}, "default/p2": {"v": 2}}),
        _body(status={"x": 1, "children": {}}),  # and what follows the parent inside it
        _body(status={"x": 2, "children": {}}),
    ]
    for body in bodies:
        _read(reader, body)
    assert reader.hits == len(bodies) - 1


def test_what_the_reader_cannot_read_as_before_it_reads_as_usual() -> None:
    reader = IncrementalReader(least=0)
    base = _body()
    _read(reader, base)
    variants = [
        base.replace(b'"v":2', b'"v":NaN'),  # invalid JSON in a changed object: a 400
        base.replace(b'"v":2', b'"v":[1,'),
        base.replace(b',"finalizing":false', b',"finalizing":"yes"'),
        base.replace(b'"Node.v1":{', b'"Node.v1": {'),  # whitespace: read as usual
        base.replace(b'"v":2}}', b'"v":2}} '),
        base.replace(b'"v":1}}', b'"v":0}} '),  # (a changed object followed by a space)
        base.replace(b'"default/p2":', b'"default/p1":'),  # a key twice
        base.replace(b'"n1":{"kind"', b'"n1":[{"kind"').replace(b'"n1"}}}', b'"n1"}}]}'),
        base[:-1],
        base + b" ",
        base.replace(b'"default/p1"', b'"default\\/p1"'),  # an escaped key
        b"[]" + base[2:],
        base.replace(b'"v":2', b'"v":' + b"[" * 100_000 + b"]" * 100_000),  # too deep
    ]
    for body in variants:
        _read(reader, body)
        _read(reader, base)


def test_each_parent_is_read_against_its_own_last_request() -> None:
    """Its unchanged objects are the very bytes of its last request (the memos' look-ups
    then compare identities), whichever pools were read in between."""
    reader = IncrementalReader(least=0)
    last: dict[str, bytes] = {}
    for round_ in range(3):
        for pool in ("pool-a", "pool-b", "pool-c"):
            pods = {f"default/{pool}-{i}": {"round": round_ if i == 0 else 0} for i in range(5)}
            body = _body(parent=pool, pods=pods)
            _read(reader, body)
            raw = reader.read(PATH, body).related["Pod.v1"][f"default/{pool}-1"].raw
            if round_ > 0:
                assert raw is last[pool]
            last[pool] = raw


def test_the_reader_holds_at_most_its_limit_in_bytes_and_ignores_small_requests() -> None:
    one = IncrementalReader(least=0)
    _read(one, _body(parent="pool-a"))
    _read(one, _body(parent="pool-a"))  # (read against the first: keeps its body too)
    size = one.nbytes
    body = len(_body(parent="pool-a"))
    assert body < size < 2 * body  # the body, and each object's bytes
    reader = IncrementalReader(limit=2 * size, least=0)
    for pool in ("pool-a", "pool-b", "pool-c", "pool-d"):
        _read(reader, _body(parent=pool))
        _read(reader, _body(parent=pool))
        assert reader.nbytes <= 2 * size
    assert list(reader._last) == [(PATH, "/pool-c"), (PATH, "/pool-d")]
    assert reader.forgotten == 2  # the least recently read first
    reader.read("/tfjobs/sync", _body(parent="job-a"))  # another hook's: apart, same limit
    assert list(reader._last) == [(PATH, "/pool-d"), ("/tfjobs/sync", "/job-a")]
    small = IncrementalReader(least=10**6)
    _read(small, _body())
    _read(small, _body())
    assert not small._last and small.hits == 0


def test_random_edits_are_read_as_read_sync_request_reads_them() -> None:
    rng = random.Random(25)
    reader = IncrementalReader(least=0)
    pods = {f"default/p{i}": {"v": i} for i in range(20)}
    for _ in range(200):
        op = rng.random()
        key = f"default/p{rng.randrange(30)}"
        if op < 0.4:
            pods[key] = {"v": rng.randrange(5), "pad": "x" * rng.randrange(50)}
        elif op < 0.6:
            pods.pop(key, None)
        body = _body(pods=dict(sorted(pods.items())), status={"n": rng.randrange(3)})
        if rng.random() < 0.1:  # a corrupt byte somewhere
            i = rng.randrange(len(body))
            body = body[:i] + bytes([rng.choice(b'{}[]",:x ')]) + body[i + 1 :]
        _read(reader, body)
    assert reader.hits > 150


def test_the_app_reads_every_request_through_the_reader() -> None:
    """The same pool answers for each fixture, read anew or against the last request."""
    plain, incremental = Hook(), Hook()
    reader = incremental.app.config["DRAGONET_READER"]
    reader.least = 0
    for name in POOL_FIXTURES:
        request = versioned(load_fixture(name))
        for _ in range(2):
            want = plain.post("/pools/sync", request)
            got = incremental.post("/pools/sync", request)
            assert got.status_code == want.status_code == 200
            assert got.get_json() == want.get_json()
    assert reader.hits >= len(POOL_FIXTURES)
