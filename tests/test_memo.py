"""The webhook's memo (policy/memo.py) saves work and never changes an answer: it is keyed
by the bytes an object arrived in, so nothing but the same content can hit it."""

from __future__ import annotations

import copy
import random
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from policy.job.sync import JobConfig
from policy.job.sync import sync as job_sync
from policy.memo import DERIVED_BYTES, Encoded, Memo, Memos, charge
from policy.model.kinds import MXJOB, TFJOB
from policy.pool.sync import sync as pool_sync
from sim.engine import SimConfig, Simulation
from sim.scenario import Scenario, from_trace, load_scenario
from tests import metacontroller as mc
from tests.conftest import NOW, Clock, Hook, load_fixture, versioned
from tests.fuzz_requests import two_tier
from tests.simkit import COMPAT, file_job, gpu_nodes, scenario
from tests.test_sim_mxjob import mx_spec
from webhooks.app import create_app
from webhooks.config import Settings

TRACE = Path(__file__).parent / "fixtures" / "traces" / "workload-1.csv"
EXAMPLES = Path(__file__).parent.parent / "examples"
POOL_FIXTURES = [
    "pool-sync-job1-cannot-fit.json",
    "pool-sync-job1-one-big-node.json",
    "pool-sync-job1-spill.json",
    "pool-sync-two-jobs.json",
    "pool-sync-mxjob-and-tfjob.json",
]


def _plain(decision) -> dict:
    expected = {"status": decision.status, "children": decision.children}
    if decision.resync_after is not None:
        expected["resyncAfterSeconds"] = decision.resync_after
    return orjson.loads(orjson.dumps(expected))


def test_answers_with_the_memo_equal_answers_without_it() -> None:
    hook = Hook()
    for _ in range(2):  # the second pass answers from the memo
        for name in POOL_FIXTURES:
            request = versioned(load_fixture(name))
            with_memo = hook.post("/pools/sync", request).get_json()
            plain = pool_sync(request["parent"], request["children"], request["related"], NOW)
            assert _plain(plain) == with_memo
        request = versioned(load_fixture("job-sync-job1-admitted.json"))
        with_memo = hook.post("/tfjobs/sync", request).get_json()
        plain = job_sync(request["parent"], request["children"], request["related"], NOW)
        assert _plain(plain) == with_memo
    assert hook.app.config["DRAGONET_POOL_MEMOS"]["default"].hits > 0
    assert hook.app.config["DRAGONET_MEMO"].hits > 0


def test_a_pool_sync_after_one_change_parses_only_what_changed() -> None:
    hook = Hook()
    nodes = [mc.node(f"n-{i}", cpu="24", memory="64Gi") for i in range(8)]
    jobs = [mc.tfjob("dragon-job1-cpu.yaml", name=f"job-{i}") for i in range(3)]
    request = versioned(mc.pool_request(mc.world(jobs[0], nodes, jobs=jobs)))
    hook.post("/pools/sync", request)
    memo = hook.app.config["DRAGONET_POOL_MEMOS"]["default"]
    misses = memo.misses
    request["related"]["Node.v1"]["n-3"]["metadata"]["labels"]["zone"] = "b"
    hook.post("/pools/sync", versioned(request))
    assert memo.misses == misses + 1  # the node that changed; the others came from the memo


def test_an_object_rewritten_with_a_new_resource_version_is_parsed_again() -> None:
    hook = Hook()
    request = versioned(load_fixture("pool-sync-job1-cannot-fit.json"))
    (waiting,) = hook.pool_sync(request)["children"]
    assert waiting["spec"]["phase"] == "Queued"
    # The node grows (a new resourceVersion, as the API server would give it): job1 fits now.
    for node in request["related"]["Node.v1"].values():
        node["status"]["allocatable"]["cpu"] = "64"
        node["status"]["allocatable"]["memory"] = "256Gi"
    (admitted,) = hook.pool_sync(versioned(request))["children"]
    assert admitted["spec"]["phase"] == "Admitted"


