"""``kubectl dragonet``'s output follows ``kubectl get``'s conventions (issue 39), against the
fake API server holding the simulated run of ``tests/test_live.py`` (``big`` waits first in
the queue, ``low`` second; ``high``, ``elastic`` and ``waiter`` hold the two nodes):
``-o json|yaml`` a ``List`` of typed objects with machine values, ``-o name``,
``--no-headers``, ``-l``, ``-w`` and its Ctrl-C, and one line for what is not understood.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

import live.printer
import live.views
from sim.dump import StateDump
from sim.engine import SimConfig, Simulation
from tests.dumpserver import DumpServer, serve_dump, served_over_http
from tests.test_live import AT, NOW, _items, _table, run, story


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    sim = Simulation(story(), SimConfig(policy="dragonet", max_time_s=AT + 600))
    dump = StateDump(sim.api, lambda: sim.now, AT)
    sim.run()
    return dump.result()[0]


@pytest.fixture
def server(state: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DumpServer:
    return serve_dump(copy.deepcopy(state), tmp_path, monkeypatch, NOW)


def _of(server: DumpServer, kind: str, name: str) -> dict[str, Any]:
    [found] = [o for o in server.items if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


# --- -o json|yaml: a List of typed objects, machine values ------------------------------------


def test_json_is_a_list_of_typed_objects_with_numbers_seconds_and_timestamps(
    server, capsys
) -> None:
    from policy.model.timeutil import parse_time

    code, out, err = run(capsys, "queue", "-o", "json")
    assert code == 0 and err == ""
    big, low = _items(out, "QueueEntry")
    assert big["metadata"] == {"name": "big", "namespace": "default"}
    assert big["regarding"] == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "name": "big",
        "namespace": "default",
    }
    # Numbers as numbers, the wait in seconds (not "50s"), the enqueue time in RFC 3339.
    assert (big["position"], big["priority"], big["waitedSeconds"]) == (1, 0, 50)
    assert (low["position"], low["priority"], low["waitedSeconds"]) == (2, -100, 450)
    assert parse_time(low["enqueued"]) == NOW - timedelta(seconds=450)
    # Every field for a script: the message -o wide shows is in the object too.
    assert big["message"].startswith("waiting: needs 18 cpu, 72Gi memory, 4 nvidia.com/gpu")
    code, again, _ = run(capsys, "queue", "-o", "yaml")
    assert yaml.safe_load(again) == json.loads(out)  # the same List, as YAML


def test_quantities_are_exact_in_json_and_rounded_only_in_the_table(server, capsys) -> None:
    """A node's ephemeral storage is 468125130866 bytes: the table rounds it as the pool
    writes it, -o json keeps every byte (it printed "436.0Gi")."""
    code, out, _ = run(capsys, "nodes", "-o", "json")
    nodes = {n["metadata"]["name"]: n for n in _items(out, "NodeUsage")}
    assert nodes["gpu-1"]["allocatable"]["ephemeral-storage"] == "468125130866"
    assert nodes["gpu-1"]["allocatable"]["memory"] == "256Gi"
    assert isinstance(nodes["gpu-1"]["pods"], int)
    code, out, _ = run(capsys, "status", "-o", "json")
    [pool] = _items(out, "PoolSummary")
    assert pool["capacity"]["memory"] == "512Gi"
    assert (pool["metadata"], pool["regarding"]["kind"]) == ({"name": "default"}, "TrainingPool")
    code, out, _ = run(capsys, "nodes", "-o", "wide")
    assert code == 0
    assert [r["FREE MEMORY"] for r in _table(out)] == [
        f"{256 - n}Gi/256Gi" for n in _node_memory_gib(nodes)
    ]


def _node_memory_gib(nodes: dict[str, Any]) -> list[int]:
    return [int(nodes[n]["requested"]["memory"].removesuffix("Gi")) for n in sorted(nodes)]


def test_one_object_asked_for_by_name_is_printed_alone_as_kubectl_does(server, capsys) -> None:
    code, out, _ = run(capsys, "status", "default", "-o", "json")
    pool = json.loads(out)
    assert (pool["kind"], pool["metadata"]["name"]) == ("PoolSummary", "default")
    code, out, _ = run(capsys, "explain", "low", "-o", "yaml")
    assert code == 0
    job = yaml.safe_load(out)
    assert (job["apiVersion"], job["kind"]) == ("view.dragonet.io/v1alpha1", "JobExplanation")
    assert (job["position"], job["queued"], job["waitedSeconds"]) == (2, 2, 450)
    assert "waited" not in job and all("age" not in e for e in job["events"])


# --- -o name, --no-headers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["status"], ["trainingpool.dragonet.io/default"]),
        (["queue"], ["tfjob.kubeflow.org/big", "tfjob.kubeflow.org/low"]),
        (["nodes"], ["node/gpu-1", "node/gpu-2"]),
        (["explain", "big"], ["tfjob.kubeflow.org/big"]),
    ],
)
def test_name_output_is_kind_group_slash_name_of_the_object_each_row_is_about(
    server, capsys, argv: list[str], names: list[str]
) -> None:
    code, out, err = run(capsys, *argv, "-o", "name")
    assert code == 0 and err == ""
    assert out.splitlines() == names


def test_no_headers_prints_only_the_rows(server, capsys) -> None:
    code, out, _ = run(capsys, "queue", "--no-headers")
    lines = out.splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["default", "1", "default/big"],
        ["default", "2", "default/low"],
    ]
    code, out, _ = run(capsys, "nodes", "--no-headers", "-o", "wide")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == ["gpu-1", "gpu-2"]


def test_an_empty_table_says_so_on_stderr_and_prints_nothing(server, capsys) -> None:
    code, out, err = run(capsys, "queue", "-n", "team-a", "--no-headers")
    assert code == 0 and out == "" and err == "No jobs wait in namespace team-a.\n"
    code, out, err = run(capsys, "queue", "-n", "team-a", "-o", "json")
    assert _items(out, "QueueEntry") == [] and err == ""


# --- -l/--selector -----------------------------------------------------------------------------


def test_a_label_selector_picks_nodes_as_the_api_server_reads_it(server, capsys) -> None:
    _of(server, "Node", "gpu-1")["metadata"]["labels"]["rack"] = "a"
    _of(server, "Node", "gpu-2")["metadata"]["labels"]["rack"] = "b"
    for selector, shown in [
        ("rack=a", ["gpu-1"]),
        ("rack in (a,b)", ["gpu-1", "gpu-2"]),
        ("rack notin (a)", ["gpu-2"]),
        ("rack!=a,kubernetes.io/os=linux", ["gpu-2"]),
        ("!rack", []),
    ]:
        code, out, err = run(capsys, "nodes", "-l", selector, "-o", "name")
        assert code == 0, err
        assert out.splitlines() == [f"node/{n}" for n in shown], selector
    assert any("labelSelector" not in c for c in server.calls)  # the path; the query holds it


def test_a_label_selector_picks_jobs_of_the_queue_keeping_the_pools_positions(
    server, capsys
) -> None:
    _of(server, "TFJob", "low")["metadata"]["labels"] = {"team": "batch"}
    code, out, err = run(capsys, "queue", "-l", "team=batch")
    assert code == 0, err
    assert [(r["POSITION"], r["JOB"]) for r in _table(out)] == [("2", "default/low")]
    code, out, err = run(capsys, "queue", "--selector", "team=research")
    assert (code, out, err) == (0, "", "No jobs wait.\n")


def test_a_selector_the_api_server_cannot_parse_is_its_one_line(server, capsys) -> None:
    code, out, err = run(capsys, "nodes", "-l", "rack in a")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("dragonet nodes: the API server answered 400: unable to parse")


def test_a_pool_name_with_a_selector_is_refused_in_kubectls_words(server, capsys) -> None:
    code, out, err = run(capsys, "status", "default", "-l", "team=a")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "name cannot be provided when a selector is specified" in err
    assert server.calls == []


# --- what is not understood: one line ----------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["queue", "-o", "table"], "unable to match a printer suitable for the output format"),
        (["queue", "-o", "jsonpath={.items[*].metadata.name}"], "pipe -o json into jq"),
        (["nodes", "-o", "custom-columns=NAME:.metadata.name"], "custom-columns is kubectl's"),
        (["explain", "big", "-o", "wide"], "allowed formats are: json, yaml, name"),
        (["explain", "big", "-w"], "unrecognized arguments: -w"),
        (["explain", "big", "-l", "a=b"], "unrecognized arguments: -l"),
        (["queue", "--watch-interval", "0"], "invalid interval '0'"),
    ],
)
def test_what_is_not_understood_is_one_clear_line(capsys, argv: list[str], said: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        run(capsys, *argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert err.splitlines()[-1].startswith("dragonet")


def test_watch_events_without_a_watch_is_refused_in_kubectls_words(server, capsys) -> None:
    code, out, err = run(capsys, "status", "--output-watch-events")
    assert (code, out) == (2, "")
    assert err == (
        "dragonet status: --output-watch-events option can only be used with --watch or "
        "--watch-only\n"
    )


# --- -w/--watch ----------------------------------------------------------------------------------


class Ticks:
    """Replaces the watch's sleep: each tick moves the clock and runs the next change to
    the cluster; after the last one, Ctrl-C (a real SIGINT to this process)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *changes: Any) -> None:
        self.changes = list(changes)
        self.slept: list[float] = []
        self.now = NOW
        monkeypatch.setattr(live.printer, "_sleep", self.sleep)
        monkeypatch.setattr(live.views, "utc_now", lambda: self.now)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += timedelta(seconds=seconds)
        if not self.changes:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the signal arrives before this ends
        self.changes.pop(0)()


