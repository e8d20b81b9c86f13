"""``kubectl dragonet status|queue|explain|nodes`` against a fake API server holding a
simulated run's state (``dragonet simulate --dump``'s List, served at the HTTP layer the
official client calls), and each way it can fail: one line, exit 1, never a traceback.

The run (dragonet policy, two 4-GPU nodes), dumped 450 s in:
* ``low`` (priority -100) ran first; ``elastic`` (min 1, max 4) next. ``high`` (priority
  1000) preempted ``elastic`` at 60 s; ``elastic`` then preempted ``low`` (0 > -100);
* ``waiter`` (3 workers at once) starved 30 s, so ``elastic`` shrank from 4 workers to 1;
* ``big`` (4 workers at once, 400 s in) waits for its gang; ``low`` waits behind it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.main import main
from policy.model.jobs import pod_request
from policy.model.resources import Resources
from sim.apiserver import EPOCH
from sim.dump import StateDump
from sim.engine import Scenario, SimConfig, Simulation
from tests.dumpserver import DumpServer, serve_dump
from tests.kube_schema import validate_k8s
from tests.kubefake import KUBECONFIG, granted
from tests.simkit import gpu_nodes, job, scenario

AT = 450.0  # simulated seconds: the moment the dump shows
NOW = EPOCH + timedelta(seconds=AT)
ROOT = Path(__file__).resolve().parent.parent


def _priority(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def _queue_of(spec: Any, priority_class: str) -> None:
    spec.manifest["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": priority_class}}


def story() -> Scenario:
    low = job("low", 4, min_workers=4, max_workers=4, steps=1e6)
    _queue_of(low, "batch")
    elastic = job("elastic", 4, min_workers=1, max_workers=4, arrival=5, steps=1e6)
    high = job("high", 4, min_workers=4, max_workers=4, arrival=60, steps=1e6)
    _queue_of(high, "high")
    waiter = job("waiter", 3, min_workers=3, max_workers=3, arrival=200, steps=1e6)
    big = job("big", 4, min_workers=4, max_workers=4, arrival=400, steps=1e6)
    base = scenario(gpu_nodes(2), [low, elastic, high, waiter, big])
    classes = (_priority("high", 1000), _priority("batch", -100))
    return Scenario(base.name, base.nodes, base.jobs, classes)


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    sim = Simulation(story(), SimConfig(policy="dragonet", max_time_s=AT + 600))
    dump = StateDump(sim.api, lambda: sim.now, AT)
    sim.run()
    taken, when = dump.result()
    assert when == AT
    return taken


@pytest.fixture
def server(state: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DumpServer:
    """Every request of every client made in the test goes to a server of the dump."""
    return serve_dump(state, tmp_path, monkeypatch, NOW)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _items(out: str, kind: str, parse: Any = json.loads) -> list[dict[str, Any]]:
    """The items of what ``-o json|yaml`` printed: a kubectl List of ``kind`` objects."""
    doc = parse(out)
    assert (doc["apiVersion"], doc["kind"]) == ("v1", "List"), doc
    assert {(i["apiVersion"], i["kind"]) for i in doc["items"]} <= {
        ("view.dragonet.io/v1alpha1", kind)
    }
    return doc["items"]


def _table(out: str) -> list[dict[str, str]]:
    """A kubectl table's rows by column name (columns are 3+ spaces apart)."""
    import re

    lines = [line for line in out.splitlines() if line.strip()]
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"(?:(?<=^)|(?<=\s{3}))\S", header)]
    names = [header[s:e].strip() for s, e in zip(starts, [*starts[1:], None], strict=True)]
    return [
        {n: line[s:e].strip() for n, s, e in zip(names, starts, [*starts[1:], None], strict=True)}
        for line in lines[1:]
    ]


# --- the scenario holds what the tests need ---------------------------------------------------


def test_the_dump_holds_a_waiting_gang_a_preempted_job_and_a_shrunk_job(state) -> None:
    jobs = {
        o["metadata"]["name"]: o["status"]["scheduling"]
        for o in state["items"]
        if o["kind"] == "TFJob"
    }
    assert jobs["big"]["phase"] == "Queued" and jobs["big"]["reason"] == "WaitingForCapacity"
    assert jobs["low"]["service"]["lastPreemption"]["by"] == "default/elastic"
    assert (jobs["elastic"]["lastScale"]["from"], jobs["elastic"]["lastScale"]["to"]) == (4, 1)


# --- status ------------------------------------------------------------------------------------


