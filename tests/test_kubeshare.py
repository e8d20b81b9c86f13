"""Fractional GPUs with KubeShare, through the webhook in Metacontroller's request shape.

A pool's ``spec.kubeshare`` chooses: ``none`` keeps a fractional job waiting and says why;
``v1`` writes SharePods with their node and GPUID; ``v2`` writes Pods labelled for
kubeshare-scheduler. Every child is validated by the Hook (SharePods against KubeShare's
vendored CRD and its Go type, the rest against Kubernetes' schemas); the property test checks
that device-level accounting never over-commits a GPU.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.model.gpushare import (
    GPU,
    SHARE,
    DeviceFree,
    Devices,
    GpuShare,
    mint_id,
    observe_devices,
)
from policy.model.resources import Resources
from tests import metacontroller as mc
from tests.conftest import Hook, condition

JOB = "dragon-job1-kubeshare.yaml"  # PS (cpu) + 4 workers of 0.5 GPU, min 1, max 4
GIB = 2**30


def _hook(kubeshare: str) -> Hook:
    return Hook(pool=mc.pool(kubeshare=kubeshare))


def _gpu_node(name: str, gpus: int, mib: int | None = None) -> dict[str, Any]:
    node = mc.node(name, cpu="64", memory="256Gi", gpu=gpus)
    if mib is not None:
        info = ",".join(f"GPU-{name}-{i}:{mib}" for i in range(gpus)) + ","
        node["metadata"]["annotations"] = {"kubeshare/gpu_info": info}
    return node


def _fractional(name: str, share: str, workers: int, memory: int = GIB) -> dict[str, Any]:
    job = mc.compat(JOB)
    job["metadata"]["name"] = name
    job["spec"]["max-instances"] = workers
    job["spec"]["min-instances"] = workers
    worker = job["spec"]["tfReplicaSpecs"]["Worker"]
    worker["replicas"] = workers
    worker["template"]["metadata"]["annotations"] = {
        "kubeshare/gpu_request": share,
        "kubeshare/gpu_limit": "1.0",
        "kubeshare/gpu_mem": str(memory),
    }
    for c in (job["spec"]["tfReplicaSpecs"]["PS"], worker):
        c["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    return job


def _whole(name: str, workers: int) -> dict[str, Any]:
    job = mc.compat("dragon-job1-gpu.yaml")
    job["metadata"]["name"] = name
    job["spec"]["max-instances"] = workers
    job["spec"]["min-instances"] = workers
    job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = workers
    return job


def _children(body: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in body["children"] if c["kind"] == kind}


def observed_sharepod(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """A SharePod we asked for, running, as KubeShare v1 reports it (status.PodStatus)."""
    pod = mc.observed_pod(parent, child)
    status = pod.pop("status")
    sp = {**pod, "apiVersion": "kubeshare.nthu/v1", "kind": "SharePod"}
    gpuid = child["metadata"]["annotations"]["kubeshare/GPUID"]
    sp["status"] = {"PodStatus": status, "BoundDeviceID": gpuid}
    return sp


def _sum_by_device(sharepods: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for sp in sharepods:
        key = (sp["spec"]["nodeName"], sp["metadata"]["annotations"]["kubeshare/GPUID"])
        out[key] = out.get(key, 0) + float(sp["metadata"]["annotations"]["kubeshare/gpu_request"])
    return out


# --- the three modes, end to end through the webhook ----------------------------------------


def test_a_pool_without_kubeshare_keeps_a_fractional_job_waiting_and_says_why() -> None:
    hook = _hook("none")
    job = mc.tfjob(JOB)
    body = hook.sync(mc.world(job, [_gpu_node("gpu-1", 4)]))
    assert body["children"] == []
    assert condition(body, "Failed") is None
    scheduling = body["status"]["scheduling"]
    assert scheduling["phase"] == "Queued" and scheduling["reason"] == "NoKubeShare"
    assert "spec.kubeshare" in scheduling["message"]
    assert "never runs without its GPU" in scheduling["message"]
    assert hook.last_pool["status"]["queued"] == 1
    assert "fractional GPUs" in hook.last_pool["status"]["message"]


def test_dragon_kubeshare_annotation_alone_asks_for_kubeshare() -> None:
    """DRAGON's job annotation opts a job into KubeShare: without it configured, it waits."""
    job = mc.tfjob("dragon-job1-cpu.yaml")
    job["metadata"]["annotations"] = {"DRAGON_KUBESHARE": "true"}
    body = _hook("none").sync(mc.world(job, [_gpu_node("gpu-1", 4)]))
    assert body["status"]["scheduling"]["reason"] == "NoKubeShare"


