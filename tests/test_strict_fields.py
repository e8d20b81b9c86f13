"""What a user writes in an object of our CRDs is checked as `kubectl apply` with strict
field validation would have the API server check it (issue 38): a misspelt field or a value
of the wrong type is refused with the file, the field's line and path, and the closest
known field, never ignored."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cli.main import main
from policy.model.crdcheck import check_object, known_kind

ROOT = Path(__file__).resolve().parent.parent
NODES = str(ROOT / "examples" / "nodes.yaml")

ELASTIC_JOB = """\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: resnet
spec:
  min-instances: 2
  {field}: 4
  tfReplicaSpecs:
    PS:
      replicas: 1
      template:
        spec:
          containers:
            - {{name: tensorflow, image: tf:2, resources: {{limits: {{cpu: "1"}}}}}}
    Worker:
      replicas: {replicas}
      template:
        spec:
          containers:
            - {{name: tensorflow, image: tf:2, resources: {{limits: {{cpu: "1"}}}}}}
"""


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("command", ["render", "simulate"])
def test_a_camel_case_max_instances_is_refused_with_the_dragon_spelling(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(ELASTIC_JOB.format(field="maxInstances", replicas=2))
    code, out, err = _run(capsys, command, str(job), "--nodes", NODES)
    assert code == 2 and out == ""
    line = _one_line(err)
    assert line.startswith(f"dragonet {command}: {job}:7: TFJob resnet: spec.maxInstances: ")
    assert 'unknown field "maxInstances" (did you mean "max-instances"?' in line


def test_the_dragon_spelling_is_taken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(ELASTIC_JOB.format(field="max-instances", replicas=2))
    code, _, err = _run(capsys, "render", str(job), "--nodes", NODES)
    assert code == 0, err


def test_a_quoted_replica_count_is_refused_as_the_api_server_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(ELASTIC_JOB.format(field="max-instances", replicas='"2"'))
    code, _, err = _run(capsys, "render", str(job), "--nodes", NODES)
    assert code == 2
    assert _one_line(err) == (
        f"dragonet render: {job}:16: TFJob resnet: spec.tfReplicaSpecs.Worker.replicas: "
        "must be an integer (got the string '2')"
    )


def test_a_misspelt_pool_setting_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = tmp_path / "pool.yaml"
    pool.write_text(
        "apiVersion: dragonet.io/v1alpha1\nkind: TrainingPool\nmetadata: {name: default}\n"
        "spec:\n  policy: dragonet\n  starvationSecond: 600\n"
    )
    job = str(ROOT / "examples" / "job1.yaml")
    for command in ("render", "simulate"):
        code, out, err = _run(capsys, command, job, "--nodes", NODES, "--pool", str(pool))
        assert code == 2 and out == ""
        line = _one_line(err)
        assert f"{pool}:6: TrainingPool default: spec.starvationSecond: " in line
        assert 'did you mean "starvationSeconds"?' in line


def test_a_misspelt_metadata_field_is_refused(tmp_path: Path) -> None:
    job = yaml.safe_load(ELASTIC_JOB.format(field="max-instances", replicas=2))
    job["metadata"]["label"] = {"team": "a"}
    said = check_object(job)
    assert said is not None and said.startswith('metadata.label: unknown field "label" (did')


def test_pod_templates_are_left_to_the_template_check() -> None:
    """The CRD keeps templates schemaless (x-kubernetes-preserve-unknown-fields); what is in
    them is checked against PodTemplateSpec by the webhook, which names the field in the
    job's Failed condition."""
    job = yaml.safe_load(ELASTIC_JOB.format(field="max-instances", replicas=2))
    job["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["anything"] = 1
    assert check_object(job) is None


def test_every_example_of_our_kinds_passes() -> None:
    """What the README and docs tell users to apply is what the CRDs accept."""
    seen = 0
    for path in sorted(ROOT.glob("examples/**/*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and known_kind(doc.get("apiVersion"), doc.get("kind")):
                seen += 1
                assert check_object(doc) is None, (path, check_object(doc))
    assert seen >= 10


@pytest.mark.parametrize(
    ("node", "said"),
    [
        (
            "{name: a, cpu: 8, memory: 64GB, gpu: 2}",
            "nodes[0]: memory: '64GB' is not a quantity the API server takes",
        ),
        ("{name: a, cpu: -4, gpu: 2}", "nodes[0]: cpu: '-4' is not a quantity"),
        (
            "{name: a, gpu: 2, taints: [{key: x, effect: NoSchdule}]}",
            "nodes[0]: taints[0].effect: 'NoSchdule' is not a taint effect "
            '(did you mean "NoSchedule"?',
        ),
    ],
)
@pytest.mark.parametrize("command", ["render", "simulate"])
def test_a_node_the_api_server_would_refuse_is_refused_not_dropped(
    command: str, node: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(f"nodes:\n  - {node}\n")
    job = str(ROOT / "examples" / "job1.yaml")
    code, out, err = _run(capsys, command, job, "--nodes", str(nodes))
    assert code == 2 and out == ""
    assert _one_line(err).startswith(f"dragonet {command}: {nodes}:2: {said}")


def test_two_nodes_of_one_name_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - {name: a, cpu: 8}\n  - {name: a, cpu: 16}\n")
    job = str(ROOT / "examples" / "job1.yaml")
    for command in ("render", "simulate"):
        code, _, err = _run(capsys, command, job, "--nodes", str(nodes))
        assert code == 2
        assert _one_line(err) == (
            f"dragonet {command}: {nodes}:3: nodes[1]: a second node named 'a' "
            f"(the first: {nodes}:2: nodes[0])"
        )


def test_a_scenario_naming_an_unknown_profile_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        "nodes: [{name: n1, cpu: 16, memory: 64Gi, gpu: 4}]\njobs:\n"
        f"  - {{manifest: {ROOT / 'examples/tfjobs/resnet.yaml'}, profile: resnet50}}\n"
    )
    code, _, err = _run(capsys, "simulate", str(scenario))
    assert code == 2
    assert _one_line(err) == (
        f"dragonet simulate: {scenario}: jobs.0.profile: unknown application 'resnet50' "
        "(known: bert, cifar10, deepspeech2, imagenet, ncf, yolov3)"
    )