def test_status_shows_each_pools_policy_nodes_queue_admitted_and_free_room(server, capsys) -> None:
    code, out, err = run(capsys, "status")
    assert code == 0 and err == ""
    [row] = _table(out)
    # high (4) + elastic (1) + waiter (3) hold all 8 GPUs; big and low wait.
    assert row == {
        "NAME": "default",
        "POLICY": "dragonet",
        "STOP": "None",
        "NODES": "2",
        "QUEUED": "2",
        "ADMITTED": "3",
        "FREE GPU": "0/8",
        "FREE CPU": row["FREE CPU"],
        "FREE MEMORY": row["FREE MEMORY"],
    }
    code, out, _ = run(capsys, "status", "-o", "json")
    [pool] = _items(out, "PoolSummary")
    assert (pool["queued"], pool["admitted"], pool["free"]["nvidia.com/gpu"]) == (2, 3, "0")
    assert pool["capacity"]["nvidia.com/gpu"] == "8"


# --- queue -------------------------------------------------------------------------------------


def test_queue_lists_the_order_with_position_priority_wait_and_reason_in_one_read(
    server, capsys
) -> None:
    code, out, err = run(capsys, "queue")
    assert code == 0 and err == ""
    rows = _table(out)
    assert [(r["POSITION"], r["JOB"], r["PRIORITY"], r["WAITED"], r["REASON"]) for r in rows] == [
        ("1", "default/big", "0", "50s", "WaitingForCapacity"),  # arrived at 400 s
        ("2", "default/low", "-100", "7m30s", "WaitingForCapacity"),  # since it was created
    ]
    assert "LAS QUEUE" not in out  # dragonet has no least-attained-service queues
    # A job's position is one read of its pool, not a read (or a write) per job; and one
    # list of at most one job says whether the caller may read every namespace's jobs
    # (else their names are left out: tests/test_tenants.py).
    assert server.calls == [
        "/apis/dragonet.io/v1alpha1/trainingpools",
        "/apis/kubeflow.org/v1/tfjobs",
    ]


def test_queue_wide_adds_each_jobs_message_and_yaml_keeps_every_field(server, capsys) -> None:
    code, out, _ = run(capsys, "queue", "default", "-o", "wide")
    assert code == 0
    big = _table(out)[0]
    assert big["MESSAGE"].startswith("waiting: needs 18 cpu, 72Gi memory, 4 nvidia.com/gpu")
    code, out, _ = run(capsys, "queue", "-o", "yaml")
    rows = _items(out, "QueueEntry", yaml.safe_load)
    assert rows[1]["metadata"] == {"name": "low", "namespace": "default"}
    assert rows[1]["enqueued"] == "2026-01-01T00:00:00Z"


def test_queue_with_a_namespace_keeps_the_pools_positions(server, capsys) -> None:
    code, out, err = run(capsys, "queue", "-n", "team-a")
    assert code == 0 and out == "" and err.strip() == "No jobs wait in namespace team-a."
    code, out, _ = run(capsys, "queue", "-n", "default")
    assert [r["POSITION"] for r in _table(out)] == ["1", "2"]


def _moved(state: dict[str, Any], name: str, namespace: str) -> list[dict[str, Any]]:
    """The dump's items with TFJob ``name`` (its Admission, its Events and its place in its
    pool's queue) in ``namespace`` instead of default."""
    import copy

    items = copy.deepcopy(state["items"])
    for o in items:
        meta = o["metadata"]
        if (o["kind"], meta["name"]) in (("TFJob", name), ("Admission", f"tfjob-{name}")):
            meta["namespace"] = namespace
        if o["kind"] == "Event" and (o.get("regarding") or {}).get("name") == name:
            meta["namespace"] = o["regarding"]["namespace"] = namespace
        if o["kind"] == "TrainingPool":
            for entry in (o.get("status") or {}).get("queue") or []:
                if entry["job"] == f"default/{name}":
                    entry["job"] = f"{namespace}/{name}"
    return items


def test_queue_all_namespaces_lists_every_namespace_in_the_pools_order(
    server, capsys, state
) -> None:
    """`queue -A`: every namespace's jobs, positions as the pool gives them; -A wins over -n
    (as in kubectl), and -o wide reads the jobs' messages from every namespace."""
    server.items = _moved(state, "big", "team-a")
    code, out, err = run(capsys, "queue", "-n", "default")
    assert code == 0 and err == ""
    assert [(r["POSITION"], r["JOB"]) for r in _table(out)] == [("2", "default/low")]
    expected = [("1", "team-a/big"), ("2", "default/low")]
    for argv in (["-A"], ["--all-namespaces"], ["-A", "-n", "default"]):
        code, out, err = run(capsys, "queue", *argv)
        assert code == 0 and err == ""
        assert [(r["POSITION"], r["JOB"]) for r in _table(out)] == expected, argv
    server.calls.clear()
    code, out, _ = run(capsys, "queue", "-A", "-o", "wide")
    big = _table(out)[0]
    assert big["JOB"] == "team-a/big" and big["MESSAGE"].startswith("waiting: needs 18 cpu")
    assert "/apis/kubeflow.org/v1/tfjobs" in server.calls  # one list of every namespace


