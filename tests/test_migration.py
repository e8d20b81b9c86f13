"""Container migration end to end: Migration requests in the simulated API server, the real
webhook behind the simulated Metacontroller, the pool's decisions, make-before-break moves.

The Migration objects are what the Container Monitor or an operator with kubectl creates
(``policy.model.migration.request_object``: named after the pod, its labels, owned by it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from policy.model.cluster import L_INDEX, L_TYPE
from policy.model.migration import (
    CHIEF_MOVABLE_ANNOTATION,
    TYPE_KEY,
    move_of,
    request_object,
)
from sim.apiserver import Conflict, Obj, object_key
from sim.engine import SimConfig, Simulation
from sim.kube import node_object
from sim.monitor import MonitorConfig
from sim.spec import JobSpec, TrainingProfile, tfjob_manifest
from sim.webhook import HookResponse
from tests.kube_schema import validate_custom, validate_job_status, validate_k8s
from tests.simkit import PODS, TFJOBS, HookSpy, scenario

MIGRATIONS = TYPE_KEY
SERVICES = "Service.v1"
SLOW = TrainingProfile(name="slow", step_time_s=1.0, restore_s=5.0)
SMALL = {"cpu": "2", "memory": "2Gi"}


def nodes(*cpus: str) -> tuple[dict[str, Any], ...]:
    return tuple(
        node_object(f"cpu-{i}", {"cpu": c, "memory": "64Gi"}) for i, c in enumerate(cpus, 1)
    )


def job(
    name: str,
    workers: int = 3,
    *,
    steps: float = 600.0,
    chief_movable: bool = True,
    preference: str | None = None,
    profile: TrainingProfile = SLOW,
    worker: dict[str, str] | None = None,
    ps: int = 1,
    **bounds: Any,
) -> JobSpec:
    manifest = tfjob_manifest(
        name,
        workers=workers,
        ps=ps,
        worker_resources=worker or SMALL,
        ps_resources=SMALL,
        **bounds,
    )
    if chief_movable:
        manifest["metadata"]["annotations"] = {CHIEF_MOVABLE_ANNOTATION: "true"}
    if preference:
        manifest["spec"]["node-preference"] = preference
    return JobSpec(manifest, 0.0, steps, profile)


@dataclass
class Watch:
    """Everything that happens to pods and Migrations, in order."""

    sim: Simulation
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    events: list[tuple[float, str, str, Obj | None]] = field(default_factory=list)
    created: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.sim.api.watchers.append(self._on)

    def _on(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        obj = new if new is not None else old
        key = object_key(obj)
        if tkey == MIGRATIONS and new is not None:
            status = new.get("status") or {}
            seen = self.statuses.setdefault(key, [])
            if status and (not seen or seen[-1] != status):
                seen.append(status)
        if tkey != PODS:
            return
        if old is None:
            self.events.append((self.sim.now, "create", key, new))
            self.created.add(key)
        elif new is None:
            self.events.append((self.sim.now, "gone", key, old))
        else:
            if new["metadata"].get("deletionTimestamp") and not old["metadata"].get(
                "deletionTimestamp"
            ):
                self.events.append((self.sim.now, "delete", key, new))
            if (new.get("status") or {}).get("phase") == "Running" and (
                old.get("status") or {}
            ).get("phase") != "Running":
                self.events.append((self.sim.now, "running", key, new))

    def first(self, event: str, key: str) -> float | None:
        return next((t for t, e, k, _ in self.events if e == event and k == key), None)

    def phases(self, key: str) -> list[str]:
        return [s.get("phase", "") for s in self.statuses.get(key, [])]

    def last(self, key: str) -> dict[str, Any]:
        return self.statuses[key][-1]


def live_pod(sim: Simulation, job_name: str, rtype: str, index: int) -> Obj:
    """The newest live pod of one slot (a moved worker's replacement, once it exists)."""
    pods = [
        p
        for p in sim.api.list(PODS)
        if p["metadata"]["name"].startswith(f"{job_name}-")
        and p["metadata"]["labels"].get(L_TYPE) == rtype
        and p["metadata"]["labels"].get(L_INDEX) == str(index)
        and not p["metadata"].get("deletionTimestamp")
    ]
    assert pods, f"no live {rtype} {index} of {job_name}"
    return max(pods, key=lambda p: move_of(p["metadata"]["name"]))


def ask(
    sim: Simulation,
    at: float,
    job_name: str,
    index: int,
    *,
    rtype: str = "worker",
    reason: str = "Manual",
    node: str | None = None,
    labelled: bool = True,
) -> None:
    """At ``at``, create a Migration for the slot's current pod, as kubectl or the
    monitor would."""

    def create() -> None:
        pod = live_pod(sim, job_name, rtype, index)
        obj = request_object(pod, reason, "kubectl")
        if node is not None:
            obj["spec"]["node"] = node
        if not labelled:
            obj["metadata"]["labels"] = {}
        sim.api.create(obj)

    sim.schedule(at, create)


def at(sim: Simulation, t: float, action: Callable[[], None]) -> None:
    sim.schedule(t, action)


def simulate(jobs: list[JobSpec], cluster, **config: Any) -> tuple[Simulation, Watch, HookSpy]:
    config.setdefault("delete_finished_after_s", None)  # keep the job: read its status
    sim = Simulation(scenario(cluster, jobs), SimConfig(**config))
    return sim, Watch(sim), HookSpy(sim)


def test_a_manual_request_moves_a_worker_make_before_break_and_nothing_else_restarts() -> None:
    sim, watch, spy = simulate([job("a")], nodes("16", "16", "16"))
    ask(sim, 60, "a", 1)
    uids: dict[str, str] = {}
    at(
        sim,
        59,
        lambda: uids.update({object_key(p): p["metadata"]["uid"] for p in sim.api.list(PODS)}),
    )
    result = sim.run()

    old, new = "default/a-worker-1", "default/a-worker-1-m1"
    assert set(uids) == {"default/a-ps-0", *(f"default/a-worker-{i}" for i in range(3))}
    # Make-before-break: the replacement runs before the old pod is deleted.
    created, running, deleted = (
        watch.first("create", new),
        watch.first("running", new),
        watch.first("delete", old),
    )
    assert created is not None and running is not None and deleted is not None
    assert created < running <= deleted
    moved = next(e[3] for e in watch.events if e[1] == "create" and e[2] == new)
    before = next(e[3] for e in watch.events if e[1] == "create" and e[2] == old)
    # Same replica index: the same TF_CONFIG entry, on another node.
    assert moved["metadata"]["labels"][L_INDEX] == "1"
    env = {e["name"]: e["value"] for e in moved["spec"]["containers"][0]["env"]}
    old_env = {e["name"]: e["value"] for e in before["spec"]["containers"][0]["env"]}
    assert env["TF_CONFIG"] == old_env["TF_CONFIG"]
    node = next(e[3] for e in watch.events if e[1] == "running" and e[2] == new)["spec"]["nodeName"]
    assert node != "cpu-1"
    # Nothing else of the job was deleted or created again.
    for key in uids:
        if key != old:
            assert watch.first("delete", key) is None or watch.first("delete", key) > (
                result.jobs[0].finish_s or 0
            ), key
    assert watch.created == {*uids, new}
    # The request said what happened.
    phases = watch.phases("default/a-worker-1")
    assert phases[0] in ("Pending", "Moving") and "Moving" in phases
    assert watch.statuses["default/a-worker-1"][-1].get("target") == node
    # The job finished, and its status keeps the move.
    assert result.summary["jobs_finished"] == 1
    assert result.summary["migrations"] == 1
    moves = sim.api.get(TFJOBS, "default/a")["status"]["scheduling"]["moves"]
    assert moves == [
        {
            "type": "Worker",
            "index": 1,
            "count": 1,
            "time": moves[0]["time"],
            "from": "cpu-1",
            "to": node,
            "reason": "Manual",
        }
    ]
    # The Service of index 1 was never replaced: its DNS name stayed.
    assert sum(1 for c in spy.of("/tfjobs/sync") if c.status != 200) == 0


def test_the_job_keeps_training_while_its_worker_moves() -> None:
    sim, _, _ = simulate([job("a")], nodes("16", "16"))
    ask(sim, 60, "a", 2)
    result = sim.run()
    record = result.jobs[0]
    started = record.start_s
    assert started is not None and started < 60
    after = [s for s in record.segments if s.end_s > started]
    assert after and all(s.state == "training" for s in after), after


def test_every_object_the_webhook_answers_during_a_move_validates() -> None:
    sim, _, spy = simulate([job("a")], nodes("16", "16"))
    ask(sim, 60, "a", 1)
    ask(sim, 61, "a", 0, rtype="ps")
    sim.run()
    pods = admissions = statuses = 0
    for call in spy.of("/tfjobs/sync"):
        for child in call.answer["children"]:
            validate_k8s(child)
            pods += child["kind"] == "Pod" and move_of(child["metadata"]["name"]) > 0
        validate_job_status("TFJob", call.answer["status"])
    for call in spy.of("/pools/sync"):
        for child in call.answer["children"]:
            validate_custom(child)
            admissions += bool(child["spec"].get("migrations"))
    for call in spy.of("/migrations/sync"):
        request = sim.api.get(MIGRATIONS, call.parent) or {
            "apiVersion": "dragonet.io/v1alpha1",
            "kind": "Migration",
            "metadata": {"name": call.parent.split("/")[1], "namespace": "default"},
            "spec": {"pod": call.parent.split("/")[1], "node": "cpu-1"},
        }
        validate_custom({**request, "status": call.answer["status"]})
        statuses += 1
    assert pods and admissions and statuses


def test_no_move_to_a_full_node() -> None:
    # cpu-2 has 1 CPU: no worker (2 CPUs) fits there, whatever its load.
    sim, watch, _ = simulate([job("a", steps=200)], nodes("16", "1"))
    ask(sim, 40, "a", 1)
    sim.run()
    last = watch.last("default/a-worker-1")
    assert last["phase"] == "Refused" and last["reason"] == "NoRoom", last
    assert "target" not in last
    assert not any(move_of(k) for k in watch.created)


def test_no_move_to_the_same_node_when_it_is_already_the_least_loaded() -> None:
    # dragon's score: job b's limits make cpu-2 busier than cpu-1 even after the move.
    heavy = {"cpu": "1", "memory": "1Gi"}
    b = job("b", 2, steps=400, preference="cpu-2", worker=heavy)
    b.manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "resources"
    ]["limits"] = {"cpu": "16", "memory": "60Gi"}
    sim, watch, _ = simulate(
        [job("a", 2, steps=400, preference="cpu-1"), b],
        nodes("16", "16"),
        policy="dragon",
    )
    ask(sim, 60, "a", 1)
    sim.run()
    last = watch.last("default/a-worker-1")
    assert (last["phase"], last["reason"]) == ("Refused", "SameNode"), last
    assert not any(move_of(k) for k in watch.created)


