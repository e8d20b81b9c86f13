"""End to end through the simulator: real manifests and the real webhook on a simulated
cluster. What a user would see: jobs finish with the right status, GPUs are not held by
jobs that cannot train, nobody jumps the queue, and faults or restarts change nothing."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from cli.main import main
from policy.model.pool import POLICIES
from sim.apiserver import Obj
from sim.engine import Scenario, SimConfig, Simulation, simulate
from sim.results import SimResult
from sim.scenario import ScenarioError, from_manifests, load_scenario
from tests.simkit import (
    COMPAT,
    GPU,
    PODS,
    TFJOBS,
    CapacityProbe,
    ClaimProbe,
    HookSpy,
    comparable,
    condition,
    cpu_nodes,
    file_job,
    first_create,
    gpu_nodes,
    job,
    scenario,
    stale_view_race,
    status_of,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "scenario.yaml"
PHILLY = ROOT / "tests" / "fixtures" / "traces" / "philly-excerpt.csv"
KEEP = SimConfig(delete_finished_after_s=None)  # finished jobs stay, so their status is readable
# For a job that never starts: long past its first syncs, four of Metacontroller's resyncs
# (30 min) and six expiries of its customize cache (20 min), after which nothing changes
# (the default horizon, 60 days, syncs it 5,000 times more to the same answer).
STUCK = dataclasses.replace(KEEP, max_time_s=2 * 3600.0)

# kube-batch's nodes for gang-tfjob.yaml: its pods select gpu=1060g1.
KUBE_BATCH_NODES = gpu_nodes(2, labels={"gpu": "1060g1"})


@pytest.fixture(scope="module")
def example() -> Scenario:
    return load_scenario(EXAMPLE)


# --- 1. compatibility manifests --------------------------------------------------------


@pytest.mark.parametrize(
    ("manifest", "nodes", "binding"),
    [
        ("dragon-job1-cpu.yaml", cpu_nodes(2), "affinity"),
        ("dragon-job1-gpu.yaml", gpu_nodes(2), "affinity"),
        # Its pods name schedulerName kube-batch, which the simulator does not run: pinned by
        # affinity they would wait for it forever. Bound by nodeName they need no scheduler.
        ("gang-tfjob.yaml", KUBE_BATCH_NODES, "nodeName"),
    ],
)
def test_compat_job_runs_to_success(manifest: str, nodes: tuple, binding: str) -> None:
    spec = file_job(COMPAT / manifest)
    sim = Simulation(scenario(nodes, [spec]), dataclasses.replace(KEEP, binding=binding))
    result = sim.run()
    (record,) = result.jobs
    assert record.finish_s is not None
    assert record.start_s is not None and record.start_s <= record.finish_s
    status = status_of(sim, spec.key)
    succeeded = condition(status, "Succeeded")
    assert succeeded is not None and succeeded["status"] == "True"
    assert condition(status, "Failed") is None
    assert status["observedGeneration"] == sim.api.get(TFJOBS, spec.key)["metadata"]["generation"]


def test_kubeshare_job_waits_instead_of_running_without_a_gpu() -> None:
    """A pool without KubeShare never runs a fractional-GPU job (before, it ran on cpu and
    memory alone, without a word): no pod, and its status says why and what would help."""
    spec = file_job(COMPAT / "dragon-job1-kubeshare.yaml")
    sim = Simulation(scenario(gpu_nodes(2), [spec]), STUCK)
    (record,) = sim.run().jobs
    assert record.start_s is None and record.finish_s is None
    assert not list(sim.api.list(PODS))
    status = status_of(sim, spec.key)
    assert condition(status, "Failed") is None
    assert status["scheduling"]["phase"] == "Queued"
    assert status["scheduling"]["reason"] == "NoKubeShare"
    assert "spec.kubeshare" in status["scheduling"]["message"]


def test_gang_tfjob_in_a_pool_without_kube_batch_says_what_to_change() -> None:
    """A job naming kube-batch in a pool without a gang scheduler still runs (bound by
    nodeName here), and its status says that no PodGroup is written and what to change
    (docs/gang-schedulers.md; in a kube-batch pool it runs unchanged: test_gang_schedulers)."""
    spec = file_job(COMPAT / "gang-tfjob.yaml")
    config = dataclasses.replace(KEEP, binding="nodeName")
    messages: set[str] = set()

    def watch(_: object) -> None:
        job = sim.api.get(TFJOBS, spec.key)
        scheduling = ((job or {}).get("status") or {}).get("scheduling") or {}
        if scheduling.get("phase") == "Admitted":
            messages.add(scheduling["message"])

    sim = Simulation(scenario(KUBE_BATCH_NODES, [spec]), config, on_progress=watch)
    (record,) = sim.run().jobs
    assert record.finish_s is not None
    assert messages == {
        "its pods name schedulerName kube-batch, but TrainingPool 'default' has no gang "
        "scheduler (gangScheduler: none), so no PodGroup is written for it; no pool uses "
        "kube-batch: create one with gangScheduler: kube-batch, or remove schedulerName from "
        "its templates"
    }


def test_gang_tfjob_pinned_by_affinity_waits_for_its_scheduler() -> None:
    """Why the test above binds by nodeName: with affinity the pods name a scheduler that
    is not there, so they are never bound and the job never starts (nor does it fail); its
    status says which scheduler they wait for and what to change."""
    spec = file_job(COMPAT / "gang-tfjob.yaml")
    sim = Simulation(scenario(KUBE_BATCH_NODES, [spec]), STUCK)
    (record,) = sim.run().jobs
    assert record.start_s is None
    pods = list(sim.api.list(PODS))
    assert pods and all(not p["spec"].get("nodeName") for p in pods)
    status = status_of(sim, spec.key)
    assert condition(status, "Failed") is None
    assert status["scheduling"]["phase"] == "Admitted"
    message = status["scheduling"]["message"]
    assert f"{len(pods)} pod(s)" in message
    assert "scheduler kube-batch" in message
    assert "remove schedulerName" in message


def test_legacy_v1alpha1_tfjob_is_not_a_tfjob() -> None:
    """tensorflow.org/v1alpha1 TfJob is another API: the loader refuses the file, and in a
    cluster Dragonet's controller (kubeflow.org/v1 tfjobs) never picks the object up."""
    legacy = COMPAT / "legacy-tfjob-v1alpha1.yaml"
    with pytest.raises(ScenarioError, match=r"TfJob is not supported as it is; convert it"):
        from_manifests([legacy], ROOT / "examples" / "nodes.yaml")

    sim = Simulation(scenario(cpu_nodes(1), [job("ok", 1, worker_resources={"cpu": "1"})]), KEEP)
    obj = file_job(legacy).manifest
    sim.api.create(obj)
    # Converted in name only (apiVersion/kind) it is ours, but has no tfReplicaSpecs.
    renamed = copy.deepcopy(obj)
    renamed.update(apiVersion="kubeflow.org/v1", kind="TFJob")
    renamed["metadata"]["name"] = "renamed"
    sim.api.create(renamed)
    result = sim.run()

    assert result.summary["jobs_finished"] == 1  # the ordinary job is not disturbed
    untouched = sim.api.get("TfJob.tensorflow.org/v1alpha1", "default/example-job")
    assert "status" not in untouched and not untouched["metadata"].get("finalizers")
    pods = {p["metadata"]["name"] for p in sim.api.list(PODS)}
    assert not {p for p in pods if p.startswith(("example-job", "renamed"))}
    failed = condition(status_of(sim, "default/renamed"), "Failed")
    assert failed is not None and failed["status"] == "True"
    assert "tfReplicaSpecs" in failed["message"]