# --- explain -----------------------------------------------------------------------------------


def test_explain_a_job_waiting_for_its_gang_says_why_what_it_needs_and_where_it_stands(
    server, capsys
) -> None:
    code, out, err = run(capsys, "explain", "big")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == (
        "TFJob default/big in TrainingPool default: Queued (WaitingForCapacity), position 1 of "
        "2 in the queue, waited 50s"
    )
    said = "\n".join(lines)
    assert "Needs:      18 cpu, 72Gi memory, 4 nvidia.com/gpu at once, for its 1 parameter " in said
    assert "the pool is short of 4 nvidia.com/gpu" in said
    assert "Would run:  room for its whole gang" in said
    assert "Admission:  tfjob-big: Queued, 0 workers" in said


def test_explain_a_preempted_job_says_by_whom_and_why(server, capsys) -> None:
    code, out, _ = run(capsys, "explain", "tfjob/low")
    assert code == 0
    [line] = [x for x in out.splitlines() if x.startswith("Preempted:")]
    assert "by default/elastic (default/elastic has higher priority (0 > -100))" in line
    code, out, _ = run(capsys, "explain", "low", "-o", "json")
    info = json.loads(out)
    assert info["preempted"]["by"] == "default/elastic" and info["position"] == 2


def test_explain_a_shrunk_job_says_from_and_to_how_many_and_why(server, capsys) -> None:
    code, out, _ = run(capsys, "explain", "elastic")
    assert code == 0
    [line] = [x for x in out.splitlines() if x.startswith("Last scale:")]
    assert line.startswith("Last scale: shrank from 4 to 1 workers at 2026-01-01T00:03:50Z")
    assert "to make room for default/waiter, which waited 30 s" in line
    assert "Workers:    1 running, target 1 (min 1, max 4)" in out
    # It was preempted by high once, before it preempted low in turn.
    assert "by default/high" in out


def test_explain_shows_the_events_the_recorder_wrote_in_the_dump(server, capsys, state) -> None:
    """``simulate --dump`` holds the Events the chart's recorder writes: explain shows
    them, the oldest first."""
    mine = sorted(
        (e["eventTime"], e["reason"])
        for e in state["items"]
        if e["kind"] == "Event" and e["regarding"]["name"] == "elastic"
    )
    assert {"Admitted", "Preempted", "Shrunk"} <= {r for _, r in mine}
    _, out, _ = run(capsys, "explain", "elastic")
    shown = [line.split()[1] for line in out.split("Events:\n", 1)[1].splitlines()[1:]]
    assert shown == [r for _, r in mine]


def test_explain_shows_the_jobs_own_events_oldest_first(server, capsys, state) -> None:
    [elastic] = [
        o for o in state["items"] if o["metadata"]["name"] == "elastic" and o["kind"] == "TFJob"
    ]
    uid = elastic["metadata"]["uid"]

    def event(name: str, reason: str, at: str, regarding_uid: str, count: int = 1) -> dict:
        return {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": "default"},
            "eventTime": at,
            "series": {"count": count, "lastObservedTime": at} if count > 1 else None,
            "type": "Normal" if reason != "Preempted" else "Warning",
            "reason": reason,
            "note": f"{reason} note",
            "regarding": {
                "kind": "TFJob",
                "name": "elastic",
                "namespace": "default",
                "uid": regarding_uid,
            },
            "reportingController": "dragonet.io/recorder",
            "action": reason,
        }

    # The dump's own Events of elastic (the recorder's, next test) give way to these,
    # whose order and counts this test sets.
    server.items[:] = [
        o
        for o in server.items
        if not (o["kind"] == "Event" and o["regarding"]["name"] == "elastic")
    ]
    server.items += [
        event("elastic.2", "Shrunk", "2026-01-01T00:03:50.000000Z", uid),
        event("elastic.1", "Preempted", "2026-01-01T00:01:00.000000Z", uid, count=2),
        event(
            "elastic.0", "Admitted", "2025-12-31T00:00:00.000000Z", "an-earlier-job-of-that-name"
        ),
    ]
    _, out, _ = run(capsys, "explain", "elastic")
    events = out.split("Events:\n", 1)[1].splitlines()
    assert [e.split()[:4] for e in events] == [
        ["TYPE", "REASON", "AGE", "COUNT"],
        ["Warning", "Preempted", "6m30s", "2"],
        ["Normal", "Shrunk", "3m40s", "1"],
    ]
    assert any(
        c.startswith("/apis/events.k8s.io/v1/namespaces/default/events") for c in server.calls
    )