def test_v1_writes_sharepods_with_node_and_gpuid_two_halves_per_device() -> None:
    hook = _hook("v1")
    job = mc.tfjob(JOB)
    body = hook.sync(mc.world(job, [_gpu_node("gpu-1", 2), _gpu_node("gpu-2", 2)]))
    sharepods = _children(body, "SharePod")
    assert sorted(sharepods) == [f"job1-worker-{i}" for i in range(4)]
    assert set(_children(body, "Pod")) == {"job1-ps-0"}  # the PS asks for no GPU
    for sp in sharepods.values():
        annotations = sp["metadata"]["annotations"]
        assert annotations["kubeshare/gpu_request"] == "0.5"
        assert annotations["kubeshare/gpu_limit"] == "1.0"
        assert annotations["kubeshare/gpu_mem"] == "3189243904"
        assert sp["spec"]["nodeName"] == "gpu-1"  # the whole job on one node (locality)
    # Two halves fill a device: four workers open two devices, each exactly full.
    assert sorted(_sum_by_device(list(sharepods.values())).values()) == [1.0, 1.0]
    # The Admission carries the device of each fractional pod, and the mode.
    spec = hook.admission(job)["spec"]
    assert spec["kubeshare"] == "v1"
    gpus = {(p["type"], p["index"]): p.get("gpu") for p in spec["pods"]}
    assert gpus[("PS", 0)] is None
    assert {gpus[("Worker", i)] for i in range(4)} == {
        sp["metadata"]["annotations"]["kubeshare/GPUID"] for sp in sharepods.values()
    }


def test_v2_writes_pods_labelled_for_kubeshare_scheduler_pinned_to_their_node() -> None:
    hook = _hook("v2")
    job = mc.tfjob(JOB)
    body = hook.sync(mc.world(job, [_gpu_node("gpu-1", 2)]))
    pods = _children(body, "Pod")
    assert not _children(body, "SharePod")
    for i in range(4):
        pod = pods[f"job1-worker-{i}"]
        assert pod["spec"]["schedulerName"] == "kubeshare-scheduler"
        assert "nodeName" not in pod["spec"]  # kubeshare-scheduler binds it and picks the GPU
        labels = pod["metadata"]["labels"]
        assert labels["sharedgpu/gpu_request"] == "0.5"
        assert labels["sharedgpu/gpu_limit"] == "1.0"
        assert labels["sharedgpu/gpu_mem"] == "3189243904"
        assert not any(k.startswith("kubeshare/") for k in pod["metadata"].get("annotations", {}))
        assert mc._pinned(pod["spec"]) == "gpu-1"
    assert pods["job1-ps-0"]["spec"].get("schedulerName") is None
    entries = hook.admission(job)["spec"]["pods"]
    assert all("gpu" not in p for p in entries)  # v2: kubeshare-scheduler picks the device


def test_v2_labels_on_the_template_work_in_a_v1_pool_too() -> None:
    """A template written for KubeShare v2 (labels) asks for the same share."""
    manifest = mc.compat(JOB)
    meta = manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["metadata"]
    meta["labels"] = {"sharedgpu/gpu_request": "0.25", "sharedgpu/gpu_mem": "1073741824"}
    del meta["annotations"]
    body = _hook("v1").sync(mc.world(mc.tfjob(manifest), [_gpu_node("gpu-1", 1)]))
    sharepods = _children(body, "SharePod")
    assert len(sharepods) == 4
    assert list(_sum_by_device(list(sharepods.values())).values()) == [1.0]
    for sp in sharepods.values():
        assert not any(k.startswith("sharedgpu/") for k in sp["metadata"]["labels"])


# --- device accounting --------------------------------------------------------------------


