"""Any replica, any instant, the same answer (DESIGN §2; issue 36, cause 5).

A process that synced a pool a moment ago keeps its answer (``policy.pool.sync``'s memo)
until a time rule's wake; a fresh process computes it. They must agree byte for byte at
every instant, above all at the instants where the answer changes: a job crossing a least
attained service limit, a preempted job's promotion coming due, a tick of the decision
interval, any wake the answer itself asks for, and the instants just before and after.

Generated pools (running jobs started at various times, some with a deadline, queued jobs,
preempted ones with the service they attained, one to three LAS limits, with or without a
decision interval), sent through the real webhook app as Metacontroller sends them: the
same pool again and again, its status as the last answer wrote it, and each running job's
own sync. A warm app walks every instant in order (its memos filled by the syncs just
before), a second warm app jumps between a few of them, and each answer is compared with
an app that remembers nothing.
"""

from __future__ import annotations

import heapq
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.model.request import object_map
from policy.pool.cadence import next_tick
from tests import metacontroller as mc
from tests.conftest import Clock, versioned
from tests.poolbuilder import PoolBuilder
from webhooks.app import create_app
from webhooks.config import Settings

START = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)
HORIZON = timedelta(seconds=900)
MAX_INSTANTS = 70  # per example: enough for every crossing, wake and tick drawn
LIMITS_GPU_H = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)  # 18 to 720 GPU-seconds


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@st.composite
def pools(draw: st.DrawFn) -> tuple[dict[str, Any], list[bytes], list[datetime]]:
    """A pool's sync request, its running jobs' sync requests, and the instants its time
    rules act at, as its jobs say (each running job's crossing of each limit and its
    deadline, each preempted job's promotion)."""
    limits = sorted(draw(st.sets(st.sampled_from(LIMITS_GPU_H), min_size=1, max_size=3)))
    policy = draw(st.sampled_from(["dragonet-las", "tiresias"]))
    spec: dict[str, Any] = {
        "lasThresholdsGPUHours": limits,
        "lasPromotion": draw(st.booleans()),
        "decisionIntervalSeconds": draw(st.sampled_from([0.0, 0.0, 7.0, 60.0])),
        "starvationSeconds": draw(st.sampled_from([5.0, 30.0])),
    }
    if policy == "dragonet-las":
        spec["lasByRemaining"] = draw(st.booleans())
    b = PoolBuilder(policy=policy, pool_spec=spec)
    free: list[int] = []
    for i in range(draw(st.integers(1, 3))):
        gpus = draw(st.sampled_from([2, 4, 8]))
        b.node(f"n{i}", cpu=32, gpu=gpus)
        free.append(gpus)
    instants: list[datetime] = []
    for j in range(draw(st.integers(0, 3))):
        per = draw(st.sampled_from([1, 2, 3, 4]))
        workers = draw(st.integers(1, 2))
        where = []
        for w in range(workers):
            node = next((n for n, room in enumerate(free) if room >= per), None)
            if node is None:
                break
            free[node] -= per
            where.append(f"Worker-{w}@n{node}")
        if not where:
            continue
        started = START - timedelta(seconds=draw(st.integers(0, 120)))
        b.running(f"r{j}", tuple(where), gpu=per, started=_stamp(started))
        rate = per * len(where)
        instants += [started + timedelta(seconds=h * 3600 / rate) for h in limits]
        deadline = draw(st.sampled_from([None, None, 30, 200]))
        if deadline is not None:  # the job fails then: the pool stops planning it
            b.jobs[-1]["spec"]["runPolicy"] = {"activeDeadlineSeconds": deadline}
            instants.append(started + timedelta(seconds=deadline))
    running = [(job, admission) for job, admission in zip(b.jobs, b.admissions, strict=True)]
    for j in range(draw(st.integers(0, 3))):
        b.queued(f"q{j}", gpu=draw(st.sampled_from([1, 2, 4])), workers=draw(st.integers(1, 2)))
    for j in range(draw(st.integers(0, 2))):  # preempted: queued again with what it attained
        name, per = f"p{j}", draw(st.sampled_from([1, 2, 4]))
        b.queued(name, gpu=per)
        attained = draw(st.sampled_from([18.0, 40.0, 200.0, 1000.0]))
        stopped = START - timedelta(seconds=draw(st.integers(0, 200)))
        admission = _preempted(b.jobs[-1], attained, stopped)
        b.admissions.append(admission)
        instants.append(stopped + timedelta(seconds=attained / per))
    jobs = [_job_request(job, admission, b.pods) for job, admission in running]
    return versioned(b.request()), jobs, instants


def _job_request(
    job: dict[str, Any], admission: dict[str, Any], pods: list[dict[str, Any]]
) -> bytes:
    """A running job's sync request, as its CompositeController sends it."""
    uid = job["metadata"]["uid"]
    own = [p for p in pods if p["metadata"]["labels"].get("controller-uid") == uid]
    return orjson.dumps(
        versioned(
            {
                "controller": mc.controller(),
                "parent": job,
                "children": object_map(own, mc.TF_CHILD_TYPES),
                "related": object_map([admission], [mc.ADMISSIONS]),
                "finalizing": False,
            }
        )
    )


def _preempted(job: dict[str, Any], gpu_seconds: float, at: datetime) -> dict[str, Any]:
    admission = mc.admission(job, phase="Queued", message="preempted")
    admission["spec"]["reason"] = "Preempted"
    admission["spec"]["service"] = {
        "gpuSeconds": gpu_seconds,
        "preemptions": 1,
        "lasPreemptions": 1,
        "lastPreemption": {"time": _stamp(at), "by": "default/other", "reason": "test"},
    }
    return admission