def test_explain_without_permission_to_read_events_still_explains_and_says_so(
    server, capsys
) -> None:
    server.forbidden = {"events"}
    code, out, err = run(capsys, "explain", "big")
    assert code == 0 and err == ""
    assert "Why:" in out
    last = out.rstrip().splitlines()[-1]  # on the Events line itself, not after "<none>"
    assert last.startswith("Events:     (its Events could not be read: no permission:")


# --- nodes -------------------------------------------------------------------------------------


def test_nodes_shows_what_each_node_holds_and_has_free(server, capsys, state) -> None:
    code, out, err = run(capsys, "nodes", "-o", "json")
    assert code == 0 and err == ""
    rows = {r["metadata"]["name"]: r for r in _items(out, "NodeUsage")}
    assert set(rows) == {"gpu-1", "gpu-2"}
    # Independently of the command: what the dump's bound, unfinished pods request.
    for name, row in rows.items():
        pods = [
            p
            for p in state["items"]
            if p["kind"] == "Pod"
            and p["spec"].get("nodeName") == name
            and p["status"].get("phase") not in ("Succeeded", "Failed")
        ]
        gpus = Resources.total(pod_request(p["spec"]) for p in pods)["nvidia.com/gpu"] // 1000
        assert row["requested"]["nvidia.com/gpu"] == str(gpus)
        assert int(row["free"]["nvidia.com/gpu"]) == 4 - gpus
        assert sum(row["jobs"].values()) == row["pods"] == len(pods)
        assert row["pools"] == ["default"]
    held = {job for r in rows.values() for job in r["jobs"]}
    assert held == {"default/elastic", "default/high", "default/waiter"}
    code, out, _ = run(capsys, "nodes", "default")
    table = _table(out)
    assert [r["NAME"] for r in table] == ["gpu-1", "gpu-2"]
    assert all(r["FREE GPU"].endswith("/4") for r in table)


# --- errors: one line, exit 1 ------------------------------------------------------------------


def _one_line_error(code: int, out: str, err: str, prefix: str) -> str:
    assert code == 1 and out == ""
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(prefix), err
    return err.strip()


def test_explain_all_namespaces_finds_the_job_wherever_it_is(server, capsys, state) -> None:
    """`explain -A NAME`: the job in whichever namespace holds it; in none, or in several,
    one line (the second names the namespaces and asks for -n)."""
    server.items = _moved(state, "big", "team-a")
    code, out, err = run(capsys, "explain", "big")
    said = _one_line_error(code, out, err, "dragonet explain: ")
    assert said.endswith("no TFJob, MXJob or PyTorchJob 'big' in namespace default")
    for argv in (["-A"], ["--all-namespaces"], ["-A", "-n", "default"]):
        code, out, err = run(capsys, "explain", "big", *argv)
        assert code == 0 and err == "", argv
        assert out.splitlines()[0] == (
            "TFJob team-a/big in TrainingPool default: Queued (WaitingForCapacity), position 1 "
            "of 2 in the queue, waited 50s"
        )
        assert "Admission:  tfjob-big: Queued, 0 workers" in out
    code, out, err = run(capsys, "explain", "tfjob/low", "-A", "-o", "json")
    assert code == 0 and json.loads(out)["position"] == 2
    code, out, err = run(capsys, "explain", "nope", "-A")
    said = _one_line_error(code, out, err, "dragonet explain: ")
    assert said.endswith("no TFJob, MXJob or PyTorchJob 'nope' in any namespace")
    [other] = [
        o
        for o in _moved(state, "big", "team-b")
        if (o["kind"], o["metadata"]["name"]) == ("TFJob", "big")
    ]
    server.items.append(other)  # a second TFJob big, in team-b
    code, out, err = run(capsys, "explain", "big", "-A")
    said = _one_line_error(code, out, err, "dragonet explain: ")
    assert said.endswith(
        "a TFJob, MXJob or PyTorchJob 'big' is in several namespaces (team-a, team-b): "
        "give one with -n"
    )


