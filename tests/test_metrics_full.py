"""A full or unwritable metrics directory loses metrics, never a worker nor the master
(issue 36, cause 4).

On a real full filesystem: a tmpfs as small as the test needs, as the chart's metrics
directory is one, mounted in a mount namespace of its own (``unshare``: root, or a user
namespace), with each scenario of ``tests/fullmetrics.py`` run inside it. Before the fix
prometheus-client's sparse files died of SIGBUS there, the worker at its first new series
and the master as it compacted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from webhooks import metrics as m

ROOT = Path(__file__).resolve().parent.parent
MOUNTED = "mounted"


def _in_tmpfs(scenario: str, tmp_path: Path, options: str) -> dict[str, Any]:
    """Run ``scenario`` of tests/fullmetrics.py on a tmpfs mounted with ``options`` (its
    size) at tmp_path/metrics;
    what it printed. Fails if the process died (a signal, an exception)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare(1) (util-linux) to mount a small tmpfs")
    where = tmp_path / "metrics"
    where.mkdir()
    script = (
        f'mount -t tmpfs -o {options} tmpfs "$1" && echo {MOUNTED} && '
        f'exec "$2" -m tests.fullmetrics "$3" "$1"'
    )
    command = [unshare, "--user", "--map-root-user", "--mount"]
    if os.geteuid() == 0:
        command = [unshare, "--mount"]
    run = subprocess.run(
        [*command, "sh", "-c", script, "sh", str(where), sys.executable, scenario],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=240,
    )
    lines = run.stdout.splitlines()
    if MOUNTED not in lines:
        pytest.skip(f"cannot mount a tmpfs in a namespace here: {run.stderr.strip()[-300:]}")
    code = run.returncode
    signalled = -code if code < 0 else code - 128 if code > 128 else 0
    died = f"signal {signal.Signals(signalled).name}" if signalled else f"exit {code}"
    assert code == 0, f"{scenario} died ({died}): {run.stderr[-3000:]}"
    return json.loads(lines[-1])


def test_a_worker_on_a_full_directory_answers_on_and_logs_its_metrics_lost_once(
    tmp_path: Path,
) -> None:
    seen = _in_tmpfs("worker", tmp_path, "size=512k")
    assert seen["alive"]
    assert "No space left on device" in seen["lost"]


def test_the_master_compacting_on_a_full_directory_lives_and_keeps_the_workers_counts(
    tmp_path: Path,
) -> None:
    seen = _in_tmpfs("compact", tmp_path, "size=1m")
    assert seen["alive"]
    assert seen["left"], "the exited worker's files stay when they cannot be folded"
    assert seen["counted"] == 30  # and every series in them is still counted


def test_the_real_server_answers_every_sync_with_its_metrics_directory_full(
    tmp_path: Path,
) -> None:
    """``dragonet serve``: 80 syncs under new pool names with the directory full, a worker
    stopped meanwhile (the master compacts on the full directory): every sync answered
    200, no worker died, the master lives, ``/metrics`` still answers."""
    seen = _in_tmpfs("serve", tmp_path, "size=1m")
    assert seen["codes"] == [200] * 80
    assert seen["died_before_stop"] == []
    assert seen["master_exit"] is None
    assert seen["scrape"] == 200
    assert seen["lost_logged"] >= 1


def test_a_read_only_directory_loses_metrics_and_the_worker_answers_on(tmp_path: Path) -> None:
    """A directory the process cannot write (here a read-only mount): the metrics are
    lost from the first one (``dragonet_build_info``, as the app is made), and nothing
    half-made is left for a scrape to trip on."""
    seen = _in_tmpfs("worker", tmp_path, "size=512k,ro")
    assert seen["alive"]
    assert "Read-only file system" in seen["lost"]


def test_a_metrics_directory_that_cannot_be_made_does_not_stop_the_server_starting(
    tmp_path: Path,
) -> None:
    (tmp_path / "a-file").write_text("")
    m.prepare(str(tmp_path / "a-file" / "metrics"))  # not a directory: cannot be made
