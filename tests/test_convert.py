"""``dragonet convert``: legacy v1alpha1 TfJobs and MXJobs become kubeflow.org/v1 jobs the
webhook runs; what cannot be carried over is said by field path, never dropped silently."""

from __future__ import annotations

import copy
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.main import main
from policy.model.jobs import parse_job
from policy.model.kinds import MXJOB, TFJOB
from sim.engine import SimConfig, Simulation
from sim.spec import JobSpec
from tests.kube_schema import validate_custom, validate_k8s
from tests.simkit import QUICK, condition, cpu_nodes, scenario
from webhooks.convert import ConvertError, Note, convert
from webhooks.manifests import load_documents

ROOT = Path(__file__).resolve().parent.parent
COMPAT = ROOT / "tests" / "fixtures" / "compat"
LEGACY_TF = COMPAT / "legacy-tfjob-v1alpha1.yaml"
LEGACY_MX = COMPAT / "legacy-mxjob-v1alpha1.yaml"
NODES = str(ROOT / "examples" / "nodes.yaml")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["convert", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _converted(path: Path) -> tuple[dict[str, Any], list[Note]]:
    (doc,) = load_documents(path)
    return convert(doc)


def test_the_legacy_tfjob_converts_to_a_v1_tfjob_the_webhook_accepts() -> None:
    job, notes = _converted(LEGACY_TF)
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "TFJob"
    specs = job["spec"]["tfReplicaSpecs"]
    assert list(specs) == ["Master", "Worker", "PS"]
    assert specs["Master"]["restartPolicy"] == "OnFailure"
    assert "restartPolicy" not in specs["Master"]["template"]["spec"]
    assert "restartPolicy" not in specs["PS"]  # v1's default, Never: nothing was written
    assert specs["PS"]["replicas"] == 2
    (ps,) = specs["PS"]["template"]["spec"]["containers"]
    assert ps["name"] == "tensorflow" and ps["image"] == "tensorflow/tensorflow:1.3.0"
    assert "tf.train.Server" in ps["command"][-1] and "TF_CONFIG" in ps["command"][-1]
    for spec in specs.values():
        (main_c,) = spec["template"]["spec"]["containers"]
        assert main_c["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]
    parsed = parse_job(job, TFJOB)
    assert parsed is not None
    validate_custom(job)
    paths = [n.path for n in notes]
    assert paths == ["spec.replicaSpecs[2].template"]  # spec.tensorboard is carried over
    assert "default parameter server" in str(notes[0])
    assert "tensorboard" not in job["spec"]
    board = json.loads(job["metadata"]["annotations"]["dragonet.io/tensorboard"])
    assert board == {"logDir": "/tmp/tensorflow"}
    assert parsed.tensorboard is not None and parsed.tensorboard.log_dir == "/tmp/tensorflow"


def test_the_legacy_mxjob_converts_to_a_v1_mxjob_the_webhook_accepts() -> None:
    job, notes = _converted(LEGACY_MX)
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "MXJob"
    assert job["spec"]["jobMode"] == "MXTrain"
    specs = job["spec"]["mxReplicaSpecs"]
    assert list(specs) == ["Scheduler", "Server", "Worker"]
    for spec in specs.values():
        assert spec["restartPolicy"] == "OnFailure"
        (c,) = spec["template"]["spec"]["containers"]
        assert c["ports"] == [{"name": "mxjob-port", "containerPort": 9000}]  # mxPort's default
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "All"}  # the old operator's default
    assert parse_job(job, MXJOB) is not None
    validate_custom(job)
    assert notes == []


def test_legacy_fields_are_named_not_dropped() -> None:
    doc = {
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "TFJob",
        "metadata": {"name": "old", "uid": "1234", "resourceVersion": "9"},
        "spec": {
            "RuntimeId": "abcd",
            "schedulerName": "kube-batch",
            "tfImage": "tensorflow/tensorflow:1.4.0",
            "terminationPolicy": {"chief": {"replicaName": "WORKER", "replicaIndex": 0}},
            "replicaSpecs": [
                {"tfReplicaType": "MASTER", "tfPort": 3333, "template": _tf_template()},
                {"tfReplicaType": "WORKER", "replicas": 2, "template": _tf_template()},
                {"tfReplicaType": "PS"},
            ],
        },
        "status": {"phase": "Running"},
    }
    job, notes = convert(doc)
    lines = [str(n) for n in notes]
    paths = [n.path for n in notes]
    assert "metadata.uid" in paths and "metadata.resourceVersion" in paths
    assert "uid" not in job["metadata"]
    assert any(line.startswith("spec.RuntimeId: not carried over") for line in lines)
    assert any(
        line.startswith("spec.terminationPolicy.chief: not carried over: replica WORKER 0")
        for line in lines
    )
    assert any(line.startswith("spec.schedulerName: moved into every") for line in lines)
    assert "status" in paths and "status" not in job
    specs = job["spec"]["tfReplicaSpecs"]
    for spec in specs.values():
        assert spec["template"]["spec"]["schedulerName"] == "kube-batch"
    ports = specs["Master"]["template"]["spec"]["containers"][0]["ports"]
    assert ports == [{"name": "tfjob-port", "containerPort": 3333}]
    ps_image = specs["PS"]["template"]["spec"]["containers"][0]["image"]
    assert ps_image == "tensorflow/tensorflow:1.4.0"
    assert "spec.tfImage" not in paths  # it was used: the default PS runs it
    parse_job(job, TFJOB)


def _tf_template() -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "tensorflow", "image": "tf:1"}]}}