def test_no_such_job_is_one_line(server, capsys) -> None:
    code, out, err = run(capsys, "explain", "nope")
    said = _one_line_error(code, out, err, "dragonet explain: ")
    assert said.endswith("no TFJob, MXJob or PyTorchJob 'nope' in namespace default")
    code, out, err = run(capsys, "explain", "pod/nope")
    assert "not a TFJob, MXJob or PyTorchJob" in _one_line_error(
        code, out, err, "dragonet explain: "
    )


def test_no_such_pool_and_no_dragonet_are_one_line(server, capsys) -> None:
    code, out, err = run(capsys, "queue", "gpu")
    assert "no TrainingPool 'gpu'" in _one_line_error(code, out, err, "dragonet queue: ")
    server.missing = {"trainingpools"}
    code, out, err = run(capsys, "status")
    assert "Dragonet is not installed here" in _one_line_error(code, out, err, "dragonet status: ")


def test_no_permission_is_one_line(server, capsys) -> None:
    server.forbidden = {"trainingpools"}
    code, out, err = run(capsys, "status")
    said = _one_line_error(code, out, err, "dragonet status: no permission: ")
    assert 'cannot list resource "trainingpools"' in said
    server.forbidden = {"pods"}
    code, out, err = run(capsys, "nodes")
    assert "pods is forbidden" in _one_line_error(code, out, err, "dragonet nodes: ")


