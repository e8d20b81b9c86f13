"""A large pool's sync does less work per object and answers the same (issue 36: a 1,000-node
pool with 1,000 waiting jobs took 2.3 s of CPU; ``benchmarks/large_pool.py``).

The fast paths: a replica's template is analysed once per content (``parse_job``), and
under least attained service a running job nothing in the cycle touches keeps the plan and
Admission the memo derived at an earlier sync (its service changes every cycle, what it is
without does not). Each is checked for doing less, and for answering as the full path does
on generated pools.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import orjson
import pytest

from policy.memo import Encoded, Memo
from policy.model import cluster, jobs
from policy.model.jobs import InvalidJob, Job, parse_job
from policy.model.kinds import MXJOB, TFJOB
from policy.model.resources import Resources
from policy.pool.observe import read_objects
from policy.pool.sync import sync as pool_sync
from tests import metacontroller as mc
from tests.conftest import NOW
from tests.fuzz_requests import two_tier
from tests.poolbuilder import PoolBuilder


def _encoded(group: Mapping[str, Any]) -> dict[str, Any]:
    """A request's objects as the webhook hands them to the policy: their bytes."""
    return {t: {k: Encoded(orjson.dumps(o)) for k, o in objs.items()} for t, objs in group.items()}


def _answer(decision: Any) -> bytes:
    return orjson.dumps(
        {"status": decision.status, "children": decision.children, "r": decision.resync_after},
        option=orjson.OPT_SORT_KEYS,
    )


def _clear_template_cache() -> None:
    cache = getattr(jobs, "_analysed", None)
    if cache is not None:
        cache.cache_clear()


def test_a_template_shared_by_many_jobs_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """30 jobs of one sweep (one template per replica type, names differ): the template is
    validated twice in all (PS and Worker), not 60 times."""
    _clear_template_cache()
    checked: list[Any] = []
    real = jobs.check_template

    def counting(template: Any) -> str | None:
        checked.append(template)
        return real(template)

    monkeypatch.setattr(jobs, "check_template", counting)
    b = PoolBuilder()
    for i in range(30):
        b.queued(f"sweep-{i}", ps=1, workers=4, cpu="2")
    parsed = [parse_job(j, TFJOB) for j in b.jobs]
    assert len(checked) == 2
    assert {j.replicas["Worker"].request for j in parsed} == {parsed[0].replicas["Worker"].request}
    assert all(j.replicas["Worker"].replicas == 4 for j in parsed)


def test_an_invalid_template_says_the_same_from_the_cache() -> None:
    """A template that cannot run is refused with the same words the second time (from the
    cache) as the first, for every job that shares it."""
    _clear_template_cache()
    b = PoolBuilder().queued("a", workers=2).queued("b", workers=2)
    for job in b.jobs:
        container = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        container["resources"]["limits"]["cpu"] = "lots"
    messages = []
    for job in b.jobs:
        with pytest.raises(InvalidJob) as err:
            parse_job(job, TFJOB)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert "has an unreadable resource quantity" in messages[0]
    assert "Worker.template.spec.containers[0].resources.limits['cpu']" in messages[0]


def test_generated_jobs_parse_alike_with_and_without_the_template_cache() -> None:
    """Every job of generated pools (a fifth with one field mutated), parsed through the
    cache warmed by the others and with the cache emptied before each: the same job, or
    the same refusal."""
    rng = random.Random(36)
    compared = 0
    for _ in range(30):
        path, body = two_tier(rng, rng.randint(3, 12), rng.randint(5, 20), mutate_p=0.5)[0]
        assert path == "/pools/sync"
        try:
            related = orjson.loads(body)["related"]
        except orjson.JSONDecodeError:  # mutated deeper than JSON decoders go: not a job
            continue
        for tkey, objs in related.items():
            if not tkey.startswith(("TFJob", "MXJob")):
                continue
            kind = MXJOB if tkey.startswith("MXJob") else TFJOB
            for obj in objs.values():
                warm = jobs.job_or_why(copy.deepcopy(obj), kind)
                _clear_template_cache()
                cold = jobs.job_or_why(copy.deepcopy(obj), kind)
                if isinstance(cold, InvalidJob):
                    assert isinstance(warm, InvalidJob) and str(warm) == str(cold)
                else:
                    assert warm == cold
                    assert warm.replicas.keys() == cold.replicas.keys()
                    for t, r in cold.replicas.items():
                        w = warm.replicas[t]
                        assert (w.request, w.port, w.gpu_share) == (r.request, r.port, r.gpu_share)
                compared += 1
    assert compared > 100


def test_resources_read_as_a_mapping_of_its_vector() -> None:
    r = Resources({"cpu": 1500, "nvidia.com/gpu": 2000, "empty": 0})
    assert dict(r.items()) == {"cpu": 1500, "nvidia.com/gpu": 2000}
    assert list(r.keys()) == ["cpu", "nvidia.com/gpu"]
    assert list(r.values()) == [1500, 2000]
    assert r.get("cpu") == 1500
    assert r.get("memory", 7) == 0  # a missing name is 0, as r["memory"] is
    assert r["memory"] == 0


def _las_pool() -> dict[str, Any]:
    """Two GPU jobs running and one queued under dragonet-las (thresholds low enough that
    a running job crosses one within the hours below)."""
    b = PoolBuilder(policy="dragonet-las", pool_spec={"lasThresholdsGPUHours": [1.0, 10.0]})
    for i in range(3):
        b.node(f"n{i}", cpu=16, gpu=4)
    b.running("a", ("Worker-0@n0", "Worker-1@n0"), gpu=1)
    b.running("b", ("Worker-0@n1",), gpu=1)
    b.queued("c", workers=8, gpu=1)  # waits: 8 GPUs are not free
    return b.request()


