"""``kubectl dragonet suspend|resume|delete JOB`` and ``hold|drain|release POOL`` against a
fake API server holding a simulated run's state (``tests/dumpserver.py``), asserting the
exact request each verb sends (kubectl's and kueuectl's: a JSON merge patch of
``spec.runPolicy.suspend`` or ``spec.stopPolicy``, a DELETE with background cascade and the
job's uid as a precondition), what the server then holds, and each way it can fail: one
line, exit 1, never a traceback.

The run (dragonet policy, one 4-GPU node), dumped 100 s in: ``trainer`` (2 workers) runs;
``big`` (4 workers at once) waits for its gang."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.main import main
from sim.apiserver import EPOCH
from sim.dump import StateDump
from sim.engine import SimConfig, Simulation
from tests.dumpserver import DumpServer, Write, serve_dump
from tests.kube_schema import validate_k8s
from tests.kubefake import granted
from tests.simkit import gpu_nodes, job, scenario

AT = 100.0
NOW = EPOCH + timedelta(seconds=AT)
ROOT = Path(__file__).resolve().parent.parent
TFJOBS = "/apis/kubeflow.org/v1/namespaces/default/tfjobs"
POOL = "/apis/dragonet.io/v1alpha1/trainingpools/default"
MERGE = "application/merge-patch+json"


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    trainer = job("trainer", 2, min_workers=2, max_workers=2, steps=1e6)
    big = job("big", 4, min_workers=4, max_workers=4, arrival=10, steps=1e6)
    run = Simulation(
        scenario(gpu_nodes(1), [trainer, big]),
        SimConfig(policy="dragonet", max_time_s=AT + 60),
    )
    dump = StateDump(run.api, lambda: run.now, AT)
    run.run()
    taken, when = dump.result()
    assert when == AT
    return taken


@pytest.fixture
def server(state: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DumpServer:
    """A server of its own copy: the tests write to it."""
    return serve_dump(copy.deepcopy(state), tmp_path, monkeypatch, NOW)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _stored(server: DumpServer, kind: str, name: str) -> dict[str, Any] | None:
    return next(
        (o for o in server.items if o["kind"] == kind and o["metadata"]["name"] == name), None
    )


def _one_line(code: int, out: str, err: str, starts: str) -> str:
    assert code == 1 and out == ""
    assert err.startswith(starts) and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.strip()


def test_the_dump_holds_a_running_job_and_a_waiting_one(state: dict[str, Any]) -> None:
    phases = {
        o["spec"]["job"]["name"]: o["spec"]["phase"]
        for o in state["items"]
        if o["kind"] == "Admission"
    }
    assert phases == {"trainer": "Admitted", "big": "Queued"}


def test_suspend_then_resume_sends_kubeflows_merge_patch_once_each(server, capsys) -> None:
    assert run(capsys, "suspend", "trainer") == (0, "tfjob.kubeflow.org/trainer suspended\n", "")
    assert server.writes == [
        Write("PATCH", f"{TFJOBS}/trainer", MERGE, {"spec": {"runPolicy": {"suspend": True}}}, {})
    ]
    assert _stored(server, "TFJob", "trainer")["spec"]["runPolicy"]["suspend"] is True

    # Again: nothing to do, nothing written (kubectl's "(no change)").
    code, out, _ = run(capsys, "suspend", "tfjob/trainer")
    assert (code, out) == (0, "tfjob.kubeflow.org/trainer is already suspended (no change)\n")
    assert len(server.writes) == 1

    assert run(capsys, "resume", "tfjobs.kubeflow.org/trainer", "-n", "default")[:2] == (
        0,
        "tfjob.kubeflow.org/trainer resumed\n",
    )
    assert server.writes[1].body == {"spec": {"runPolicy": {"suspend": False}}}
    assert _stored(server, "TFJob", "trainer")["spec"]["runPolicy"]["suspend"] is False


def test_resuming_a_job_that_is_not_suspended_writes_nothing(server, capsys) -> None:
    code, out, _ = run(capsys, "resume", "big")
    assert (code, out) == (0, "tfjob.kubeflow.org/big is not suspended (no change)\n")
    assert server.writes == []


def test_a_finished_job_is_not_suspended(server, capsys) -> None:
    done = _stored(server, "TFJob", "trainer")
    done["status"]["conditions"] = [{"type": "Succeeded", "status": "True"}]
    said = _one_line(*run(capsys, "suspend", "trainer"), "dragonet suspend: ")
    assert said.endswith("tfjob.kubeflow.org/trainer has succeeded: there is nothing to suspend")
    assert server.writes == []


def test_delete_sends_background_cascade_with_the_uid_it_read(server, capsys) -> None:
    uid = _stored(server, "TFJob", "big")["metadata"]["uid"]
    assert run(capsys, "delete", "big")[:2] == (0, 'tfjob.kubeflow.org "big" deleted\n')
    options = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Background",
        "preconditions": {"uid": uid},
    }
    assert server.writes == [Write("DELETE", f"{TFJOBS}/big", "application/json", options, {})]
    assert _stored(server, "TFJob", "big") is None


@pytest.mark.parametrize("mode", ["client", "server"])
def test_a_dry_run_changes_nothing(server, capsys, mode: str) -> None:
    for argv in (("delete", "big"), ("suspend", "trainer"), ("drain", "default")):
        code, out, err = run(capsys, *argv, f"--dry-run={mode}")
        assert code == 0, err
        assert out.endswith(" (dry run)\n" if mode == "client" else " (server dry run)\n")
    if mode == "client":
        assert server.writes == []  # only reads
    else:  # the API server checks each write and keeps none
        assert [w.method for w in server.writes] == ["DELETE", "PATCH", "PATCH"]
        assert all(w.query == {"dryRun": "All"} for w in server.writes)
    assert _stored(server, "TFJob", "big") is not None
    assert "suspend" not in (_stored(server, "TFJob", "trainer")["spec"].get("runPolicy") or {})
    assert "stopPolicy" not in _stored(server, "TrainingPool", "default")["spec"]


@pytest.mark.parametrize(
    ("verb", "stop", "says"),
    [
        ("hold", "Hold", "held: it admits no job; its 1 admitted job(s) run to completion"),
        ("drain", "HoldAndDrain", "drained: it admits no job, and its 1 admitted job(s) are"),
    ],
)
def test_hold_or_drain_then_release_patch_the_pools_stop_policy(
    server, capsys, verb: str, stop: str, says: str
) -> None:
    code, out, err = run(capsys, verb, "default")
    assert code == 0, err
    assert out.startswith(f"trainingpool.dragonet.io/default {says}")
    assert server.writes == [Write("PATCH", POOL, MERGE, {"spec": {"stopPolicy": stop}}, {})]
    assert _stored(server, "TrainingPool", "default")["spec"]["stopPolicy"] == stop

    code, out, _ = run(capsys, verb, "default")
    assert "(spec.stopPolicy " + stop + "; no change)" in out and len(server.writes) == 1
    code, out, _ = run(capsys, "status", "default", "-o", "json")
    assert json.loads(out)["stopPolicy"] == stop  # status says the pool is held

    code, out, _ = run(capsys, "release", "default")
    assert out == "trainingpool.dragonet.io/default released: it admits its 1 queued job(s) again\n"
    assert server.writes[1].body == {"spec": {"stopPolicy": "None"}}
    assert _stored(server, "TrainingPool", "default")["spec"]["stopPolicy"] == "None"


def test_releasing_a_pool_that_is_not_held_writes_nothing(server, capsys) -> None:
    code, out, _ = run(capsys, "release", "default")
    assert (code, server.writes) == (0, [])
    assert out == (
        "trainingpool.dragonet.io/default is already released (spec.stopPolicy None; no change)\n"
    )


def test_no_such_job_or_pool_is_one_line(server, capsys) -> None:
    said = _one_line(*run(capsys, "suspend", "nope"), "dragonet suspend: ")
    assert said.endswith("no TFJob, MXJob or PyTorchJob 'nope' in namespace default")
    said = _one_line(*run(capsys, "delete", "mxjob/trainer"), "dragonet delete: ")
    assert said.endswith("no MXJob 'trainer' in namespace default")
    said = _one_line(*run(capsys, "resume", "pod/trainer"), "dragonet resume: ")
    assert "pod/trainer: not a TFJob, MXJob or PyTorchJob" in said
    said = _one_line(*run(capsys, "hold", "gpu"), "dragonet hold: ")
    assert said.endswith("no TrainingPool 'gpu' (kubectl get trainingpools)")
    server.missing.add("trainingpools")
    said = _one_line(*run(capsys, "drain", "default"), "dragonet drain: ")
    assert said.endswith(
        "Dragonet is not installed here: the API server has no TrainingPools "
        "(trainingpools.dragonet.io)"
    )
    assert server.writes == []


def test_a_write_the_user_may_not_make_is_one_line_in_the_api_servers_words(server, capsys) -> None:
    server.denied |= {("patch", "tfjobs"), ("patch", "trainingpools"), ("delete", "tfjobs")}
    said = _one_line(*run(capsys, "suspend", "trainer"), "dragonet suspend: no permission: ")
    assert 'User "alice" cannot patch resource "tfjobs" in the namespace "default"' in said
    said = _one_line(*run(capsys, "hold", "default"), "dragonet hold: no permission: ")
    assert 'cannot patch resource "trainingpools" at the cluster scope' in said
    said = _one_line(*run(capsys, "delete", "big"), "dragonet delete: no permission: ")
    assert 'cannot delete resource "tfjobs"' in said
    assert _stored(server, "TrainingPool", "default")["spec"].get("stopPolicy") is None


def test_a_crd_that_prunes_the_field_is_said_not_taken_for_success(server, capsys) -> None:
    server.pruned |= {"stopPolicy", "runPolicy.suspend"}
    said = _one_line(*run(capsys, "hold", "default"), "dragonet hold: ")
    assert "the API server did not keep spec.stopPolicy" in said
    said = _one_line(*run(capsys, "suspend", "trainer"), "dragonet suspend: ")
    assert "did not keep spec.runPolicy.suspend" in said


def test_a_job_replaced_since_it_was_read_is_not_deleted(server, capsys, monkeypatch) -> None:
    """The DELETE carries the uid the job was read with: a job created again under the same
    name in between is another object, and the API server refuses (409)."""
    read = server.request

    def replaced(method: str, url: str, **kw: Any):
        if method == "DELETE":
            _stored(server, "TFJob", "big")["metadata"]["uid"] = "another"
        return read(method, url, **kw)

    monkeypatch.setattr(server, "request", replaced)
    said = _one_line(*run(capsys, "delete", "big"), "dragonet delete: ")
    assert "the API server answered 409: Precondition failed" in said
    assert _stored(server, "TFJob", "big") is not None


def test_the_operator_role_grants_every_request_the_verbs_make(server, capsys) -> None:
    """examples/rbac/kubectl-dragonet-operator.yaml, checked against the requests made."""
    role = yaml.safe_load((ROOT / "examples/rbac/kubectl-dragonet-operator.yaml").read_text())
    validate_k8s(role)
    for argv in (
        ["suspend", "trainer"],
        ["resume", "trainer"],
        ["hold", "default"],
        ["release", "default"],
        ["drain", "default"],
        ["delete", "big"],
        ["suspend", "nope"],  # a miss also reads whether the kinds are served
    ):
        run(capsys, *argv)
    needed = set()
    for method, path in [("GET", p) for p in server.calls] + [
        (w.method, w.path) for w in server.writes
    ]:
        segs = path.strip("/").split("/")
        group = "" if segs[0] == "api" else segs[1]
        rest = segs[2:] if segs[0] == "api" else segs[3:]
        if rest[:1] == ["namespaces"]:
            rest = rest[2:]
        read = "get" if len(rest) > 1 else "list"
        needed.add((group, rest[0], read if method == "GET" else method.lower()))
    assert {v for _, _, v in needed} >= {"get", "patch", "delete"}
    assert needed <= granted(role), needed - granted(role)


def test_the_plugin_lists_the_control_verbs(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = capsys.readouterr().out
    for verb in ("suspend", "resume", "delete", "hold", "drain", "release"):
        assert f"    {verb} " in shown
    with pytest.raises(SystemExit) as exit_:
        main(["hold", "-n", "x", "default"])  # pools are cluster-scoped
    assert exit_.value.code == 2
