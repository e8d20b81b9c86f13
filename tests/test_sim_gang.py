"""Gang-backend pools end to end in the simulator (sim/gang.py), through the real webhook
and the job controllers of metacontroller/ owning the backend's PodGroups.

And the simulated gang scheduler itself: all of a group or none, the preferred node first.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest

from sim.apiserver import ApiServer, Obj, object_key
from sim.engine import SimConfig, Simulation
from sim.kube import Kube, node_object
from sim.results import SimResult
from sim.scenario import load_scenario
from tests.kube_schema import validate_pod_group
from tests.simkit import (
    COMPAT,
    PODS,
    TFJOBS,
    condition,
    cpu_nodes,
    file_job,
    gpu_nodes,
    job,
    scenario,
)
from tests.simkit import status_of as tf_status

ROOT = COMPAT.parent.parent.parent
# Metacontroller's writes free and instant (sim/metacontroller.py COST_FREE): these tests pin
# that a PodGroup's write follows its Admission's, and when a status lands; with the real
# rate-limited client a PodGroup lags its Admission by the writes queued before it.
KEEP = SimConfig(delete_finished_after_s=None).cost_free()
KUBE_BATCH_NODES = gpu_nodes(2, labels={"gpu": "1060g1"})
ADMISSIONS = "Admission.dragonet.io/v1alpha1"
POD_GROUPS = {
    "kube-batch": "PodGroup.scheduling.incubator.k8s.io/v1alpha1",
    "volcano": "PodGroup.scheduling.volcano.sh/v1beta1",
    "coscheduling": "PodGroup.scheduling.x-k8s.io/v1alpha1",
}


class History:
    """What the API server saw: every write of a PodGroup by its job's sync, every status
    the backend wrote in one, every Admission's pod count, every pod's binding, each with
    the simulated time."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.groups: list[tuple[float, str, int]] = []  # (t, namespace/name, minMember)
        self.admitted: dict[str, list[tuple[float, int]]] = {}  # job name -> (t, pods)
        self.bound_by: dict[str, str] = {}  # pod -> schedulerName at binding
        self.statuses: list[tuple[float, str, Obj]] = []  # (t, namespace/name, status)
        sim.api.watchers.append(self._on)

    def _on(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        t = self.sim.now
        if (
            tkey in POD_GROUPS.values()
            and new is not None
            and new.get("status") != (old or {}).get("status")
        ):
            self.statuses.append((t, object_key(new), new["status"]))
        elif tkey in POD_GROUPS.values() and new is not None:
            key = f"{new['metadata']['namespace']}/{new['metadata']['name']}"
            self.groups.append((t, key, new["spec"]["minMember"]))
        elif tkey == ADMISSIONS and new is not None:
            job = new["spec"]["job"]["name"]
            self.admitted.setdefault(job, []).append((t, len(new["spec"]["pods"])))
        elif (
            tkey == PODS
            and new is not None
            and new["spec"].get("nodeName")
            and not (old or {}).get("spec", {}).get("nodeName")
        ):
            self.bound_by[new["metadata"]["name"]] = new["spec"].get("schedulerName", "")

    def admitted_pods_at(self, job: str, t: float) -> int:
        return [n for when, n in self.admitted[job] if when <= t][-1]


def _run(sc: Any, backend: str, **config: Any) -> tuple[Simulation, History, SimResult]:
    sim = Simulation(sc, dataclasses.replace(KEEP, gang_scheduler=backend, **config))
    history = History(sim)
    return sim, history, sim.run()


def test_gang_tfjob_runs_unchanged_to_success_in_a_kube_batch_pool() -> None:
    """Kubeflow's kube-batch manifest, as written: its PodGroup exists while it runs, the
    simulated kube-batch binds both pods together, and it succeeds; once finished the
    PodGroup is gone."""
    spec = file_job(COMPAT / "gang-tfjob.yaml")
    sim, history, result = _run(scenario(KUBE_BATCH_NODES, [spec]), "kube-batch")
    (record,) = result.jobs
    assert record.finish_s is not None
    status = tf_status(sim, spec.key)
    assert condition(status, "Succeeded")["status"] == "True"
    assert condition(status, "Failed") is None
    assert history.groups == [(history.groups[0][0], spec.key, 2)]
    assert history.bound_by == {
        "tfjob-gang-scheduling-ps-0": "kube-batch",
        "tfjob-gang-scheduling-worker-0": "kube-batch",
    }
    assert sim.kube.gang is not None and sim.kube.gang.groups_bound == 1
    assert list(sim.api.list(POD_GROUPS["kube-batch"])) == []  # deleted with the finish


@pytest.mark.parametrize("backend", list(POD_GROUPS))
@pytest.mark.parametrize(
    ("manifest", "nodes"),
    [("dragon-job1-cpu.yaml", cpu_nodes(2)), ("dragon-job1-gpu.yaml", gpu_nodes(2))],
)
def test_dragons_jobs_run_to_success_under_each_backend(
    backend: str, manifest: str, nodes: tuple
) -> None:
    spec = file_job(COMPAT / manifest)
    sim, history, _ = _run(scenario(nodes, [spec]), backend)
    status = tf_status(sim, spec.key)
    assert condition(status, "Succeeded")["status"] == "True"
    assert history.groups and all(k == spec.key for _, k, _ in history.groups)
    names = {"kube-batch": "kube-batch", "volcano": "volcano"}
    expected = names.get(backend, "scheduler-plugins-scheduler")
    assert set(history.bound_by.values()) == {expected}


@pytest.mark.parametrize("backend", ["volcano", "coscheduling"])
def test_min_member_is_always_the_admissions_pod_count_as_elastic_jobs_grow_and_shrink(
    backend: str,
) -> None:
    """examples/elastic.yaml: the elastic job grows into idle GPUs and gives workers back.
    Every PodGroup write carries the pod count of the Admission it was rendered from, and
    minMember took more than one value for it; every job still finishes."""
    sc = load_scenario(ROOT / "examples" / "elastic.yaml")
    _, history, result = _run(sc, backend)
    assert all(r.finish_s is not None for r in result.jobs)
    by_job: dict[str, set[int]] = {}
    for t, key, members in history.groups:
        name = key.split("/")[1]
        assert members == history.admitted_pods_at(name, t), (t, key)
        by_job.setdefault(name, set()).add(members)
    assert max(len(v) for v in by_job.values()) >= 2, by_job  # some job grew or shrank


def test_an_mxjob_and_a_tfjob_share_a_volcano_pool() -> None:
    sc = load_scenario(ROOT / "examples" / "mixed.yaml")
    _, history, result = _run(sc, "volcano")
    assert all(r.finish_s is not None for r in result.jobs)
    kinds = {key.split("/")[1] for _, key, _ in history.groups}
    assert len(kinds) == len(result.jobs)  # each job had its PodGroup
    assert set(history.bound_by.values()) == {"volcano"}


class Squatters:
    """Pods Dragonet did not plan: the moment a job is admitted, one on every node takes
    ``gpus`` GPUs (a plan made from a view that had not seen them yet), for ``hold_s``."""

    def __init__(self, sim: Simulation, gpus: int, hold_s: float) -> None:
        self.sim, self.gpus, self.hold_s = sim, gpus, hold_s
        self.came = False
        sim.api.watchers.append(self._on)

    def _on(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if tkey == ADMISSIONS and old is None and new is not None and not self.came:
            self.came = True
            self.sim.schedule(0.0, self._come)

    def _come(self) -> None:
        names = [f"other/squatter-{n['metadata']['name']}" for n in self.sim.scenario.nodes]
        for n, key in zip(self.sim.scenario.nodes, names, strict=True):
            limits = {"nvidia.com/gpu": str(self.gpus)}
            container = {"name": "squat", "image": "busybox", "resources": {"limits": limits}}
            meta = {"name": key.split("/")[1], "namespace": "other"}
            spec = {"nodeName": n["metadata"]["name"], "containers": [container]}
            self.sim.api.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
        self.sim.schedule(self.hold_s, lambda: [self.sim.api.delete(PODS, k) for k in names])


class Messages:
    """Every scheduling message a TFJob's status carried, with the simulated time."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.said: list[tuple[float, str]] = []
        sim.api.watchers.append(self._on)

    def _on(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        message = ((new or {}).get("status") or {}).get("scheduling", {}).get("message")
        if tkey == TFJOBS and message and (not self.said or self.said[-1][1] != message):
            self.said.append((self.sim.now, message))


WAIT = (
    "4 pod(s) wait for {0} to bind them: it binds PodGroup squeezed all at once when its "
    "pods fit together ({0} says: {1})"
)
TASKS = "1/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable"


@pytest.mark.parametrize(
    ("backend", "scheduler", "said"),
    [
        (
            "volcano",
            "volcano",
            f"Inqueue, 0/4 running: {TASKS}; Pending: 1 Unschedulable, 3 Schedulable",
        ),
        ("kube-batch", "kube-batch", f"Inqueue, 0/4 running: {TASKS}."),
        ("coscheduling", "scheduler-plugins-scheduler", "Scheduling, 0/4 running"),
    ],
)
def test_a_gang_that_cannot_be_placed_at_once_says_what_its_backend_wrote(
    backend: str, scheduler: str, said: str
) -> None:
    """Three 1-GPU workers and a PS admitted onto two 4-GPU nodes, where pods Dragonet did
    not plan take 3 GPUs of each the moment it is admitted: the simulated backend can place
    three of the four pods, so it binds none and writes why in the PodGroup's status (a
    status update: the job's controller re-syncs), and the TFJob's status repeats it. Once
    the squatters leave, the gang is bound and runs: the PodGroup says Running, 4 running;
    every status it wrote is valid for the backend's CRD and none was written twice."""
    spec = job("squeezed", 3)
    sim = Simulation(
        scenario(gpu_nodes(2), [spec]), dataclasses.replace(KEEP, gang_scheduler=backend)
    )
    history, messages = History(sim), Messages(sim)
    Squatters(sim, gpus=3, hold_s=60.0)
    (record,) = sim.run().jobs
    assert record.finish_s is not None and record.start_s > 60.0
    expected = WAIT.format(scheduler, said)
    (when,) = [t for t, m in messages.said if m == expected]
    # It is what the backend last wrote, and the job's status said it within a job sync of
    # that write: the status update alone re-synced the job.
    wrote = [st for t, _, st in history.statuses if t <= when][-1]
    unschedulable = condition(wrote, "Unschedulable")
    if backend == "coscheduling":
        assert wrote == {"phase": "Scheduling"} and unschedulable is None
    else:
        assert unschedulable is not None and unschedulable["status"] == "True"
        assert unschedulable["reason"] == "NotEnoughResources"
        assert expected.endswith(f"{unschedulable['message']})")
    assert when - [t for t, _, _ in history.statuses if t <= when][-1] < 0.1
    running = [st for _, _, st in history.statuses if st.get("running") == 4]
    assert running and running[0]["phase"] == "Running"
    assert running[0].get("succeeded") is None and running[0].get("failed") is None
    # Then the workers succeed, the PS still runs; the group is gone once the job finishes.
    assert history.statuses[-1][2]["phase"] == "Running"
    assert history.statuses[-1][2]["running"] == 1 and history.statuses[-1][2]["succeeded"] == 3
    statuses = [st for _, _, st in history.statuses]
    assert all(a != b for a, b in itertools.pairwise(statuses))
    api_version = POD_GROUPS[backend].split(".", 1)[1]
    for st in statuses:
        if backend == "kube-batch":
            # Its CRD (apiextensions v1beta1, never pruned) declares only the counts; its
            # type (scheduling/v1alpha1 PodGroupStatus) has the phase and conditions too.
            st = {k: v for k, v in st.items() if k not in ("phase", "conditions")}
        validate_pod_group(
            {
                "apiVersion": api_version,
                "kind": "PodGroup",
                "metadata": {"name": "squeezed", "namespace": "default"},
                "spec": {"minMember": 4},
                "status": st,
            }
        )
    assert tf_status(sim, spec.key)["scheduling"]["message"] != expected
    assert list(sim.api.list(POD_GROUPS[backend])) == []


# --- the simulated gang scheduler ------------------------------------------------------------


class Cluster:
    """An API server and its kube-scheduler/kubelets, with gang scheduler "volcano", whose
    scheduled actions run in order, at once."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.actions: list[Callable[[], None]] = []
        self.api = ApiServer(clock=lambda: 0.0)
        self.kube = Kube(
            self.api, lambda _delay, action: self.actions.append(action), random.Random(0)
        )
        self.kube.run_gang_scheduler({"volcano"})
        for n in nodes:
            self.api.create(n)
        self.settle()

    def settle(self) -> None:
        while self.actions:
            self.actions.pop(0)()

    def group(self, name: str, min_member: int, backend: str = "volcano") -> None:
        self.api.create(
            {
                "apiVersion": POD_GROUPS[backend].split(".", 1)[1],
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"minMember": min_member},
            }
        )
        self.settle()

    def pod(self, name: str, group: str, gpus: int, prefer: str | None = None) -> None:
        spec: dict[str, Any] = {
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "tensorflow",
                    "image": "tf",
                    "resources": {"limits": {"nvidia.com/gpu": gpus}},
                }
            ],
        }
        if prefer:
            term = {"key": "kubernetes.io/hostname", "operator": "In", "values": [prefer]}
            spec["affinity"] = {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "preference": {"matchExpressions": [term]}}
                    ]
                }
            }
        meta = {
            "name": name,
            "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": group},
        }
        self.api.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
        self.settle()

    def node_of(self, name: str) -> str | None:
        return self.api.get(PODS, f"default/{name}")["spec"].get("nodeName")

    def group_status(self, name: str) -> Obj:
        (group,) = [g for t in POD_GROUPS.values() for g in self.api.list(t)]
        assert group["metadata"]["name"] == name
        return group.get("status") or {}

    def unschedulable(self, name: str) -> bool:
        conds = (self.api.get(PODS, f"default/{name}").get("status") or {}).get("conditions") or []
        return any(c.get("reason") == "Unschedulable" for c in conds)


def _gpu_nodes(*gpus: int) -> list[dict[str, Any]]:
    return [
        node_object(f"n{i}", {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": str(g)})
        for i, g in enumerate(gpus, 1)
    ]


def test_a_group_waits_silently_until_all_its_members_exist_then_binds_them_together() -> None:
    c = Cluster(_gpu_nodes(4))
    c.group("job", 3)
    c.pod("job-0", "job", 1)
    c.pod("job-1", "job", 1)
    assert c.node_of("job-0") is None and not c.unschedulable("job-0")
    c.pod("job-2", "job", 1)
    assert [c.node_of(f"job-{i}") for i in range(3)] == ["n1", "n1", "n1"]


def test_a_group_that_cannot_fit_at_once_binds_no_pod() -> None:
    """Three 2-GPU pods, room for two: none is bound (a plain scheduler would bind two and
    hold their GPUs idle), and each says why."""
    c = Cluster(_gpu_nodes(2, 2))
    c.group("job", 3)
    for i in range(3):
        c.pod(f"job-{i}", "job", 2)
    assert [c.node_of(f"job-{i}") for i in range(3)] == [None, None, None]
    assert all(c.unschedulable(f"job-{i}") for i in range(3))


def test_volcano_writes_why_a_group_waits_and_then_that_it_runs() -> None:
    """The PodGroup's status as Volcano's session writes it: Inqueue at once; the gang
    plugin's Unschedulable condition with its message while the group cannot be placed
    (written once: trying again to no other end writes nothing); Running with its Scheduled
    condition once bound (the old Unschedulable stays, as Volcano keeps it), then the
    counts; Unknown while a member cannot be placed and the others run."""
    c = Cluster(_gpu_nodes(2, 2))
    c.group("job", 3)
    assert c.group_status("job") == {"phase": "Inqueue"}
    for i in range(3):
        c.pod(f"job-{i}", "job", 2)
    unschedulable = {
        "type": "Unschedulable",
        "status": "True",
        "reason": "NotEnoughResources",
        "message": "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, "
        "3 minAvailable; Pending: 1 Unschedulable, 2 Schedulable",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    assert c.group_status("job") == {"phase": "Inqueue", "conditions": [unschedulable]}
    assert c.kube.gang is not None
    writes = c.kube.gang.status_writes
    c.api.create(node_object("cpu", {"cpu": "8", "memory": "32Gi"}))  # tried again: no room
    c.settle()
    assert c.kube.gang.status_writes == writes
    c.api.create(node_object("n3", {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "2"}))
    c.settle()
    scheduled = {
        "type": "Scheduled",
        "status": "True",
        "reason": "tasks in gang are ready to be scheduled",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    status = c.group_status("job")
    assert status == {"phase": "Running", "conditions": [unschedulable, scheduled], "running": 3}
    # job-2 restarts (deleted, made again) while another pod took its GPUs.
    node = c.node_of("job-2")
    c.api.delete(PODS, "default/job-2")
    c.settle()
    assert c.group_status("job")["running"] == 2
    blocker = {"nodeName": node, "containers": [{"name": "b", "image": "b"}]}
    blocker["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 2}}
    c.api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}, "spec": blocker})
    c.pod("job-2", "job", 2)
    status = c.group_status("job")
    assert status["phase"] == "Unknown" and status["running"] == 2
    assert status["conditions"][0]["message"] == (
        "1/3 tasks in gang unschedulable: pod group is not ready, 1 Pending, 2 Running, "
        "3 minAvailable; Pending: 1 Unschedulable"
    )
    for st in (status, c.group_status("job")):
        validate_pod_group(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "job", "namespace": "default"},
                "status": st,
            }
        )


def test_coscheduling_writes_its_phases_and_counts_without_conditions() -> None:
    """scheduler-plugins' PodGroup controller: Pending until minMember pods exist, then
    Scheduling, Running once they run, Finished once minMember succeeded; the counts."""
    c = Cluster(_gpu_nodes(4))
    written: list[Obj] = []

    def on(tkey: str, old: Obj | None, new: Obj | None) -> None:
        if (
            tkey == POD_GROUPS["coscheduling"]
            and new
            and new.get("status") != (old or {}).get("status")
        ):
            written.append(new["status"])

    c.api.watchers.append(on)
    c.group("job", 2, backend="coscheduling")
    c.pod("job-0", "job", 1)
    assert c.group_status("job") == {"phase": "Pending"}
    c.pod("job-1", "job", 1)
    assert c.group_status("job") == {"phase": "Running", "running": 2}
    c.kube.exit("default/job-0", 0)
    c.settle()
    assert c.group_status("job") == {"phase": "Running", "running": 1, "succeeded": 1}
    c.kube.exit("default/job-1", 0)
    c.settle()
    assert c.group_status("job") == {"phase": "Finished", "succeeded": 2}
    assert [st["phase"] for st in written] == [
        "Pending",
        "Scheduling",
        "Running",
        "Running",
        "Finished",
    ]


def test_pods_without_their_pod_group_are_not_bound() -> None:
    c = Cluster(_gpu_nodes(4))
    c.pod("job-0", "job", 1)
    assert c.node_of("job-0") is None
    c.group("job", 1)  # the group appears: its pod is bound
    assert c.node_of("job-0") == "n1"


def test_each_pod_goes_to_its_preferred_node_when_it_fits_there() -> None:
    c = Cluster(_gpu_nodes(4, 4, 4))
    c.group("job", 3)
    c.pod("job-0", "job", 1, prefer="n3")
    c.pod("job-1", "job", 4, prefer="n2")
    c.pod("job-2", "job", 4, prefer="n2")  # n2 is full once job-1 is there: elsewhere
    assert c.node_of("job-0") == "n3"
    assert c.node_of("job-1") == "n2"
    assert c.node_of("job-2") == "n1"


def test_delegating_binding_changes_nothing_dragonet_decides_even_on_stale_views() -> None:
    """examples/scenario.yaml with a 2 s stale informer view and 5 workers per controller:
    under volcano every job starts and ends when it does with the kube-scheduler binding,
    to the second (the PodGroups' few extra syncs cost milliseconds): Dragonet's queue
    decides what runs; the backend only binds."""
    sc = load_scenario(ROOT / "examples" / "scenario.yaml")
    stale = {"view_delay_s": 2.0, "mc_workers": 5}
    plain = Simulation(sc, dataclasses.replace(KEEP, **stale)).run()
    _, history, gang = _run(sc, "volcano", **stale)
    assert [(r.key, round(r.start_s), round(r.finish_s)) for r in gang.jobs] == [
        (r.key, round(r.start_s), round(r.finish_s)) for r in plain.jobs
    ]
    assert all(r.finish_s is not None for r in gang.jobs)
    assert set(history.bound_by.values()) == {"volcano"}
