"""The benchmarks still run (they print figures; no timing is asserted here)."""

from __future__ import annotations

import sys

import pytest

from benchmarks import sync_latency


def test_sync_latency_benchmark_runs(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["sync_latency", "--quick"])
    sync_latency.main()
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0].split()[:3] == ["nodes", "jobs", "pods"]
    assert [r.split()[:2] for r in rows[1:]] == [["1", "1"], ["16", "40"], ["64", "200"]]