def test_the_same_identity_with_other_content_is_parsed_again() -> None:
    """A request that reuses a real object's uid and resourceVersion with other content
    changes nothing for genuine requests: the memo knows content, not names."""
    hook = Hook()
    genuine = load_fixture("pool-sync-job1-one-big-node.json")
    forged = copy.deepcopy(genuine)
    node = forged["related"]["Node.v1"]["big-1"]
    node["status"]["allocatable"]["cpu"] = "1"  # same uid and resourceVersion, other content
    hook.post("/pools/sync", forged)
    (admission,) = hook.pool_sync(genuine)["children"]
    assert {p["node"] for p in admission["spec"]["pods"]} == {"big-1"}


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["dragonet", "dragonet-las", "dragon"])
def test_every_pool_answer_of_a_simulated_run_is_the_answer_without_the_memo(
    policy: str,
) -> None:
    """The pool's memo derives more than parsed objects (each job's view, its running state,
    its plan when nothing touches it, its Admission, each node's free room), all by the
    identity of what it parsed. Through a whole run (jobs arriving, growing, shrinking,
    finishing; under LAS, preempted), every pool sync is answered again from scratch."""
    sim = Simulation(from_trace(TRACE, jobs=24), SimConfig(policy=policy))
    post = sim.webhook.post
    compared = []

    def checked(path: str, body: bytes, *, measure: bool = True):
        answer = post(path, body, measure=measure)
        if path == "/pools/sync" and answer.status == 200:
            req = orjson.loads(body)
            now = sim.clock().replace(microsecond=0)
            plain = pool_sync(req["parent"], req["children"], req["related"], now)
            assert answer.body == _plain(plain)
            compared.append(path)
        return answer

    sim.webhook.post = checked  # type: ignore[method-assign]
    summary = sim.run().summary
    assert summary["jobs_finished"] == 24
    assert len(compared) > 100


def test_an_object_found_by_name_is_parsed_again_when_its_bytes_change() -> None:
    """Found by the name the request maps it under, an entry holds only while the bytes
    are equal; an older version is replaced, not kept beside the new one."""
    memo = Memo()
    parsed: list[str] = []

    def parse(obj: dict) -> str:
        assert type(obj) is dict  # handed decoded: the parser never decodes on its own
        parsed.append(obj["spec"]["cpu"])
        return obj["spec"]["cpu"]

    first, second = b'{"spec":{"cpu":"1"}}', b'{"spec":{"cpu":"2"}}'
    for raw in (first, first, second, second, first):
        assert (
            memo.parsed("Node.v1", Encoded(raw), parse, "n-1") == orjson.loads(raw)["spec"]["cpu"]
        )
    assert parsed == ["1", "2", "1"]
    assert len(memo) == 1


JOB_HOOKS = {"/tfjobs/sync": TFJOB, "/mxjobs/sync": MXJOB}


def _job_answers_checked(sim: Simulation) -> list[str]:
    """Compare every answer of a job's sync hook in ``sim`` with the job's sync computed
    afresh without a memo, byte for byte (key order too); the paths compared."""
    post = sim.webhook.post
    config = JobConfig(sim.webhook.app.config["DRAGONET_SETTINGS"].cluster_domain)
    compared: list[str] = []

    def checked(path: str, body: bytes, *, measure: bool = True):
        answer = post(path, body, measure=measure)
        req = orjson.loads(body)
        if path in JOB_HOOKS and answer.status == 200 and not req.get("finalizing"):
            now = sim.clock().replace(microsecond=0)
            kind = JOB_HOOKS[path]
            plain = job_sync(req["parent"], req["children"], req["related"], now, config, kind)
            expected = {"status": plain.status, "children": plain.children}
            if plain.resync_after is not None:
                expected["resyncAfterSeconds"] = plain.resync_after
            assert orjson.dumps(answer.body) == orjson.dumps(expected)
            compared.append(path)
        return answer

    sim.webhook.post = checked  # type: ignore[method-assign]
    return compared


@pytest.mark.slow
def test_every_job_answer_of_a_simulated_run_is_the_answer_without_the_memo() -> None:
    """A job's sync keeps the job parsed without its status (keyed by its metadata and
    spec), and the pods and Services it rendered from it; through a whole run (jobs
    admitted, growing, shrinking, finishing) every job sync is answered again from
    scratch."""
    sim = Simulation(from_trace(TRACE, jobs=24), SimConfig(policy="dragonet"))
    compared = _job_answers_checked(sim)
    assert sim.run().summary["jobs_finished"] == 24
    assert len(compared) > 100


def _kubeshare_world() -> Scenario:
    jobs = [file_job(COMPAT / "dragon-job1-kubeshare.yaml"), mx_spec("mx", 2, arrival=10.0)]
    return scenario(gpu_nodes(2, gpus=2), jobs)


BOTH = {"/tfjobs/sync", "/mxjobs/sync"}


