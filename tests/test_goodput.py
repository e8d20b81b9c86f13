"""The allocation rule (policy/pool/goodput.py): spare workers go where the jobs' own
reports say they add the most speed, charged their restart, re-decided on an interval.

Every case is a small pool whose right answer is worked out by hand from the reported
speeds (steps per second, in the job's ``dragonet.io/throughput`` annotation, as the
Container Monitor writes it):

* ``linear`` ran at 1 and 2 workers at 1.0 and 2.0 steps/s: each worker adds as much as
  the first, so worker 3 makes it 50 % faster and worker 4 another 33 %;
* ``flat`` ran at 1 and 2 workers at 1.0 and 1.05 steps/s: its parameter server holds it
  back (Amdahl: 1/f = 0.095/w + 0.905), so worker 3 adds 1.7 % (less than the pool's
  ``minGainPerWorker``, 5 %);
* a job without the annotation is planned as before this rule: ``grow_by_gain``.
"""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest

from policy.model.speedup import estimate
from policy.model.throughput import ANNOTATION, Config, parse
from policy.model.timeutil import format_time
from policy.pool.goodput import give_back, grow_by_goodput, worth
from policy.pool.grow import grow, grow_by_gain
from policy.pool.queue import enqueue_time
from policy.pool.shrink import make_room
from tests.conftest import NOW, Hook
from tests.poolbuilder import PoolBuilder, nodes_of


def history(*speeds: tuple[int, float]) -> dict[str, str]:
    """The annotation of a job measured at (workers, steps/s), packed with 1 PS, 8 minutes
    at each."""
    readings = [
        {"workers": w, "ps": 1, "remote": 0, "nodes": 1, "stepsPerSecond": f, "reports": 8}
        for w, f in speeds
    ]
    return {ANNOTATION: orjson.dumps({"version": 1, "readings": readings}).decode()}


LINEAR = history((1, 1.0), (2, 2.0))
FLAT = history((1, 1.0), (2, 1.05))


def _pool(interval: float = 0.0, **annotations: dict[str, str] | None) -> PoolBuilder:
    """Node ``a`` holds both jobs' PS and 2 workers each, and 2 more workers: the room
    the rule gives out (``b`` is full). Each job may grow to 4 workers."""
    b = PoolBuilder(
        policy="dragonet",
        pool_spec={"allocationIntervalSeconds": interval, "restartSeconds": 30},
    )
    b.node("a", 8)
    for name in ("first", "second"):
        b.running(
            name,
            ("PS-0@a", "Worker-0@a", "Worker-1@a"),
            ps=1,
            low=1,
            high=4,
            annotations=annotations.get(name),
            started="2026-11-21T09:00:00Z" if name == "first" else "2026-11-21T09:30:00Z",
        )
    return b


def _grown(b: PoolBuilder) -> dict[str, int]:
    view = b.view()
    out = grow(view.ledger, view.running)
    return {k.split("/")[1]: len(nodes_of(v)) for k, v in out.items()}


def test_the_model_behind_the_cases() -> None:
    """The hand-worked numbers above, from the estimator the rule reads."""
    linear = estimate(parse(LINEAR[ANNOTATION]))
    flat = estimate(parse(FLAT[ANNOTATION]))
    two, three = Config(2, 1), Config(3, 1)
    assert linear.throughput(three) / linear.throughput(two) == pytest.approx(1.5, rel=0.01)
    assert flat.throughput(three) / flat.throughput(two) == pytest.approx(1.017, abs=0.003)


def test_both_spare_workers_go_to_the_job_that_scales() -> None:
    """``linear`` gains 50 % then 33 %; ``flat`` 1.7 %: ``linear`` takes both, although
    ``flat`` has as few workers (today's rule splits them, one each)."""
    assert _grown(_pool(first=FLAT, second=LINEAR)) == {"second": 2}
    assert _grown(_pool(first=LINEAR, second=FLAT)) == {"first": 2}