@pytest.mark.parametrize(
    ("rtype", "index", "chief_movable", "node", "reason"),
    [
        ("ps", 0, True, None, "NotAWorker"),
        ("worker", 0, False, None, "IsChief"),
        ("worker", 1, True, "cpu-9", "Stale"),
    ],
)
def test_a_request_the_pool_may_not_honour_is_refused_saying_why(
    rtype: str, index: int, chief_movable: bool, node: str | None, reason: str
) -> None:
    sim, watch, _ = simulate([job("a", steps=200, chief_movable=chief_movable)], nodes("16", "16"))
    ask(sim, 40, "a", index, rtype=rtype, node=node)
    sim.run()
    key = f"default/a-{rtype}-{index}"
    last = watch.last(key)
    assert (last["phase"], last["reason"]) == ("Refused", reason), last
    assert last["message"]
    assert not any(move_of(k) for k in watch.created)
    answers = sim.api.get(TFJOBS, "default/a")["status"]["scheduling"]
    assert "moves" not in answers


def test_a_request_made_by_hand_without_labels_is_found_by_its_pods_name() -> None:
    sim, watch, _ = simulate([job("a", steps=300)], nodes("16", "16"))
    ask(sim, 40, "a", 2, labelled=False)
    sim.run()
    assert "Moving" in watch.phases("default/a-worker-2")
    assert "default/a-worker-2-m1" in watch.created


