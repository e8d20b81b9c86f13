"""Errors in our words (issue 38): a file that is not UTF-8 is named, standard input is read
by render as by convert, and a kind written in the wrong case is named as such."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from cli.main import main

ROOT = Path(__file__).resolve().parent.parent
NODES = str(ROOT / "examples" / "nodes.yaml")
JOB = str(ROOT / "examples" / "job1.yaml")
LATIN1 = b"apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: caf\xe9}\n"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.mark.parametrize(
    "args",
    [
        ["render", "{bad}", "--nodes", NODES],
        ["simulate", "{bad}", "--nodes", NODES],
        ["convert", "{bad}"],
        ["render", JOB, "--nodes", "{bad}"],
        ["render", JOB, "--nodes", NODES, "--pool", "{bad}"],
        ["simulate", "--trace", "{bad}"],
    ],
    ids=["render", "simulate", "convert", "nodes", "pool", "trace"],
)
def test_a_file_that_is_not_utf8_is_named(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / ("trace.csv" if "--trace" in args else "latin1.yaml")
    bad.write_bytes(b"timestamp,duration\n\xe9\n" if "--trace" in args else LATIN1)
    code, out, err = _run(capsys, *[a.replace("{bad}", str(bad)) for a in args])
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert f"{bad}: not UTF-8 text (byte 0xe9 at offset" in line


def test_render_reads_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(Path(JOB).read_bytes()))
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, err = _run(capsys, "render", "-", "--nodes", NODES)
    assert code == 0, err
    assert "kind: Pod" in out and "default/job1: Admitted" in err


def test_a_kind_in_the_wrong_case_is_named_not_sent_to_convert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(Path(JOB).read_text().replace("kind: TFJob", "kind: TfJob"))
    code, _, err = _run(capsys, "render", str(job), "--nodes", NODES)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "kubeflow.org/v1 has no kind 'TfJob' (did you mean \"TFJob\"?" in line
    assert "dragonet convert" not in line


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("dragonet,dragonet", "--policy: dragonet given twice (each runs once)"),
        ("", "--policy: names no policy"),
        (",", "--policy: names no policy"),
        ("dragonet,", "--policy 'dragonet,': an empty name in the list"),
    ],
)
def test_a_policy_list_runs_each_named_policy_once(
    given: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "simulate", "--policy", given)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"dragonet simulate: {said}")


def test_render_under_kube_default_says_who_places_the_pods(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = _run(capsys, "render", JOB, "--nodes", NODES, "--policy", "kube-default")
    assert code == 0
    assert "# default/job1: Admitted - 5 pods, to be placed by their scheduler" in err