def test_no_cluster_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    config = tmp_path / "kubeconfig"
    # Nothing listens on port 1: the connection is refused at once.
    config.write_text(KUBECONFIG.replace("https://api.example:6443", "https://127.0.0.1:1"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code, out, err = run(capsys, "status", "--kubeconfig", str(config), "--request-timeout", "2")
    assert "no cluster at https://127.0.0.1:1" in _one_line_error(code, out, err, "dragonet status")
    code, out, err = run(capsys, "queue", "--kubeconfig", str(tmp_path / "absent"))
    assert "no kubeconfig at" in _one_line_error(code, out, err, "dragonet queue: no cluster")


def test_context_chooses_the_cluster_and_namespace(server, capsys, tmp_path: Path) -> None:
    config = tmp_path / "two-contexts"
    two = yaml.safe_load(KUBECONFIG)
    two["contexts"].append(
        {"name": "team", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}}
    )
    config.write_text(yaml.safe_dump(two))
    code, out, err = run(capsys, "explain", "big", "--kubeconfig", str(config), "--context", "team")
    assert "in namespace team-a" in _one_line_error(code, out, err, "dragonet explain: ")
    code, out, err = run(capsys, "explain", "big", "--kubeconfig", str(config), "--context", "nope")
    assert "nope" in _one_line_error(code, out, err, "dragonet explain: no cluster")
    code, out, _ = run(capsys, "explain", "big", "--kubeconfig", str(config), "-n", "default")
    assert code == 0


# --- the plugin itself -------------------------------------------------------------------------


def test_the_plugin_is_installed_and_its_help_loads_no_client() -> None:
    script = Path(sys.executable).parent / "kubectl-dragonet"
    assert script.exists(), "pip install -e . installs kubectl-dragonet"
    shown = subprocess.run(
        [str(script), "queue", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert shown.startswith("usage: kubectl dragonet queue")
    probe = (
        "import sys; from cli.main import main\n"
        "try:\n    main(['explain', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('kubernetes' in sys.modules)"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.splitlines()[-1]
    assert loaded == "False"


def test_the_viewer_role_grants_every_read_the_commands_make(server, capsys) -> None:
    """examples/rbac/kubectl-dragonet-viewer.yaml, checked against the requests made."""
    role = yaml.safe_load((ROOT / "examples/rbac/kubectl-dragonet-viewer.yaml").read_text())
    validate_k8s(role)
    for argv in (["status"], ["queue", "-o", "wide"], ["explain", "elastic"], ["nodes"]):
        assert run(capsys, *argv)[0] == 0
    needed = set()
    for path in server.calls:
        segs = path.strip("/").split("/")
        group = "" if segs[0] == "api" else segs[1]
        rest = segs[2:] if segs[0] == "api" else segs[3:]
        if rest[:1] == ["namespaces"]:
            rest = rest[2:]
        needed.add((group, rest[0], "get" if len(rest) > 1 else "list"))
    assert needed <= granted(role), needed - granted(role)
    assert {v for _, _, v in granted(role)} == {"get", "list"}  # read-only


def test_explain_finds_an_mxjob_that_no_sync_has_seen_yet(server, capsys) -> None:
    mxjob = yaml.safe_load((ROOT / "examples/mxjobs/linear.yaml").read_text())
    name = mxjob["metadata"]["name"]
    mxjob["metadata"].update(
        namespace="default", uid="uid-mx", creationTimestamp="2026-01-01T00:07:00Z"
    )
    server.items.append(mxjob)
    code, out, _ = run(capsys, "explain", name)  # not a TFJob: the MXJob of that name
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"MXJob default/{name} in TrainingPool default: Queued (WaitingForPool)"
    assert "Would run:  its pool's sync: check that Metacontroller runs" in out
    assert "Admission:  none yet" in out
    code, out, _ = run(capsys, "explain", f"mxjob/{name}", "-o", "json")
    needs = json.loads(out)["needs"]
    assert needs.endswith("at once, for its 1 scheduler and 1 server plus 2 workers")


# --- dragonet view --live: the web view of the pool, read as the commands read it -------------


def _stories(page: Path) -> dict[str, str]:
    import re

    found = re.search(r'id="stories">(.*?)</script>', page.read_text(), re.S)
    assert found is not None
    return json.loads(found.group(1).replace("<\\/", "</"))


def test_view_live_draws_the_pool_page_the_dump_draws(
    server, capsys, state, tmp_path: Path
) -> None:
    live = tmp_path / "live.html"
    code, out, err = run(capsys, "view", "--live", "--html", str(live))
    assert code == 0 and out == ""
    assert err.strip().endswith("5 jobs on 2 nodes") and f"wrote {live}" in err
    assert set(server.calls) == {  # one list of each kind the page shows
        "/api/v1/nodes",
        "/api/v1/pods",
        "/apis/dragonet.io/v1alpha1/trainingpools",
        "/apis/kubeflow.org/v1/tfjobs",
        "/apis/kubeflow.org/v1/mxjobs",
        "/apis/kubeflow.org/v1/pytorchjobs",
        "/apis/dragonet.io/v1alpha1/admissions",
    }
    dumped = tmp_path / "state.json"
    dumped.write_text(json.dumps(state))
    assert run(capsys, "view", str(dumped), "--html", str(tmp_path / "dump.html"))[0] == 0

    def steady(stories: dict[str, str]) -> dict[str, list[str]]:
        # "now" is the read's moment live and the dump's latest timestamp from a file.
        return {
            k: [s for s in v.splitlines() if not s.startswith("as of")] for k, v in stories.items()
        }

    stories = _stories(live)
    assert steady(stories) == steady(_stories(tmp_path / "dump.html"))
    assert set(stories) == {
        f"TFJob/default/{n}" for n in ("low", "elastic", "high", "waiter", "big")
    }
    big = stories["TFJob/default/big"]
    assert "pool      default: Queued" in big and f"as of     {NOW:%Y-%m-%dT%H:%M:%SZ}" in big
    page = live.read_text()
    assert "the moment they were read" in page and "https://api.example:6443" in page


def test_view_live_reads_one_namespace_with_n_and_only_what_the_viewer_role_grants(
    server, capsys, state, tmp_path: Path
) -> None:
    code, _, err = run(capsys, "view", "--live", "-n", "team-a", "--html", str(tmp_path / "a.html"))
    assert code == 0 and err.strip().endswith("0 jobs on 2 nodes")
    assert "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs" in server.calls
    assert "/api/v1/nodes" in server.calls  # nodes and pools are the cluster's
    role = yaml.safe_load((ROOT / "examples/rbac/kubectl-dragonet-viewer.yaml").read_text())
    needed = set()
    for path in server.calls:
        segs = path.strip("/").split("/")
        rest = segs[2:] if segs[0] == "api" else segs[3:]
        if rest[:1] == ["namespaces"]:
            rest = rest[2:]
        needed.add(("" if segs[0] == "api" else segs[1], rest[0], "list"))
    assert needed <= granted(role), needed - granted(role)
    # A CRD that is not installed (MXJobs here) is left out, as the dump leaves it out.
    server.missing = {"mxjobs"}
    assert run(capsys, "view", "--live", "--html", str(tmp_path / "b.html"))[0] == 0


def test_view_live_without_a_cluster_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG.replace("https://api.example:6443", "https://127.0.0.1:1"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    out = tmp_path / "pool.html"
    argv = ["view", "--live", "--kubeconfig", str(config), "--request-timeout", "2"]
    code, said, err = run(capsys, *argv, "--html", str(out))
    assert "no cluster at https://127.0.0.1:1" in _one_line_error(code, said, err, "dragonet view")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    code, said, err = run(capsys, "view", "--live", "--html", str(out))
    assert "no kubeconfig at" in _one_line_error(code, said, err, "dragonet view: no cluster")
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([], "give a dump"),
        (["state.json", "--live"], "not both"),
        (["state.json", "--context", "x"], "--context: only with --live"),
        (["--live", "-n", "a", "-A"], "-n and -A"),
    ],
)
def test_view_refuses_flags_that_do_not_go_together(
    argv: list[str], said: str, capsys, tmp_path: Path
) -> None:
    code, out, err = run(capsys, "view", *argv, "--html", str(tmp_path / "p.html"))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("dragonet view: ") and said in err


@pytest.mark.parametrize(
    ("given", "seconds"),
    [("10", 10.0), ("5s", 5.0), ("1m30s", 90.0), ("250ms", 0.25), ("1.5h", 5400.0), ("0", None)],
)
def test_request_timeout_is_read_as_kubectl_reads_it(given: str, seconds: float | None) -> None:
    from live.commands import request_timeout

    assert request_timeout(given) == seconds


@pytest.mark.parametrize("given", ["-1", "5x", "1.5", "s", ""])
def test_a_request_timeout_kubectl_refuses_is_refused_before_any_request(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["status", "--request-timeout", given])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"invalid timeout value {given!r}" in err and "no cluster" not in err


def test_a_duration_timeout_reaches_the_cluster(server, capsys) -> None:
    code, out, err = run(capsys, "status", "--request-timeout", "5s")
    assert code == 0, err
    assert "default" in out


def test_kubeconfig_lists_skip_missing_files_as_kubectl_does(
    server, capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    real = os.environ["KUBECONFIG"]
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "missing"), real]))
    code, out, err = run(capsys, "status")
    assert code == 0, err
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    code, out, err = run(capsys, "status")
    assert "no kubeconfig at" in _one_line_error(code, out, err, "dragonet status: no cluster")