def _around(t: datetime) -> list[datetime]:
    """The whole seconds just before, at and after ``t`` (the webhook's ``now`` has whole
    seconds, as Kubernetes timestamps do)."""
    low = t.replace(microsecond=0)
    high = low if t == low else low + timedelta(seconds=1)
    return [low - timedelta(seconds=1), low, high, high + timedelta(seconds=1)]


class App:
    def __init__(self) -> None:
        self.clock = Clock(START)
        self.app = create_app(Settings(), clock=self.clock)
        self.client = self.app.test_client()

    def post(self, body: bytes, at: datetime, path: str = "/pools/sync") -> tuple[int, bytes]:
        self.clock.now = at
        r = self.client.post(path, data=body, content_type="application/json")
        return r.status_code, r.data

    def forget(self) -> None:
        self.app.config["DRAGONET_MEMOS"].clear()


def _with_status(request: dict[str, Any], status: Any) -> bytes:
    """The pool's request with its status as the last answer wrote it (Metacontroller
    writes it back; under a decision interval, it says when the pool last decided)."""
    parent = {**request["parent"], "status": status or {}}
    return orjson.dumps({**request, "parent": parent})


@pytest.mark.slow  # 30 pools, each compared at every instant (20 s): make test-slow, CI
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(pools(), st.data())
def test_a_warm_process_answers_as_a_fresh_one_at_every_instant(
    pool: tuple[dict[str, Any], list[bytes], list[datetime]], data: st.DataObject
) -> None:
    request, jobs, crossings = pool
    interval = request["parent"]["spec"].get("decisionIntervalSeconds") or 0.0
    end = START + HORIZON
    todo: list[datetime] = [START]
    for t in crossings:
        todo += _around(t)
    tick = START
    for _ in range(6 if interval else 0):  # the interval's ticks, counted from the epoch
        tick = next_tick(tick, timedelta(seconds=interval))
        todo += _around(tick)
    heapq.heapify(todo)
    walker, fresh = App(), App()
    jumper = App()
    jumps = data.draw(st.floats(0.0, 1.0), label="share of instants the jumper syncs at")
    status: Any = {}
    seen: set[datetime] = set()
    compared = 0
    while todo and compared < MAX_INSTANTS:
        now = heapq.heappop(todo)
        if now in seen or now < START or now > end:
            continue
        seen.add(now)
        body = _with_status(request, status)
        fresh.forget()
        expected = fresh.post(body, now)
        assert walker.post(body, now) == expected, (now, "after the sync just before")
        if data.draw(st.floats(0.0, 1.0), label="jump") < jumps:
            assert jumper.post(body, now) == expected, (now, "after an earlier sync")
        compared += 1
        code, raw = expected
        assert code == 200, raw
        answer = orjson.loads(raw)
        status = answer["status"]
        resyncs = [answer.get("resyncAfterSeconds")]
        for job in jobs:  # and each running job's own sync (its memo, its deadline)
            fresh.forget()
            expected = fresh.post(job, now, "/tfjobs/sync")
            assert walker.post(job, now, "/tfjobs/sync") == expected, (now, "a job's sync")
            assert expected[0] == 200, expected[1]
            resyncs.append(orjson.loads(expected[1]).get("resyncAfterSeconds"))
        for resync in resyncs:
            if resync is not None:
                for t in _around(now + timedelta(seconds=math.ceil(resync))):
                    heapq.heappush(todo, t)
    assert compared > 0


def test_at_the_instant_a_job_crosses_a_limit_a_process_that_synced_before_agrees() -> None:
    """The job "long" (4 GPUs since 10:00:00) crosses 0.2 GPU-h (720 GPU-seconds) at
    10:03:00 exactly. A process that answered at 10:02:59 was told to wake 1 ms after the
    crossing, so at 10:03:00 it gave its earlier answer again (asking to be synced once
    more), while a fresh process already counted the job past the limit."""
    b = PoolBuilder(
        policy="dragonet-las",
        pool_spec={"lasThresholdsGPUHours": [0.1, 0.2], "lasByRemaining": False},
    )
    b.node("n1", cpu=16, gpu=4)
    b.running("long", ("Worker-0@n1",), gpu=4, started="2026-11-21T10:00:00Z")
    b.queued("short", gpu=4)
    body = orjson.dumps(versioned(b.request()))
    crossing = datetime(2026, 11, 21, 10, 3, 0, tzinfo=UTC)
    warm, fresh = App(), App()
    _, before = warm.post(body, crossing - timedelta(seconds=1))
    assert warm.post(body, crossing) == fresh.post(body, crossing)
    assert orjson.loads(before)["resyncAfterSeconds"] == 1  # the crossing, not just after


@given(
    past=st.floats(0, 1e9),
    rate=st.floats(1e-3, 1e4),
    started_us=st.integers(0, 10**12),
    ahead=st.floats(1e-6, 1e8),
)
def test_a_crossing_wake_is_the_first_instant_the_queue_counts_the_job_past_its_limit(
    past: float, rate: float, started_us: int, ahead: float
) -> None:
    """To the microsecond: at the wake the service the queue reads has reached the limit,
    a microsecond before it has not (whatever the rounding of the arithmetic)."""
    from policy.pool.attained_service import _crossing, _service_at

    started = START - timedelta(microseconds=started_us)
    weighted = rate * started.timestamp()
    limit = _service_at(START, past, rate, weighted) + ahead
    wake = _crossing(START, past, rate, weighted, limit)
    if wake is None:  # past the horizon
        assert ahead / rate > 100 * 365 * 24 * 3600 * 0.99
        return
    assert wake > START
    assert _service_at(wake, past, rate, weighted) >= limit
    assert _service_at(wake - timedelta(microseconds=1), past, rate, weighted) < limit
