"""The benchmarks still run (they print figures; no timing is asserted here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks import large_pool, sync_latency

FIXTURES = Path(__file__).parent / "fixtures" / "traces"


@pytest.mark.slow
def test_sync_latency_benchmark_runs(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["sync_latency", "--quick"])
    sync_latency.main()
    table, breakdown = capsys.readouterr().out.strip().split("\n\n")
    rows = table.splitlines()
    assert rows[0].split()[:3] == ["nodes", "jobs", "pods"]
    assert "cold/JSON" in rows[0] and "job p99" in rows[0]
    assert [r.split()[:2] for r in rows[1:]] == [["16", "40"], ["64", "200"]]
    assert [r.split()[:2] for r in breakdown.splitlines()[2:]] == [["16", "40"], ["64", "200"]]


def test_large_pool_benchmark_runs_and_the_answers_digest_alike(
    monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setattr(sys, "argv", ["large_pool", "--quick", "--nodes", "40", "--base", "12"])
    large_pool.main()
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0].split()[:4] == ["nodes", "jobs", "pods", "queued"]
    assert [r.split()[:2] for r in rows[1:]] == [["12", "18"], ["40", "59"]]
    assert all(int(r.split()[3]) > 0 for r in rows[1:])  # jobs wait in both pools
    assert large_pool.digest(b'{"a":1,"b":[2]}') == large_pool.digest(b'{"b":[2],"a":1}')


def test_walk_benchmark_follows_the_related_objects_into_the_snapshot() -> None:
    """Every kind of related object is followed from sync.py into its parser, and the walk
    that follows only them is part of the walk through all of observe(). (In a process of
    its own: ``sys.setprofile`` in a test process that other tests used first ran for
    minutes instead of seconds.)"""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.walk", "--show"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    out = done.stdout.splitlines()
    assert out[0].split()[:4] == ["walk", "stays", "modules", "returns"]
    related, whole = ([m.strip() for m in out[i].split(" > ")] for i in (2, 4))
    assert related[0] == "sync" and {"cluster", "jobs", "priority"} <= set(related)
    assert out[1].startswith("related objects") and out[3].startswith("all of observe()")
    assert int(out[1].split()[2]) < int(out[3].split()[3])  # fewer stays than all the code
    assert set(related) <= set(whole)
    assert any(line.startswith("parse_time call sites:") for line in out)


@pytest.mark.slow
def test_elastic_benchmark_compares_every_policy_and_checks_the_targets(
    monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from benchmarks import elastic

    monkeypatch.setattr(elastic, "PHILLY", FIXTURES / "philly-excerpt.csv")
    argv = ["elastic", "--traces", "philly", "--philly-start", "0", "--philly-jobs", "6"]
    monkeypatch.setattr(sys, "argv", [*argv, "--loads", "1", "--jobs-parallel", "1"])
    elastic.main()
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("Metric"))
    assert header.split()[1:] == [
        "dragonet",
        "dragon",
        "gang-fifo",
        "kube-default",
        "dragonet-las",
        "tiresias",
    ]
    (finished,) = [row for row in out.splitlines() if row.startswith("Jobs finished")]
    assert finished.count("6 / 6") == 6
    (lost,) = [row for row in out.splitlines() if row.startswith("GPU lost to preemption")]
    assert "GPU-h" in lost
    targets = out.split("Targets for dragonet:")[1]
    assert "below gang-fifo" in targets and "below dragon" in targets
    assert "below tiresias" in targets
    assert "lower bound" in targets


@pytest.mark.slow
def test_load_benchmark_runs_against_the_real_server_and_survives_a_killed_worker(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks import load

    load.main(["--quick"])
    out = capsys.readouterr().out
    assert "2 workers x 4 threads on 127.0.0.1" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("/")}
    assert int(rows["/pools/sync"][1]) > 0 and int(rows["/tfjobs/sync"][1]) > 0
    (killed,) = [line for line in out.splitlines() if line.startswith("killed worker")]
    assert "replaced by" in killed
    after = int(killed.split("; ")[-1].split()[0])
    assert after > 0, "requests kept being answered after the kill"
    assert "peak of the pod's total" in out
    assert out.count(" worker ") >= 3  # two workers, and the one that replaced the killed one


@pytest.mark.slow
def test_gang_benchmark_compares_every_backend_with_the_kube_scheduler(
    monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from benchmarks import gang

    monkeypatch.setattr(sys, "argv", ["gang", "--quick"])
    gang.main()
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0].split()[:2] == ["workload", "backend"]
    table = [r.split() for r in rows[1:]]
    assert [r[1] for r in table[:4]] == ["none", "kube-batch", "volcano", "coscheduling"]
    assert len(table) == 12  # three examples, four ways each
    for row in table:
        done, total = row[-3], row[-1]
        assert done == total, row  # every job finished under every backend


@pytest.mark.slow
def test_migration_benchmark_prints_every_system_side_by_side(capsys) -> None:
    from benchmarks import migration

    assert migration.main(["--scenarios", "a,c", "--no-trace", "--jobs-parallel", "1"]) == 0
    speed, planner = capsys.readouterr().out.strip().split("\n\n")
    header, *rows = speed.splitlines()
    assert header.split()[:5] == ["scenario", "dragon", "avg", "JCT", "dragon+mig"]
    assert [r.split()[0] for r in rows] == ["speed-a", "speed-c"]
    assert planner.splitlines()[1].split()[0] == "scattered"
    assert migration.main(["--scenarios", "z", "--no-trace"]) == 2


def test_migration_examples_run_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    """``--examples``: examples/migration through ``dragonet simulate --monitor``, a row per
    scenario with both policies' JCT, their ratio and their moves."""
    from benchmarks import migration

    assert migration.main(["--examples", "--scenarios", "c", "--jobs-parallel", "1"]) == 0
    header, _, row = capsys.readouterr().out.strip().splitlines()
    assert header.startswith("| scenario | DRAGON avg JCT | Dragonet avg JCT |")
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "speed-c" and cells[1] == cells[2]  # spread: nobody gains
    assert (cells[3], cells[4]) == ("1.00x", "0 / 0")