def test_whole_and_fractional_gpus_never_share_a_device() -> None:
    """A node of 2 GPUs running a whole-GPU worker has one device left: four halves need
    two, so the fractional job (min 4) waits; with min 2 it gets that one device."""
    hook = _hook("v1")
    whole = mc.tfjob(_whole("whole", 1), created="2026-11-21T09:00:00Z")
    nodes = [_gpu_node("gpu-1", 2)]
    w = mc.world(whole, nodes)
    first = hook.sync(w)
    running = [mc.observed_pod(whole, p) for p in _children(first, "Pod").values()]
    frac = mc.tfjob(_fractional("frac", "0.5", 4))
    body = hook.sync(mc.world(frac, nodes, jobs=[whole, frac], pods=running))
    assert body["children"] == []
    assert body["status"]["scheduling"]["phase"] == "Queued"

    frac2 = _fractional("frac", "0.5", 2)
    frac2["spec"]["max-instances"] = 4
    frac2 = mc.tfjob(frac2)
    hook2 = _hook("v1")
    hook2.pool_sync(mc.pool_request(mc.world(whole, nodes), (), hook2.pool))
    body = hook2.sync(mc.world(frac2, nodes, jobs=[whole, frac2], pods=running))
    sharepods = list(_children(body, "SharePod").values())
    assert len(sharepods) == 2
    assert list(_sum_by_device(sharepods).values()) == [1.0]


def test_running_sharepods_keep_their_device_and_new_halves_fill_it_first() -> None:
    hook = _hook("v1")
    nodes = [_gpu_node("gpu-1", 2)]
    older = mc.tfjob(_fractional("older", "0.5", 1), created="2026-11-21T09:00:00Z")
    first = hook.sync(mc.world(older, nodes))
    (sp,) = _children(first, "SharePod").values()
    device = sp["metadata"]["annotations"]["kubeshare/GPUID"]
    running = [observed_sharepod(older, sp)]
    running += [mc.observed_pod(older, p) for p in _children(first, "Pod").values()]
    newer = mc.tfjob(_fractional("newer", "0.5", 1))
    body = hook.sync(mc.world(newer, nodes, jobs=[older, newer], pods=running))
    (new,) = _children(body, "SharePod").values()
    assert new["metadata"]["annotations"]["kubeshare/GPUID"] == device  # best fit


def test_the_pool_counts_a_sharepod_once_not_its_kubeshare_pod_too() -> None:
    """KubeShare v1 runs each SharePod as a Pod it owns, with the same labels; the pool
    counts the SharePod and skips that Pod, as DRAGON did."""
    hook = _hook("v1")
    nodes = [_gpu_node("gpu-1", 1)]
    older = mc.tfjob(_fractional("older", "0.5", 1), created="2026-11-21T09:00:00Z")
    first = hook.sync(mc.world(older, nodes))
    (sp,) = _children(first, "SharePod").values()
    shp = observed_sharepod(older, sp)
    pod = mc.observed_pod(older, {**copy.deepcopy(sp), "apiVersion": "v1", "kind": "Pod"})
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeshare.nthu/v1",
            "kind": "SharePod",
            "name": sp["metadata"]["name"],
            "uid": shp["metadata"]["uid"],
            "controller": True,
        }
    ]
    running = [shp, pod, *(mc.observed_pod(older, p) for p in _children(first, "Pod").values())]
    newer = mc.tfjob(_fractional("newer", "0.5", 1))
    body = hook.sync(mc.world(newer, nodes, jobs=[older, newer], pods=running))
    assert len(_children(body, "SharePod")) == 1  # the other half of the one GPU


def test_gpu_memory_is_checked_per_device() -> None:
    """Two pods of 0.25 GPU but 6 GiB each cannot share an 8 GiB device."""
    hook = _hook("v1")
    job = mc.tfjob(_fractional("mem", "0.25", 2, memory=6 * GIB))
    body = hook.sync(mc.world(job, [_gpu_node("gpu-1", 2, mib=8192)]))
    devices = _sum_by_device(list(_children(body, "SharePod").values()))
    assert sorted(devices.values()) == [0.25, 0.25]


# --- never over-commit: random clusters and queues --------------------------------------------

SHARES = ["0.1", "0.2", "0.25", "0.3", "0.5", "0.6", "0.75", "1.0"]


