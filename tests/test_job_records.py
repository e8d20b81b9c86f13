"""Per-job records (issue 29): what happened to each job under each policy, in ``--json``
and in the table, for jobs that finished and for those that never did."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from sim.engine import Scenario, SimConfig, Simulation
from tests.simkit import gpu_nodes, job, scenario

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
JOB1 = EXAMPLES / "job1.yaml"


def _simulate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


@pytest.fixture
def two_jobs_one_node(tmp_path: Path) -> list[str]:
    """job1 and a copy, job2, on one 8-core node: job2 waits for job1's room, and job1
    (a million steps) is still training at the horizon."""
    second = tmp_path / "job2.yaml"
    second.write_text(JOB1.read_text().replace("name: job1", "name: job2"))
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - {name: only-1, cpu: 8, memory: 20Gi}\n")
    return [str(JOB1), str(second), "--nodes", str(nodes), "--steps", "1e6", "--horizon", "0.01"]


def test_json_carries_one_record_per_job_that_agrees_with_the_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _simulate(
        capsys, str(EXAMPLES / "elastic.yaml"), "--policy", "dragonet", "--json"
    )
    assert code == 0
    (run,) = _lines(out)
    records = {r["job"]: r for r in run["job_records"]}
    assert set(records) == {"team-a/resnet-elastic", "team-b/bert", "team-b/cifar-elastic"}
    # The summary's numbers are these records' numbers.
    assert statistics.fmean(r["wait_s"] for r in records.values()) == pytest.approx(
        run["avg_queue_s"], abs=0.1
    )
    assert statistics.fmean(r["jct_s"] for r in records.values()) == pytest.approx(
        run["avg_jct_s"], abs=0.1
    )
    assert sum(r["scale_actions"] for r in records.values()) == run["scale_actions"]
    for r in records.values():
        assert r["state"] == "finished" and r["why_unfinished"] is None
        assert r["arrival_s"] <= r["admitted_s"] <= r["started_s"] < r["finished_s"]
        assert r["jct_s"] == pytest.approx(r["finished_s"] - r["arrival_s"], abs=0.2)
        assert r["workers"][0] == [r["arrival_s"], 0] and r["workers"][-1] == [r["finished_s"], 0]
    # resnet-elastic grows into the idle cluster, is shrunk for bert, and grows again: its
    # workers over time and the pool's decisions (with their reasons) show each step.
    resnet = records["team-a/resnet-elastic"]
    counts = [n for _, n in resnet["workers"]]
    assert max(counts) == 8 and 4 in counts[counts.index(8) :]
    steps = [(s["from"], s["to"]) for s in resnet["scales"]]
    assert (4, 8) in steps and (8, 4) in steps
    assert any("shrunk" in s["reason"] for s in resnet["scales"])
    assert resnet["preemptions"] == [] and resnet["moves"] == []


def test_an_unfinished_job_is_named_with_the_pools_reason_in_the_table_and_json(
    capsys: pytest.CaptureFixture[str], two_jobs_one_node: list[str]
) -> None:
    code, out, _ = _simulate(capsys, *two_jobs_one_node, "--policy", "dragonet")
    assert code == 0
    table = out[out.index("Unfinished jobs") :]
    job1 = next(line for line in table.splitlines() if "default/job1" in line)
    job2 = next(line for line in table.splitlines() if "default/job2" in line)
    assert "training" in job1 and "still training when the run stopped" in job1
    assert "queued" in job2
    assert "WaitingForCapacity" in job2 and "default/job1" in job2

    code, out, _ = _simulate(capsys, *two_jobs_one_node, "--policy", "dragonet", "--json")
    (run,) = _lines(out)
    records = {r["job"]: r for r in run["job_records"]}
    waiting = records["default/job2"]
    assert waiting["state"] == "queued" and waiting["finished_s"] is None
    assert waiting["reason"] == "WaitingForCapacity"
    assert "default/job1" in waiting["message"]
    assert waiting["why_unfinished"].startswith("WaitingForCapacity: ")
    assert waiting["admitted_s"] is None and waiting["wait_s"] is None
    assert records["default/job1"]["state"] == "training"


def test_a_run_where_everything_finished_prints_no_unfinished_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _simulate(capsys, str(EXAMPLES / "elastic.yaml"), "--policy", "dragonet")
    assert code == 0
    assert "Jobs finished" in out and "Unfinished jobs" not in out


def test_a_preempted_job_records_when_by_whom_and_why() -> None:
    high = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    }
    a = job("a", 8, ps=1, min_workers=8, max_workers=8, steps=2000)
    b = job("b", 8, ps=1, min_workers=8, max_workers=8, arrival=100.0, steps=200)
    b.manifest["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": "high"}}
    base = scenario(gpu_nodes(2), [a, b])
    world = Scenario(base.name, base.nodes, base.jobs, (high,))
    result = Simulation(world, SimConfig(policy="dragonet").cost_free()).run()
    records = {r.key: r for r in result.jobs}
    (preempted,) = records["default/a"].preemptions
    assert preempted.by == "default/b" and "higher priority" in preempted.reason
    assert preempted.t_s == pytest.approx(100.0, abs=5.0)
    assert records["default/a"].state_losses == 1
    # It trained with 8 workers, had none while b ran, then 8 again.
    counts = [n for _, n in records["default/a"].workers]
    assert counts[counts.index(8) :].count(0) >= 1 and counts.count(8) >= 2
    assert records["default/b"].preemptions == ()


def test_a_moved_worker_is_recorded_with_its_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    folder = EXAMPLES / "migration"
    jobs = sorted(str(p) for p in (folder / "speed-a").glob("job*.yaml"))
    argv = [*jobs, "--nodes", str(folder / "nodes.yaml"), "--monitor", "--policy", "dragonet"]
    code, out, _ = _simulate(capsys, *argv, "--json")
    assert code == 0
    (run,) = _lines(out)
    moves = [m for r in run["job_records"] for m in r["moves"]]
    assert len(moves) == run["migrations"] > 0
    for m in moves:
        assert m["replica"].startswith("worker-") and m["from"] and m["to"]
        assert m["from"] != m["to"]