def test_without_reports_the_pool_grows_as_before() -> None:
    b = _pool()
    view = b.view()
    candidates = list(enumerate(view.running))
    expected = grow_by_gain(b.view().ledger, candidates)
    got = grow_by_goodput(view.ledger, candidates)
    assert {k: nodes_of(v) for k, v in got.items()} == {k: nodes_of(v) for k, v in expected.items()}
    assert _grown(b) == {"first": 1, "second": 1}


def test_a_job_that_reports_nothing_is_not_held_back_by_the_limit() -> None:
    """``flat``'s own reports stop it; the silent job grows on the linear prior."""
    assert _grown(_pool(first=FLAT)) == {"second": 2}


def test_a_job_whose_reports_promise_too_little_leaves_the_room_free() -> None:
    """Two flat jobs: no worker is worth its GPU; the room stays for the queue."""
    assert _grown(_pool(first=FLAT, second=FLAT)) == {}


def test_the_restart_is_charged_over_the_interval() -> None:
    """A worker worth 8 % is worth 8 % x (60 - 30) / 60 = 4 % over a 60 s interval with a
    30 s restart: under the 5 % limit. With a 600 s interval, 7.6 %: it grows."""
    c = Config(2, 1)
    modest = estimate(parse(history((1, 1.0), (2, 1.222))[ANNOTATION]))  # 2 -> 3: +8 %
    gain = modest.throughput(Config(3, 1)) / modest.throughput(c) - 1
    short = worth(modest, c, local=True, restart_s=30, interval_s=60)
    long = worth(modest, c, local=True, restart_s=30, interval_s=600)
    assert gain == pytest.approx(0.08, abs=0.002)
    assert short.informed and short.value == pytest.approx(gain * 0.5)
    assert long.value == pytest.approx(gain * 0.95)
    assert short.value < 0.05 < long.value


def _borrowing(annotation: dict[str, str] | None, started: str = "2026-11-21T09:00:00Z"):
    """One job of Worker.replicas 2 grown to 4 on node ``a`` (all of ``a``'s room)."""
    b = PoolBuilder(policy="dragonet", pool_spec={"allocationIntervalSeconds": 60})
    b.node("a", 5)
    b.running(
        "big",
        ("PS-0@a", "Worker-0@a", "Worker-1@a", "Worker-2@a", "Worker-3@a"),
        ps=1,
        workers=2,
        low=1,
        high=4,
        annotations=annotation,
        started=started,
    )
    return b


SATURATED = history((2, 1.0), (3, 1.0), (4, 0.98))  # workers 3 and 4 add nothing


def test_a_borrowed_worker_that_adds_nothing_goes_back() -> None:
    view = _borrowing(SATURATED).view()
    (r,) = view.running
    give_back(view.ledger, view.running)
    assert [p.name for p in view.ledger.victims[r.job.key]] == ["big-worker-3"]
    scale = view.ledger.scales[r.job.key]
    assert (scale.before, scale.after) == (4, 3)
    assert "adds 0.0%" in scale.reason and "minGainPerWorker" in scale.reason


@pytest.mark.parametrize(
    "annotation",
    [None, LINEAR, history((2, 1.0), (4, 1.9))],
    ids=["silent", "one count linear", "scales"],
)
def test_a_worker_worth_its_room_or_unmeasured_stays(annotation: dict[str, str] | None) -> None:
    view = _borrowing(annotation).view()
    give_back(view.ledger, view.running)
    assert view.ledger.victims == {} and view.ledger.scales == {}


def test_give_back_never_takes_a_worker_that_adds_nothing_below_worker_replicas() -> None:
    b = PoolBuilder(policy="dragonet", pool_spec={"allocationIntervalSeconds": 60})
    b.node("a", 5)
    b.running("tuned", ("PS-0@a", "Worker-0@a", "Worker-1@a", "Worker-2@a"), ps=1, high=4,
              annotations=SATURATED)  # fmt: skip
    view = b.view()
    give_back(view.ledger, view.running)
    assert view.ledger.victims == {}