@settings(max_examples=25, deadline=None)
@given(
    gpus=st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=2),
    jobs=st.lists(
        st.tuples(st.sampled_from([*SHARES, "whole"]), st.integers(min_value=1, max_value=3)),
        min_size=1,
        max_size=5,
    ),
)
def test_device_accounting_never_over_commits_a_gpu(
    gpus: list[int], jobs: list[tuple[str, int]]
) -> None:
    """Whatever the queue, after each round of plans (with the pods of the last round
    running): no device holds more than one GPU of shares, and on every node the devices
    fractional pods use plus the whole GPUs taken never exceed its GPUs."""
    nodes = [_gpu_node(f"gpu-{i}", n) for i, n in enumerate(gpus)]
    manifests = [
        mc.tfjob(
            _whole(f"j{i}", n) if share == "whole" else _fractional(f"j{i}", share, n),
            created=f"2026-11-21T09:{i:02d}:00Z",
        )
        for i, (share, n) in enumerate(jobs)
    ]
    hook = _hook("v1")
    running: list[dict[str, Any]] = []
    for _ in range(2):
        created: list[dict[str, Any]] = []
        hook.pool_sync(
            mc.pool_request(
                mc.world(manifests[0], nodes, manifests, running),
                hook.admissions.values(),
                hook.pool,
            )
        )
        for job in manifests:
            w = mc.world(job, nodes, manifests, running)
            body = hook.job_sync(mc.job_request(w, hook.admission(job)))
            have = {p["metadata"]["name"] for p in w.own(running)}
            for child in body["children"]:
                if child["metadata"]["name"] in have or child["kind"] == "Service":
                    continue
                obs = (
                    observed_sharepod(job, child)
                    if child["kind"] == "SharePod"
                    else mc.observed_pod(job, child)
                )
                created.append(obs)
        running += created
        sharepods = [p for p in running if p["kind"] == "SharePod"]
        by_device = _sum_by_device(sharepods)
        assert all(v <= 1.0 + 1e-9 for v in by_device.values()), by_device
        for node in nodes:
            name = node["metadata"]["name"]
            opened = {d for (n, d) in by_device if n == name}
            whole = sum(
                int(c["resources"].get("limits", {}).get(GPU, 0))
                for p in running
                if p["kind"] == "Pod" and p["spec"].get("nodeName") == name
                for c in p["spec"]["containers"]
            )
            assert len(opened) + whole <= int(node["status"]["allocatable"][GPU])


# --- the model itself -------------------------------------------------------------------------


def _share(request: int, memory: int = 0) -> Resources:
    return Resources({"cpu": 1000, **GpuShare(request, request, memory).vector()})


def test_devices_place_best_fit_then_a_fresh_deterministic_id() -> None:
    free = DeviceFree.empty("n", Resources({"cpu": 8000, GPU: 2000}), None)
    after = free - _share(600)
    (opened,) = after.devices.opened
    assert opened.id == mint_id("n", 0) and opened.free == 400
    assert after[GPU] == 1000  # one device is no longer whole
    fuller = after - _share(300)
    assert len(fuller.devices.opened) == 1  # the 0.3 fits next to the 0.6
    assert not _share(500).fits_in(fuller - Resources({GPU: 1000}))


def test_a_pod_leaving_frees_its_device_and_a_free_device_is_whole_again() -> None:
    empty = DeviceFree.empty("n", Resources({"cpu": 8000, GPU: 1000}), None)
    on_a = Resources({"cpu": 1000, **GpuShare(500, 500, 0).vector("abcde")})
    held = observe_devices("n", empty, None, [on_a, on_a])
    assert held[GPU] == 0 and held[SHARE] == 0
    assert not _share(100).fits_in(held)
    back = held + on_a
    assert back[SHARE] == 500 and _share(500).fits_in(back)
    assert (back + on_a)[GPU] == 1000  # whole again


def test_an_over_committed_node_takes_no_more_fractional_pods() -> None:
    empty = DeviceFree.empty("n", Resources({"cpu": 8000, GPU: 1000}), None)
    on_a = Resources(GpuShare(800, 800, 0).vector("abcde"))
    held = observe_devices("n", empty, None, [on_a, on_a])
    assert held.devices.broken
    assert not _share(100).fits_in(held)


def test_devices_are_a_pure_value() -> None:
    d = Devices("n", (), 2, None)
    assert d.place(500, 0, 3) == d.place(500, 0, 3)
    assert d.place(500, 0, 5) is None


# --- the simulator: KubeShare modelled, the compat manifest runs to Succeeded --------------


def _simulate(kubeshare: str, specs: list[Any], nodes: Any) -> Any:
    from sim.engine import SimConfig, Simulation
    from tests.simkit import scenario

    sim = Simulation(
        scenario(nodes, specs), SimConfig(delete_finished_after_s=None, kubeshare=kubeshare)
    )
    return sim, sim.run()