def test_under_las_an_untouched_running_job_keeps_its_admission_across_syncs() -> None:
    """Its attained service grows every sync, but its plan does not read it: the second
    sync answers the very Admission the first derived (no plan or Admission made again),
    and the same one a process without a memo answers."""
    request = _las_pool()
    memo = Memo()
    first = second = None
    for minutes in (0, 10):
        now = NOW + timedelta(minutes=minutes)
        memo.begin()
        got = pool_sync(
            request["parent"],
            _encoded(request["children"]),
            _encoded(request["related"]),
            now,
            memo,
        )
        plain = pool_sync(request["parent"], request["children"], request["related"], now)
        assert _answer(got) == _answer(plain)
        by_job = {c["spec"]["job"]["name"]: c for c in got.children}
        if first is None:
            first = by_job
        else:
            second = by_job
    assert first is not None and second is not None
    assert second["a"]["spec"]["phase"] == "Admitted"
    assert second["a"] is first["a"]
    assert second["b"] is first["b"]


@pytest.mark.parametrize("seed", range(6))
def test_generated_las_pools_answer_with_a_warm_memo_as_without(seed: int) -> None:
    """Generated pools under dragonet-las, synced again and again as time passes (jobs
    cross LAS limits, wait past the starvation limit) and pods change: every answer with
    the memo is the answer without it."""
    rng = random.Random(seed)
    _, body = two_tier(rng, rng.randint(4, 14), rng.randint(6, 24), mutate_p=0.0)[0]
    request = orjson.loads(body)
    request["parent"]["spec"]["policy"] = "dragonet-las"
    request["parent"]["spec"]["lasThresholdsGPUHours"] = [0.01, 0.5]
    memo = Memo()
    pods = request["related"].get("Pod.v1", {})
    for step in range(6):
        now = NOW + timedelta(minutes=7 * step)
        if pods and step % 2:  # a pod event: one container restarts in place
            key = sorted(pods)[step % len(pods)]
            pod = copy.deepcopy(pods[key])
            statuses = pod.setdefault("status", {}).setdefault("containerStatuses", [{}])
            statuses[0]["restartCount"] = step
            pods = {**pods, key: pod}
            request["related"]["Pod.v1"] = pods
        memo.begin()
        warm = pool_sync(
            request["parent"],
            _encoded(request["children"]),
            _encoded(request["related"]),
            now,
            memo,
        )
        plain = pool_sync(request["parent"], request["children"], request["related"], now)
        assert _answer(warm) == _answer(plain)
        # Metacontroller applies the answer: the next sync observes these Admissions.
        before = {_named(o): o for o in request["children"].get(mc.ADMISSIONS, {}).values()}
        stored = [
            mc.stored_admission(request["parent"], c, before.get(_named(c))) for c in warm.children
        ]
        request["children"] = mc.object_map(stored, [mc.ADMISSIONS])


def _named(obj: Mapping[str, Any]) -> tuple[str, str]:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def test_under_las_a_jobs_gpu_use_and_its_pods_starts_are_read_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Least attained service measures a job in GPUs or in CPU cores, from each running
    pod's start. With a memo each is read once per object, not again in every sync (a
    warm 1,000-node sync asked each job three times, issue 36): three syncs ten minutes
    apart read each job's GPU use once and no pod's time after the first sync."""
    uses_gpus = Job.__dict__["uses_gpus"]
    real_uses_gpus, real_parse_time = uses_gpus.func, cluster.parse_time
    asked: list[str] = []
    parsed: list[str | None] = []

    def counted_uses_gpus(job: Job) -> bool:
        asked.append(job.name)
        return real_uses_gpus(job)

    def counted_parse_time(value: str | None) -> Any:
        parsed.append(value)
        return real_parse_time(value)

    monkeypatch.setattr(uses_gpus, "func", counted_uses_gpus)
    monkeypatch.setattr(cluster, "parse_time", counted_parse_time)
    request = _las_pool()
    memo = Memo()
    after_first = None
    for minutes in (0, 10, 20):
        memo.begin()
        pool_sync(
            request["parent"],
            _encoded(request["children"]),
            _encoded(request["related"]),
            NOW + timedelta(minutes=minutes),
            memo,
        )
        after_first = len(parsed) if after_first is None else after_first
    assert sorted(asked) == ["a", "b", "c"]
    assert 3 <= after_first == len(parsed)  # the three running pods' starts, then nothing


def test_the_pools_reader_hands_a_parser_the_decoded_object_once() -> None:
    """One look-up covers a whole parse: the parser gets the object decoded (never the
    bytes to decode on its own, field by field), and an object whose bytes are unchanged
    is not parsed again."""
    handed: list[type] = []

    def parse(obj: Mapping[str, Any]) -> str:
        handed.append(type(obj))
        return obj["metadata"]["name"]

    memo = Memo()
    pod = {"metadata": {"name": "p", "namespace": "ns"}}
    related = {"Pod.v1": {"ns/p": Encoded(orjson.dumps(pod))}}
    for _ in range(2):
        problems: list[str] = []
        assert read_objects(related, "Pod.v1", parse, problems, memo) == ["p"]
        assert problems == []
    assert handed == [dict]