def _admitted(body: dict) -> dict[str, dict]:
    return {c["spec"]["job"]["name"]: c for c in body["children"]}


def test_through_the_webhook_the_reports_decide_who_grows() -> None:
    """The pool's sync as Metacontroller sends it: the Admission of the job that scales
    gets both new workers, with why; the flat job's stays at 2 (and says nothing changed)."""
    body = Hook().pool_sync(_pool(first=FLAT, second=LINEAR).request())
    got = _admitted(body)
    assert got["second"]["spec"]["workers"] == 4
    assert got["first"]["spec"]["workers"] == 2
    assert "grew from 2 to 4" in got["second"]["spec"]["lastScale"]["reason"]
    plain = _admitted(Hook().pool_sync(_pool().request()))  # nobody reports: one each
    assert (plain["first"]["spec"]["workers"], plain["second"]["spec"]["workers"]) == (3, 3)


def _last_scaled(b: PoolBuilder, job: int, seconds_ago: int) -> PoolBuilder:
    stamp = format_time(NOW - timedelta(seconds=seconds_ago))
    b.admissions[job]["spec"]["lastScale"] = {"time": stamp, "from": 1, "to": 2, "reason": "x"}
    return b


def test_a_job_is_sized_again_only_an_interval_after_its_last_change() -> None:
    """Interval 60 s: ``second`` grew 30 s ago, so it waits, and the pool asks to be synced
    again when its 60 s are up; ``first`` (changed 90 s ago) takes one worker (a reporting
    job grows a step per interval, so each size is measured)."""
    b = _last_scaled(_last_scaled(_pool(60, first=LINEAR, second=LINEAR), 0, 90), 1, 30)
    hook = Hook()
    body = hook.pool_sync(b.request())
    got = _admitted(body)
    assert (got["first"]["spec"]["workers"], got["second"]["spec"]["workers"]) == (3, 2)
    assert body["resyncAfterSeconds"] == pytest.approx(30, abs=1)


def _two_full_nodes(flat: dict[str, str] | None, steep: dict[str, str] | None) -> PoolBuilder:
    """``flat`` fills node ``a`` (PS and 3 workers), ``steep`` node ``b``; a job of higher
    priority waits for one worker's room."""
    b = PoolBuilder(policy="dragonet").node("a", 4).node("b", 4)
    b.priority_class("high", 1000)
    b.running("flat", ("PS-0@a", "Worker-0@a", "Worker-1@a", "Worker-2@a"), ps=1, low=1,
              annotations=flat)  # fmt: skip
    b.running("steep", ("PS-0@b", "Worker-0@b", "Worker-1@b", "Worker-2@b"), ps=1, low=1,
              annotations=steep, started="2026-11-21T08:00:00Z")  # fmt: skip
    return b.queued("urgent", workers=1, priority_class="high")


def _taken(b: PoolBuilder) -> list[str]:
    view = b.view()
    q = view.job("urgent")
    make_room(view.ledger, q, 1000, enqueue_time(q, view.now), view.running)
    return [p.name for pods in view.ledger.victims.values() for p in pods]


def test_a_shrink_takes_the_worker_whose_job_loses_least() -> None:
    """``flat``'s third worker adds 1 %, ``steep``'s 50 %: ``flat`` gives it up, although
    ``steep`` started first (and would give it up without reports)."""
    flat, steep = history((2, 1.0), (3, 1.01)), history((2, 2.0), (3, 3.0))
    assert _taken(_two_full_nodes(flat, steep)) == ["flat-worker-2"]
    assert _taken(_two_full_nodes(steep, flat)) == ["steep-worker-2"]
    assert _taken(_two_full_nodes(None, None)) == ["steep-worker-2"]  # today's order


