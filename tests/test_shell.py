"""The webhook's shell (webhooks/shell.py, deadline.py, metrics.py, logs.py) in process:
who may call, how large, how long; what /metrics and the logs say. The same guards on the
real gunicorn server are in test_serve.py."""

from __future__ import annotations

import gc
import io
import json
import logging
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import NOW, Clock, load_fixture
from webhooks import shell
from webhooks.app import create_app
from webhooks.config import Settings
from webhooks.deadline import FIRST_BYTE, RequestTimeout, TimeLimit
from webhooks.logs import JsonFormatter

JOB = load_fixture("job-sync-job1-admitted.json")
POOL = load_fixture("pool-sync-two-jobs.json")


def _post(app: Any, path: str, body: Any, **headers: str) -> Any:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    # buffered: the body is read and the response closed, as a server sends it
    return app.test_client().post(path, data=data, headers=headers, buffered=True)


def samples(app: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """/metrics parsed: {(sample name, sorted labels): value}."""
    response = app.test_client().get("/metrics")
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain; version=0.0.4")
    out = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


# --- 413: request size -----------------------------------------------------------------


def test_a_body_over_the_cap_is_answered_413_before_it_is_read() -> None:
    app = create_app(Settings(max_request_bytes=1000))
    # Not even JSON: a body that were read and parsed would be answered 400.
    too_big = _post(app, "/tfjobs/sync", b"x" * 1001)
    assert too_big.status_code == 413
    assert "1001 bytes" in too_big.get_json()["error"]
    assert "DRAGONET_MAX_REQUEST_BYTES" in too_big.get_json()["error"]
    assert _post(app, "/tfjobs/sync", b"x" * 1000).status_code == 400  # read, then refused
    assert _post(app, "/pools/customize", b"x" * 1001).status_code == 413


def test_a_chunked_body_without_length_is_cut_off_at_the_cap() -> None:
    app = create_app(Settings(max_request_bytes=1000))
    environ = {"wsgi.input_terminated": True}
    response = app.test_client().post(
        "/tfjobs/sync", input_stream=io.BytesIO(b" " * 5000), environ_overrides=environ
    )
    assert response.status_code == 413
    assert response.is_json


def test_the_default_cap_takes_a_large_pools_request() -> None:
    # ~12 MiB for 1,000 nodes and 5,000 pods (benchmarks/sync_latency.py): well under.
    assert Settings().max_request_bytes == 64 << 20


# --- 401: the shared secret ------------------------------------------------------------


def test_with_a_shared_secret_every_hook_needs_it_and_health_does_not() -> None:
    app = create_app(Settings(shared_secret="s3cret-token"), clock=Clock())
    for path, body in [("/tfjobs/sync", JOB), ("/pools/sync", POOL), ("/tfjobs/finalize", JOB)]:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
            refused = _post(app, path, body, **headers)
            assert refused.status_code == 401, (path, headers)
            assert "Authorization: Bearer" in refused.get_json()["error"]
            assert refused.headers["WWW-Authenticate"].startswith("Bearer")
    assert _post(app, "/tfjobs/sync", JOB, Authorization="Bearer s3cret-token").status_code == 200
    assert _post(app, "/pools/sync", POOL, Authorization="bearer s3cret-token").status_code == 200
    assert app.test_client().get("/healthz").status_code == 200
    assert app.test_client().get("/metrics").status_code == 200


def test_the_secret_is_read_from_a_mounted_file(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("from-a-secret\n")  # kubectl create secret --from-file keeps newlines
    app = create_app(Settings(shared_secret_file=str(secret)), clock=Clock())
    assert _post(app, "/tfjobs/sync", JOB).status_code == 401
    assert _post(app, "/tfjobs/sync", JOB, Authorization="Bearer from-a-secret").status_code == 200
    secret.write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        create_app(Settings(shared_secret_file=str(secret)))


def test_without_a_secret_hooks_are_open() -> None:
    assert _post(create_app(clock=Clock()), "/tfjobs/sync", JOB).status_code == 200


# --- 422: the time limit -----------------------------------------------------------------


def test_a_request_past_the_time_limit_is_answered_422_and_the_next_one_is_not() -> None:
    slow = {"on": True}

    def clock() -> Any:  # the hook asks for "now" while it works: Python that never ends
        while slow["on"]:
            pass
        return NOW

    app = create_app(Settings(request_timeout_seconds=0.2), clock=clock)
    started = time.monotonic()
    answer = _post(app, "/tfjobs/sync", JOB)
    elapsed = time.monotonic() - started
    assert answer.status_code == 422
    assert answer.get_json()["error"] == (
        "/tfjobs/sync for default/job1 took longer than the webhook's limit of 0.2 s "
        "(DRAGONET_REQUEST_TIMEOUT_SECONDS); it was stopped"
    )
    assert 0.2 <= elapsed < 2
    slow["on"] = False
    assert _post(app, "/tfjobs/sync", JOB).status_code == 200
    time.sleep(0.3)  # nothing fires later in a thread that left the request
    assert _post(app, "/tfjobs/sync", JOB).status_code == 200


def test_the_time_limit_counts_from_the_requests_first_byte() -> None:
    """The server says when the request's first byte arrived (FIRST_BYTE): time spent
    arriving and waiting for a thread is spent from the limit, so the 422 comes at the
    deadline from the first byte, not a whole limit after the hook started."""
    slow = {"on": True}

    def clock() -> Any:
        while slow["on"]:
            pass
        return NOW

    app = create_app(Settings(request_timeout_seconds=1.0), clock=clock)
    started = time.monotonic()
    answer = app.test_client().post(
        "/tfjobs/sync",
        data=orjson.dumps(JOB),
        environ_base={FIRST_BYTE: started - 0.8},  # it took 0.8 s to arrive
    )
    elapsed = time.monotonic() - started
    assert answer.status_code == 422
    assert 0.15 <= elapsed < 0.6, elapsed
    slow["on"] = False
    late = app.test_client().post(  # arrived after the limit: answered at once
        "/tfjobs/sync", data=orjson.dumps(JOB), environ_base={FIRST_BYTE: time.monotonic() - 2}
    )
    assert late.status_code == 422


def test_a_timed_out_sync_gives_its_in_flight_slot_back() -> None:
    slow = {"on": True}

    def clock() -> Any:
        while slow["on"]:
            pass
        return NOW

    app = create_app(Settings(request_timeout_seconds=0.05, max_inflight=1), clock=clock)
    assert [_post(app, "/tfjobs/sync", JOB).status_code for _ in range(3)] == [422] * 3
    slow["on"] = False
    assert _post(app, "/tfjobs/sync", JOB).status_code == 200


# --- the cycle collector around large requests --------------------------------------------


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_cyclic_garbage_left_by_large_requests_is_still_freed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every request counts as large here.
    monkeypatch.setattr(shell, "COLLECTOR", shell.Collector(big=1))
    left: list[weakref.ref[_Cycle]] = []

    def clock() -> Any:  # garbage in a reference cycle, made while a request is answered
        left.append(weakref.ref(_Cycle()))
        return NOW

    app = create_app(clock=clock)
    for _ in range(5):
        assert _post(app, "/pools/sync", POOL).status_code == 200
    assert len(left) == 5
    assert [ref() for ref in left] == [None] * 5


def test_a_large_request_frees_its_own_cycles_and_nothing_walks_the_whole_heap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The campaign saw the periodic full collection stall a worker for 20.6 s, past the
    deadline: the collector now only ever collects the young generation (what the large
    request left), and the cycles a request made are gone once it is answered."""
    monkeypatch.setattr(shell, "COLLECTOR", shell.Collector(big=1))
    collect = gc.collect
    generations: list[int] = []

    def recorded(generation: int = 2) -> int:
        generations.append(generation)
        return collect(generation)

    monkeypatch.setattr(shell.gc, "collect", recorded)
    left: list[weakref.ref[_Cycle]] = []

    def clock() -> Any:
        left.append(weakref.ref(_Cycle()))
        return NOW

    app = create_app(clock=clock)
    try:
        for n in range(1, 1_201):
            assert _post(app, "/tfjobs/sync", JOB).status_code == 200
            if n % 400 == 0:
                assert [ref() for ref in left] == [None] * n
        assert set(generations) == {0} and len(generations) == 2 * 1_200
    finally:
        gc.unfreeze()


def test_a_large_requests_collection_waits_until_its_answer_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Behind ``dragonet serve`` (``AFTER_SEND``), the young collection after a large sync
    (~12 % of a cold 1,000-node sync) runs once the answer is out, not before it; until
    then the collector stays off, also across a second large request in between."""
    monkeypatch.setattr(shell, "COLLECTOR", shell.Collector(big=1))
    left: list[weakref.ref[_Cycle]] = []

    def clock() -> Any:
        left.append(weakref.ref(_Cycle()))
        return NOW

    app = create_app(clock=clock)
    body = orjson.dumps(POOL)
    after_send: list[Any] = []
    try:
        for _ in range(2):  # the second starts before the first is settled
            got = app.test_client().post(
                "/pools/sync", data=body, environ_overrides={shell.AFTER_SEND: after_send}
            )
            assert got.status_code == 200
        assert len(after_send) == 2 and len(left) == 2
        assert not gc.isenabled()  # answered, not yet collected: nothing walks it yet
        assert all(ref() is not None for ref in left)
        for call in after_send:
            call()
        assert [ref() for ref in left] == [None, None]
        assert gc.isenabled()  # on again, as it was before the first large request
    finally:
        gc.enable()
        gc.unfreeze()


def test_the_collector_is_off_during_a_large_request_and_back_on_after_any(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shell, "COLLECTOR", shell.Collector(big=len(orjson.dumps(POOL))))
    during: list[bool] = []

    def clock() -> Any:
        during.append(gc.isenabled())
        return NOW

    def forever() -> Any:
        while True:
            pass

    slow = create_app(Settings(request_timeout_seconds=0.05), clock=forever)
    app = create_app(clock=clock)
    try:
        assert _post(app, "/pools/sync", POOL).status_code == 200
        assert _post(app, "/tfjobs/sync", JOB).status_code == 200  # smaller: left alone
        assert during == [False, True] and gc.isenabled()
        assert _post(app, "/pools/sync", b"[" * len(orjson.dumps(POOL))).status_code == 400
        assert gc.isenabled()
        assert _post(slow, "/pools/sync", POOL).status_code == 422
        assert gc.isenabled()
        gc.disable()  # whoever turned it off keeps it off
        assert _post(app, "/pools/sync", POOL).status_code == 200
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_a_request_stuck_in_one_call_gives_the_process_up() -> None:
    """A thread inside one C call (here a sleep) cannot take the exception until the call
    returns: past ``stuck_after`` the limit gives the process up (in the server: the worker
    exits and gunicorn starts another)."""
    stuck: list[dict[str, Any]] = []
    limit = TimeLimit(0.05, stuck_after=0.1, on_stuck=stuck.append)
    raised: list[BaseException] = []

    def request() -> None:
        try:
            with limit.guard({"hook": "/tfjobs/sync", "job": "job1"}):
                time.sleep(0.6)
        except RequestTimeout as err:
            raised.append(err)

    thread = threading.Thread(target=request)
    thread.start()
    time.sleep(0.4)
    assert stuck == [{"hook": "/tfjobs/sync", "job": "job1", "limit_seconds": 0.05}]
    thread.join()
    assert len(raised) == 1, "the exception still lands once the call returns"


def test_requests_within_the_limit_are_left_alone() -> None:
    """200 quick requests: none is timed out, the process is never given up, and no
    exception is left pending for the thread once they are done. (``on_stuck`` runs on
    the watchdog's thread: it records, the test asserts.)"""
    stuck: list[dict[str, Any]] = []
    limit = TimeLimit(0.05, stuck_after=0.05, on_stuck=stuck.append)
    answered = 0
    late: list[BaseException] = []
    for _ in range(200):
        with limit.guard():
            answered += 1
    deadline = time.monotonic() + 0.2
    try:
        while time.monotonic() < deadline:  # an exception left pending would land here
            pass
    except RequestTimeout as err:
        late.append(err)
    assert answered == 200
    assert late == []
    assert stuck == []


# --- 429 --------------------------------------------------------------------------------


def test_refusals_do_not_take_an_in_flight_slot() -> None:
    app = create_app(Settings(max_inflight=1, max_request_bytes=100), clock=Clock())
    for _ in range(3):
        assert _post(app, "/tfjobs/sync", b"x" * 200).status_code == 413
        assert _post(app, "/tfjobs/sync", b"garbage").status_code == 400
    assert _post(app, "/tfjobs/sync", b"{}").status_code == 400  # not 429


def test_a_second_large_sync_in_one_process_is_answered_429_and_small_ones_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 36: 2-4 syncs of 1,000-node pools at once shared one process's core and every
    one was answered 422 at the deadline. A process now works on one large sync at a time:
    another is told to come back (429 + Retry-After, which Metacontroller honours without
    backoff), a small one is answered meanwhile, and the large slot is free again after."""
    body = orjson.dumps(POOL)
    monkeypatch.setattr(shell, "LARGE_SYNC", len(body), raising=False)  # this pool is large
    entered, release = threading.Event(), threading.Event()

    def clock() -> Any:  # the first large sync stays in flight until released
        if threading.current_thread().name == "held":
            entered.set()
            release.wait(10)
        return NOW

    app = create_app(Settings(max_inflight=3), clock=clock)
    held: list[int] = []
    first = threading.Thread(
        target=lambda: held.append(_post(app, "/pools/sync", body).status_code), name="held"
    )
    first.start()
    try:
        assert entered.wait(10)
        busy = _post(app, "/pools/sync", body)
        assert busy.status_code == 429
        assert busy.headers["Retry-After"] == "2"
        assert "large sync" in busy.get_json()["error"]
        assert _post(app, "/tfjobs/sync", JOB).status_code == 200  # small: not held back
    finally:
        release.set()
        first.join(10)
    assert held == [200]
    assert _post(app, "/pools/sync", body).status_code == 200  # the slot was given back


# --- /metrics -------------------------------------------------------------------------


def test_metrics_count_hooks_by_code_and_hold_no_pool_state() -> None:
    app = create_app(Settings(max_request_bytes=100_000), clock=Clock())
    for _ in range(2):
        assert _post(app, "/pools/sync", POOL).status_code == 200
    for _ in range(3):
        assert _post(app, "/tfjobs/sync", JOB).status_code == 200
    assert _post(app, "/tfjobs/sync", b"garbage").status_code == 400
    assert _post(app, "/tfjobs/sync", b" " * 100_001).status_code == 413
    m = samples(app)
    answers = "dragonet_hook_answers_total"
    assert m[(answers, (("code", "200"), ("hook", "/pools/sync")))] == 2
    assert m[(answers, (("code", "200"), ("hook", "/tfjobs/sync")))] == 3
    assert m[(answers, (("code", "400"), ("hook", "/tfjobs/sync")))] == 1
    assert m[(answers, (("code", "413"), ("hook", "/tfjobs/sync")))] == 1
    duration = "dragonet_hook_duration_seconds_count"
    assert m[(duration, (("hook", "/pools/sync"),))] == 2
    assert m[(duration, (("hook", "/tfjobs/sync"),))] == 5
    size = len(orjson.dumps(POOL))
    assert m[("dragonet_hook_request_bytes_sum", (("hook", "/pools/sync"),))] == 2 * size
    # A replica's answers are not the pool's state: the recorder exports that, once.
    assert not [name for name, _ in m if name.startswith("dragonet_pool_")]


def test_metrics_keep_each_series_and_count_as_labels_would() -> None:
    """Metrics looks each labelled series up once: what /metrics shows is what calling
    ``labels`` on every observation shows, and a series nothing observed stays absent."""
    from prometheus_client import generate_latest

    from webhooks.metrics import Metrics

    kept, plain = Metrics(), Metrics()
    answers = [
        ("/tfjobs/sync", 200, 0.01, 2000, 900),
        ("/tfjobs/sync", 200, 0.2, None, 900),
        ("/tfjobs/sync", 413, 0.001, 10**9, None),
        ("/pools/sync", 200, 3.0, 5 * 2**20, 2**20),
    ]
    for hook, code, seconds, request_bytes, size in answers:
        kept.hook_answer(hook, code, seconds, request_bytes, size)
        plain.latency.labels(hook).observe(seconds)
        plain.answers.labels(hook, str(code)).inc()
        if request_bytes is not None:
            plain.request_bytes.labels(hook).observe(request_bytes)
        if size is not None:
            plain.response_bytes.labels(hook).observe(size)

    def shown(m: Metrics) -> list[str]:  # but the times each series was created
        text = generate_latest(m.registry).decode()
        return [line for line in text.splitlines() if "_created" not in line]

    assert shown(kept) == shown(plain)
    assert not any("/healthz" in line for line in shown(kept))  # nothing observed: absent


# --- logs -------------------------------------------------------------------------------


@pytest.fixture
def json_log() -> Any:
    """The JSON lines the webhook's loggers write (formatted as they are emitted, in the
    request's thread, as the server's handler does)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("dragonet")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.DEBUG)
    yield lambda: [json.loads(line) for line in out.getvalue().splitlines()]
    logger.removeHandler(handler)
    logger.setLevel(old)