def test_a_second_request_for_the_same_pod_is_a_conflict() -> None:
    sim, _, _ = simulate([job("a", steps=200)], nodes("16", "16"))
    errors: list[str] = []

    def twice() -> None:
        pod = live_pod(sim, "a", "worker", 1)
        sim.api.create(request_object(pod))
        try:
            sim.api.create(request_object(pod))
        except Conflict as err:
            errors.append(str(err))

    at(sim, 40, twice)
    sim.run()
    assert len(errors) == 1 and "already exists" in errors[0]


def test_a_worker_moved_a_moment_ago_waits_then_moves_again() -> None:
    sim, watch, _ = simulate(
        [job("a", steps=600)], nodes("16", "16", "16"), migration={"minIntervalSeconds": 30}
    )
    ask(sim, 40, "a", 1)
    ask(sim, 55, "a", 1)  # the replacement, 15 s after the first move
    sim.run()
    said = watch.statuses["default/a-worker-1-m1"]
    throttled = [s for s in said if s.get("reason") == "Throttled"]
    assert throttled and throttled[0]["phase"] == "Pending"
    assert said.index(throttled[0]) < watch.phases("default/a-worker-1-m1").index("Moving")
    moved = watch.first("create", "default/a-worker-1-m2")
    assert moved is not None and moved >= 70


