"""``dragonet simulate`` as a script sees it: exit codes, one-line errors, options that work
for every input they accept, progress off a terminal, a run cut by the horizon said so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cli.main import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
NODES = str(EXAMPLES / "nodes.yaml")
COMPAT = ROOT / "tests" / "fixtures" / "compat"
TRACES = ROOT / "tests" / "fixtures" / "traces"


def _simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def _summaries(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_an_invalid_job_stops_the_run_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not "Jobs finished 0 / 1": the reason the webhook would give, file and line named."""
    job = yaml.safe_load((EXAMPLES / "job1.yaml").read_text())
    job["spec"]["min-instances"] = 7
    bad = tmp_path / "bad.yaml"
    bad.write_text("# a comment first\n" + yaml.safe_dump(job))
    code, out, err = _simulate(capsys, str(bad), "--nodes", NODES)
    assert code == 1 and out == ""
    assert err.strip().splitlines() == [
        f"dragonet simulate: {bad}:2: TFJob default/job1 is invalid: "
        "min-instances (7) is greater than max-instances (4)"
    ]


def test_a_kubeshare_job_is_refused_without_kubeshare(capsys: pytest.CaptureFixture[str]) -> None:
    shared = COMPAT / "dragon-job1-kubeshare.yaml"
    code, out, err = _simulate(capsys, str(shared), "--nodes", NODES)
    assert code == 4 and out == ""  # valid, but it can never run in this pool
    assert err.strip().splitlines() == [
        f"dragonet simulate: {shared}:3: TFJob default/job1 asks for fractional GPUs "
        "(KubeShare), and the pool has no KubeShare: it would wait forever; run with "
        "--kubeshare v1 or v2"
    ]


