"""``dragonet render``: what a newcomer runs first (the README's main command)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import node_of
from tests.kube_schema import validate_custom, validate_k8s
from webhooks.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def test_render_bundled_example(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["render", str(EXAMPLES / "job1.yaml"), "--nodes", str(EXAMPLES / "nodes.yaml")])
    out, err = capsys.readouterr()
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    for doc in docs:
        (validate_custom if doc["kind"] == "Admission" else validate_k8s)(doc)
    (admission,) = [d for d in docs if d["kind"] == "Admission"]
    assert admission["spec"]["phase"] == "Admitted" and admission["spec"]["workers"] == 4
    pods = [d for d in docs if d["kind"] == "Pod"]
    assert sorted(p["metadata"]["name"] for p in pods) == [
        "job1-ps-0",
        "job1-worker-0",
        "job1-worker-1",
        "job1-worker-2",
        "job1-worker-3",
    ]
    assert {node_of(p) for p in pods} == {"big-1"}
    assert "default/job1: Admitted - 5 pods on big-1" in err


def test_render_shows_why_a_second_job_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    second = yaml.safe_load((EXAMPLES / "job1.yaml").read_text())
    second["metadata"]["name"] = "job2"
    second["spec"]["min-instances"] = 4
    (tmp_path / "job2.yaml").write_text(yaml.safe_dump(second))
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - name: only\n    cpu: 24\n    memory: 64Gi\n")
    code = main(
        ["render", str(EXAMPLES / "job1.yaml"), str(tmp_path / "job2.yaml"), "--nodes", str(nodes)]
    )
    _, err = capsys.readouterr()
    assert code == 0
    assert "default/job1: Admitted - 5 pods on only" in err
    assert (
        "default/job2: Queued - waiting: jobs ahead in the queue (default/job1) claim the free "
        "capacity it needs"
    ) in err


def test_render_with_node_name_binding(capsys: pytest.CaptureFixture[str]) -> None:
    main(
        [
            "render",
            str(EXAMPLES / "job1.yaml"),
            "--nodes",
            str(EXAMPLES / "nodes.yaml"),
            "--binding",
            "nodeName",
            "--output",
            "json",
        ]
    )
    out, _ = capsys.readouterr()
    docs = yaml.safe_load(out)
    assert {d["spec"]["nodeName"] for d in docs if d["kind"] == "Pod"} == {"big-1"}


def test_render_reports_a_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["render", "no-such-job.yaml", "--nodes", str(EXAMPLES / "nodes.yaml")])
    assert code == 2
    assert "no-such-job.yaml" in capsys.readouterr().err


def test_render_reports_an_invalid_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = yaml.safe_load((EXAMPLES / "job1.yaml").read_text())
    job["spec"]["min-instances"] = 7
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(job))
    code = main(["render", str(tmp_path / "bad.yaml"), "--nodes", str(EXAMPLES / "nodes.yaml")])
    _, err = capsys.readouterr()
    assert code == 0
    assert "Invalid" in err and "min-instances (7) is greater than max-instances (4)" in err


def test_render_plans_in_the_pool_a_file_describes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its binding, and only the nodes its selector matches (as Metacontroller sends them)."""
    pool = tmp_path / "pool.yaml"
    pool.write_text(
        "apiVersion: dragonet.io/v1alpha1\nkind: TrainingPool\nmetadata: {name: default}\n"
        "spec:\n  binding: nodeName\n  nodeSelector: {matchLabels: {pool: gpu}}\n"
    )
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "nodes:\n  - {name: big-cpu, cpu: 64, memory: 256Gi}\n"
        "  - {name: gpu-1, cpu: 24, memory: 64Gi, labels: {pool: gpu}}\n"
    )
    args = ["render", str(EXAMPLES / "job1.yaml"), "--nodes", str(nodes), "--pool", str(pool)]
    code = main([*args, "--output", "json"])
    out, _ = capsys.readouterr()
    assert code == 0
    docs = yaml.safe_load(out)
    assert {d["spec"]["nodeName"] for d in docs if d["kind"] == "Pod"} == {"gpu-1"}


def test_render_plans_tfjobs_and_mxjobs_in_one_queue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - {name: g-1, cpu: 32, memory: 128Gi, gpu: 2}\n")
    mx = EXAMPLES / "mxjobs" / "linear.yaml"
    code = main(["render", str(EXAMPLES / "job1.yaml"), str(mx), "--nodes", str(nodes)])
    out, err = capsys.readouterr()
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    for doc in docs:
        (validate_custom if doc["kind"] == "Admission" else validate_k8s)(doc)
    admissions = {d["metadata"]["name"] for d in docs if d["kind"] == "Admission"}
    assert admissions == {"tfjob-job1", "mxjob-linear"}
    pods = {d["metadata"]["name"] for d in docs if d["kind"] == "Pod"}
    assert {"linear-scheduler-0", "linear-server-0", "linear-worker-1"} <= pods
    assert "team-m/linear: Admitted - 4 pods on g-1" in err


def test_render_refuses_another_kind(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: p}\n")
    with pytest.raises(SystemExit, match="'PyTorchJob' is not a TFJob or MXJob"):
        main(["render", str(job), "--nodes", str(EXAMPLES / "nodes.yaml")])