def test_the_move_cap_holds_across_scaling() -> None:
    """Three moves of one worker while its job grows: the fourth request is refused, and
    the count the job's status shows is still three (DRAGON's count reset on any copy)."""
    elastic = job("a", 2, steps=2000, min_workers=1, max_workers=4)
    sim, watch, _ = simulate(
        [elastic],
        nodes("16", "16", "16"),
        policy="dragon",  # grows after 60 s without action: between the moves
        idle_seconds=60,
        migration={"score": "dragonet"},
    )
    for t in (40, 80, 120, 160):
        ask(sim, t, "a", 1)
    result = sim.run()
    assert result.summary["scale_actions"] > 0  # it grew while its worker moved
    grew = sim.api.get(TFJOBS, "default/a")["status"]["scheduling"]["lastScale"]
    assert (grew["from"], grew["to"], grew["time"]) == (2, 4, "2026-01-01T00:01:00Z")
    assert result.summary["migrations"] == 3
    last = watch.last("default/a-worker-1-m3")
    assert (last["phase"], last["reason"]) == ("Refused", "MoveCapReached"), last
    moves = sim.api.get(TFJOBS, "default/a")["status"]["scheduling"]["moves"]
    assert [(m["index"], m["count"]) for m in moves] == [(1, 3)]


def test_a_request_survives_a_webhook_restart_and_the_move_is_made_once() -> None:
    sim, watch, _ = simulate(
        [job("a", steps=400)], nodes("16", "16"), webhook_restarts_s=(60.5, 61.0, 63.0)
    )
    ask(sim, 60, "a", 1)
    sim.run()
    assert "Moving" in watch.phases("default/a-worker-1")
    replacements = sorted(k for k in watch.created if move_of(k))
    assert replacements == ["default/a-worker-1-m1"]
    moves = sim.api.get(TFJOBS, "default/a")["status"]["scheduling"]["moves"]
    assert [m["count"] for m in moves] == [1]


def test_a_request_made_while_the_webhook_is_down_is_answered_once_it_is_back() -> None:
    sim, watch, spy = simulate([job("a", steps=400)], nodes("16", "16"))
    down = {"on": False}
    original = spy._post

    def post(path: str, body: bytes, *, measure: bool = True) -> HookResponse:
        if down["on"]:
            return HookResponse(503, {"error": "webhook down"}, {})
        return original(path, body, measure=measure)

    spy._post = post  # type: ignore[method-assign]
    at(sim, 59, lambda: down.update(on=True))
    ask(sim, 60, "a", 1)
    at(sim, 90, lambda: down.update(on=False))
    sim.run()
    assert not any(t < 90 for t, e, k, _ in watch.events if e == "create" and move_of(k))
    assert "default/a-worker-1-m1" in watch.created


def test_the_monitor_moves_workers_off_an_overloaded_node_and_never_a_parameter_server() -> None:
    from benchmarks.migration import SYSTEMS, speed_scenario

    asked: list[tuple[float, str]] = []
    plain = Simulation(speed_scenario("a"), SYSTEMS["dragon"]).run()
    sim = Simulation(speed_scenario("a"), SYSTEMS["dragonet"])
    sim.api.watchers.append(
        lambda tkey, old, new: (
            asked.append((sim.now, object_key(new)))
            if tkey == MIGRATIONS and old is None and new is not None
            else None
        )
    )
    moved = sim.run()
    assert moved.summary["migrations"] > 0
    assert moved.summary["avg_jct_s"] < plain.summary["avg_jct_s"]
    assert not any("-ps-" in key for _, key in asked)
    last: dict[str, float] = {}
    for t, key in asked:  # the monitor asks at most once per pod per 3 s
        assert t - last.get(key, -10.0) >= 3.0
        last[key] = t


