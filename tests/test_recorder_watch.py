"""The recorder from a watch, through the official client (``kubernetes.watch.Watch``)
against a fake API server at the HTTP layer: it lists, then watches from the list's
resourceVersion with bookmarks; a dropped connection resumes from the last version seen;
410 Gone lists again; each fact is written once, as it comes, and a restarted recorder
writes nothing twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from recorder.kube import KubeEvents, KubeObjects
from recorder.loop import Writer, run
from recorder.write import TokenBucket, Written
from tests.kubefake import FakeApi, WatchStream, route, use_kubeconfig
from tests.test_recorder import _admission
from webhooks.kubeapi import Api

ADMISSIONS = ("dragonet.io/v1alpha1", "admissions")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FakeApi, Api]:
    use_kubeconfig(tmp_path, monkeypatch)
    api = Api(1.0)
    fake = FakeApi()
    route(api.client, fake.request, monkeypatch)
    return fake, api


def _until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


STOPS: list[threading.Event] = []


@pytest.fixture(autouse=True)
def _stop_recorders():
    """A test that fails midway still stops its recorders (their threads would go on)."""
    yield
    for stop in STOPS:
        stop.set()
    STOPS.clear()


def _recorder(api: Api, clock: Callable[[], datetime]) -> tuple[Writer, Callable[[], None]]:
    """A recorder process: its loop in a thread; the function that stops it."""
    stop = threading.Event()
    STOPS.append(stop)
    events = KubeEvents(api, page_size=2)
    writer = Writer(events, Written(timedelta(hours=1)), "r", TokenBucket(0, 1), stop, clock)
    loop = threading.Thread(target=run, args=(KubeObjects(api, page_size=2), writer, 60, 0.01))
    loop.start()

    def end() -> None:
        stop.set()
        loop.join(5)
        assert not loop.is_alive()

    return writer, end


def _events(fake: FakeApi) -> list[tuple[str, str, str]]:
    return sorted(
        (e["regarding"]["name"], e["reason"], e.get("series", {}).get("count", 1))
        for e in fake.objects("events.k8s.io/v1", "events")
    )


def _versions(fake: FakeApi) -> list[str]:
    return [q["resourceVersion"][0] for p, q in fake.watched if p == "admissions"]


def test_events_come_as_their_facts_happen_through_a_drop_and_a_410(server) -> None:
    fake, api = server
    a = _admission("a", admittedTime="2026-01-01T00:00:10Z")
    fake.put(*ADMISSIONS, a)
    now = [T0 + timedelta(seconds=20)]
    # The watch, as the API server will answer it: a shrink, then the connection drops;
    # resumed, b is admitted and a grows while the watch is away, and the next watch
    # hears only a bookmark, then 410 (that version is too old now): listed again (b is
    # there, a has grown), the watch from the new list answers 410 as well.
    shrink = {"time": "2026-01-01T00:00:30Z", "from": 2, "to": 1, "reason": "for b"}
    dropped_at: list[str] = []

    def first() -> list[Any]:
        change = fake.change(*ADMISSIONS, _with(a, lastScale=shrink))
        dropped_at.append(str(fake.version))
        return [change, WatchStream.DROP]

    def second() -> list[Any]:
        fake.put(*ADMISSIONS, _admission("b", admittedTime="2026-01-01T00:00:40Z"))
        grow = {"time": "2026-01-01T00:00:50Z", "from": 1, "to": 2, "reason": "room"}
        fake.put(*ADMISSIONS, _with(a, lastScale=grow))
        expired = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
        return [fake.bookmark(), {"type": "ERROR", "object": expired}]

    fake.watches[ADMISSIONS] = [first, second, 410]
    writer, end = _recorder(api, lambda: now[0])
    _until(lambda: len(_versions(fake)) >= 4, "watched again")
    _until(lambda: len(_events(fake)) == 4, "four Events")
    end()
    assert _events(fake) == [
        ("a", "Admitted", 1),
        ("a", "Grown", 1),
        ("a", "Shrunk", 1),
        ("b", "Admitted", 1),
    ]
    # Listed, watched from the list; after the drop, resumed from the last version seen;
    # after 410 (in the stream, then as the answer), listed again and watched from there.
    listed = [v for p, v in fake.lists if p == "admissions"]
    assert len(listed) == 3
    assert _versions(fake)[:4] == [listed[0], dropped_at[0], listed[1], listed[2]]
    assert all(q["allowWatchBookmarks"] == ["true"] for _, q in fake.watched)
    assert all(q["watch"] == ["true"] and "timeoutSeconds" in q for _, q in fake.watched)
    # a was handed on four times (listed thrice, changed once): its Admitted is one Event.
    assert fake.writes == 4
    # The Shrunk Event was written as the watch told it, at its own time.
    [shrunk] = [e for e in fake.objects("events.k8s.io/v1", "events") if e["reason"] == "Shrunk"]
    assert shrunk["eventTime"] == "2026-01-01T00:00:30.000000Z"

    # A restarted recorder lists its Events and the objects: it writes nothing again.
    writes = fake.writes
    writer, end = _recorder(api, lambda: now[0] + timedelta(minutes=1))
    _until(lambda: writer.handed >= 2, "both Admissions read")
    end()
    assert fake.writes == writes and _events(fake)[0] == ("a", "Admitted", 1)


def test_a_change_that_comes_later_is_written_within_the_watch(server) -> None:
    """Nothing polls: a change the watch delivers after the recorder started is written
    as soon as it comes, well before any poll interval."""
    fake, api = server
    a = _admission("a", admittedTime="2026-01-01T00:00:10Z")
    fake.put(*ADMISSIONS, a)
    gate = threading.Event()

    class Late(WatchStream):
        def stream(self, amt: Any = None, decode_content: Any = None) -> Any:
            gate.wait(5)
            yield from super().stream(amt, decode_content)

    preempted = {
        "gpuSeconds": 10.0,
        "preemptions": 1,
        "lastPreemption": {
            "time": "2026-01-01T00:01:00Z",
            "by": "team-c/urgent",
            "reason": "team-c/urgent has higher priority (1000 > 0)",
        },
    }
    fake.watches[ADMISSIONS] = [
        lambda: Late([fake.change(*ADMISSIONS, _with(a, phase="Queued", service=preempted))])
    ]
    _, end = _recorder(api, lambda: T0 + timedelta(minutes=1))
    _until(lambda: len(_events(fake)) == 1, "Admitted")
    sent = time.monotonic()
    gate.set()
    _until(lambda: len(_events(fake)) == 2, "Preempted")
    took = time.monotonic() - sent
    end()
    [note] = [
        e["note"] for e in fake.objects("events.k8s.io/v1", "events") if e["reason"] == "Preempted"
    ]
    assert took < 1.0, took
    # Another namespace's job is not named.
    assert "team-c" not in note and "a job in another namespace has higher priority" in note


def _with(admission: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {**admission, "spec": {**admission["spec"], **spec}}
