"""``dragonet simulate --dump``: the simulated API server's objects as ``kubectl get nodes,pods,
trainingpools,tfjobs,mxjobs,admissions -A -o json`` returns them, at the end of a run or as
they stood at ``--dump-at``, without changing the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from sim.apiserver import ApiServer
from sim.dump import StateDump
from tests.simkit import comparable

ROOT = Path(__file__).resolve().parent.parent
JOB = str(ROOT / "examples" / "job1.yaml")
NODES = str(ROOT / "examples" / "nodes.yaml")
ORDER = ["Node", "Pod", "TrainingPool", "TFJob", "MXJob", "Admission", "Event"]


def _simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["simulate", JOB, "--nodes", NODES, "--policy", "dragonet", "--json", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_the_dump_is_a_kubectl_list_and_the_run_is_the_same_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, plain, _ = _simulate(capsys)
    path = tmp_path / "state.json"
    code, out, err = _simulate(capsys, "--dump", str(path), "--dump-at", "30")
    assert code == 0
    assert comparable(json.loads(out)) == comparable(json.loads(plain))
    assert f"wrote {path} (the objects at simulated time 30 s)" in err
    state = json.loads(path.read_text())
    assert (state["apiVersion"], state["kind"]) == ("v1", "List")
    kinds = [o["kind"] for o in state["items"]]
    assert kinds == sorted(kinds, key=ORDER.index)  # each type in turn, as kubectl lists them
    assert {"Node", "Pod", "TrainingPool", "TFJob", "Admission"} <= set(kinds)
    [job] = [o for o in state["items"] if o["kind"] == "TFJob"]
    assert job["apiVersion"] == "kubeflow.org/v1" and job["metadata"]["uid"]
    # 30 s in, the job runs: its pods are there, with the Admission that placed them.
    assert job["status"]["scheduling"]["phase"] == "Admitted"
    assert any(
        o["kind"] == "Pod" and o["metadata"]["name"].startswith("job1-") for o in state["items"]
    )


def test_the_dump_at_the_end_shows_the_cluster_the_run_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "end.json"
    code, out, err = _simulate(capsys, "--dump", str(path))
    assert code == 0
    end = json.loads(out)["makespan_s"]
    state = json.loads(path.read_text())
    kinds = {o["kind"] for o in state["items"]}
    # The job finished and was deleted after it (the simulator deletes finished jobs, as
    # a user or the reaper does), its pods and Admission with it; the cluster remains.
    assert "Node" in kinds and "TrainingPool" in kinds
    assert not kinds & {"TFJob", "Admission", "Pod"}
    shown = float(err.split("at simulated time ")[1].split(" s")[0])
    assert shown >= end


def test_dump_options_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [
        (["--dump-at", "5"], "--dump-at needs --dump"),
        (["--dump", str(tmp_path / "x.json"), "--dump-at", "-1"], "--dump-at -1: must be"),
        (["--dump", str(tmp_path / "no" / "x.json")], "no such directory"),
    ]
    for args, said in cases:
        code, out, err = _simulate(capsys, *args)
        assert code == 2 and out == "" and err.count("\n") == 1 and said in err, err
    code = main(["simulate", JOB, "--nodes", NODES, "--dump", str(tmp_path / "x.json")])
    _, err = capsys.readouterr()
    assert code == 2 and "one policy's objects at a time (add --policy" in err


def test_a_capture_leaves_out_the_first_change_after_its_time() -> None:
    now = [0.0]
    api = ApiServer(clock=lambda: now[0])
    dump = StateDump(api, lambda: now[0], at=10.0)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {}}
    api.create(node)
    now[0] = 10.0
    api.update({**api.get("Node.v1", "n"), "status": {"phase": "at ten"}})
    now[0] = 11.0
    api.update({**api.get("Node.v1", "n"), "status": {"phase": "later"}})
    api.create({**node, "metadata": {"name": "m"}})
    state, when = dump.result()
    assert when == 10.0
    assert [(o["metadata"]["name"], o["status"]) for o in state["items"]] == [
        ("n", {"phase": "at ten"})
    ]


def test_the_dump_holds_the_events_a_cluster_would_have(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chart's recorder runs beside the dump: its Events are in the List, valid
    ``events.k8s.io/v1`` Events, each written as its fact happened (none after the time
    the dump shows)."""
    from tests.kube_schema import validate_k8s

    at_30, end = tmp_path / "at30.json", tmp_path / "end.json"
    assert _simulate(capsys, "--dump", str(at_30), "--dump-at", "30")[0] == 0
    assert _simulate(capsys, "--dump", str(end))[0] == 0
    early = [o for o in json.loads(at_30.read_text())["items"] if o["kind"] == "Event"]
    late = [o for o in json.loads(end.read_text())["items"] if o["kind"] == "Event"]
    for event in late:
        validate_k8s(event)
        assert event["regarding"]["name"] == "job1"
    assert [e["reason"] for e in early] == ["Admitted"]
    # The job finished and was deleted after it; its Events remain (until the API
    # server's --event-ttl), as in a cluster.
    reasons = sorted(e["reason"] for e in late)
    assert reasons == ["Admitted", "TFJobSucceeded"], reasons
    assert early[0] == next(e for e in late if e["reason"] == "Admitted")
