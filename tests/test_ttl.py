"""``runPolicy.ttlSecondsAfterFinished``: a finished job is deleted that many seconds after
its completionTime, as Kubeflow does. A Metacontroller hook cannot delete its own parent,
so the reaper (``reaper/``) does it; the job's status says when. End to end through the
simulator, which runs the reaper's real pass over the simulated API server."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from policy.model.jobs import InvalidJob, JobKind, parse_job
from policy.model.kinds import MXJOB, TFJOB
from policy.model.ttl import FIELD, deletion_note, expiry, sweep, ttl_seconds
from reaper.loop import Pass, reap_once, run, wait_seconds
from sim.engine import SimConfig, Simulation
from sim.spec import JobSpec, tfjob_manifest
from tests.simkit import PODS, QUICK, TFJOBS, condition, gpu_nodes, scenario
from webhooks.kubeapi import ApiError

T0 = datetime(2026, 11, 26, 10, 0, 0, tzinfo=UTC)
KEEP = SimConfig(delete_finished_after_s=None)  # no user deletes anything: only the TTL does


def finished(
    ttl: Any = 60,
    *,
    where: str = "runPolicy",
    condition_type: str = "Succeeded",
    completed: str | None = "2026-11-26T10:00:00Z",
    name: str = "j",
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"tfReplicaSpecs": {}, **spec}
    if ttl is not None:
        if where == "runPolicy":
            body.setdefault("runPolicy", {})["ttlSecondsAfterFinished"] = ttl
        else:
            body["ttlSecondsAfterFinished"] = ttl
    status: dict[str, Any] = {
        "conditions": [
            {"type": "Created", "status": "True", "lastTransitionTime": "2026-11-26T09:00:00Z"},
            {
                "type": condition_type,
                "status": "True",
                "lastTransitionTime": "2026-11-26T10:00:05Z",
            },
        ]
    }
    if completed is not None:
        status["completionTime"] = completed
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": body,
        "status": status,
    }


# --- the rule ------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["Succeeded", "Failed"])
def test_a_finished_job_expires_its_ttl_after_its_completion_time(outcome: str) -> None:
    e = expiry(finished(600, condition_type=outcome))
    assert e is not None
    assert (e.kind, e.key, e.uid, e.at) == ("TFJob", "team/j", "uid-j", T0 + timedelta(seconds=600))


def test_the_legacy_top_level_field_counts_and_run_policy_wins() -> None:
    assert expiry(finished(30, where="spec")).at == T0 + timedelta(seconds=30)  # type: ignore[union-attr]
    both = finished(None, runPolicy={"ttlSecondsAfterFinished": 5}, ttlSecondsAfterFinished=99)
    assert expiry(both).at == T0 + timedelta(seconds=5)  # type: ignore[union-attr]


def test_without_a_completion_time_the_end_condition_says_when() -> None:
    e = expiry(finished(10, completed=None))
    assert e is not None and e.at == T0 + timedelta(seconds=15)


@pytest.mark.parametrize(
    ("job", "why"),
    [
        (finished(None), "no ttl"),
        (finished(10, condition_type="Running"), "not finished"),
        (finished(10, runPolicy={"suspend": True, "ttlSecondsAfterFinished": 10}), "suspended"),
        (finished(10, runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"}), "MultiKueue's"),
        (finished(-1), "negative"),
        (finished(True), "a boolean"),
        (finished("60"), "a string"),
        (finished(2**31), "beyond int32"),
    ],
)
def test_a_job_that_never_expires(job: dict[str, Any], why: str) -> None:
    assert expiry(job) is None, why


def test_a_job_already_being_deleted_is_left_to_its_finalizers() -> None:
    job = finished(0)
    job["metadata"]["deletionTimestamp"] = "2026-11-26T10:00:01Z"
    assert expiry(job) is None


def test_sweep_returns_what_is_due_oldest_first_and_when_the_next_falls_due() -> None:
    jobs = [finished(30, name="b"), finished(10, name="a"), finished(300, name="c"), {"x": 1}]
    swept = sweep(jobs, T0 + timedelta(seconds=30))
    assert [e.name for e in swept.due] == ["a", "b"]
    assert swept.next_at == T0 + timedelta(seconds=300)
    assert sweep([finished(None)], T0).next_at is None


def test_ttl_seconds_reads_only_counts_of_seconds() -> None:
    assert ttl_seconds({"runPolicy": {"ttlSecondsAfterFinished": 0}}) == 0
    assert ttl_seconds({"runPolicy": None, "ttlSecondsAfterFinished": 7}) == 7
    assert ttl_seconds("not a spec") is None


# --- one pass of the reaper ----------------------------------------------------------


class FakeJobs:
    """``reaper.kube.Jobs`` from dicts; a kind may fail to list, a name fail to delete."""

    def __init__(self, jobs: Mapping[str, list[dict[str, Any]]]) -> None:
        self.jobs = {k: list(v) for k, v in jobs.items()}
        self.deleted: list[tuple[str, str, str]] = []
        self.unlistable: set[str] = set()
        self.undeletable: set[str] = set()

    def list(self, kind: JobKind) -> Iterator[Mapping[str, Any]]:
        if kind.kind in self.unlistable:
            raise ApiError("503 Service Unavailable", 503)
        return iter(self.jobs.get(kind.kind, []))

    def delete(self, kind: JobKind, namespace: str, name: str, uid: str) -> bool:
        if name in self.undeletable:
            raise ApiError("500 Internal Server Error", 500)
        for obj in self.jobs.get(kind.kind, []):
            if obj["metadata"]["name"] == name and obj["metadata"]["uid"] == uid:
                self.jobs[kind.kind].remove(obj)
                self.deleted.append((kind.kind, f"{namespace}/{name}", uid))
                return True
        return False


def _mxjob(**kw: Any) -> dict[str, Any]:
    return {**finished(**kw), "kind": "MXJob"}


def test_a_pass_deletes_expired_jobs_of_every_kind_by_uid_and_keeps_the_rest() -> None:
    jobs = FakeJobs(
        {
            "TFJob": [finished(60, name="old"), finished(3600, name="young"), finished(None)],
            "MXJob": [_mxjob(ttl=0, name="mx")],
        }
    )
    done = reap_once(jobs, T0 + timedelta(seconds=60))
    assert done.deleted == ("TFJob team/old", "MXJob team/mx")
    assert jobs.deleted == [("TFJob", "team/old", "uid-old"), ("MXJob", "team/mx", "uid-mx")]
    assert [j["metadata"]["name"] for j in jobs.jobs["TFJob"]] == ["young", "j"]
    assert (done.failed, done.next_at) == (0, T0 + timedelta(seconds=3600))


def test_a_kind_that_cannot_be_listed_or_a_failed_delete_stops_nothing_else() -> None:
    jobs = FakeJobs({"TFJob": [finished(0, name="a"), finished(0, name="b")], "MXJob": []})
    jobs.unlistable.add("MXJob")
    jobs.undeletable.add("a")
    done = reap_once(jobs, T0)
    assert done.deleted == ("TFJob team/b",)
    assert done.failed == 2


def test_a_job_replaced_under_its_name_is_not_deleted() -> None:
    jobs = FakeJobs({"TFJob": [finished(0)]})
    replaced = dict(
        jobs.jobs["TFJob"][0], metadata={"name": "j", "namespace": "team", "uid": "new"}
    )
    jobs.jobs["TFJob"] = [replaced]
    stale = FakeJobs({"TFJob": [finished(0)]})  # what the list said: the old uid
    e = sweep(stale.jobs["TFJob"], T0).due[0]
    assert jobs.delete(TFJOB, e.namespace, e.name, e.uid) is False
    assert jobs.jobs["TFJob"] == [replaced]


def test_the_reaper_wakes_at_the_next_expiry_or_after_its_interval() -> None:
    soon = Pass((), 0, T0 + timedelta(seconds=7))
    assert wait_seconds(soon, T0, 30) == 7
    assert wait_seconds(Pass((), 0, None), T0, 30) == 30
    assert wait_seconds(Pass((), 0, T0 + timedelta(hours=2)), T0, 30) == 30
    assert wait_seconds(Pass((), 0, T0), T0, 30) == 1  # never spins


# --- end to end, in the simulator ----------------------------------------------------


def _spec(name: str, ttl: int | None, arrival: float = 0.0) -> JobSpec:
    manifest = tfjob_manifest(name, workers=1, ps=1)
    if ttl is not None:
        manifest["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": ttl}
    return JobSpec(manifest, arrival, 50.0, QUICK)


def _last_status_before_removal(sim: Simulation) -> dict[str, dict[str, Any]]:
    kept: dict[str, dict[str, Any]] = {}

    def watch(tkey: str, old: Any, new: Any) -> None:
        if tkey == TFJOBS and new is None and old is not None:
            kept[f"{old['metadata']['namespace']}/{old['metadata']['name']}"] = old

    sim.api.watchers.append(watch)
    return kept


@pytest.mark.parametrize("ttl", [0, 45])
def test_a_job_with_a_ttl_is_deleted_once_it_passed_and_one_without_stays(ttl: int) -> None:
    sim = Simulation(
        scenario(gpu_nodes(2), [_spec("ttl", ttl), _spec("kept", None)]),
        dataclasses.replace(KEEP, reaper_interval_s=20.0),
    )
    gone = _last_status_before_removal(sim)
    result = sim.run()
    assert all(r.finish_s is not None for r in result.jobs)
    assert sim.api.get(TFJOBS, "default/ttl") is None
    assert sim.api.get(TFJOBS, "default/kept") is not None
    status = gone["default/ttl"]["status"]
    assert condition(status, "Succeeded")["status"] == "True"  # type: ignore[index]
    expires = datetime.fromisoformat(status["completionTime"]) + timedelta(seconds=ttl)
    (when, what), *_ = sim.reaper.deleted
    assert what == "TFJob default/ttl"
    # Deleted once its TTL passed, and no later than one listing interval after.
    assert expires <= datetime.fromisoformat(when) <= expires + timedelta(seconds=20)
    # Its pods and Services went with it (owner references); no pod of it is left.
    assert not [p for p in sim.api.list(PODS) if p["metadata"]["name"].startswith("ttl-")]
    # The status said when, in words, before it went.
    at = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
    said = f"the TFJob is deleted at {at} (runPolicy.ttlSecondsAfterFinished: {ttl})"
    assert said in status["scheduling"]["message"]
    kept = sim.api.get(TFJOBS, "default/kept")["status"]["scheduling"]["message"]  # type: ignore[index]
    assert "deleted at" not in kept


def test_an_invalid_job_with_a_ttl_is_failed_then_deleted() -> None:
    spec = _spec("bad", 30)
    spec.manifest["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = -1
    sim = Simulation(scenario(gpu_nodes(1), [spec]), KEEP)
    gone = _last_status_before_removal(sim)
    sim.run()
    assert sim.api.get(TFJOBS, "default/bad") is None
    status = gone["default/bad"]["status"]
    assert condition(status, "Failed")["status"] == "True"  # type: ignore[index]
    assert "is invalid" in status["scheduling"]["message"]
    assert "(runPolicy.ttlSecondsAfterFinished: 30)" in status["scheduling"]["message"]


def test_a_run_without_ttls_starts_no_reaper() -> None:
    sim = Simulation(scenario(gpu_nodes(1), [_spec("plain", None)]), KEEP)
    sim.run()
    assert sim.reaper.deleted == [] and not sim.reaper._running


def test_mxjobs_are_reaped_too() -> None:
    jobs = FakeJobs({"MXJob": [_mxjob(ttl=5, name="mx")]})
    assert reap_once(jobs, T0 + timedelta(seconds=5), (MXJOB,)).deleted == ("MXJob team/mx",)


def test_a_ttl_beyond_kubeflows_int32_fails_the_job_naming_the_field() -> None:
    manifest = tfjob_manifest("big", workers=1, ps=1)
    manifest["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": 2**31}
    manifest["metadata"]["namespace"] = "default"
    with pytest.raises(InvalidJob, match=r"runPolicy\.ttlSecondsAfterFinished"):
        parse_job(manifest, TFJOB)


def test_the_status_says_nothing_of_a_deletion_the_reaper_will_not_make() -> None:
    done = "2026-11-26T10:00:00Z"
    assert deletion_note("TFJob", {"runPolicy": {FIELD: 60}}, done) == (
        "the TFJob is deleted at 2026-11-26T10:01:00Z (runPolicy.ttlSecondsAfterFinished: 60)"
    )
    assert deletion_note("TFJob", {"runPolicy": {FIELD: 60, "suspend": True}}, done) == ""
    assert deletion_note("MXJob", {FIELD: 5, "suspend": True}, done) == ""
    assert deletion_note("TFJob", {}, done) == ""
    assert deletion_note("TFJob", {"runPolicy": {FIELD: 60}}, None) == ""


def test_the_loop_survives_a_failed_pass_and_stops_when_told() -> None:
    stop = threading.Event()

    class Flaky(FakeJobs):
        calls = 0

        def list(self, kind: JobKind) -> Iterator[Mapping[str, Any]]:
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise RuntimeError("a bug in a pass")  # logged; the loop goes on
            if Flaky.calls >= 3:
                stop.set()
            return super().list(kind)

    jobs = Flaky({"TFJob": [finished(0)]})
    run(jobs, interval=0.01, stop=stop, clock=lambda: T0)
    assert jobs.deleted == [("TFJob", "team/j", "uid-j")]
    assert stop.is_set()


def test_a_day_long_ttl_does_not_keep_a_finished_run_going() -> None:
    sim = Simulation(scenario(gpu_nodes(1), [_spec("daylong", 86_400)]), KEEP)
    result = sim.run()
    (record,) = result.jobs
    assert record.finish_s is not None
    # The run ends an hour after its last job, as it does with nothing left to wait for;
    # the job is still there: its TTL has a day to go.
    assert sim.now <= record.finish_s + 3600 + sim.config.reaper_interval_s
    assert sim.api.get(TFJOBS, "default/daylong") is not None
    assert sim.reaper.deleted == []
