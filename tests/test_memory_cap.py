"""One memory cap, in bytes, over what a webhook process keeps between requests (issue 36,
cause 7): the memos (policy/memo.py) and the request reader's last requests
(webhooks/lazy.py) are charged what they keep, stay under ``DRAGONET_MEMORY_CAP_BYTES``
together, and what they forget is freed at once, without a collection of the (frozen)
heap."""

from __future__ import annotations

import gc
import random
import tracemalloc
import weakref
from collections.abc import Iterator
from functools import partial

import orjson
import pytest

from policy.memo import Encoded, Memo
from policy.model.jobs import InvalidJob, job_or_why
from policy.model.kinds import TFJOB
from tests import metacontroller as mc
from tests.conftest import Clock
from tests.fuzz_requests import two_tier
from webhooks.app import create_app
from webhooks.config import MiB, Settings


@pytest.fixture
def no_collector() -> Iterator[None]:
    """As under a large request (webhooks.shell.Collector): nothing collects cycles."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _invalid_job(i: int) -> bytes:
    job = mc.tfjob("dragon-job1-cpu.yaml", name=f"job-{i}")
    job["metadata"]["name"] = f"Not_A_DNS_Label_{i}"
    job["metadata"]["annotations"] = {"pad": "x" * 50_000}  # what a cycle would keep alive
    return orjson.dumps(job)


def test_an_invalid_job_the_memo_forgets_is_freed_at_once(no_collector: None) -> None:
    """A memo keeps an invalid job's ``InvalidJob`` (the job's status says why): once it
    is forgotten it must go by reference counting alone. Kept with its traceback, its
    frames (the decoded job among their locals) and the exception formed a cycle, which
    the shell's frozen heap never collects."""
    memo = Memo()
    value = memo.parsed("job:TFJob", Encoded(_invalid_job(0)), partial(job_or_why, kind=TFJOB))
    assert isinstance(value, InvalidJob) and "DNS-1035" in str(value)
    gone = weakref.ref(value)
    del value
    memo.clear()
    assert gone() is None


def test_what_the_memos_forget_after_invalid_job_syncs_is_freed_at_once(
    no_collector: None,
) -> None:
    """The same through the app: a job's sync of an invalid job, then the memos forget
    (here: cleared, as eviction drops them) and nothing is left for a collector."""
    app = create_app(Settings(), clock=Clock())
    client = app.test_client()
    for i in range(3):
        job = orjson.loads(_invalid_job(i))
        answer = client.post("/tfjobs/sync", json=mc.job_request(mc.world(job, []), None))
        assert answer.status_code == 200
    memo = app.config["DRAGONET_MEMO"]
    kept = [weakref.ref(v) for v in memo.current.values() if isinstance(v, InvalidJob)]
    assert len(kept) == 3
    app.config["DRAGONET_MEMOS"].clear()
    assert [r for r in kept if r() is not None] == []


def test_what_the_memos_and_the_reader_forget_of_mixed_traffic_needs_no_collection(
    no_collector: None,
) -> None:
    """The campaign's traffic (every policy, a fifth to a half of the pools with a job or
    node mutated: invalid jobs, unreadable objects): once the memos and the reader forget
    it, nothing is left that only a collection frees (before: thousands of objects)."""
    app = create_app(Settings(), clock=Clock())
    client = app.test_client()
    rng = random.Random(3)
    for i in range(6):
        for path, body in two_tier(rng, rng.randint(3, 30), rng.randint(5, 40), f"p-{i % 3}", 0.6):
            client.post(path, data=body, content_type="application/json")
    gc.collect()  # (the requests' own cycles: werkzeug's router, which the shell collects)
    assert len(app.config["DRAGONET_MEMOS"]) > 0
    app.config["DRAGONET_MEMOS"].clear()
    app.config["DRAGONET_READER"].clear()
    assert gc.collect() == 0


def _traffic(rng: random.Random, rounds: int) -> Iterator[tuple[str, bytes]]:
    """Pools of 40 nodes (over the reader's 64 KiB) under eight names, in turn, each synced
    twice (as after an event that changes nothing it reads) and followed by a few of its
    jobs' syncs; a fifth with one object mutated."""
    pools = [two_tier(rng, 40, 16, f"pool-{i}") for i in range(8)]
    for _ in range(rounds):
        for requests in pools:
            yield requests[0]
            yield from requests[:4]


@pytest.mark.slow
def test_what_a_process_keeps_stays_under_its_cap_and_is_charged_at_least_what_it_holds() -> None:
    """Under a cap a few pools overflow: after every request the memos and the reader are
    charged at most the cap together, pools are forgotten (the least recently synced) and
    so are the reader's requests; and what they hold (tracemalloc: what clearing them
    frees) is no more than what they are charged, so it is under the cap too."""
    cap = 2 * MiB
    app = create_app(Settings(memory_cap_bytes=cap), clock=Clock())
    client = app.test_client()
    memos, reader = app.config["DRAGONET_MEMOS"], app.config["DRAGONET_READER"]
    rng = random.Random(36)
    highest = 0
    tracemalloc.start()
    try:
        for path, body in _traffic(rng, 2):
            answer = client.post(path, data=body, content_type="application/json")
            assert answer.status_code in (200, 400)
            charged = memos.nbytes + reader.nbytes
            assert charged <= cap
            highest = max(highest, charged)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        memos.clear()
        reader.clear()
        gc.collect()
        held -= tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert memos.forgotten > 0 and reader.forgotten > 0 and reader.hits > 0
    assert highest > cap // 2  # (the cap was what bounded them)
    assert 0 < held <= charged, (held, charged)