# --- 2. the gang scenario --------------------------------------------------------------


def test_gang_admission_keeps_gpus_away_from_jobs_that_cannot_train(example: Scenario) -> None:
    free = {p: simulate(example, SimConfig(policy=p).cost_free()).summary for p in POLICIES}
    for summary in free.values():
        assert summary["jobs_finished"] == summary["jobs"] == len(example.jobs)
    assert free["kube-default"]["deadlocked_resource_seconds"][GPU] > 0
    assert free["dragonet"]["deadlocked_resource_seconds"][GPU] == 0
    assert free["gang-fifo"]["deadlocked_resource_seconds"][GPU] == 0
    assert free["dragonet"]["avg_jct_s"] < free["kube-default"]["avg_jct_s"]
    # Under Metacontroller's real client a gang's pods are written one request at a time:
    # the GPUs held before its last pod exists are seconds, against kube-default's hours.
    real = {p: simulate(example, SimConfig(policy=p)).summary for p in ("dragonet", "kube-default")}
    held = real["dragonet"]["deadlocked_resource_seconds"][GPU]
    assert held < 0.01 * real["kube-default"]["deadlocked_resource_seconds"][GPU]
    assert real["dragonet"]["avg_jct_s"] < real["kube-default"]["avg_jct_s"]


# --- 3. no unfair overtaking -----------------------------------------------------------