def test_the_compat_manifest_succeeds_in_the_simulator_with_kubeshare_v1() -> None:
    from tests.simkit import COMPAT, file_job, gpu_nodes, status_of
    from tests.simkit import condition as sim_condition

    spec = file_job(COMPAT / JOB)
    sim, result = _simulate("v1", [spec], gpu_nodes(2, gpus=2))
    succeeded = sim_condition(status_of(sim, spec.key), "Succeeded")
    assert succeeded is not None and succeeded["status"] == "True"
    assert result.jobs[0].finish_s is not None
    assert sim.kubeshare.failed == 0 and sim.kube.rejected == 0 and sim.mc.errors == 0
    # KubeShare ran them as four halves on two vGPUs, each holding one physical GPU.
    assert result.summary["utilization"]["nvidia.com/gpu"] > 0


def test_the_compat_manifest_succeeds_in_the_simulator_with_kubeshare_v2() -> None:
    from tests.simkit import COMPAT, file_job, gpu_nodes, status_of
    from tests.simkit import condition as sim_condition

    spec = file_job(COMPAT / JOB)
    sim, _ = _simulate("v2", [spec], gpu_nodes(2, gpus=2))
    succeeded = sim_condition(status_of(sim, spec.key), "Succeeded")
    assert succeeded is not None and succeeded["status"] == "True"
    assert sim.kubeshare.failed == 0 and sim.kube.rejected == 0 and sim.mc.errors == 0
    binds = [e for e in sim.log if e[1] == "bind" and "worker" in e[2]]
    assert len(binds) == 4  # kubeshare-scheduler bound each worker


def test_a_starving_fractional_job_shrinks_an_elastic_fractional_one_in_the_simulator() -> None:
    """Elastic scaling works on shares: one node, one GPU; a job of four quarter-GPU
    workers (min 1) holds it all; a job needing two quarters waits, the first shrinks, and
    both finish without KubeShare ever refusing a SharePod."""
    from sim.spec import JobSpec
    from tests.simkit import QUICK, gpu_nodes

    big = _fractional("big", "0.25", 4)
    big["spec"]["min-instances"] = 1
    small = _fractional("small", "0.25", 2)
    for m in (big, small):
        m["metadata"]["namespace"] = "default"
    specs = [JobSpec(big, 0.0, 4000.0, QUICK), JobSpec(small, 20.0, 200.0, QUICK)]
    sim, result = _simulate("v1", specs, gpu_nodes(1, gpus=1))
    finished = {r.key: r.finish_s for r in result.jobs}
    assert all(t is not None for t in finished.values()), finished
    assert result.summary["scale_actions"] >= 1
    assert sim.kubeshare.failed == 0 and sim.kube.rejected == 0


def test_the_kubeshare_example_runs_every_job_at_once_under_every_policy(
    capsys: Any,
) -> None:
    """examples/kubeshare.yaml: three small jobs share two GPUs (v1, and kube-default's pods
    placed by KubeShare's own scheduler); refused without KubeShare."""
    import orjson

    from cli.main import main

    example = str(mc.ROOT / "examples" / "kubeshare.yaml")
    assert main(["simulate", example, "--kubeshare", "v1", "--policy", "all", "--json"]) == 0
    out, _ = capsys.readouterr()
    summaries = [orjson.loads(line) for line in out.splitlines()]
    from policy.model.pool import POLICIES

    assert [s["policy"] for s in summaries] == list(POLICIES)
    for s in summaries:
        assert s["jobs_finished"] == 3 and s["kubelet_rejections"] == 0
        assert s["avg_queue_s"] < 30  # nobody queued behind another: the GPUs are shared
    assert main(["simulate", example]) == 4  # valid, but never runs without KubeShare
    _, err = capsys.readouterr()
    assert "run with --kubeshare v1 or v2" in err


def test_room_reserved_for_a_waiting_job_stays_device_aware() -> None:
    """A shrink reserves room (free capacity floored at zero): on a KubeShare node the floor
    keeps the devices, so a younger job's half cannot squeeze into a device with 0.4 left."""
    from policy.pool.ledger import floor0 as _floor0

    free = DeviceFree.empty("n", Resources({"cpu": 8000, GPU: 1000}), None) - _share(600)
    kept = _floor0(free - Resources({"cpu": 9000}))
    assert isinstance(kept, DeviceFree) and kept["cpu"] == 0
    assert kept[SHARE] == 400
    assert not _share(500).fits_in(kept + Resources({"cpu": 8000}))  # the device, not the cpu
    assert _share(400).fits_in(kept + Resources({"cpu": 8000}))