def test_a_moved_workers_restore_time_is_charged() -> None:
    """A moved worker is a new process: it restores before it trains again (30 s here);
    make-before-break keeps the old one training until the replacement runs."""

    def jct(move: bool) -> float:
        profile = TrainingProfile(name="r", step_time_s=1.0, restore_s=30.0)
        # No parameter server: the move costs the restore, not locality.
        one = job("a", 1, steps=300, profile=profile, ps=0)
        sim, _, _ = simulate([one], nodes("16", "16"))
        if move:
            ask(sim, 100, "a", 0)
        result = sim.run()
        assert result.summary.get("migrations", 0) == int(move)
        return result.jobs[0].jct_s or 0.0

    assert 29.9 <= jct(True) - jct(False) <= 40.0


def test_the_monitor_config_defaults_are_dragons() -> None:
    c = MonitorConfig()
    assert (c.threshold, c.throttle_s, c.retry_s) == (1.0, 3.0, 60.0)


def test_the_example_request_validates_against_the_crd() -> None:
    from pathlib import Path

    import yaml

    example = Path(__file__).resolve().parent.parent / "examples" / "migration.yaml"
    request = yaml.safe_load(example.read_text())
    validate_custom(request)
    assert request["metadata"]["name"] == request["spec"]["pod"]


def test_a_move_the_kube_scheduler_cannot_place_is_called_off_and_the_old_pod_stays() -> None:
    """The pool sees only Dragonet's pods (watchAllPods false): another tenant's pod fills
    cpu-2 unseen, the replacement pinned there is Unschedulable, and the move is called off:
    the old pod keeps running, the replacement goes, the request says why."""
    sim, watch, _ = simulate([job("a", steps=400)], nodes("16", "4"))
    foreign = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "someone-else", "namespace": "default"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "cpu-2"},
            "containers": [
                {"name": "app", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}
            ],
        },
    }
    at(sim, 50, lambda: sim.api.create(foreign))
    ask(sim, 60, "a", 1)
    result = sim.run()
    last = watch.last("default/a-worker-1")
    assert (last["phase"], last["reason"]) == ("Refused", "NoRoom"), watch.statuses
    assert "cpu-2 had no room" in last["message"]
    assert watch.first("delete", "default/a-worker-1") is None or (
        watch.first("delete", "default/a-worker-1") >= (result.jobs[0].finish_s or 0)
    )
    assert watch.first("create", "default/a-worker-1-m1") is not None
    assert watch.first("running", "default/a-worker-1-m1") is None
    assert result.summary["jobs_finished"] == 1


def test_moves_under_a_lagging_view_and_two_metacontroller_workers_stay_single_and_fit() -> None:
    """speed-d (nine workers piled on one node) with the monitor, a 2 s informer lag and
    two Metacontroller workers: each move is made once, no node ever holds more than it
    can, and every job finishes."""
    from dataclasses import replace

    from benchmarks.migration import SYSTEMS, speed_scenario
    from tests.simkit import CapacityProbe

    sim = Simulation(
        speed_scenario("d"), replace(SYSTEMS["dragonet"], view_delay_s=2.0, mc_workers=2)
    )
    watch, probe = Watch(sim), CapacityProbe(sim)
    result = sim.run()
    replacements = {k for k in watch.created if move_of(k)}
    assert result.summary["migrations"] == len(replacements) > 0
    assert probe.overcommits == []
    assert result.summary["jobs_finished"] == 3 and result.summary["sync_errors"] == 0


def test_defragmenting_moves_one_worker_so_a_gang_that_fits_nowhere_starts() -> None:
    """Four one-GPU jobs leave 3 GPUs free on each of four 4-GPU nodes; a job whose worker
    needs 4 GPUs fits nowhere (12 GPUs free in all), and no shrink helps. With
    ``defragment`` the pool moves one small worker off one node and the big job starts
    there; without, it waits for a small job to finish."""
    from benchmarks.migration import frag_scenario
    from tests.simkit import CapacityProbe

    def run(defragment: bool) -> tuple[Simulation, Watch, Any]:
        config = SimConfig(policy="dragonet", migration={"defragment": defragment})
        sim = Simulation(frag_scenario(), config)
        watch, probe = Watch(sim), CapacityProbe(sim)
        result = sim.run()
        assert probe.overcommits == []
        return sim, watch, result

    _, plain_watch, plain = run(False)
    _, watch, moved = run(True)
    small_done = min(r.finish_s or 0 for r in plain.jobs if r.key != "default/big")
    big = {r.key: r for r in moved.jobs}["default/big"]
    plain_big = {r.key: r for r in plain.jobs}["default/big"]
    assert plain_big.start_s is not None and plain_big.start_s >= small_done
    assert big.start_s is not None and big.start_s < 120 < small_done
    assert moved.summary["migrations"] == 1
    assert [k for k in watch.created if move_of(k)] == ["default/small-1-worker-0-m1"]
    assert not any(move_of(k) for k in plain_watch.created)


