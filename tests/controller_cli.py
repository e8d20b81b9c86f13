"""The controllers' command lines (``python -m recorder``, ``python -m reaper``) run as
their own process, with no settings or kubeconfig from the machine running the tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_module(
    module: str, tmp_path: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m module args``, its environment only ``env`` and a bare PATH and HOME."""
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_exits_2_with_one_line(proc: subprocess.CompletedProcess[str], starting: str) -> None:
    """Exit status 2 and one line on stderr, beginning with ``starting``: no traceback."""
    assert proc.returncode == 2
    assert proc.stderr.startswith(starting)
    assert len(proc.stderr.splitlines()) == 1