def _admit_big(server: DumpServer) -> None:
    """big is admitted: it leaves the queue, and low moves up to position 1."""
    pool = _of(server, "TrainingPool", "default")
    pool["status"]["queue"] = [
        {**e, "position": 1} for e in pool["status"]["queue"] if e["job"] == "default/low"
    ]
    pool["status"]["queued"] = 1


def test_watch_reprints_rows_as_they_change_and_ctrl_c_ends_it_with_status_0(
    server, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks = Ticks(monkeypatch, lambda: None, lambda: _admit_big(server))
    code, out, err = run(capsys, "queue", "-w", "--watch-interval", "5s")
    assert code == 0 and err == ""
    rows = _table(out)
    # The table; nothing for the 5 s in which only the clock moved (WAITED is the reader's);
    # then low's new position, and big's last row as it leaves the queue.
    assert [(r["POSITION"], r["JOB"], r["WAITED"]) for r in rows] == [
        ("1", "default/big", "50s"),
        ("2", "default/low", "7m30s"),
        ("1", "default/low", "7m40s"),
        ("1", "default/big", "55s"),
    ]
    assert out.splitlines()[0].startswith("POOL ") and out.count("POOL") == 1
    assert ticks.slept == [5.0, 5.0, 5.0]


def test_watch_events_name_each_change_and_json_prints_each_object(
    server, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    Ticks(monkeypatch, lambda: _admit_big(server))
    code, out, _ = run(capsys, "queue", "-w", "--output-watch-events")
    assert code == 0
    assert [(r["EVENT"], r["POSITION"], r["JOB"]) for r in _table(out)] == [
        ("ADDED", "1", "default/big"),
        ("ADDED", "2", "default/low"),
        ("MODIFIED", "1", "default/low"),
        ("DELETED", "1", "default/big"),
    ]
    Ticks(monkeypatch, lambda: _of(server, "TrainingPool", "default")["status"].update(queued=9))
    code, out, _ = run(capsys, "status", "--watch-only", "-o", "json", "--output-watch-events")
    assert code == 0
    [event] = _documents(out)  # not the pool as it was: only its change
    assert event["type"] == "MODIFIED" and event["object"]["queued"] == 9
    assert event["object"]["kind"] == "PoolSummary"


def _documents(out: str) -> list[Any]:
    decoder, docs, at = json.JSONDecoder(), [], 0
    while at < len(out.rstrip()):
        doc, end = decoder.raw_decode(out, at)
        docs.append(doc)
        at = end + 1
    return docs


def test_ctrl_c_ends_a_real_watch_with_status_0_and_no_traceback(server, tmp_path: Path) -> None:
    """The installed plugin, reading a real HTTP server, stopped by SIGINT as a terminal
    sends it."""
    script = Path(sys.executable).parent / "kubectl-dragonet"
    with served_over_http(server, tmp_path) as config:
        watching = subprocess.Popen(
            [str(script), "queue", "-w", "--watch-interval", "200ms", "--kubeconfig", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert watching.stdout is not None
        header = watching.stdout.readline()
        rows = [watching.stdout.readline(), watching.stdout.readline()]
        time.sleep(0.5)  # at least one more read
        watching.send_signal(signal.SIGINT)
        rest, err = watching.communicate(timeout=20)
    assert watching.returncode == 0, err
    assert err == "" and rest == ""
    assert header.split()[:3] == ["POOL", "POSITION", "JOB"]
    assert [r.split()[2] for r in rows] == ["default/big", "default/low"]
    assert len([c for c in server.calls if c.endswith("/trainingpools")]) >= 2
