"""Figures a user reads are shares of what existed in the window they describe (issue 38)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main

ROOT = Path(__file__).resolve().parent.parent


def test_a_cut_run_reports_utilisation_over_its_horizon(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One short job finishes in a minute, a long one trains past the horizon: the cluster
    was in use for the whole hour measured, not 15 times its capacity (the old figure
    divided an hour's allocation by the short job's minute)."""
    scenario = tmp_path / "cut.yaml"
    scenario.write_text(
        "name: cut\nnodes: [{name: n1, cpu: 16, memory: 64Gi, gpu: 4}]\njobs:\n"
        f"  - {{manifest: {ROOT / 'examples/tfjobs/cifar.yaml'}, steps: 50}}\n"
        f"  - {{manifest: {ROOT / 'examples/tfjobs/ncf.yaml'}, steps: 100000}}\n"
    )
    horizon_days = 0.05
    code = main(
        [
            "simulate",
            str(scenario),
            "--policy",
            "dragonet",
            "--horizon",
            str(horizon_days),
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)
    assert summary["stopped_at_horizon"] and summary["jobs_finished"] == 1
    used = summary["utilization"]["nvidia.com/gpu"]
    # ncf's one GPU the whole window, cifar's two for its first minute, of 4 GPUs.
    window = horizon_days * 86400
    assert 0.25 <= used <= (window + 2 * 120) / (4 * window)


def test_a_job_that_never_fits_for_want_of_pod_slots_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node with room for one pod: the reason names pods, not cpu the node has plenty of."""
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - {name: a, cpu: 64, memory: 256Gi, gpu: 8, pods: 1}\n")
    job = str(ROOT / "examples" / "tfjobs" / "resnet.yaml")
    code = main(["render", job, "--nodes", str(nodes)])
    _, err = capsys.readouterr()
    assert code == 4
    assert "at once: 7 pods, more than the nodes it may use run in all (1 pod on 1 node)" in err
    assert "the largest" not in err
