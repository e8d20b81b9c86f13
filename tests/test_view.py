"""The web view's files and commands without a browser (issue 29): the page carries its
charting library and every job's story; bad inputs are refused in one line before work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from plotly.offline import get_plotlyjs

from cli.main import main

ROOT = Path(__file__).resolve().parent.parent
DUMP = ROOT / "tests" / "fixtures" / "view" / "elastic-pool.json"


def _stories(page: str) -> dict[str, str]:
    found = re.search(r'<script type="application/json" id="stories">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1).replace("<\\/", "</"))


def test_a_runs_page_is_one_file_with_plotly_inside_and_every_jobs_story(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    second = tmp_path / "job2.yaml"
    second.write_text((ROOT / "examples" / "job1.yaml").read_text().replace("job1", "job2"))
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - {name: only-1, cpu: 8, memory: 20Gi}\n")
    out = tmp_path / "run.html"
    argv = [str(ROOT / "examples" / "job1.yaml"), str(second), "--nodes", str(nodes)]
    # gang-fifo can never run job1 whole on this node: a warning, and the run goes on.
    argv += ["--steps", "1e6", "--horizon", "0.01", "--policy", "dragonet,gang-fifo"]
    assert main(["simulate", *argv, "--html", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    page = out.read_text()
    library = get_plotlyjs()
    assert page.count(library) == 1  # plotly.js is inlined, once
    ours = page.replace(library, "")
    assert "Plotly.newPlot" in ours and "src=" not in ours and "href=" not in ours
    stories = _stories(page)
    assert set(stories) == {
        f"{policy}|default/{job}"
        for policy in ("dragonet", "gang-fifo")
        for job in ("job1", "job2")
    }
    waiting = stories["dragonet|default/job2"]
    assert waiting.startswith("default/job2 (TFJob) under dragonet")
    assert "unfinished at 0:14:24: WaitingForCapacity" in waiting


def test_view_renders_a_dump_and_says_what_it_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pool.html"
    assert main(["view", str(DUMP), "--html", str(out)]) == 0
    assert "3 jobs on 2 nodes" in capsys.readouterr().err
    stories = _stories(out.read_text())
    assert set(stories) == {
        "TFJob/team-a/resnet-elastic",
        "TFJob/team-b/bert",
        "TFJob/team-b/cifar-elastic",
    }
    resnet = stories["TFJob/team-a/resnet-elastic"]
    assert "pool      default: Admitted" in resnet
    assert "scaled" in resnet and "4 -> 3" in resnet


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ('{"kind": "TFJob", "metadata": {"name": "x"}}', "kind: expected List"),
        ('{"kind": "List", "items": {}}', "items: expected a list"),
        ('{"kind": "List", "items": [{"metadata": {"name": "x"}}]}', "items[0].kind"),
        ('{"kind": "List", "items": [{"kind": "Node", "metadata": {}}]}', "items[0].metadata.name"),
        ('{"kind": "List", "items": [{"kind": "Secret", "metadata": {"name": "s"}}]}', "no Nodes"),
        ("kind: [unclosed", "neither JSON nor YAML"),
    ],
)
def test_view_refuses_a_file_that_is_not_a_list_of_objects_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, said: str
) -> None:
    dump = tmp_path / "state.json"
    dump.write_text(content)
    err = _refused(capsys, ["view", str(dump), "--html", str(tmp_path / "x.html")])
    assert str(dump) in err and said in err
    assert not (tmp_path / "x.html").exists()


def test_view_refuses_a_missing_dump_and_an_unwritable_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refused(
        capsys, ["view", str(tmp_path / "none.json"), "--html", str(tmp_path / "x.html")]
    )
    assert "none.json" in err and "No such file" in err
    err = _refused(capsys, ["view", str(DUMP), "--html", str(tmp_path / "no" / "x.html")])
    assert "--html" in err and "no such directory" in err
    err = _refused(capsys, ["view", str(DUMP), "--html", str(tmp_path / "x.png")])
    assert "only .html is supported" in err


@pytest.mark.parametrize(
    ("html", "said"), [("no-such-dir/run.html", "no such directory"), ("run.png", "only .html")]
)
def test_simulate_refuses_an_html_it_cannot_write_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], html: str, said: str
) -> None:
    argv = ["simulate", str(ROOT / "examples" / "elastic.yaml"), "--html", str(tmp_path / html)]
    err = _refused(capsys, argv)
    assert "--html" in err and said in err


def test_a_few_jobs_waiting_and_training_are_counted_in_whole_ticks() -> None:
    """Two jobs on one node: the counts' axes tick 0, 1, 2, never "0.2 jobs"."""
    from sim.engine import SimConfig, Simulation
    from sim.view.run import jobs_over_time
    from tests.simkit import gpu_nodes, job, scenario

    jobs = [job("a", 4, steps=2000), job("b", 4, arrival=10, steps=2000)]
    result = Simulation(scenario(gpu_nodes(1), jobs), SimConfig(policy="gang-fifo")).run()
    fig = jobs_over_time([result])
    assert max(max(t.y) for t in fig.data) >= 1
    assert (fig.layout.yaxis.dtick, fig.layout.yaxis2.dtick) == (1, 1)
