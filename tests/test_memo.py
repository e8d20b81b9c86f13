"""The webhook's memo (policy/memo.py) saves work and never changes an answer: it is keyed
by the bytes an object arrived in, so nothing but the same content can hit it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from policy.job.sync import JobConfig
from policy.job.sync import sync as job_sync
from policy.memo import Encoded, Memo
from policy.model.jobs import MXJOB, TFJOB
from policy.pool.sync import sync as pool_sync
from sim.engine import SimConfig, Simulation
from sim.scenario import Scenario, from_trace, load_scenario
from tests import metacontroller as mc
from tests.conftest import NOW, Hook, load_fixture, versioned
from tests.simkit import COMPAT, file_job, gpu_nodes, scenario
from tests.test_sim_mxjob import mx_spec

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
    parsed: list[bytes] = []

    def parse(obj: Encoded) -> bytes:
        parsed.append(obj.raw)
        return obj.raw

    first, second = b'{"spec":{"cpu":"1"}}', b'{"spec":{"cpu":"2"}}'
    for raw in (first, first, second, second, first):
        assert memo.parsed("Node.v1", Encoded(raw), parse, "n-1") == raw
    assert parsed == [first, second, first]
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
