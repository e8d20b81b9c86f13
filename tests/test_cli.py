"""``dragonet render``: what a newcomer runs first (the README's main command)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from cli.main import main
from tests.conftest import node_of
from tests.kube_schema import validate_custom, validate_k8s, validate_pod_group

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
    assert code == 1  # a script must not take an invalid job for a rendered one
    assert "Invalid" in err
    # The last line names the file and line, and says what the Failed condition says.
    assert err.splitlines()[-1] == (
        f"dragonet render: {tmp_path / 'bad.yaml'}:1: TFJob default/job1 is invalid: "
        "min-instances (7) is greater than max-instances (4)"
    )
    assert "Traceback" not in err


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


def test_render_in_the_example_volcano_pool_writes_a_volcano_pod_group(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pool = EXAMPLES / "volcano-pool.yaml"
    validate_custom(yaml.safe_load(pool.read_text()))
    args = ["render", str(EXAMPLES / "job1.yaml"), "--nodes", NODES, "--pool", str(pool)]
    code = main([*args, "--output", "json"])
    out, _ = capsys.readouterr()
    assert code == 0
    docs = yaml.safe_load(out)
    (group,) = [d for d in docs if d["kind"] == "PodGroup"]
    validate_pod_group(group)
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["spec"]["queue"] == "default"
    pods = [d for d in docs if d["kind"] == "Pod"]
    assert group["spec"]["minMember"] == len(pods)
    assert {p["spec"]["schedulerName"] for p in pods} == {"volcano"}


# --- inputs the command cannot use: one line, the file named, a non-zero status -------------

COMPAT = ROOT / "tests" / "fixtures" / "compat"
NODES = str(EXAMPLES / "nodes.yaml")


def _render(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["render", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_render_refuses_an_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing here\n")
    code, out, err = _render(capsys, str(empty), "--nodes", NODES)
    assert code == 2 and out == ""
    assert _one_line(err) == f"dragonet render: {empty}: no objects in this file (empty?)"


@pytest.mark.parametrize("which", ["job", "nodes"])
def test_render_names_the_line_of_malformed_yaml(
    which: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("metadata:\n  name: x\nspec: [1, 2\nother: 3\n")
    job = str(bad) if which == "job" else str(EXAMPLES / "job1.yaml")
    nodes = str(bad) if which == "nodes" else NODES
    code, out, err = _render(capsys, job, "--nodes", nodes)
    assert code == 2 and out == ""
    line = _one_line(err)
    assert line.startswith(f"dragonet render: {bad}:4: not valid YAML: "), line


def test_render_names_the_field_of_a_bad_nodes_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - {name: a, cpu: 4}\n  - {name: b, gpus: 4}\n")
    code, _, err = _render(capsys, str(EXAMPLES / "job1.yaml"), "--nodes", str(nodes))
    assert code == 2
    assert _one_line(err) == (
        f"dragonet render: {nodes}:3: nodes[1]: unknown field 'gpus' (known: name, cpu, "
        "memory, gpu, pods, labels, taints, unschedulable)"
    )


@pytest.mark.parametrize(
    ("content", "line", "said"),
    [
        (
            "# a cluster\nnodes:\n  - name: a\n  - name: b\n    cpus: 8\n    mem: 4Gi\n",
            4,
            "nodes[1]: unknown fields 'cpus', 'mem' (known: name, cpu, memory, gpu, pods, "
            "labels, taints, unschedulable)",
        ),
        (
            "nodes:\n  - name: a\n    gpu: many\n",
            2,
            "nodes[0]: gpu: must be a whole number of nvidia.com/gpu (default 0), not 'many'",
        ),
        ("nodes:\n  - cpu: 4\n", 2, "nodes[0]: name: required (the node's name)"),
        ("nodes:\n  - just-a-name\n", 2, "nodes[0]: each node must be a mapping of name, "),
    ],
)
def test_a_nodes_file_error_names_its_line_and_every_unknown_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, line: int, said: str
) -> None:
    """The line the bad node starts on (not the file's first), every unknown field with the
    known ones, in our words; for render and for a scenario file's inline nodes alike."""
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(content)
    code, _, err = _render(capsys, str(EXAMPLES / "job1.yaml"), "--nodes", str(nodes))
    assert code == 2
    assert _one_line(err).startswith(f"dragonet render: {nodes}:{line}: {said}")
    scenario = tmp_path / "scenario.yaml"
    job = EXAMPLES / "job1.yaml"
    scenario.write_text(f"name: s\njobs:\n  - manifest: {job}\n" + content)
    code = main(["simulate", str(scenario)])
    _, err = capsys.readouterr()
    assert code == 2
    assert _one_line(err).startswith(f"dragonet simulate: {scenario}:{line + 3}: {said}")


def test_render_refuses_a_legacy_tfjob_and_names_the_converter(
    capsys: pytest.CaptureFixture[str],
) -> None:
    legacy = COMPAT / "legacy-tfjob-v1alpha1.yaml"
    code, out, err = _render(capsys, str(legacy), "--nodes", NODES)
    assert code == 2 and out == ""
    line = _one_line(err)
    assert line.startswith(f"dragonet render: {legacy}:3: kind 'TfJob'")
    assert "not supported as it is" in line
    assert f"'dragonet convert {legacy} > new.yaml'" in line


def test_render_refuses_a_legacy_mxjob_and_names_the_converter(
    capsys: pytest.CaptureFixture[str],
) -> None:
    mx = COMPAT / "legacy-mxjob-v1alpha1.yaml"
    code, _, err = _render(capsys, str(mx), "--nodes", NODES)
    assert code == 2
    line = _one_line(err)
    assert line.startswith(f"dragonet render: {mx}:4: kind 'MXJob'")
    assert "legacy MXNet-operator MXJob is not supported as it is" in line
    assert f"'dragonet convert {mx} > new.yaml'" in line


def test_render_refuses_a_kubeshare_job_in_a_pool_without_kubeshare(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fractional GPUs need KubeShare: the job must not quietly run with no GPU, and the
    last line says what would change it."""
    shared = COMPAT / "dragon-job1-kubeshare.yaml"
    code, out, err = _render(capsys, str(shared), "--nodes", NODES)
    assert code == 4  # valid, but it can never run in this pool
    assert not [d for d in yaml.safe_load_all(out) if d and d["kind"] in ("Pod", "SharePod")]
    last = err.strip().splitlines()[-1]
    assert last == (
        f"dragonet render: {shared}:3: TFJob default/job1 asks for fractional GPUs (KubeShare) "
        "and the pool has no KubeShare; it would wait forever (try --kubeshare v1 or v2)"
    )


def test_render_writes_sharepods_with_node_and_gpuid_for_kubeshare_v1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = COMPAT / "dragon-job1-kubeshare.yaml"
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - {name: g1, cpu: 32, memory: 128Gi, gpu: 2}\n")
    code, out, _ = _render(capsys, str(shared), "--nodes", str(nodes), "--kubeshare", "v1")
    assert code == 0
    docs = [d for d in yaml.safe_load_all(out) if d]
    sharepods = [d for d in docs if d["kind"] == "SharePod"]
    assert sorted(d["metadata"]["name"] for d in sharepods) == [
        f"job1-worker-{i}" for i in range(4)
    ]
    for sp in sharepods:
        assert sp["apiVersion"] == "kubeshare.nthu/v1"
        assert sp["spec"]["nodeName"]
        assert sp["metadata"]["annotations"]["kubeshare/gpu_request"] == "0.5"
        assert len(sp["metadata"]["annotations"]["kubeshare/GPUID"]) == 5
    # The parameter server asks for no GPU: it stays a plain Pod.
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Pod"] == ["job1-ps-0"]


def test_render_warns_about_a_gang_scheduler_the_pool_does_not_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gang = COMPAT / "gang-tfjob.yaml"
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "nodes:\n  - {name: n1, cpu: 16, memory: 64Gi, gpu: 4, labels: {gpu: 1060g1}}\n"
    )
    code, out, err = _render(capsys, str(gang), "--nodes", str(nodes))
    assert code == 0  # it runs as the pool runs jobs: Dragonet admits the gang itself
    assert (
        f"dragonet render: {gang}:3: warning: its pods name schedulerName kube-batch, but "
        "TrainingPool 'default' has no gang scheduler (gangScheduler: none), so no PodGroup "
        "is written for it; no pool uses kube-batch: create one with gangScheduler: kube-batch,"
        " or remove schedulerName from its templates"
    ) in err
    assert not [d for d in yaml.safe_load_all(out) if d and d["kind"] == "PodGroup"]


def test_render_in_a_kube_batch_pool_writes_the_pod_group_without_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gang = COMPAT / "gang-tfjob.yaml"
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "nodes:\n  - {name: n1, cpu: 16, memory: 64Gi, gpu: 4, labels: {gpu: 1060g1}}\n"
    )
    args = ("--nodes", str(nodes), "--gang-scheduler", "kube-batch")
    code, out, err = _render(capsys, str(gang), *args)
    assert code == 0
    assert "warning" not in err
    docs = [d for d in yaml.safe_load_all(out) if d]
    (group,) = [d for d in docs if d["kind"] == "PodGroup"]
    assert group["apiVersion"] == "scheduling.incubator.k8s.io/v1alpha1"
    assert group["spec"] == {"minMember": 2}
    assert {d["spec"]["schedulerName"] for d in docs if d["kind"] == "Pod"} == {"kube-batch"}


def test_render_refuses_a_gang_scheduler_with_node_name_binding_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ("--nodes", NODES, "--gang-scheduler", "volcano", "--binding", "nodeName")
    code, out, err = _render(capsys, str(ROOT / "examples" / "job1.yaml"), *args)
    assert code == 2 and out == ""
    line = _one_line(err)
    assert line.startswith("dragonet render: the default pool: spec.")
    assert "binding nodeName bypasses every scheduler" in line


def test_render_refuses_a_gang_scheduler_with_kubeshare_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ("--nodes", NODES, "--gang-scheduler", "kube-batch", "--kubeshare", "v2")
    code, out, err = _render(capsys, str(ROOT / "examples" / "job1.yaml"), *args)
    assert code == 2 and out == ""
    line = _one_line(err)
    assert line.startswith("dragonet render: the default pool: spec.")
    assert "kubeshare v2 places fractional-GPU pods itself" in line
    assert "gangScheduler kube-batch would wait for pods it never schedules" in line


# --- serve: bad settings ----------------------------------------------------------------------


def test_serve_refuses_a_bad_port(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DRAGONET_PORT", "eighty")
    assert main(["serve"]) == 2
    assert _one_line(capsys.readouterr().err).startswith("dragonet serve: DRAGONET_PORT: ")
    monkeypatch.delenv("DRAGONET_PORT")
    assert main(["serve", "--port", "0"]) == 2
    assert _one_line(capsys.readouterr().err).startswith("dragonet serve: --port: ")


def test_serve_refuses_half_a_tls_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DRAGONET_TLS_CERT_FILE", "/tmp/cert.pem")
    assert main(["serve"]) == 2
    assert _one_line(capsys.readouterr().err) == (
        "dragonet serve: settings: set both DRAGONET_TLS_CERT_FILE and DRAGONET_TLS_KEY_FILE "
        "or neither"
    )


# --- help ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["serve"], ["render"], ["simulate"]])
def test_help_documents_every_option_without_backticks(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "`" not in text
    # argparse prints an option's help on its line or the next: none may be bare.
    lines = text.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("--") and "  " not in stripped:
            following = lines[i + 1] if i + 1 < len(lines) else ""
            assert following.startswith(" " * 10), f"undocumented option: {stripped}"
    if command:
        assert "examples:" in text
    if command == ["serve"]:
        assert "--port" in text and "8080" in text


def test_without_the_simulator_serve_still_parses_and_simulate_says_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The image ships policy/, webhooks/ and cli/ only: the command must not need sim/."""
    monkeypatch.setitem(sys.modules, "sim.cli", None)
    monkeypatch.setenv("DRAGONET_PORT", "0")
    assert main(["serve"]) == 2  # got as far as checking its settings
    assert "DRAGONET_PORT" in capsys.readouterr().err
    assert main(["simulate"]) == 2
    assert _one_line(capsys.readouterr().err).startswith(
        "dragonet simulate: the simulator is not installed"
    )


def test_render_names_the_field_of_a_bad_pool_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = tmp_path / "pool.yaml"
    pool.write_text(
        "apiVersion: dragonet.io/v1alpha1\nkind: TrainingPool\nmetadata: {name: default}\n"
        "spec: {binding: wrong}\n"
    )
    code, _, err = _render(
        capsys, str(EXAMPLES / "job1.yaml"), "--nodes", NODES, "--pool", str(pool)
    )
    assert code == 2
    assert _one_line(err) == (
        f"dragonet render: {pool}:4: TrainingPool default: spec.binding: must be one of "
        "'affinity', 'nodeName' (got 'wrong')"
    )


def test_render_refuses_a_tfjob_without_a_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {}\nspec: {}\n")
    code, _, err = _render(capsys, str(job), "--nodes", NODES)
    assert code == 2
    assert _one_line(err) == f"dragonet render: {job}:1: metadata.name: a TFJob needs a name"


def test_a_bug_of_ours_is_one_line_and_status_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import cli.main as cli

    def broken(*_: object) -> int:
        raise KeyError("name")

    monkeypatch.setattr(cli, "render", broken)
    monkeypatch.delenv("DRAGONET_DEBUG", raising=False)
    code, _, err = _render(capsys, str(EXAMPLES / "job1.yaml"), "--nodes", NODES)
    assert code == 3
    assert _one_line(err).startswith("dragonet render: internal error: KeyError: 'name'")


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


def test_render_refuses_another_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("apiVersion: kubeflow.org/v1\nkind: XGBoostJob\nmetadata: {name: p}\n")
    code, _, err = _render(capsys, str(job), "--nodes", NODES)
    assert code == 2
    assert (
        "not a training job (expected apiVersion kubeflow.org/v1, kind TFJob, MXJob or PyTorchJob)"
        in (_one_line(err))
    )


HEAVY = (
    "kubernetes",
    "flask",
    "werkzeug",
    "gunicorn",
    "rich",
    "matplotlib",
    "scipy",
    "sim.engine",
    "sim.scenario",
)


def _probe(argv: list[str]) -> tuple[int, str, list[str]]:
    """Run ``dragonet ARGV`` in a fresh interpreter: its exit status, its stderr and the
    heavy modules it imported."""
    import subprocess

    probe = (
        "import json, sys\n"
        "from cli.main import main\n"
        "try:\n"
        f"    code = main({argv!r})\n"
        "except SystemExit as done:\n"
        "    code = done.code\n"
        f"heavy = {HEAVY!r}\n"
        "loaded = {m for m in sys.modules for h in heavy if m == h or m.startswith(h + '.')}\n"
        "print(json.dumps([code, sorted(loaded)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    code, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return code, done.stderr, loaded


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["render", "--help"],
        ["simulate", "--help"],
        ["render"],
        ["render", "no-such-job.yaml", "--nodes", "no-such-nodes.yaml"],
        ["simulate", "--steps", "-10"],
    ],
)
def test_help_and_errors_import_no_heavy_module(argv: list[str]) -> None:
    """`dragonet --help`, a command's help and a usage error answer without importing the
    web server, the Kubernetes client, the simulator or the plotting and terminal libraries."""
    assert _probe(argv)[2] == []


def test_file_errors_import_no_heavy_module() -> None:
    """A job file without --nodes in `simulate` and a job given twice in `render` are
    refused from the files alone: the same one line and exit status, without scipy, the
    simulator or the Kubernetes client (each half a second or more to import)."""
    job = "examples/job1.yaml"
    code, err, loaded = _probe(["simulate", job])
    assert (code, loaded) == (2, [])
    assert _one_line(err) == (
        f"dragonet simulate: {job}: job manifests need --nodes (a cluster file, e.g. "
        "examples/nodes.yaml); a scenario file (examples/scenario.yaml) needs none"
    )
    code, err, loaded = _probe(["render", job, job, "--nodes", "examples/nodes.yaml"])
    assert (code, loaded) == (2, [])
    assert _one_line(err) == (
        f"dragonet render: {job}:3: TFJob default/job1 is given twice (first at {job}:3)"
    )


def test_the_app_loads_the_quantity_parser_when_made() -> None:
    """`serve`: a worker's app loads the Kubernetes client's quantity parser when it is
    made, never in its first request's time limit, while importing webhooks.app (as
    `render` does before it refuses a file) does not."""
    import subprocess

    probe = (
        "import sys\n"
        "from webhooks.app import create_app\n"
        "before = 'kubernetes.utils.quantity' in sys.modules\n"
        "create_app()\n"
        "print(before, 'kubernetes.utils.quantity' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["False", "True"]


def test_render_refuses_a_job_given_twice(capsys: pytest.CaptureFixture[str]) -> None:
    """`dragonet render job1.yaml job1.yaml`: one line naming both places, exit 2, and no
    duplicate Pods on stdout."""
    job = str(EXAMPLES / "job1.yaml")
    code, out, err = _render(capsys, job, job, "--nodes", NODES)
    assert code == 2 and out == ""
    assert _one_line(err) == (
        f"dragonet render: {job}:3: TFJob default/job1 is given twice (first at {job}:3)"
    )


def test_render_skips_another_kind_in_a_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ConfigMap beside the job: one line saying it was skipped, the job rendered."""
    bundle = tmp_path / "bundle.yaml"
    bundle.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n---\n"
        + (EXAMPLES / "job1.yaml").read_text()
    )
    code, out, err = _render(capsys, str(bundle), "--nodes", NODES)
    assert code == 0
    assert (
        f"dragonet render: {bundle}:1: skipped ConfigMap settings: not a TFJob, MXJob or PyTorchJob"
        in (err.splitlines())
    )
    assert "ConfigMap" not in out
    assert "default/job1: Admitted" in err


def test_render_exits_4_for_a_job_too_large_for_every_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`dragonet render cifar.yaml --nodes nodes.yaml` (GPUs the nodes lack): valid, but it
    can never run there: exit 4, not 0, and the last line says why."""
    job = str(EXAMPLES / "tfjobs" / "cifar.yaml")
    code, _, err = _render(capsys, job, "--nodes", NODES)
    assert code == 4
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"dragonet render: {job}:2: TFJob team-c/cifar can never run here: ")
    assert "0 nvidia.com/gpu" in last


def _ps_only(tmp_path: Path) -> Path:
    job = yaml.safe_load((EXAMPLES / "job1.yaml").read_text())
    job["metadata"]["name"] = "ps-only"
    del job["spec"]["max-instances"], job["spec"]["min-instances"]
    job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 0
    path = tmp_path / "ps-only.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def test_a_ps_only_job_is_refused_by_render_and_simulate_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`Worker.replicas: 0` and no Chief: Kubeflow would never mark it Succeeded, nothing
    trains. Both commands refuse it as invalid (exit 1) with the same reason, naming the
    field, instead of render saying Admitted and simulate waiting for ever."""
    path = _ps_only(tmp_path)
    reason = (
        "spec.tfReplicaSpecs.Worker.replicas: the job has no Worker to run and no Chief or "
        "Master; nothing would train and it would never succeed (give it workers)"
    )
    code, _, err = _render(capsys, str(path), "--nodes", NODES)
    assert code == 1
    assert err.strip().splitlines()[-1].endswith(reason)
    code = main(["simulate", str(path), "--nodes", NODES])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert _one_line(err).endswith(f"is invalid: {reason}")


def test_the_help_lists_every_policy_and_every_route(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`dragonet simulate --help` names all the policies there are and `dragonet serve
    --help` every route the webhook answers (none left out as the app grows)."""
    from policy.model.pool import POLICIES
    from webhooks.app import create_app
    from webhooks.config import Settings

    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    for policy in POLICIES:
        assert f"{policy} (" in said, policy
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    said = capsys.readouterr().out
    routes = {str(r) for r in create_app(Settings()).url_map.iter_rules()} - {
        "/static/<path:filename>"
    }
    missing = [r for r in sorted(routes) if r not in said]
    assert not missing