def test_a_file_that_is_no_kubeconfig_is_said_in_our_words(server, capsys, tmp_path: Path) -> None:
    not_config = tmp_path / "notes.yaml"
    not_config.write_text("just a line of text\n")
    code, out, err = run(capsys, "status", "--kubeconfig", str(not_config))
    said = _one_line_error(code, out, err, "dragonet status: no cluster: ")
    assert f"{not_config}: not a kubeconfig" in said


def test_the_plugin_lists_only_its_own_verbs_and_a_version() -> None:
    """As kubectl's plugin, `serve`, `simulate`, `render` and `convert` are no kubectl verbs."""
    script = Path(sys.executable).parent / "kubectl-dragonet"
    shown = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, check=True
    ).stdout
    for verb in ("status", "queue", "explain", "nodes", "view", "version"):
        assert f"    {verb} " in shown
    for verb in ("serve", "simulate", "render", "convert"):
        assert f"    {verb} " not in shown
    refused = subprocess.run([str(script), "serve"], capture_output=True, text=True)
    assert refused.returncode == 2 and "invalid choice: 'serve'" in refused.stderr
    version = subprocess.run(
        [str(script), "version"], capture_output=True, text=True, check=True
    ).stdout
    assert version.startswith("kubectl dragonet ")


@pytest.mark.parametrize("command", ["status", "nodes"])
def test_cluster_scoped_views_take_no_namespace(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for flag in ("-n", "-A"):
        with pytest.raises(SystemExit) as exit_:
            main([command, flag, *(["team-a"] if flag == "-n" else [])])
        assert exit_.value.code == 2
        assert f"unrecognized arguments: {flag}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "given",
    ["tfjob/low", "tfjobs/low", "TFJob/low", "tfjobs.kubeflow.org/low", "tfjob.kubeflow.org/low"],
)
def test_explain_takes_a_job_as_kubectl_names_it(server, capsys, given: str) -> None:
    code, out, err = run(capsys, "explain", given, "-o", "json")
    assert code == 0, err
    assert json.loads(out)["metadata"] == {"name": "low", "namespace": "default"}


def test_status_shows_the_crds_default_policy_for_a_pool_that_names_none(server, capsys) -> None:
    from policy.model.pool import PoolSpec

    server.items = [  # copies: the dump is the module's
        {**o, "spec": {k: v for k, v in o["spec"].items() if k != "policy"}}
        if o["kind"] == "TrainingPool"
        else o
        for o in server.items
    ]
    code, out, err = run(capsys, "status", "-o", "json")
    assert code == 0, err
    assert {p["policy"] for p in _items(out, "PoolSummary")} == {PoolSpec().policy}


def test_explain_with_the_job_crds_missing_says_so(server, capsys) -> None:
    server.missing = {"tfjobs", "mxjobs", "pytorchjobs"}
    code, out, err = run(capsys, "explain", "big")
    said = _one_line_error(code, out, err, "dragonet explain: ")
    assert (
        "the API server has no TFJob, MXJob or PyTorchJobs" in said
        and "CRDs are not installed" in said
    )