def test_converting_twice_is_converting_once_and_v1_passes_unchanged() -> None:
    for path in (LEGACY_TF, LEGACY_MX):
        once, _ = _converted(path)
        twice, notes = convert(copy.deepcopy(once))
        assert twice == once and notes == []
    (v1,) = load_documents(ROOT / "examples" / "job1.yaml")
    assert convert(v1) == (v1, [])


def test_the_cli_converts_several_files_and_documents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = tmp_path / "both.yaml"
    both.write_text(LEGACY_TF.read_text() + "\n---\n" + LEGACY_MX.read_text())
    code, out, err = _run(capsys, str(both), str(ROOT / "examples" / "job1.yaml"))
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in docs] == ["TFJob", "MXJob", "TFJob"]
    assert {d["apiVersion"] for d in docs} == {"kubeflow.org/v1"}
    (first,) = err.strip().splitlines()  # spec.tensorboard is carried over: no line
    assert first.startswith(
        f"dragonet convert: {both}:3: TFJob example-job: spec.replicaSpecs[2].template: "
        "none given: generated the old operator's default parameter server"
    )
    assert "dragonet.io/tensorboard" in docs[0]["metadata"]["annotations"]


def test_the_cli_reads_stdin_and_its_output_converts_to_itself(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(LEGACY_TF.read_text()))
    code, once, _ = _run(capsys, "-")
    assert code == 0
    monkeypatch.setattr(sys, "stdin", io.StringIO(once))
    code, twice, err = _run(capsys, "-")
    assert code == 0 and twice == once and err == ""


def test_strict_fails_when_a_field_was_not_carried_over(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _run(capsys, "--strict", str(LEGACY_TF))
    assert code == 1 and out and "spec.replicaSpecs[2].template" in err
    assert "spec.tensorboard" not in err
    code, _, err = _run(capsys, "--strict", str(LEGACY_MX))
    assert code == 0 and err == ""


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("apiVersion: kubeflow.org/v1\nkind: XGBoostJob\nmetadata: {name: x}\n", "'XGBoostJob'"),
        ("apiVersion: kubeflow.org/v1alpha2\nkind: TFJob\n", "kind 'TFJob'"),
        ("", "no objects in this file"),
        ("kind: [\n", "not valid YAML"),
    ],
)
def test_what_it_cannot_convert_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, words: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    code, out, err = _run(capsys, str(LEGACY_TF), str(bad))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"dragonet convert: {bad}") and words in line