def _fifo_scenario() -> Scenario:
    """8 GPUs. ``big-a`` takes 6 for a long time; ``old-b`` (4) must wait for it. Younger
    small jobs fit into the 2 GPUs left, which ``old-b`` cannot use. ``young-f`` (5) would
    fit into what ``big-a`` leaves, but ``old-b`` is first in line for it."""
    return scenario(
        gpu_nodes(2),
        [
            job("big-a", 6, arrival=0, steps=1000),
            job("old-b", 4, arrival=10, steps=200),
            job("small-c", 1, arrival=20, steps=30),
            job("small-d", 1, arrival=25, steps=30),
            job("pair-e", 2, arrival=30, steps=40),
            job("young-f", 5, arrival=40, steps=50),
        ],
    )


@pytest.mark.parametrize("policy", ["dragonet", "gang-fifo"])
def test_no_younger_job_takes_capacity_an_older_one_could_use(policy: str) -> None:
    sc = _fifo_scenario()
    sim = Simulation(sc, SimConfig(policy=policy))
    probe = ClaimProbe(sim)
    result = sim.run()
    assert result.summary["jobs_finished"] == len(sc.jobs)
    capacity = sum(int(n["status"]["allocatable"][GPU]) for n in sc.nodes) * 1000
    need = {
        s.key: s.manifest["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] * 1000 for s in sc.jobs
    }
    created = {s.key: first_create(sim, s.key) for s in sc.jobs}
    order = [s.key for s in sc.jobs]  # by arrival
    instants = sorted(probe.instants)
    # Room that freed is given away one pool sync and one job sync later (milliseconds of
    # simulated time): look at each instant once everyone had that long to react.
    react = 1.0

    def claims_at(when: float) -> dict[str, int]:
        last = [t for t in instants if t <= when]
        return probe.instants[last[-1]] if last else {}

    for i, old in enumerate(order):
        arrival = sc.jobs[i].arrival_s
        younger = order[i + 1 :]
        prev: dict[str, int] = {}
        for t in instants:
            if arrival <= t and t + react < created[old]:
                later = claims_at(t + react)
                # Room this job could have had: what nobody claimed, plus what younger jobs
                # took since the instant before t.
                grabbed = sum(max(later.get(y, 0) - prev.get(y, 0), 0) for y in younger)
                room = capacity - sum(later.values()) + grabbed
                assert room < need[old], f"{old} fitted at t={t:.1f}s but waited"
            prev = probe.instants[t]

    records = {r.key: r for r in result.jobs}
    b, f = records["default/old-b"], records["default/young-f"]
    # The scenario does exercise backfill: younger jobs ran while old-b waited.
    assert created["default/small-c"] < created["default/old-b"]
    assert created["default/small-d"] < created["default/old-b"]
    assert f.start_s > b.start_s
    # old-b got its pods as soon as big-a's workers released enough GPUs (one pool sync
    # and one job sync later).
    a_done = records["default/big-a"].finish_s
    assert a_done <= created["default/old-b"] <= a_done + react


# --- 4. a webhook restart --------------------------------------------------------------


@pytest.mark.parametrize("policy", ["dragonet", "gang-fifo"])
def test_waiting_jobs_start_in_arrival_order_not_name_order(policy: str) -> None:
    """first-z arrives before also-a (a later name, an earlier namespace: a queue sorted by
    either would swap them); each needs all 8 GPUs, which "holder" keeps for a while."""
    jobs = [
        job("holder", 8, ps=0, steps=200),
        job("first-z", 8, ps=0, arrival=5.0, steps=50, namespace="team-z"),
        job("also-a", 8, ps=0, arrival=10.0, steps=50, namespace="team-a"),
    ]
    sim = Simulation(scenario(gpu_nodes(2), jobs), SimConfig(policy=policy))
    result = sim.run()
    assert result.summary["jobs_finished"] == 3
    holder = first_create(sim, "default/holder")
    first, second = first_create(sim, "team-z/first-z"), first_create(sim, "team-a/also-a")
    assert holder is not None and first is not None and second is not None
    assert holder < first < second


def test_webhook_restart_changes_no_decision(example: Scenario) -> None:
    """The webhook keeps no state between syncs: a fresh process decides exactly the same."""
    plain = Simulation(example, SimConfig())
    plain_result = plain.run()
    restarted = Simulation(example, SimConfig(webhook_restarts_s=(15.0, 300.0, 800.0)))
    first_app = restarted.webhook.app
    restarted_result = restarted.run()
    assert restarted.webhook.app is not first_app
    assert restarted.log == plain.log
    assert restarted_result.jobs == plain_result.jobs
    assert comparable(restarted_result.summary) == comparable(plain_result.summary)


# --- 5. parallel and stale syncs -------------------------------------------------------


def _busy() -> Scenario:
    """Twelve GPUs' worth of jobs (1-3 each) in two bursts of three, a second apart, on 8
    GPUs: syncs of one batch plan from one view, and (with a stale view) some plan on
    capacity that was given away since."""
    return scenario(
        gpu_nodes(2),
        [job(f"j{i}", 1 + i % 3, arrival=float(i // 3), steps=20 + 10 * (i % 4)) for i in range(6)],
    )


@dataclasses.dataclass
class _Unschedulable:
    """Pods the kube-scheduler found no room for on the node they are pinned to."""

    pods: set[str] = dataclasses.field(default_factory=set)

    def __call__(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        conds = ((new or {}).get("status") or {}).get("conditions") or ()
        if tkey == PODS and any(c.get("reason") == "Unschedulable" for c in conds):
            self.pods.add(new["metadata"]["name"])


@pytest.mark.parametrize(
    "config",
    [
        SimConfig(mc_workers=5),
        SimConfig(view_delay_s=2.0),
        SimConfig(mc_workers=5, view_delay_s=2.0),
    ],
    ids=["5-workers", "stale-view", "5-workers-stale-view"],
)
def test_racing_syncs_never_overcommit_a_node(config: SimConfig) -> None:
    sc = _busy()
    sim = Simulation(sc, dataclasses.replace(config, delete_finished_after_s=5.0))
    capacity = CapacityProbe(sim)
    unschedulable = _Unschedulable()
    sim.api.watchers.append(unschedulable)
    result = sim.run()
    assert capacity.overcommits == []
    assert result.summary["kubelet_rejections"] == 0
    assert result.summary["jobs_finished"] == len(sc.jobs)
    if config.view_delay_s:
        # A plan made on a view that missed pods is caught by the kube-scheduler, not a
        # kubelet, and the pod is placed again (test_a_plan_on_a_stale_view_... provokes it).
        assert result.summary["pod_restarts"] >= len(unschedulable.pods)
    else:
        # One pool plans, serially, on a fresh view: no pod is pinned to a node without room.
        assert unschedulable.pods == set()


def test_a_plan_on_a_stale_view_is_caught_by_the_kube_scheduler_and_placed_again() -> None:
    """The pool's view lags 2 s. It admits x (t=2), then, still blind to that Admission,
    plans the higher-priority y, which arrived later, onto the same GPUs (t=2.5). Both
    jobs' pods get created; the kube-scheduler binds x's and marks y's Unschedulable; the
    pool sees it, and y runs once x is done. Nothing is ever overcommitted. (Policy dragon:
    dragonet would preempt x for y, tests/test_preemption.py runs that on a stale view.)"""
    sc = stale_view_race()
    # One worker and instant writes (cost-free), so that the two plans race as described.
    config = SimConfig(policy="dragon", view_delay_s=2.0, delete_finished_after_s=5.0)
    sim = Simulation(sc, config.cost_free())
    capacity = CapacityProbe(sim)
    unschedulable = _Unschedulable()
    sim.api.watchers.append(unschedulable)
    result = sim.run()
    assert capacity.overcommits == []
    assert result.summary["jobs_finished"] == 2
    assert unschedulable.pods and all(p.startswith("y-") for p in unschedulable.pods)
    assert result.summary["pod_restarts"] >= len(unschedulable.pods)
    records = {r.key: r for r in result.jobs}
    assert records["default/y"].start_s >= records["default/x"].finish_s


def test_nodename_binding_on_a_stale_view_still_finishes_every_job() -> None:
    """Bound by nodeName, a pod planned on stale capacity reaches a full node; its kubelet
    rejects it (OutOf...) and the job places it again."""
    sc = _busy()
    # Bounded: a run whose jobs never finish would otherwise go on for 60 simulated days.
    config = SimConfig(binding="nodeName", view_delay_s=2.0, delete_finished_after_s=5)
    sim = Simulation(sc, dataclasses.replace(config, max_time_s=200))
    result = sim.run()
    assert result.summary["jobs_finished"] == len(sc.jobs)
    assert result.summary["pod_restarts"] >= result.summary["kubelet_rejections"]


@pytest.mark.parametrize(
    "view_delay_s",
    [
        0.0,
        2.0,
    ],
)
def test_statuses_settle_when_nothing_happens(view_delay_s: float) -> None:
    """Two jobs train for long; once their pods run nothing changes, so nothing is written."""
    sc = scenario(gpu_nodes(1), [job("a", 1, steps=1e6), job("b", 1, arrival=5, steps=1e6)])
    sim = Simulation(sc, SimConfig(view_delay_s=view_delay_s, max_time_s=120))
    writes: list[float] = []

    def watch(tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == TFJOBS and old is not None and new is not None:
            writes.append(sim.now)

    sim.api.watchers.append(watch)
    result = sim.run()
    assert all(r.start_s is not None and r.start_s < 60 for r in result.jobs)
    assert [t for t in writes if t >= 60] == []


# --- 6. determinism --------------------------------------------------------------------


def test_a_seed_fixes_the_whole_run(example: Scenario) -> None:
    first, second = Simulation(example, SimConfig(seed=7)), Simulation(example, SimConfig(seed=7))
    a, b = first.run(), second.run()
    assert comparable(a.summary) == comparable(b.summary)
    assert first.log == second.log
    assert a.jobs == b.jobs and a.samples == b.samples
    other = simulate(example, SimConfig(seed=8))
    assert [r.start_s for r in other.jobs] != [r.start_s for r in a.jobs]


# --- 7. faults -------------------------------------------------------------------------


def _victim(**config) -> tuple[Simulation, SimResult]:
    """One two-worker job on three nodes, training from about 10 s to well past 60 s."""
    sim = Simulation(
        scenario(gpu_nodes(3), [job("victim", 2, steps=200)]), dataclasses.replace(KEEP, **config)
    )
    return sim, sim.run()


def _events(sim: Simulation, pod: str, after: float) -> list[str]:
    return [ev for t, ev, p, _ in sim.log if p == pod and t >= after]


def test_an_evicted_worker_is_replaced_and_the_job_finishes() -> None:
    _, calm = _victim()
    pod = "default/victim-worker-1"
    sim, result = _victim(evictions=((60.0, pod),))
    (before,), (after,) = calm.jobs, result.jobs
    assert before.finish_s is not None and before.finish_s > 60  # it hits a running job
    assert after.finish_s is not None and after.finish_s > before.finish_s
    assert _events(sim, pod, 60.0)[:2] == ["gone", "create"]
    assert result.summary["pod_restarts"] == 1
    assert condition(status_of(sim, "default/victim"), "Succeeded")["status"] == "True"


def test_a_lost_node_is_repaired_around() -> None:
    calm_sim, calm = _victim()
    assert calm.jobs[0].finish_s is not None and calm.jobs[0].finish_s > 60
    where = {}
    for t, ev, pod, node in calm_sim.log:
        if t <= 60 and ev in ("create", "bind") and node:
            where[pod] = node
    lost = where["default/victim-worker-0"]
    on_lost = {pod for pod, node in where.items() if node == lost}
    sim, result = _victim(node_losses=((60.0, lost),))
    assert result.summary["jobs_finished"] == 1
    later = [(ev, pod, node) for t, ev, pod, node in sim.log if t >= 60]
    assert {pod for ev, pod, _ in later if ev == "gone"} >= on_lost
    assert {pod for ev, pod, _ in later if ev == "create"} >= on_lost  # same names again
    assert all(node != lost for ev, _, node in later if ev in ("bind",))
    # Only the pods of the lost node come back. A job's sync may see its pods go before
    # the pool has placed them again, and create them once on the old (now missing) node
    # first: the kube-scheduler cannot bind those, and they are placed again.
    assert {pod for ev, pod, _ in later if ev == "create"} == on_lost
    assert len(on_lost) <= result.summary["pod_restarts"] <= 2 * len(on_lost)
    assert condition(status_of(sim, "default/victim"), "Succeeded")["status"] == "True"


def test_a_crashed_worker_restarts_in_place_under_onfailure() -> None:
    pod = "default/victim-worker-0"
    sim, result = _victim(crashes=((60.0, pod, 1),))
    (record,) = result.jobs
    assert record.finish_s is not None and record.finish_s > 60
    assert _events(sim, pod, 60.0) == []  # the same pod: not deleted, not created again
    restarts = sim.api.get(PODS, pod)["status"]["containerStatuses"][0]["restartCount"]
    assert restarts == 1 == result.summary["pod_restarts"]
    status = status_of(sim, "default/victim")
    assert condition(status, "Succeeded")["status"] == "True"
    assert condition(status, "Failed") is None


def test_a_run_cut_short_reports_the_jobs_it_did_not_finish() -> None:
    sc = scenario(gpu_nodes(1), [job("early", 1, steps=50), job("late", 1, arrival=5000)])
    result = simulate(sc, SimConfig(max_time_s=1000))
    assert result.summary["jobs_finished"] == 1
    assert all(r.finish_s is None for r in result.jobs if r.key == "default/late")


# --- 9. the command line ---------------------------------------------------------------

SUMMARY_KEYS = {
    "policy",
    "jobs",
    "avg_jct_s",
    "p50_jct_s",
    "p95_jct_s",
    "makespan_s",
    "avg_queue_s",
    "utilization",
    "deadlocked_resource_seconds",
    "scale_actions",
    "pod_restarts",
    "sync_calls",
    "sync_latency_ms",
    "lower_bounds",
}


def _summaries(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_cli_prints_one_json_summary_per_policy(monkeypatch, capsys) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["simulate", "--json", "--policy", "dragonet"]) == 0
    (summary,) = _summaries(capsys.readouterr().out)
    assert summary.keys() >= SUMMARY_KEYS
    assert summary["policy"] == "dragonet"
    assert summary["jobs"] == len(load_scenario(EXAMPLE).jobs)
    assert {"p50", "p99"} <= summary["sync_latency_ms"].keys()
    assert {"makespan_s", "avg_jct_s"} <= summary["lower_bounds"].keys()
    assert summary["lower_bounds"]["makespan_s"] <= summary["makespan_s"]
    assert summary["lower_bounds"]["avg_jct_s"] <= summary["avg_jct_s"]


def test_cli_plot_writes_a_png(monkeypatch, capsys, tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out.png"
    argv = ["simulate", "--json", "--policy", "dragonet,kube-default", "--plot", str(out)]
    assert main(argv) == 0
    summaries = _summaries(capsys.readouterr().out)
    assert [s["policy"] for s in summaries] == ["dragonet", "kube-default"]
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_cli_rejects_an_unknown_policy(monkeypatch, capsys) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["simulate", "--policy", "fastest"]) == 2
    captured = capsys.readouterr()
    assert "unknown policy fastest" in captured.err
    assert "dragonet" in captured.err  # and says which exist
    assert captured.out == ""


@pytest.mark.slow
def test_cli_replays_a_philly_trace(monkeypatch, capsys) -> None:
    monkeypatch.chdir(ROOT)
    argv = ["simulate", "--trace", str(PHILLY), "--jobs", "20", "--policy", "dragonet", "--json"]
    assert main(argv) == 0
    (summary,) = _summaries(capsys.readouterr().out)
    assert summary["jobs"] == summary["jobs_finished"] == 20
    assert summary["scenario"].startswith(PHILLY.stem)


# --- 7. what one event costs -----------------------------------------------------------


def test_one_pod_event_costs_one_pool_sync_plus_the_jobs_whose_admission_changed() -> None:
    """Twelve jobs run. One pod of one of them restarts its container in place (a pod
    update, nothing more): the pool syncs once, the pod's own job once, and no other job
    (the first design synced all twelve, each planning the whole cluster)."""
    jobs = [job(f"j{i:02d}", 1, arrival=i, steps=1e6) for i in range(12)]
    sim = Simulation(scenario(gpu_nodes(4), jobs), dataclasses.replace(KEEP, max_time_s=200))
    spy = HookSpy(sim)
    pod = "default/j05-worker-0"
    sim.schedule(120.0, lambda: sim.kube.exit(pod, 137))  # OnFailure: restarted in place
    sim.run()

    def calls(controller: str) -> list[str]:
        return [c.parent for c in spy.by(controller, "sync") if 120 <= c.t < 121]

    assert calls("dragonet-pools") == ["default"]
    assert calls("dragonet-tfjobs") == ["default/j05"]
    # Before the event everything had settled: nothing was synced between 100 s and 120 s.
    assert [c for c in spy.calls if 100 <= c.t < 120 and c.hook == "sync"] == []