def test_explain_with_events_forbidden_does_not_say_there_are_none(server, capsys) -> None:
    server.forbidden = {"events"}
    code, out, err = run(capsys, "explain", "low")
    assert code == 0, err
    (events,) = [line for line in out.splitlines() if line.startswith("Events:")]
    assert "<none>" not in out
    assert events.startswith("Events:     (its Events could not be read: no permission")


def test_a_live_view_of_a_cluster_without_dragonet_says_so(server, capsys, tmp_path: Path) -> None:
    server.missing = {"trainingpools"}
    page = tmp_path / "live.html"
    code, _, err = run(capsys, "view", "--live", "--html", str(page))
    assert code != 0 and not page.exists()
    assert "Dragonet is not installed here" in err and "0 jobs" not in err


# --- dragonet view --live --serve: a page that refreshes (in Chromium: test_view_live_browser) -


def test_view_serve_says_where_serves_a_page_that_reloads_and_ctrl_c_ends_it_with_0(
    server, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command in this process, serving until a real SIGINT."""
    import os
    import re
    import signal
    import threading
    import time
    import urllib.request

    fetched: list[tuple[int, bytes]] = []

    def visit_then_interrupt() -> None:
        for _ in range(200):
            said = re.search(r"at (http://127\.0\.0\.1:\d+/) ", capsys.readouterr().err)
            if said:
                for path in ("", "plotly.js"):
                    with urllib.request.urlopen(said.group(1) + path, timeout=10) as answer:
                        fetched.append((answer.status, answer.read()))
                break
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=visit_then_interrupt, daemon=True).start()
    code = main(["view", "--live", "--serve", "--port", "0", "--refresh", "3s"])
    assert code == 0
    (status, page), (_, script) = fetched
    assert status == 200 and b'<body data-refresh="3">' in page and b"5 jobs" in page
    assert b'<script src="plotly.js">' in page and len(script) > 1_000_000  # served once
    calls = [c for c in server.calls if c.endswith("/trainingpools")]
    assert len(calls) == 2  # installed(), then the one read the first page shows


def test_a_live_snapshot_says_how_to_get_a_page_that_refreshes(server, capsys, tmp_path) -> None:
    page = tmp_path / "snap.html"
    assert run(capsys, "view", "--live", "--html", str(page))[0] == 0
    text = page.read_text()
    assert "A snapshot: dragonet view --live --serve serves this page read again" in text
    assert "data-refresh" not in text.split("<script>", 1)[0] and "<body>" in text


def test_a_served_page_that_cannot_read_the_cluster_says_so_and_keeps_trying(capsys) -> None:
    from cli.view_server import LivePage
    from live.kube import LiveError

    state = {"t": 0.0, "up": False}

    def read() -> Any:
        if not state["up"]:
            raise LiveError("no cluster at https://api.example:6443: connection refused")
        return from_state(), "https://api.example:6443"

    page = LivePage(read, 10.0, clock=lambda: state["t"])
    status, body = page.current()
    assert status == 503 and b'http-equiv="refresh" content="10"' in body
    assert b"could not be read" in body and b"connection refused" in body
    assert capsys.readouterr().err.startswith("dragonet view: no cluster at")
    state.update(t=4.0, up=True)  # within half the interval: no new read
    assert page.current()[0] == 503 and page.reads == 1
    state.update(t=5.0)
    status, body = page.current()
    assert status == 200 and b"1 jobs" in body and page.reads == 2


def from_state() -> Any:
    from sim.view.pool import from_objects

    node = {"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4"}}}
    job = {
        "kind": "TFJob",
        "metadata": {"name": "a", "namespace": "default"},
        "spec": {},
        "status": {},
    }
    return from_objects([node, job], "test", now=NOW)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--live", "--serve", "--html", "p.html"], "--serve or --html: give one"),
        (["--live", "--refresh", "5s", "--html", "p.html"], "--refresh: only with --serve"),
        (["state.json", "--serve"], "--serve: only with --live"),
        (["--live"], "give --html FILE (a snapshot) or --serve"),
        (["--live", "--serve", "--port", "70000"], "--port 70000: not a port"),
    ],
)
def test_view_serve_flags_that_do_not_go_together_are_one_line(
    argv: list[str], said: str, capsys, tmp_path: Path
) -> None:
    code, out, err = run(capsys, "view", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("dragonet view: ") and said in err


def test_view_serve_on_a_port_that_is_taken_is_one_line(server, capsys) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        code, out, err = run(capsys, "view", "--live", "--serve", "--port", port)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"dragonet view: --address 127.0.0.1 --port {port}: ")