@pytest.mark.parametrize(
    ("world", "config", "hooks"),
    [
        (_kubeshare_world, SimConfig(kubeshare="v1"), BOTH),
        (_kubeshare_world, SimConfig(kubeshare="v2"), BOTH),
        (
            lambda: load_scenario(EXAMPLES / "mixed.yaml"),
            SimConfig(gang_scheduler="volcano"),
            BOTH,
        ),
        (
            lambda: load_scenario(EXAMPLES / "elastic.yaml"),
            SimConfig(gang_scheduler="coscheduling"),
            {"/tfjobs/sync"},
        ),
    ],
    ids=["kubeshare-v1", "kubeshare-v2", "volcano-mixed", "coscheduling-elastic"],
)
def test_job_answers_with_fractional_gpus_gangs_and_mxjobs_are_the_answers_without_the_memo(
    world: Callable[[], Scenario], config: SimConfig, hooks: set[str]
) -> None:
    """The pods a memo keeps depend on the Admission too: its binding, generation, gang,
    grace period, KubeShare mode and device (the memo's key holds each)."""
    sim = Simulation(world(), config)
    compared = _job_answers_checked(sim)
    result = sim.run()
    assert all(record.finish_s is not None for record in result.jobs)
    assert set(compared) == hooks


def _captured(sim: Simulation) -> list[tuple[str, bytes, datetime | None]]:
    """Every hook request of a whole simulated run, with the simulated time it was sent."""
    post = sim.webhook.post
    sent: list[tuple[str, bytes, datetime | None]] = []

    def capture(path: str, body: bytes, *, measure: bool = True):
        sent.append((path, body, sim.clock()))
        return post(path, body, measure=measure)

    sim.webhook.post = capture  # type: ignore[method-assign]
    sim.run()
    return sent


def _mixed_traffic(rng: random.Random) -> list[tuple[str, bytes, datetime | None]]:
    """The campaign's mix, interleaved: whole runs under least attained service (preempting,
    so recording what a victim attained by now), DRAGON's rules, a gang scheduler and
    KubeShare, and generated pools of every policy each followed by its jobs' syncs, some
    with a job or node mutated (those carry no time: they are sent at the replay's)."""
    from tests.test_preemption import _las_jobs, _las_pool
    from tests.test_preemption import _world as las_world

    streams = [
        _captured(
            Simulation(
                las_world(_las_jobs(), _las_pool(), gpus_nodes=1),
                SimConfig(delete_finished_after_s=None),
            )
        ),
        _captured(Simulation(from_trace(TRACE, jobs=10), SimConfig(policy="dragon"))),
        _captured(
            Simulation(load_scenario(EXAMPLES / "mixed.yaml"), SimConfig(gang_scheduler="volcano"))
        ),
        _captured(Simulation(_kubeshare_world(), SimConfig(kubeshare="v1"))),
    ]
    for i in range(6):
        pool = "default" if i % 2 else f"pool-{i}"
        sent = two_tier(rng, rng.randint(3, 16), rng.randint(5, 16), pool, mutate_p=0.5)
        streams.append([(path, body, None) for path, body in sent])
    mixed: list[tuple[str, bytes, datetime | None]] = []
    while any(streams):
        stream = rng.choice([s for s in streams if s])
        take = rng.randint(1, 8)
        mixed += stream[:take]
        del stream[:take]
    return mixed


def _fresh(app) -> None:
    """Empty every memo of ``app``: it answers the next request as a new process would."""
    app.config["DRAGONET_MEMOS"].clear()


@pytest.mark.slow
def test_a_long_lived_worker_answers_every_request_as_a_fresh_one_across_wall_clock_gaps() -> None:
    """Any replica, any restart, same decision (DESIGN §2): the campaign's mixed traffic
    through one long-lived app, each request answered at a clock that only moves forward
    (by 0 s to 5 min between requests), and the same request again after a gap, as a
    retry or another replica sends it; each answer is compared byte for byte with the
    answer of an app that remembers nothing, at the same time."""
    rng = random.Random(24)
    traffic = _mixed_traffic(rng)
    warm_clock, fresh_clock = Clock(), Clock()
    warm = create_app(Settings(), clock=warm_clock)
    fresh = create_app(Settings(), clock=fresh_clock)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    compared: Counter[str] = Counter()
    for path, body, sent_at in traffic:
        now = max(now, sent_at or now)
        for _ in range(rng.choice((1, 2))):  # (the second time: after a gap)
            now += timedelta(seconds=rng.choice((0, 0, 1, 5, 12, 31, 61, 300)))
            warm_clock.now = fresh_clock.now = now
            answer = warm.test_client().post(path, data=body, content_type="application/json")
            _fresh(fresh)
            expected = fresh.test_client().post(path, data=body, content_type="application/json")
            assert (answer.status_code, answer.data) == (expected.status_code, expected.data), (
                path,
                now,
            )
            compared[path] += 1
    assert compared["/pools/sync"] > 150 and compared["/tfjobs/sync"] > 300
    assert compared["/mxjobs/sync"] > 10
    pool_memo = warm.config["DRAGONET_POOL_MEMOS"]["default"]
    assert pool_memo.hits > 0 and warm.config["DRAGONET_MEMO"].hits > 0