def test_every_log_line_about_a_request_names_its_parent(json_log: Any) -> None:
    app = create_app(Settings(), clock=Clock())
    assert _post(app, "/pools/sync", POOL).status_code == 200
    assert _post(app, "/tfjobs/sync", JOB).status_code == 200
    lines = json_log()
    by_hook = {}
    for line in lines:
        by_hook.setdefault(line.get("hook"), []).append(line)
    # The pool's debug line and its request line, then the job's request line.
    assert [line["message"] for line in by_hook["/pools/sync"]][-1] == "POST /pools/sync 200"
    assert len(by_hook["/pools/sync"]) == 2
    assert all(line["pool"] == "default" for line in by_hook["/pools/sync"])
    (job_line,) = by_hook["/tfjobs/sync"]
    assert (job_line["namespace"], job_line["job"]) == ("default", "job1")
    assert job_line["status"] == 200
    assert job_line["latency_ms"] > 0
    assert job_line["request_bytes"] == len(orjson.dumps(JOB))
    assert job_line["level"] == "info" and job_line["logger"] == "dragonet.access"


def test_a_refused_request_is_logged_with_its_error(json_log: Any) -> None:
    app = create_app(Settings(), clock=Clock())
    assert _post(app, "/tfjobs/sync", {"parent": []}).status_code == 400
    (line,) = json_log()
    assert line["status"] == 400
    assert "parent" in line["error"]
    assert "job" not in line  # nothing readable to name


