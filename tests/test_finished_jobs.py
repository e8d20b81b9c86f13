"""A job that finished is shown finished (issue 38): its Admission is gone with it, so the
web view and `kubectl dragonet explain` read its end from the job's own status instead of
drawing it waiting for its whole life."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from sim.apiserver import EPOCH
from sim.dump import StateDump
from sim.engine import SimConfig, Simulation
from tests.dumpserver import serve_dump
from tests.simkit import gpu_nodes, job, scenario
from tests.test_view import _stories

AT = 900.0


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    """``quick`` trains 100 steps and is done well before the dump (no one deletes it);
    ``long`` still trains."""
    story = scenario(gpu_nodes(1), [job("quick", 1, steps=100), job("long", 1, steps=1e6)])
    config = SimConfig(policy="dragonet", max_time_s=AT + 60, delete_finished_after_s=None)
    sim = Simulation(story, config)
    dump = StateDump(sim.api, lambda: sim.now, AT)
    sim.run()
    taken, when = dump.result()
    assert when == AT
    quick = next(o for o in taken["items"] if o["metadata"].get("name") == "quick")
    conditions = {c["type"]: c["status"] for c in quick["status"]["conditions"]}
    assert conditions.get("Succeeded") == "True"
    return taken


def test_the_view_draws_a_finished_job_trained_and_says_it_finished(
    state: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "state.json"
    dump.write_text(json.dumps(state))
    page = tmp_path / "pool.html"
    assert main(["view", str(dump), "--html", str(page)]) == 0
    capsys.readouterr()
    quick = _stories(page.read_text())["TFJob/default/quick"]
    assert "no Admission yet" not in quick
    assert "pool      finished: Succeeded at " in quick

    from sim.view.pool import load, row

    loaded = load(dump)
    (quick_state,) = [j for j in loaded.jobs if j.name == "quick"]
    now = EPOCH + timedelta(seconds=AT)
    spans = row(quick_state, EPOCH, now).spans
    assert spans[-1].state == "training"
    assert spans[-1].end_s < AT  # it ended when it finished, not at the dump's time


def test_explain_says_a_finished_job_finished(
    state: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    serve_dump(state, tmp_path, monkeypatch, EPOCH + timedelta(seconds=AT))
    code = main(["explain", "quick"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Finished:   Succeeded at " in out
    assert "Admission:  none (an Admission goes when its job finishes)" in out
    assert "none yet" not in out
