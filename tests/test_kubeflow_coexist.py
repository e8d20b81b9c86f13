"""Beside Kubeflow (issue 39, docs/kubeflow.md): with the chart's ``kubeflow.coexist``,
Dragonet runs only the jobs marked for it (label ``dragonet.io/managed-by: dragonet`` and
``runPolicy.managedBy: dragonet.io/dragonet``) and leaves every other job, its pods and its
status to Kubeflow's training-operator, while its pools count Kubeflow's pods as taken room.
End to end in the simulator, beside a Kubeflow-like controller (tests/kubeflowfake.py), on
an API server that stores TFJobs under Kubeflow's own CRD."""

from __future__ import annotations

import os
from typing import Any

import pytest

from policy.model.jobs import COEXIST_LABEL, DRAGONET, TRAINING_OPERATOR
from sim.dump import StateDump
from sim.engine import Scenario, SimConfig, Simulation
from sim.recorder import EVENTS, attach
from sim.spec import tfjob_manifest
from tests import metacontroller as mc
from tests.kubeflowfake import L_JOB, PODS, TFJOBS, FakeKubeflow, with_kubeflow_crd
from tests.simkit import HookSpy, condition, gpu_nodes, job, status_of
from tests.test_chart import CHART, _env, _render, _validate_all, _webhook
from tests.test_chart import _run as _helm
from webhooks.hooks import pool_related_resources

ADMISSIONS = "Admission.dragonet.io/v1alpha1"
DUMP_AT = 100.0
KEEP = SimConfig(delete_finished_after_s=None, kubeflow_coexist=True).cost_free()


def dragonet_job(name: str, workers: int, arrival: float, steps: float) -> Any:
    spec = job(name, workers, arrival=arrival, steps=steps)
    spec.manifest["metadata"]["labels"] = {COEXIST_LABEL: "dragonet"}
    spec.manifest["spec"]["runPolicy"] = {"managedBy": DRAGONET}
    return spec


def kubeflow_job(name: str, workers: int) -> dict[str, Any]:
    """A TFJob as a Kubeflow user writes it: no mark, so Kubeflow's."""
    manifest = tfjob_manifest(name, workers=workers)
    manifest["metadata"]["namespace"] = "default"
    return manifest


def _unschedulable(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
    )


def _run(config: SimConfig = KEEP) -> tuple[Simulation, FakeKubeflow, HookSpy]:
    # Two 4-GPU nodes: Kubeflow's job takes 4 GPUs from t=0 for 300 s; Dragonet's a (4 GPUs,
    # longer than that) and b (4 GPUs) arrive at 10 s and 20 s: b must wait for Kubeflow's
    # pods, since a holds the other 4.
    scenario = Scenario(
        "beside-kubeflow",
        gpu_nodes(2),
        (dragonet_job("a", 4, 10.0, 3000), dragonet_job("b", 4, 20.0, 60)),
        (kubeflow_job("kf", 4),),
    )
    sim = Simulation(scenario, config)
    with_kubeflow_crd(sim)
    kubeflow = FakeKubeflow(sim, run_s=300.0)
    spy = HookSpy(sim)
    refused: list[tuple[float, str]] = []
    sim.refused = refused  # type: ignore[attr-defined]

    def watch(tkey: str, old: Any, new: Any) -> None:
        if tkey == PODS and new is not None and _unschedulable(new):
            refused.append((sim.now, new["metadata"]["name"]))

    sim.api.watchers.append(watch)
    sim.recorder = attach(sim)  # type: ignore[attr-defined]  # the chart's, as configured
    # The cluster at 100 s, as the plugin reads it: kf and a run, b waits for kf's GPUs.
    sim.dump = StateDump(sim.api, lambda: sim.now, DUMP_AT, events=False)  # type: ignore[attr-defined]
    sim.run()
    return sim, kubeflow, spy


@pytest.fixture(scope="module")
def beside() -> tuple[Simulation, FakeKubeflow, HookSpy]:
    return _run()


def test_dragonet_never_syncs_kubeflows_job_nor_plans_it(beside) -> None:
    """Metacontroller never calls a hook for Kubeflow's job (its sync would release
    Kubeflow's pods and overwrite the job's status), and no pool writes it an Admission."""
    sim, _, spy = beside
    assert spy.calls, "the run made hook calls"
    assert not [c for c in spy.calls if c.parent == "default/kf"]
    assert sim.api.get(ADMISSIONS, "default/tfjob-kf") is None
    for call in spy.of("/pools/sync"):
        assert all("kf" not in name for name in (call.answer or {}).get("children", [])), call