def test_an_exited_workers_metrics_are_folded_into_the_archive(tmp_path: Path) -> None:
    """Counters and histogram buckets add up; a ``mostrecent`` gauge keeps its newest value,
    whichever file it is in; the exited worker's files are gone."""
    from prometheus_client.mmap_dict import MmapedDict, mmap_key

    from webhooks.metrics import compact

    def write(name: str, values: dict[str, tuple[float, float]]) -> None:
        f = MmapedDict(str(tmp_path / name))
        for key, (value, timestamp) in values.items():
            f.write_value(key, value, timestamp)
        f.close()

    def read(name: str) -> dict[str, tuple[float, float]]:
        return {
            k: (v, t) for k, v, t, _ in MmapedDict.read_all_values_from_file(str(tmp_path / name))
        }

    answers = mmap_key("a", "a_total", ["code"], ["200"], "h")
    queued = mmap_key("q", "q", ["pool"], ["default"], "h")
    write("counter_archive.db", {answers: (5.0, 0.0)})
    write("counter_111.db", {answers: (3.0, 0.0)})
    write("gauge_mostrecent_archive.db", {queued: (7.0, 100.0)})
    write("gauge_mostrecent_111.db", {queued: (2.0, 50.0)})  # older than the archive's
    write("counter_222.db", {answers: (1.0, 0.0)})  # a live worker: left alone
    compact(111, str(tmp_path))
    assert sorted(f.name for f in tmp_path.glob("*.db")) == [
        "counter_222.db",
        "counter_archive.db",
        "gauge_mostrecent_archive.db",
    ]
    assert read("counter_archive.db") == {answers: (8.0, 0.0)}
    assert read("gauge_mostrecent_archive.db") == {queued: (7.0, 100.0)}
    write("gauge_mostrecent_222.db", {queued: (4.0, 200.0)})
    compact(222, str(tmp_path))
    assert read("counter_archive.db") == {answers: (9.0, 0.0)}
    assert read("gauge_mostrecent_archive.db") == {queued: (4.0, 200.0)}