@pytest.mark.slow
def test_monitor_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import monitor

    monitor.main(["--quick"])
    out = capsys.readouterr().out
    rows = out.split("\n\n")[0].splitlines()
    assert rows[1].split()[:4] == ["N", "windowed", "us", "reference"]
    assert [r.split()[0] for r in rows[2:]] == ["100", "1000"]
    assert "KiB per tracked pod" in out and "reports/s through the app" in out


@pytest.mark.slow
def test_kubeshare_packing_benchmark_runs_and_shares_beat_whole_gpus(
    monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A short trace: every job finishes in all three runs, nothing is refused, and the
    shared GPUs finish the same work sooner than whole ones (the point of the benchmark)."""
    from benchmarks import kubeshare_packing

    monkeypatch.setattr(sys, "argv", ["kubeshare_packing", "--jobs", "12", "--gpus", "4"])
    kubeshare_packing.main()
    rows = capsys.readouterr().out.strip().splitlines()[2:]
    table = {r.split()[0]: r.split() for r in rows}
    assert set(table) == {"whole", "v1", "v2"}
    assert all(row[1] == "12" and row[-1] == "0" for row in table.values())
    assert float(table["v1"][3]) < float(table["whole"][3])  # p95 JCT
    assert float(table["v1"][4]) < float(table["whole"][4])  # makespan


@pytest.mark.slow
def test_two_tier_fuzz_runs_against_the_real_server_without_a_5xx(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks import two_tier_fuzz

    two_tier_fuzz.main(["--pools", "30"])
    out = capsys.readouterr().out
    assert "5xx" not in out
    (summary,) = [line for line in out.splitlines() if " requests (" in line]
    assert "pool 200: 30" in summary


@pytest.mark.slow
def test_memory_benchmark_runs_the_mixed_traffic_and_times_the_full_collection(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks import memory

    memory.main(["--quick", "--cap-mib", "2"])  # a cap the traffic fills (issue 36: bytes)
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.strip().endswith("ms")]
    assert len(rows) == 3 and all("RSS" in row and "memo" in row for row in rows)
    held = [float(row.split("entries")[1].split("MiB")[0]) for row in rows]
    assert all(0 < mib <= 2 * 3 / 4 for mib in held)  # the memos' share of the cap holds
    assert "answers: {200: 120}" in out
    memory.main(["--full-collection", "--quick"])
    out = capsys.readouterr().out
    assert "full collection" in out and "no cap" in out and "cold pool sync" in out


def test_a_metacontroller_setting_replaces_only_metacontroller_fields() -> None:
    """``--mc``: gang, elastic and migration run their own configs under one of mc_costs'
    settings; the benchmark's other fields (policy, view delay, migration) stay its own."""
    from benchmarks.mc_costs import RECOMMENDED, configured
    from sim.engine import SimConfig

    own = SimConfig(policy="dragon", view_delay_s=2.0, migration={"enabled": False})
    free = configured(own, "cost-free")
    assert free == own.cost_free()
    assert (free.policy, free.view_delay_s, free.migration) == ("dragon", 2.0, {"enabled": False})
    recommended = configured(own, "recommended")
    assert (recommended.mc_qps, recommended.mc_burst) == (RECOMMENDED.mc_qps, RECOMMENDED.mc_burst)
    assert recommended.mc_apply_strategy == "server-side-apply"
    assert configured(own, "defaults") == own
    with pytest.raises(SystemExit, match="unknown setting 'fast'"):
        configured(own, "fast")


def test_migration_benchmark_runs_under_the_setting_it_is_given() -> None:
    """Metacontroller's default client charges every write (5 requests a second), so the
    same speed scenario ends later than cost-free: the setting reaches the simulation."""
    from benchmarks import migration

    free = migration.run_speed("c", "dragon", "cost-free")["avg_jct_s"]
    charged = migration.run_speed("c", "dragon", "defaults")["avg_jct_s"]
    assert charged > free


@pytest.mark.slow
def test_pollux_compete_runs_each_policy_and_reports_ratios_to_the_published() -> None:
    """A smoke run on the first 8 jobs of workload-1: every policy runs with its reports, and
    each average is put beside Pollux's published figures of that workload and load."""
    from benchmarks import pollux_compete as pc

    fixture = Path(__file__).parent / "fixtures" / "traces" / "workload-1.csv"
    results = [pc.run(pc.Cell(p, 1, 1.0, fixture, jobs=8)) for p in ("default", "tiresias")]
    assert [r["finished"] for r in results] == [8, 8]
    assert {"cifar10", "ncf"} <= set(results[0]["apps"])
    text = pc.report(results, markdown=True)
    default = next(line for line in text.splitlines() if "| default |" in line)
    assert "2,089 s" in default and f"{results[0]['avg'] / 2088.77:.3f}" in default
    assert pc.pool_spec("default") == {} and pc.pool_spec("tiresias")["policy"] == "tiresias"


def test_scale_trace_counts_a_late_first_size_apart_from_the_pools_decisions() -> None:
    """Issue 25: on Metacontroller's defaults ``dragonet`` made more scale actions than
    cost-free with the very same decisions. One job (8 workers, min 4, max 16) alone on 16
    GPUs: the pool admits it and grows it to 16 before any pod exists, under both settings.
    Cost-free its 16 workers exist before it trains; at 5 writes a second it trains on its
    first ones while the rest are still being created, and the simulator counts those as
    scale actions: the trace says they are the size the pool decided before it trained."""
    from benchmarks import scale_trace
    from sim.engine import SimConfig
    from tests.simkit import gpu_nodes, job, scenario

    one = scenario(gpu_nodes(4), [job("big", 8, min_workers=4, max_workers=16, steps=200)])
    free = scale_trace.trace(one, SimConfig(policy="dragonet").cost_free())
    charged = scale_trace.trace(one, SimConfig(policy="dragonet"))
    for run in (free, charged):
        assert (run["decisions"], run["grew"], run["shrunk"], run["reversals"]) == (1, 1, 0, 0)
        assert run["pod_restarts"] == 0
        assert run["scale_actions"] == run["first size"] + run["decided adds"] + run["removals"]
    assert free["scale_actions"] == free["first size"] == 0
    assert charged["scale_actions"] == charged["first size"] > 0