def test_every_write_to_kubeflows_job_and_its_pods_is_kubeflows_or_the_clusters(beside) -> None:
    """The job's status is exactly what Kubeflow wrote last (Succeeded), it never got
    Metacontroller's finalizer, and its pods are the ones Kubeflow made, still owned by it."""
    sim, kubeflow, _ = beside
    kf = sim.api.get(TFJOBS, "default/kf")
    assert kf is not None
    assert (TFJOBS, "default/kf", kf["metadata"]["resourceVersion"]) in kubeflow.wrote
    assert condition(kf["status"], "Succeeded") is not None
    assert not kf["metadata"].get("finalizers")
    assert set(kf["status"]) <= {"conditions", "startTime", "completionTime"}
    made = {key for tkey, key, _ in kubeflow.wrote if tkey == PODS}
    assert made == {f"default/kf-{t}-{i}" for t, n in (("ps", 1), ("worker", 4)) for i in range(n)}
    kf_pods = [p for p in sim.api.list(PODS) if p["metadata"]["labels"].get(L_JOB) == "kf"]
    for pod in kf_pods:
        [owner] = pod["metadata"]["ownerReferences"]
        assert owner["uid"] == kf["metadata"]["uid"] and owner["controller"] is True
        assert "controller-uid" not in pod["metadata"]["labels"]


def test_the_recorder_tells_dragonets_jobs_stories_and_nothing_of_kubeflows(beside) -> None:
    """Its lists and watches select the labelled jobs: Kubeflow's job succeeded, and no
    Event of Dragonet's says so (Kubeflow writes its own); its caches, which the pools'
    metrics read, hold Dragonet's jobs alone."""
    sim, _, _ = beside
    about = {(e["regarding"]["name"], e["reason"]) for e in sim.api.list(EVENTS)}
    assert {("a", "Admitted"), ("b", "Admitted"), ("b", "WaitingForCapacity")} <= about
    assert not [e for e in about if e[0] == "kf"], about
    cache = sim.recorder.caches[TFJOBS][1]  # type: ignore[attr-defined]
    assert sorted(j["metadata"]["name"] for j in cache.items()) == ["a", "b"]
    # A restarted recorder lists as the running one watches.
    sim.recorder.restart()  # type: ignore[attr-defined]
    assert not [e for e in sim.api.list(EVENTS) if e["regarding"]["name"] == "kf"]