def test_another_kind_in_a_bundle_is_skipped_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`dragonet convert bundle.yaml` with a ConfigMap beside the job: the job converted,
    the ConfigMap left out with one line naming it, exit 0."""
    bundle = tmp_path / "bundle.yaml"
    bundle.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n---\n" + LEGACY_TF.read_text()
    )
    code, out, err = _run(capsys, str(bundle))
    assert code == 0
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["TFJob"]
    assert (
        f"dragonet convert: {bundle}:1: skipped ConfigMap settings: "
        "not a TFJob, MXJob or PyTorchJob" in (err.splitlines())
    )


def test_a_job_given_twice_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """`dragonet convert old.yaml old.yaml`: two jobs of one name would be one object in a
    cluster; refused with one line naming both places, nothing on stdout."""
    code, out, err = _run(capsys, str(LEGACY_TF), str(LEGACY_TF))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"dragonet convert: {LEGACY_TF}:")
    assert "is given twice (first at " in line


def test_a_legacy_replica_without_a_template_is_named() -> None:
    doc = {
        "apiVersion": "tensorflow.org/v1alpha1",
        "kind": "TfJob",
        "metadata": {"name": "x"},
        "spec": {"replicaSpecs": [{"tfReplicaType": "WORKER"}]},
    }
    with pytest.raises(ConvertError, match=r"spec.replicaSpecs\[0\].template"):
        convert(doc)


@pytest.mark.parametrize("legacy", [LEGACY_TF, LEGACY_MX])
def test_the_converted_job_renders(
    legacy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, str(legacy))
    assert code == 0
    new = tmp_path / "new.yaml"
    new.write_text(out)
    code = main(["render", str(new), "--nodes", NODES])
    rendered, err = capsys.readouterr()
    assert code == 0, err
    docs = list(yaml.safe_load_all(rendered))
    for doc in docs:
        (validate_custom if doc["kind"] == "Admission" else validate_k8s)(doc)
    pods = [d for d in docs if d["kind"] == "Pod"]
    assert len(pods) == (4 if legacy == LEGACY_TF else 3)


@pytest.mark.parametrize(
    ("legacy", "tkey"), [(LEGACY_TF, "TFJob.kubeflow.org/v1"), (LEGACY_MX, "MXJob.kubeflow.org/v1")]
)
def test_the_converted_job_runs_to_succeeded(legacy: Path, tkey: str) -> None:
    job, _ = _converted(legacy)
    job["metadata"]["namespace"] = "default"
    spec = JobSpec(job, 0.0, 100.0, QUICK)
    sim = Simulation(scenario(cpu_nodes(2), [spec]), SimConfig(delete_finished_after_s=None))
    (record,) = sim.run().jobs
    assert record.finish_s is not None
    obj = sim.api.get(tkey, spec.key)
    assert obj is not None
    succeeded = condition(obj.get("status") or {}, "Succeeded")
    assert succeeded is not None and succeeded["status"] == "True"


def test_a_kubeflow_v1alpha1_mxjob_keeps_its_ps_root_port_and_says_who_decided() -> None:
    (doc,) = load_documents(LEGACY_MX)
    doc["apiVersion"] = "kubeflow.org/v1alpha1"
    doc["spec"]["cleanupPodPolicy"] = "Running"
    doc["spec"]["mxImage"] = "mxjob/mxnet:gpu"
    for item in doc["spec"]["replicaSpecs"]:
        item["PsRootPort"] = 9092
    job, notes = convert(doc)
    for spec in job["spec"]["mxReplicaSpecs"].values():
        (c,) = spec["template"]["spec"]["containers"]
        assert c["ports"] == [{"name": "mxjob-port", "containerPort": 9092}]
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "Running"}
    assert [str(n) for n in notes] == [
        "spec.mxImage: not carried over: every replica has its own template",
        "spec.terminationPolicy.chief: not carried over: replica WORKER 0 (the default chief) "
        "decided success; in v1 the Scheduler decides (or all workers)",
    ]
    parse_job(job, MXJOB)


def test_a_legacy_tfjob_without_a_master_says_its_default_chief_is_gone() -> None:
    doc = {
        "apiVersion": "tensorflow.org/v1alpha1",
        "kind": "TfJob",
        "metadata": {"name": "x"},
        "spec": {"replicaSpecs": [{"tfReplicaType": "WORKER", "template": _tf_template()}]},
    }
    _, notes = convert(doc)
    assert [n.path for n in notes] == ["spec.terminationPolicy.chief"]
    assert "MASTER 0 (the default chief)" in notes[0].message


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*at, i))
    return out


@pytest.mark.parametrize("legacy", [LEGACY_TF, LEGACY_MX])
@pytest.mark.parametrize("junk", [None, "x", 7, True, [1], {"a": [2]}, [[]]])
def test_a_broken_field_is_a_convert_error_never_a_crash(legacy: Path, junk: Any) -> None:
    (doc,) = load_documents(legacy)
    for path in _paths(doc)[1:]:
        broken = copy.deepcopy(doc)
        parent = broken
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = copy.deepcopy(junk)
        try:
            convert(broken)
        except ConvertError as err:
            assert "\n" not in str(err)


def test_a_template_that_names_its_own_scheduler_keeps_it_and_is_named() -> None:
    own = _tf_template()
    own["spec"]["schedulerName"] = "volcano"
    doc = {
        "apiVersion": "tensorflow.org/v1alpha1",
        "kind": "TfJob",
        "metadata": {"name": "x"},
        "spec": {
            "schedulerName": "kube-batch",
            "replicaSpecs": [
                {"template": _tf_template()},
                {"tfReplicaType": "WORKER", "template": own},
            ],
        },
    }
    job, notes = convert(doc)
    specs = job["spec"]["tfReplicaSpecs"]
    assert specs["Master"]["template"]["spec"]["schedulerName"] == "kube-batch"
    assert specs["Worker"]["template"]["spec"]["schedulerName"] == "volcano"
    (note,) = notes
    assert str(note) == (
        "spec.schedulerName: moved into every replica template's spec.schedulerName "
        "(kube-batch), except Worker, whose template names its own"
    )


def test_a_legacy_tensorboard_with_volumes_becomes_the_annotation_and_converts_once() -> None:
    (doc,) = load_documents(LEGACY_TF)
    doc["metadata"]["annotations"] = {"team": "vision"}
    doc["spec"]["tensorboard"] = {
        "logDir": "/logs/run-1",
        "serviceType": "LoadBalancer",
        "volumes": [{"name": "logs", "persistentVolumeClaim": {"claimName": "tf-logs"}}],
        "volumeMounts": [{"name": "logs", "mountPath": "/logs"}],
    }
    job, notes = convert(doc)
    assert [n.path for n in notes] == ["spec.replicaSpecs[2].template"]
    annotations = job["metadata"]["annotations"]
    assert annotations["team"] == "vision"
    assert json.loads(annotations["dragonet.io/tensorboard"]) == doc["spec"]["tensorboard"]
    parsed = parse_job(job, TFJOB).tensorboard
    assert parsed is not None and parsed.service_type == "LoadBalancer"
    assert convert(copy.deepcopy(job)) == (job, [])
    # The legacy form with our annotation already written (a re-run on a half-edited file).
    doc["metadata"]["annotations"] = dict(annotations)
    again, _ = convert(doc)
    assert again == job


@pytest.mark.parametrize(
    ("board", "message"),
    [
        ({}, "spec.tensorboard: logDir: Field required"),
        ({"logDir": "/l", "serviceType": "External"}, "spec.tensorboard: serviceType:"),
        (
            {"logDir": "/l", "volumeMounts": [{"name": "x", "mountPath": "/x"}]},
            "spec.tensorboard: volumeMounts[0].name 'x' names no volume",
        ),
        ("logs", "spec.tensorboard: must be a mapping"),
    ],
)
def test_a_tensorboard_the_webhook_would_refuse_is_a_convert_error(
    board: Any, message: str
) -> None:
    (doc,) = load_documents(LEGACY_TF)
    doc["spec"]["tensorboard"] = board
    with pytest.raises(ConvertError) as err:
        convert(doc)
    assert str(err.value).startswith(message)


def test_an_annotation_that_disagrees_with_the_legacy_tensorboard_is_named() -> None:
    (doc,) = load_documents(LEGACY_TF)
    doc["metadata"]["annotations"] = {"dragonet.io/tensorboard": '{"logDir":"/other"}'}
    with pytest.raises(ConvertError, match="both ask for a TensorBoard"):
        convert(doc)