def test_a_legacy_tfjob_is_refused_with_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    legacy = COMPAT / "legacy-tfjob-v1alpha1.yaml"
    code, out, err = _simulate(capsys, str(legacy), "--nodes", NODES)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"dragonet simulate: {legacy}:3: kind 'TfJob'")
    assert (
        f"convert it to a kubeflow.org/v1 TFJob with 'dragonet convert {legacy} > new.yaml'" in line
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "in this file (empty?)"),
        ("name: x\njobs: [\n", "not valid YAML"),
    ],
)
def test_an_unusable_scenario_file_is_one_line(
    content: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(content)
    as_scenario = _simulate(capsys, str(path))
    as_jobs = _simulate(capsys, str(path), "--nodes", NODES)
    as_nodes = _simulate(capsys, str(EXAMPLES / "job1.yaml"), "--nodes", str(path))
    for code, out, err in (as_jobs, as_nodes):
        assert code == 2 and out == ""
        (line,) = err.strip().splitlines()
        assert line.startswith(f"dragonet simulate: {path}") and message in line
    code, _, err = as_scenario
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(path) in err


@pytest.mark.parametrize(("trace", "jobs"), [("workload-1.csv", 3), ("philly-excerpt.csv", 3)])
def test_jobs_keeps_that_many_jobs_for_every_trace_format(
    trace: str, jobs: int, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--trace", str(TRACES / trace), "--jobs", str(jobs), "--policy", "dragonet", "--json"]
    code, out, _ = _simulate(capsys, *argv)
    assert code == 0
    (summary,) = _summaries(out)
    assert summary["jobs"] == jobs
    assert summary["scenario"] == f"{Path(trace).stem}[0:{jobs}]"


def test_start_skips_jobs_of_a_pollux_trace(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--trace", str(TRACES / "workload-1.csv"), "--start", "158", "--policy", "dragonet"]
    code, out, _ = _simulate(capsys, *argv, "--json")
    assert code == 0
    (summary,) = _summaries(out)
    assert summary["jobs"] == 2  # the trace's last two of 160


def test_a_run_cut_by_the_horizon_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job that needs longer than the horizon: the JSON, the table and stderr say the run
    was cut, instead of a makespan that looks real."""
    argv = [str(EXAMPLES / "job1.yaml"), "--nodes", NODES, "--steps", "1e7", "--horizon", "0.01"]
    code, out, err = _simulate(capsys, *argv, "--policy", "dragonet", "--json")
    assert code == 0
    (summary,) = _summaries(out)
    assert summary["stopped_at_horizon"] is True
    assert summary["horizon_s"] == pytest.approx(864.0)
    assert summary["jobs_finished"] == 0
    assert "dragonet: stopped at the simulator's horizon (14m 24s) with 1 job(s) unfinished" in err

    code, out, _ = _simulate(capsys, *argv, "--policy", "dragonet")
    assert code == 0
    makespan = next(line for line in out.splitlines() if "Makespan" in line)
    assert "cut at 14m 24s" in makespan
    assert "stopped at the simulator's horizon (14m 24s)" in out


def test_a_finished_run_is_not_marked_cut(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(EXAMPLES / "elastic.yaml"), "--policy", "dragonet", "--json"]
    code, out, err = _simulate(capsys, *argv)
    assert code == 0
    (summary,) = _summaries(out)
    assert summary["stopped_at_horizon"] is False
    assert "horizon" not in err


def test_progress_off_a_terminal_is_plain_lines(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _simulate(capsys, str(EXAMPLES / "elastic.yaml"), "--policy", "dragonet,dragon")
    assert code == 0
    lines = [line for line in err.splitlines() if line.startswith("simulate: ")]
    assert lines[0].startswith("simulate: dragonet (1/2) done: 3/3 jobs done")
    assert "about" in lines[0] and "left" in lines[0]  # an estimate of the other policy
    assert lines[-1].startswith("simulate: dragon (2/2) done: 3/3 jobs done")
    assert "\x1b[" not in err  # no terminal codes in a log


def test_the_table_is_not_cut_to_80_columns_off_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _simulate(capsys, str(EXAMPLES / "elastic.yaml"))
    assert code == 0
    header = next(line for line in out.splitlines() if "Metric" in line)
    for policy in ("dragonet", "dragon", "gang-fifo", "kube-default"):
        assert f" {policy} " in header
    assert "…" not in out
    assert any("8 GPU · 32 CPU · 128 GiB" in line for line in out.splitlines())


def test_a_gang_scheduler_job_runs_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "nodes:\n  - {name: n1, cpu: 16, memory: 64Gi, gpu: 4, labels: {gpu: 1060g1}}\n"
    )
    gang = COMPAT / "gang-tfjob.yaml"
    argv = [str(gang), "--nodes", str(nodes), "--policy", "dragonet", "--binding", "nodeName"]
    code, out, err = _simulate(capsys, *argv, "--json")
    assert code == 0
    assert _summaries(out)[0]["jobs_finished"] == 1
    assert (
        f"dragonet simulate: {gang}:3: TFJob kubeflow/tfjob-gang-scheduling: warning: its pods "
        "name schedulerName kube-batch, but TrainingPool 'default' has no gang scheduler "
        "(gangScheduler: none), so no PodGroup is written for it; no pool uses kube-batch: "
        "create one with gangScheduler: kube-batch, or remove schedulerName from its templates"
    ) in err.splitlines()


def test_a_gang_scheduler_job_runs_unchanged_in_a_kube_batch_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "nodes:\n  - {name: n1, cpu: 16, memory: 64Gi, gpu: 4, labels: {gpu: 1060g1}}\n"
    )
    gang = COMPAT / "gang-tfjob.yaml"
    argv = [str(gang), "--nodes", str(nodes), "--policy", "dragonet"]
    code, out, err = _simulate(capsys, *argv, "--gang-scheduler", "kube-batch", "--json")
    assert code == 0
    assert _summaries(out)[0]["jobs_finished"] == 1
    assert "warning" not in err


def test_a_gang_scheduler_with_node_name_binding_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _simulate(capsys, "--gang-scheduler", "volcano", "--binding", "nodeName")
    assert code == 2 and out == ""
    assert err.strip() == (
        "dragonet simulate: --gang-scheduler volcano: binding nodeName bypasses every "
        "scheduler, so gangScheduler volcano could never bind the pods: use binding affinity"
    )


def test_a_gang_scheduler_with_kubeshare_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _simulate(capsys, "--gang-scheduler", "volcano", "--kubeshare", "v1")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("dragonet simulate: --gang-scheduler volcano: kubeshare v1 places")
    assert line.endswith("a pool uses one or the other")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--horizon", "0"], "--horizon 0: must be a number of days above 0"),
        (["--horizon", "nan"], "--horizon nan: must be a number of days above 0"),
        (["--plot", "run.svg"], "--plot run.svg: only .png is supported"),
        (["--plot", "no-such-dir/x.png"], "--plot no-such-dir/x.png: no such directory"),
        (["--trace", str(TRACES / "workload-1.csv"), "--jobs", "-1"], "--jobs -1: must be"),
        (["--jobs", "0"], "--jobs 0: must be a whole number of jobs, at least 1"),
        (["--start", "-1"], "--start -1: must be"),
        (["--load", "0"], "--load 0: must be a factor above 0"),
        (["--mx-share", "1.5"], "--mx-share 1.5: must be a share from 0 to 1"),
        (["--steps", "-10"], "--steps -10: must be a number of steps above 0"),
        (["--mc-workers", "0"], "--mc-workers 0: must be a whole number of workers, at least 1"),
        (["--mc-qps", "-1"], "--mc-qps -1: must be requests per second"),
        (["--mc-burst", "0"], "--mc-burst 0: must be"),
        (["--mc-resync", "-5"], "--mc-resync -5: must be seconds"),
        (["--mc-customize-ttl", "-1"], "--mc-customize-ttl -1: must be seconds"),
        (["--view-delay", "-3"], "--view-delay -3: must be seconds, 0 or more"),
    ],
)
def test_bad_options_are_refused_before_running(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _simulate(capsys, str(EXAMPLES / "elastic.yaml"), *args)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert message in line


def test_an_invalid_job_inside_a_scenario_file_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(
        "name: bad\nnodes: [{name: n1, cpu: 16, memory: 64Gi}]\njobs:\n  - manifest:\n"
        "      {apiVersion: kubeflow.org/v1, kind: TFJob, metadata: {name: Bad_Name},\n"
        "       spec: {tfReplicaSpecs: {}}}\n"
    )
    code, out, err = _simulate(capsys, str(path))
    assert code == 1 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"dragonet simulate: {path}: TFJob default/Bad_Name is invalid: ")
    assert "metadata.name 'Bad_Name' must be a DNS-1035 label" in line


def test_the_mixed_example_runs_its_mxjobs_and_tfjobs_from_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`dragonet simulate examples/mixed.yaml`: the MXJobs are judged as MXJobs (they were
    once checked as TFJobs and refused for having no tfReplicaSpecs)."""
    code, out, err = _simulate(capsys, str(EXAMPLES / "mixed.yaml"), "--json")
    assert code == 0 and "is invalid" not in err
    summaries = _summaries(out)
    assert summaries and all(s["jobs_finished"] == s["jobs"] == 4 for s in summaries)


def test_monitor_runs_the_container_monitor_and_counts_its_requests(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--monitor`: training tasks report to a monitor on every node, which asks for moves;
    the summary counts the requests (none without the flag) and every job still finishes."""
    example = str(EXAMPLES / "elastic.yaml")
    code, out, _ = _simulate(capsys, example, "--policy", "dragonet", "--monitor", "--json")
    (with_monitor,) = _summaries(out)
    assert code == 0 and with_monitor["jobs_finished"] == with_monitor["jobs"]
    assert with_monitor["migration_requests"] > 0
    code, out, _ = _simulate(capsys, example, "--policy", "dragonet", "--json")
    (without,) = _summaries(out)
    assert code == 0 and "migration_requests" not in without


def test_the_seeds_piled_up_speed_scenario_runs_faster_under_dragonet_with_a_move(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """container-migration's speed-a as a user runs it: three burstable TFJobs (250m
    requested, 4 CPUs limit) all on one 4-CPU node compete for its CPU; with the monitor,
    Dragonet moves workers to the idle nodes and beats DRAGON's rules."""
    scenario = EXAMPLES / "migration" / "speed-a"
    jobs = sorted(str(p) for p in scenario.glob("job*.yaml"))
    nodes = str(EXAMPLES / "migration" / "nodes.yaml")
    args = ("--nodes", nodes, "--monitor", "--policy", "dragon,dragonet", "--json")
    code, out, _ = _simulate(capsys, *jobs, *args)
    assert code == 0 and len(jobs) == 3
    runs = {s["policy"]: s for s in _summaries(out)}
    assert runs["dragonet"]["migrations"] >= 1
    assert runs["dragonet"]["avg_jct_s"] < 0.8 * runs["dragon"]["avg_jct_s"]
    # contention, not just moves: the piled-up jobs take far longer than one alone (1 s a
    # step on a free node, 1000 steps)
    assert runs["dragon"]["avg_jct_s"] > 1500


def test_metacontrollers_costs_are_on_by_default_and_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """By default the run pays Metacontroller's real costs, and --json says what they were:
    API requests by verb, the time from a decision to its writes, each queue's depth.
    --mc-cost-free gives the old, instant writes; a faster client writes sooner."""
    base = [str(EXAMPLES / "scenario.yaml"), "--policy", "dragonet", "--json"]
    runs = {}
    for name, extra in (
        ("defaults", []),
        ("free", ["--mc-cost-free"]),
        (
            "fast",
            ["--mc-qps", "50", "--mc-burst", "100", "--mc-apply-strategy", "server-side-apply"],
        ),
    ):
        code, out, _ = _simulate(capsys, *base, *extra)
        assert code == 0
        (runs[name],) = _summaries(out)
    real = runs["defaults"]
    assert set(real["api_requests"]) == {"get", "create", "update", "update_status", "delete"}
    assert real["api_requests"]["get"] >= real["sync_calls"]  # a live GET per finished sync
    assert real["write_latency_s"]["max"] > 1.0  # a decision's writes queue for tokens
    assert set(real["queue_depth_by_controller"]) == set(real["sync_calls_by_controller"])
    assert all(d["max"] >= 1 for d in real["queue_depth_by_controller"].values())
    assert runs["free"]["write_latency_s"]["max"] < 0.1
    assert runs["fast"]["write_latency_s"]["max"] < 0.5 < real["write_latency_s"]["p95"]


def test_a_pool_file_sets_the_default_pool_and_its_policy_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = str(EXAMPLES / "pollux-tiresias-pool.yaml")
    argv = ["--trace", str(TRACES / "workload-1.csv"), "--jobs", "3", "--pool", pool, "--json"]
    code, out, _ = _simulate(capsys, *argv)
    assert code == 0
    assert [s["policy"] for s in _summaries(out)] == ["tiresias"]  # the file's policy
    code, out, _ = _simulate(capsys, *argv, "--policy", "dragonet,tiresias")
    assert code == 0
    assert [s["policy"] for s in _summaries(out)] == ["dragonet", "tiresias"]

    bad = tmp_path / "pool.yaml"
    text = (EXAMPLES / "pollux-tiresias-pool.yaml").read_text()
    bad.write_text(text.replace("maxPreemptions: 1000000", "maxPreemptions: -1"))
    code, _, err = _simulate(capsys, *argv[:4], "--pool", str(bad))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "spec.maxPreemptions" in err and str(bad) in err


def test_a_job_manifest_without_nodes_asks_for_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    """`dragonet simulate job1.yaml`: not "nodes: Field required" (which reads like a broken
    scenario file) but one line saying job manifests need --nodes."""
    job = str(EXAMPLES / "job1.yaml")
    code, out, err = _simulate(capsys, job)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"dragonet simulate: {job}: job manifests need --nodes")


def test_a_job_too_large_for_every_node_exits_4_before_running(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`dragonet simulate job1.yaml cifar.yaml --nodes nodes.yaml` (no GPUs): not exit 0 and
    "Jobs finished 1 / 2", but one line naming the job and why, exit 4, nothing run."""
    cifar = str(EXAMPLES / "tfjobs" / "cifar.yaml")
    code, out, err = _simulate(capsys, str(EXAMPLES / "job1.yaml"), cifar, "--nodes", NODES)
    assert code == 4 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"dragonet simulate: {cifar}:2: TFJob team-c/cifar can never run here")


def test_another_kind_in_a_bundle_is_skipped_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As render and convert: a ConfigMap beside the job is left out with one line, and the
    job runs."""
    bundle = tmp_path / "bundle.yaml"
    bundle.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n---\n"
        + (EXAMPLES / "job1.yaml").read_text()
    )
    code, out, err = _simulate(
        capsys, str(bundle), "--nodes", NODES, "--policy", "dragonet", "--json"
    )
    assert code == 0
    assert err.strip().splitlines()[0] == (
        f"dragonet simulate: {bundle}:1: skipped ConfigMap settings: "
        "not a TFJob, MXJob or PyTorchJob"
    )
    (summary,) = _summaries(out)
    assert summary["jobs_finished"] == summary["jobs"] == 1


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (
            "name: x\nnode: []\njobs: [{manifest: a.yaml}]\n",
            "node: unknown field (known: name, nodes, jobs)",
        ),
        ("name: x\njobs: [{manifest: a.yaml}]\n", "nodes: required (a scenario file has name, "),
        (
            "nodes: []\njobs: [{manifest: a.yaml, arrivl: 3}]\n",
            "jobs.0.arrivl: unknown field (known: manifest, arrival, steps, profile)",
        ),
    ],
)
def test_a_scenario_file_error_is_in_our_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, said: str
) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(content)
    code, out, err = _simulate(capsys, str(path))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"dragonet simulate: {path}: {said}")


def test_a_job_that_fits_only_at_its_minimum_never_runs_under_a_static_policy_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cifar-elastic (2 workers of one GPU, min-instances 1) on a node with one GPU: it
    runs under dragonet at one worker, never under tiresias (static sizes). Alone,
    tiresias refuses it (exit 4) whichever policy the pool file names; compared with
    dragonet, in either order, the run goes on with one warning naming tiresias."""
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - {name: gpu-1, cpu: 16, memory: 64Gi, gpu: 1}\n")
    cifar = str(EXAMPLES / "tfjobs" / "cifar-elastic.yaml")
    code, out, err = _simulate(capsys, cifar, "--nodes", str(nodes), "--policy", "tiresias")
    assert code == 4 and out == ""
    (line,) = err.strip().splitlines()
    assert "can never run here" in line and "(under" not in line, line
    for order in ("dragonet,tiresias", "tiresias,dragonet"):
        argv = [cifar, "--nodes", str(nodes), "--policy", order, "--json", "--horizon", "2"]
        code, out, err = _simulate(capsys, *argv)
        assert code == 0, err
        (warning,) = [x for x in err.splitlines() if "can never run" in x]
        assert warning.startswith("dragonet simulate: warning: ")
        assert warning.endswith("(under tiresias; it runs under the others)"), warning
        finished = {s["policy"]: s["jobs_finished"] for s in _summaries(out)}
        assert finished == {"dragonet": 1, "tiresias": 0}