def test_the_plugin_says_kubeflows_job_is_kubeflows_and_the_page_leaves_it_out(
    beside, tmp_path, monkeypatch, capsys
) -> None:
    """``explain`` of Kubeflow's job says who runs it (its pods' operator) instead of
    "waiting for its pool"; ``view --live`` draws Dragonet's jobs and names the one it
    leaves out; ``queue`` (the pool's own list) never had it."""
    import json
    import re
    from datetime import timedelta

    from cli.main import main
    from sim.apiserver import EPOCH
    from tests.dumpserver import serve_dump

    state, at = beside[0].dump.result()
    assert at == DUMP_AT
    serve_dump(state, tmp_path, monkeypatch, EPOCH + timedelta(seconds=at))
    assert main(["explain", "kf"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "TFJob default/kf: run by Kubeflow's training-operator (its pods say "
        "training.kubeflow.org/operator-name: tfjob-controller); Dragonet does not queue, "
        "place or scale it (docs/kubeflow.md)"
    )
    assert not [line for line in out if "Would run" in line or "WaitingForPool" in line]
    assert main(["explain", "kf", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["runBy"].startswith("Kubeflow's")
    assert main(["explain", "b"]) == 0
    # Dragonet's job, its status.scheduling pruned by Kubeflow's CRD: read from its Admission.
    assert capsys.readouterr().out.startswith(
        "TFJob default/b in TrainingPool default: Queued (WaitingForCapacity), position 1 of 1"
    )
    assert main(["queue"]) == 0
    assert "kf" not in capsys.readouterr().out
    page = tmp_path / "page.html"
    assert main(["view", "--live", "--html", str(page)]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        "(1 job(s) another controller runs left out: TFJob default/kf: Kubeflow's "
        "training-operator (its pods say training.kubeflow.org/operator-name: tfjob-controller))"
    )
    assert err.splitlines()[1].endswith("2 jobs on 2 nodes")
    stories = re.search(r'id="stories">(.*?)</script>', page.read_text(), re.S)
    assert stories is not None
    assert set(json.loads(stories.group(1).replace("<\\/", "</"))) == {
        "TFJob/default/a",
        "TFJob/default/b",
    }


def test_kubeflow_skips_dragonets_jobs_by_their_managed_by(beside) -> None:
    """Kubeflow's rule (managedBy not its own: skip) keeps it off Dragonet's jobs, which
    Dragonet runs to the end under Kubeflow's CRD (its own status fields pruned)."""
    sim, kubeflow, _ = beside
    assert kubeflow.reconciled == ["default/kf"]
    assert sorted(kubeflow.skipped) == ["default/a", "default/b"]
    for name in ("a", "b"):
        status = status_of(sim, f"default/{name}")
        assert condition(status, "Succeeded") is not None, status
        assert "scheduling" not in status  # pruned: Kubeflow's CRD does not declare it
    for pod in sim.api.list(PODS):
        labels = pod["metadata"]["labels"]
        if labels.get(L_JOB) in ("a", "b"):
            assert labels["training.kubeflow.org/operator-name"] == "dragonet"


def test_the_pool_counts_kubeflows_pods_as_taken(beside) -> None:
    """Kubeflow's 4 GPUs are not the pool's to give: the second Dragonet job waits until
    Kubeflow's pods are done, and no Dragonet pod is ever refused by the kube-scheduler
    for want of room the pool thought was free."""
    sim, _, _ = beside
    starts = {name: status_of(sim, f"default/{name}")["startTime"] for name in ("a", "b")}
    kf_done = status_of(sim, "default/kf")["completionTime"]
    a_done = status_of(sim, "default/a")["completionTime"]
    assert starts["a"] < kf_done <= starts["b"] < a_done, (starts, kf_done, a_done)
    assert not [(t, pod) for t, pod in sim.refused if pod[:2] in ("a-", "b-")]


def test_pool_customize_reads_only_marked_jobs_and_every_training_pod() -> None:
    pool = mc.pool()
    rules = {r["resource"]: r["labelSelector"] for r in pool_related_resources(pool, True)}
    assert rules["tfjobs"] == rules["mxjobs"] == {"matchLabels": {COEXIST_LABEL: "dragonet"}}
    assert rules["pods"] == {
        "matchExpressions": [{"key": "training.kubeflow.org/operator-name", "operator": "Exists"}]
    }
    alone = {r["resource"]: r["labelSelector"] for r in pool_related_resources(pool)}
    assert alone["tfjobs"] == {}
    assert alone["pods"] == {"matchLabels": {"training.kubeflow.org/operator-name": "dragonet"}}
    everything = mc.pool(watchAllPods=True)
    assert {r["resource"]: r["labelSelector"] for r in pool_related_resources(everything, True)}[
        "pods"
    ] == {}


@pytest.mark.parametrize("manager", [None, TRAINING_OPERATOR])
def test_a_marked_job_that_kubeflow_runs_is_left_alone(hook, manager: str | None) -> None:
    """Without the admission policy, a job could carry Dragonet's label and Kubeflow's
    managedBy: Kubeflow runs it, so Dragonet creates no pod, writes no status and gives
    its room to others."""
    theirs = mc.tfjob("dragon-job1-cpu.yaml", name="theirs")
    theirs["metadata"]["labels"] = {COEXIST_LABEL: "dragonet"}
    if manager:
        theirs["spec"]["runPolicy"] = {"managedBy": manager}
    mine = mc.tfjob("dragon-job1-cpu.yaml", name="mine", created="2026-11-21T10:00:30Z")
    nodes = [mc.node("n-1", cpu="20", memory="64Gi")]  # room for one of them
    body = hook.sync(mc.world(theirs, nodes, jobs=[theirs, mine]))
    assert body == {"children": [], "status": {}}
    assert hook.admission(theirs) is None
    assert hook.sync(mc.world(mine, nodes, jobs=[theirs, mine]))["children"]


# --- the chart's kubeflow.coexist, rendered by real helm ---------------------------------------


@pytest.fixture(scope="module")
def coexist_docs(helm: str) -> list[dict[str, Any]]:
    return _render(helm, "--set", "kubeflow.coexist=true", "--set", "monitor.enabled=true")


def _controllers(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "CompositeController"}


def test_coexist_renders_valid_objects_and_selects_only_marked_jobs(coexist_docs, helm) -> None:
    _validate_all(coexist_docs)
    controllers = _controllers(coexist_docs)
    marked = {"matchLabels": {COEXIST_LABEL: "dragonet"}}
    for name in ("dragonet-tfjobs", "dragonet-mxjobs"):
        assert controllers[name]["spec"]["parentResource"]["labelSelector"] == marked
    for name in ("dragonet-pools", "dragonet-migrations"):
        assert "labelSelector" not in controllers[name]["spec"]["parentResource"]
    # Off (the default), every job is Dragonet's: no selector, no policy, no setting.
    default = _render(helm)
    assert all(
        "labelSelector" not in c["spec"]["parentResource"] for c in _controllers(default).values()
    )
    assert not [d for d in default if d["metadata"]["name"] == "dragonet-kubeflow-coexist"]
    assert "DRAGONET_KUBEFLOW_COEXIST" not in _env(_webhook(default))


def test_coexist_reaches_the_webhook_the_reaper_and_the_recorder(coexist_docs, monkeypatch) -> None:
    from reaper.config import ReaperSettings
    from recorder.config import RecorderSettings
    from webhooks.config import Settings, unknown_variable

    deployments = {d["metadata"]["name"]: d for d in coexist_docs if d["kind"] == "Deployment"}
    for name in list(os.environ):
        if name.startswith("DRAGONET_"):
            monkeypatch.delenv(name)
    for name in ("dragonet-webhook", "dragonet-reaper", "dragonet-recorder"):
        [container] = deployments[name]["spec"]["template"]["spec"]["containers"]
        for e in container["env"]:
            if "value" in e:
                monkeypatch.setenv(e["name"], e["value"])
    assert unknown_variable(os.environ) is None
    assert Settings().kubeflow_coexist
    assert ReaperSettings().kubeflow_coexist and RecorderSettings().kubeflow_coexist


@pytest.mark.parametrize(
    "flags",
    [("--kube-version", "1.29.0"), ("--set", "rbac.admissionPolicies=false")],
    ids=["kubernetes 1.29", "no admission policies"],
)
def test_coexist_without_its_admission_policy_is_refused(helm: str, flags: tuple[str, ...]) -> None:
    proc = _helm(
        helm,
        "template",
        "dragonet",
        str(CHART),
        "--set",
        "kubeflow.coexist=true",
        *flags,
        check=False,
    )
    assert proc.returncode != 0
    assert "kubeflow.coexist needs Kubernetes >= 1.30 and rbac.admissionPolicies" in proc.stderr


def _job(labels: dict[str, str] | None = None, manager: str | None = None) -> dict[str, Any]:
    manifest = tfjob_manifest("job1", workers=1)
    manifest["metadata"]["labels"] = dict(labels or {})
    if manager is not None:
        manifest["spec"]["runPolicy"] = {"managedBy": manager}
    return manifest


MARK = {COEXIST_LABEL: "dragonet"}


@pytest.mark.parametrize(
    ("operation", "new", "old", "refused"),
    [
        ("CREATE", _job(MARK, DRAGONET), None, False),  # Dragonet's
        ("CREATE", _job(), None, False),  # Kubeflow's
        ("CREATE", _job({}, TRAINING_OPERATOR), None, False),
        ("CREATE", _job({}, "kueue.x-k8s.io/multikueue"), None, False),
        ("CREATE", _job(MARK), None, True),  # label only: Kubeflow would run it too
        ("CREATE", _job({}, DRAGONET), None, True),  # managedBy only: nobody would
        ("CREATE", _job({COEXIST_LABEL: "kubeflow"}, DRAGONET), None, True),
        ("UPDATE", _job(MARK, DRAGONET), _job(MARK, DRAGONET), False),
        ("UPDATE", _job({"team": "a"}), _job(), False),  # Kubeflow's job, other labels
        ("UPDATE", _job(MARK, DRAGONET), _job(), True),  # taken from Kubeflow
        ("UPDATE", _job(), _job(MARK, DRAGONET), True),  # handed to Kubeflow
        ("UPDATE", _job(MARK), _job(), True),
        ("UPDATE", _job({}, TRAINING_OPERATOR), _job(), True),  # managedBy never changes
    ],
)
def test_the_admission_policy_keeps_the_two_marks_in_step(
    coexist_docs, operation: str, new: dict, old: dict | None, refused: bool
) -> None:
    from tests.test_chart_security import admit

    [policy] = [
        d
        for d in coexist_docs
        if d["kind"] == "ValidatingAdmissionPolicy"
        and d["metadata"]["name"] == "dragonet-kubeflow-coexist"
    ]
    messages = admit(policy, "jane", operation, new, old)
    assert bool(messages) == refused, messages
