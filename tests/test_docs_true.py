"""Claims the docs make that a reader acts on, checked against what they describe: the
README's Philly example is the benchmarks' slice, and the chart's default CPU request for
the webhook is the whole core `benchmarks/README.md` measured it needs, as its docs say."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from kubernetes.utils.quantity import parse_quantity

from tests.kube_schema import ROOT


def _philly_commands(text: str) -> list[str]:
    """Each `dragonet simulate` command (continuation lines joined) that replays Philly."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [
        line
        for line in joined.splitlines()
        if "dragonet simulate" in line and re.search(r"--trace \S*philly\.csv", line)
    ]


def test_the_readmes_philly_example_replays_the_benchmarks_slice() -> None:
    """The benchmarks replay Philly from row 72,500 (its sparse first rows give a 92 h
    average JCT); a reader who copies the README's command must get the same slice."""
    benchmarks = (ROOT / "benchmarks" / "README.md").read_text()
    starts = {int(s) for s in re.findall(r"philly\[(\d+):\d+\]", benchmarks)}
    assert len(starts) == 1, starts
    (start,) = starts
    commands = _philly_commands((ROOT / "README.md").read_text())
    commands += _philly_commands((ROOT / "docs" / "simulator.md").read_text())
    assert commands
    for command in commands:
        assert f"--start {start} " in command + " ", command


def test_the_webhook_requests_a_whole_core_and_the_chart_docs_say_so() -> None:
    values = yaml.safe_load((ROOT / "chart" / "values.yaml").read_text())
    cpu = values["resources"]["requests"]["cpu"]
    assert parse_quantity(cpu) >= 1
    assert "a whole core" in (ROOT / "chart" / "values.yaml").read_text()
    row = next(
        line
        for line in (ROOT / "chart" / "README.md").read_text().splitlines()
        if line.startswith("| `resources.requests.cpu` |")
    )
    assert f'`"{cpu}"`' in row and "a whole core" in row


def test_the_readmes_elastic_figures_are_what_the_simulator_gives(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`dragonet simulate examples/elastic.yaml`: the average JCTs the README quotes."""
    from cli.main import main
    from sim.report import format_duration

    said = re.search(
        r"average JCT (\S+ \S+) under\s+`dragonet`, (\S+ \S+) `dragon`, (\S+ \S+) `gang-fifo`",
        (ROOT / "README.md").read_text(),
    )
    assert said is not None
    example = str(ROOT / "examples" / "elastic.yaml")
    for policy, quoted in zip(("dragonet", "dragon", "gang-fifo"), said.groups(), strict=True):
        assert main(["simulate", example, "--policy", policy, "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert format_duration(summary["avg_jct_s"]) == quoted, policy