def test_an_mxjob_worker_moves_the_same_way() -> None:
    from sim.spec import as_mxjob

    spec = job("m", 2, steps=300)
    mx = JobSpec(as_mxjob(spec.manifest), 0.0, 300.0, SLOW)
    sim, watch, spy = simulate([mx], nodes("16", "16"))
    ask(sim, 60, "m", 1)
    result = sim.run()
    assert result.summary["jobs_finished"] == 1 and result.summary["migrations"] == 1
    assert watch.phases("default/m-worker-1")[-1] == "Done"
    replacements = [
        c
        for call in spy.of("/mxjobs/sync")
        for c in call.answer["children"]
        if c["metadata"]["name"] == "m-worker-1-m1"
    ]
    assert replacements
    validate_k8s(replacements[0])
    env = {e["name"] for e in replacements[0]["spec"]["containers"][0]["env"]}
    assert "DMLC_ROLE" in env or "MX_CONFIG" in env


def test_a_pool_with_migration_disabled_refuses_saying_so() -> None:
    sim, watch, _ = simulate([job("a", steps=200)], nodes("16", "16"), migration={"enabled": False})
    ask(sim, 40, "a", 1)
    sim.run()
    last = watch.last("default/a-worker-1")
    assert (last["phase"], last["reason"]) == ("Refused", "MigrationDisabled")
    assert "spec.migration.enabled" in last["message"]
    assert not any(move_of(k) for k in watch.created)


def test_a_kubeshare_worker_moves_to_a_device_of_its_target() -> None:
    """A KubeShare v1 worker is a SharePod bound to one GPU of its node: moved, its
    replacement asks the target for a device of its own (not for the source's device,
    which no other node has) and names a GPU there; make-before-break as for any pod."""
    from tests.simkit import gpu_nodes
    from tests.test_kubeshare import _fractional

    manifest = _fractional("f", "0.5", 2)  # a PS and two half-GPU workers: one device
    manifest["metadata"]["namespace"] = "default"
    sim, watch, spy = simulate(
        [JobSpec(manifest, 0.0, 400.0, SLOW)], gpu_nodes(2, gpus=1), kubeshare="v1"
    )
    ask(sim, 60, "f", 1)
    result = sim.run()
    assert result.summary["jobs_finished"] == 1 and result.summary["migrations"] == 1
    assert sim.kubeshare.failed == 0 and sim.kube.rejected == 0 and sim.mc.errors == 0
    assert watch.phases("default/f-worker-1")[-1] == "Done"
    assert watch.last("default/f-worker-1")["target"] == "gpu-2"
    old, new = "default/f-worker-1", "default/f-worker-1-m1"
    assert watch.first("running", new) <= watch.first("delete", old)  # type: ignore[operator]
    gpu = "kubeshare/GPUID"
    answered = [
        c
        for call in spy.of("/tfjobs/sync")
        for c in call.answer["children"]
        if c["kind"] == "SharePod" and c["metadata"]["name"] in ("f-worker-1", "f-worker-1-m1")
    ]
    olds = [c for c in answered if c["metadata"]["name"] == "f-worker-1"]
    news = [c for c in answered if c["metadata"]["name"] == "f-worker-1-m1"]
    source = olds[0]["metadata"]["annotations"][gpu]
    target = news[0]["metadata"]["annotations"][gpu]
    assert {c["spec"]["nodeName"] for c in olds} == {"gpu-1"}
    assert {c["spec"]["nodeName"] for c in news} == {"gpu-2"}
    # The replacement has a device of gpu-2 (KubeShare held a GPU there for it); the old
    # SharePod is never answered with any device but its own.
    assert target != source
    assert any(e[2] == f"kube-system/kubeshare-vgpu-gpu-2-{target}" for e in watch.events)
    assert {c["metadata"]["annotations"].get(gpu, source) for c in olds} == {source}