def test_a_memo_never_holds_more_than_its_limit_and_still_answers_what_parsing_does() -> None:
    memo = Memo(limit=10 * DERIVED_BYTES)
    for i in range(100):
        raw = orjson.dumps({"spec": {"n": i}})
        assert memo.parsed("Node.v1", Encoded(raw), lambda o: o["spec"]["n"]) == i
        assert memo.derive("double", (), lambda i=i: 2 * i, i) == 2 * i
        assert memo.nbytes <= 10 * DERIVED_BYTES
        assert memo.nbytes == sum(
            charge(k, v) for g in (memo.current, memo.previous) for k, v in g.items()
        )
    assert memo.parsed("Node.v1", Encoded(b'{"spec":{"n":99}}'), lambda o: -1) == 99  # kept


def test_the_memos_give_way_pool_by_pool_the_least_recently_synced_first() -> None:
    memos = Memos(cap=100 * DERIVED_BYTES, jobs_share=0.2)  # (a derived entry's charge)
    assert memos.jobs.limit == 20 * DERIVED_BYTES  # the pools share the other 80

    def sync(name: str, entries: int) -> None:
        memo = memos.pool(name)
        memo.begin()
        for i in range(entries):
            memo.derive(name, (), lambda: None, i)
        memos.settle(memo)

    for name in ("a", "b", "c"):
        sync(name, 25)
    assert list(memos.pools) == ["a", "b", "c"] and len(memos) == 75
    assert memos.nbytes == 75 * DERIVED_BYTES
    memos.pool("a")  # synced again: now the most recent
    sync("d", 25)
    assert list(memos.pools) == ["c", "a", "d"] and memos.forgotten == 1
    sync("huge", 75)  # one pool alone may fill the pools' share: the others go
    assert list(memos.pools) == ["huge"] and len(memos) == 75 and memos.forgotten == 4


def test_the_other_pools_older_generations_go_before_any_pool_is_forgotten() -> None:
    memos = Memos(cap=100 * DERIVED_BYTES, jobs_share=0.2)
    old = memos.pool("old")
    for i in range(30):
        old.derive("old", (), lambda: None, i)
    old.rotate()  # what its last syncs did not use: the older generation
    for i in range(10):
        old.derive("old", (), lambda: None, "kept", i)
    new = memos.pool("new")
    for i in range(45):
        new.derive("new", (), lambda: None, i)
    memos.settle(new)
    assert list(memos.pools) == ["old", "new"] and memos.forgotten == 0
    assert len(old) == 10 and not old.previous and old.nbytes == 10 * DERIVED_BYTES


def test_without_a_memo_a_process_answers_the_same_and_remembers_nothing() -> None:
    rng = random.Random(3)
    plain = create_app(Settings(memory_cap_bytes=0), clock=Clock())
    fresh = create_app(Settings(), clock=Clock())
    for path, body in two_tier(rng, 6, 8):
        answer = plain.test_client().post(path, data=body, content_type="application/json")
        _fresh(fresh)
        expected = fresh.test_client().post(path, data=body, content_type="application/json")
        assert (answer.status_code, answer.data) == (expected.status_code, expected.data)
    assert len(plain.config["DRAGONET_MEMOS"]) == 0


def test_a_capped_process_answers_mixed_traffic_as_a_fresh_one_and_stays_under_its_cap() -> None:
    """Pools of every size under many names, each followed by its jobs' syncs, through one
    process whose memos are charged at most 3 MiB: they never hold more, whole pools are
    forgotten and parsed again, and every answer is a fresh process's, byte for byte."""
    rng = random.Random(7)
    settings = Settings(memory_cap_bytes=4 << 20)
    cap = settings.memory_shares()[0]
    warm = create_app(settings, clock=Clock())
    fresh = create_app(settings, clock=Clock())
    memos = warm.config["DRAGONET_MEMOS"]
    compared = 0
    for i in range(14):
        pool = "default" if i % 3 == 0 else f"pool-{i % 5}"
        for path, body in two_tier(rng, rng.randint(3, 24), rng.randint(5, 24), pool):
            answer = warm.test_client().post(path, data=body, content_type="application/json")
            _fresh(fresh)
            expected = fresh.test_client().post(path, data=body, content_type="application/json")
            assert (answer.status_code, answer.data) == (expected.status_code, expected.data)
            assert memos.nbytes <= cap
            compared += 1
    assert compared > 150
    assert memos.forgotten > 0 and memos.jobs.hits > 0