def test_a_worker_given_back_is_not_grown_again() -> None:
    """No flapping: once ``big``'s fourth worker went back (it adds nothing), the room it
    left does not tempt the rule to grow ``big`` again (a worker goes back below half of
    ``minGainPerWorker``; one grows only at or above all of it, after the restart charge)."""
    b = PoolBuilder(policy="dragonet", pool_spec={"allocationIntervalSeconds": 60})
    b.node("a", 5)
    b.running("big", ("PS-0@a", "Worker-0@a", "Worker-1@a", "Worker-2@a"), ps=1, workers=2,
              low=1, high=4, annotations=SATURATED)  # fmt: skip
    view = b.view()
    assert view.ledger.free["a"]["cpu"] == 1000  # one CPU (millicores): the room it gave back
    assert grow(view.ledger, view.running) == {}


def _one_job_next_to_a_free_node(annotation: dict[str, str]) -> PoolBuilder:
    """Node ``a`` is full with the job's PS and 2 of its 4 workers (``Worker.replicas``);
    node ``b`` is free: its next worker would be its first off the PS's node."""
    b = PoolBuilder(policy="dragonet", pool_spec={"restartSeconds": 30})
    b.node("a", 3)
    b.node("b", 4)
    b.running(
        "job",
        ("PS-0@a", "Worker-0@a", "Worker-1@a"),
        ps=1,
        workers=4,
        low=1,
        high=4,
        annotations=annotation,
    )
    return b


def test_a_job_never_gets_a_worker_its_reports_say_slows_it() -> None:
    """Below ``Worker.replicas`` a job grows as room allows, whatever a fit predicts, but
    not where its own readings say the worker makes it slower: it measured 3 workers with
    one on another node at 1.6 steps/s against 2.0 for 2 packed (Pollux's yolov3 at a
    batch of 64 is 1.76x slower on 2+2 GPUs than on 4 of one node). The same job measured
    only packed grows onto ``b``."""
    assert _grown(_one_job_next_to_a_free_node(SPREAD_SLOWER)) == {}
    assert _grown(_one_job_next_to_a_free_node(LINEAR)) == {"job": 2}  # up to its replicas


SPREAD_SLOWER = {
    ANNOTATION: orjson.dumps(
        {
            "version": 1,
            "readings": [
                {"workers": 2, "ps": 1, "stepsPerSecond": 2.0, "reports": 8},
                {
                    "workers": 3,
                    "ps": 1,
                    "remote": 1,
                    "nodes": 2,
                    "stepsPerSecond": 1.6,
                    "reports": 8,
                },
            ],
        }
    ).decode()
}


def test_a_worker_that_slows_its_job_goes_back_even_at_the_users_size() -> None:
    """``job`` (Worker.replicas 3) runs 2 workers next to its PS and a third on ``b``; it
    measured that third worker making it 20 % slower (the Pollux yolov3 case): the lonely
    worker goes back, and the job keeps its 2 packed. Never below ``min-instances``."""
    b = PoolBuilder(policy="dragonet", pool_spec={"restartSeconds": 30})
    b.node("a", 3)
    b.node("b", 4)
    b.running("job", ("PS-0@a", "Worker-0@a", "Worker-1@a", "Worker-2@b"), ps=1, workers=3,
              low=1, high=4, annotations=SPREAD_SLOWER)  # fmt: skip
    view = b.view()
    (r,) = view.running
    give_back(view.ledger, view.running)
    assert [p.name for p in view.ledger.victims[r.job.key]] == ["job-worker-2"]
    assert "slows it by 20.0%" in view.ledger.scales[r.job.key].reason
    assert grow(view.ledger, view.running) == {}  # and it is not grown back onto b

    at_min = PoolBuilder(policy="dragonet", pool_spec={"restartSeconds": 30})
    at_min.node("a", 3)
    at_min.node("b", 4)
    at_min.running("job", ("PS-0@a", "Worker-0@a", "Worker-1@a", "Worker-2@b"), ps=1,
                   workers=3, low=3, high=4, annotations=SPREAD_SLOWER)  # fmt: skip
    view = at_min.view()
    give_back(view.ledger, view.running)
    assert view.ledger.victims == {}
