"""A regular (not editable) install of the wheel works wherever it runs.

The wheel is built from this checkout as `pip install .` would build it and installed into a
fresh venv; the commands then run from a folder that is not the checkout, so nothing can be
read from the source tree by accident. The venv borrows its dependencies from the test's own
environment (a `.pth` line) instead of downloading them again: what is under test is what the
wheel itself carries.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

# Slow: it builds the wheel and installs it in a fresh venv (once, the module's fixture).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
# What a user's shell would have: no PYTHONPATH into a checkout, no active venv.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ folder of a fresh venv holding only the built wheel."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    # Build from a copy, as pip does, so no build artefact is left in the checkout.
    shutil.copytree(
        ROOT,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", ".tools", "*.egg-info", "build", "__pycache__"
        ),
    )
    dist = base / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("dragonet-*.whl")
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=False)
    bin_dir = env_dir / "bin"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(bin_dir / "python"),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        env=CLEAN_ENV,
    )
    # Only now: pip must not see the checkout's own (editable) install as already there.
    purelib = next((env_dir / "lib").glob("python3*/site-packages"))
    (purelib / "borrowed.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return bin_dir


def _run(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "dragonet"), *args],
        cwd=cwd,
        env=CLEAN_ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_installed_package_is_imported_from_the_venv_not_the_checkout(
    installed: Path, tmp_path: Path
) -> None:
    where = subprocess.run(
        [str(installed / "python"), "-c", "import sim.engine; print(sim.engine.__file__)"],
        cwd=tmp_path,
        env=CLEAN_ENV,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(installed.parent) in where and str(ROOT) not in where


def test_simulate_runs_the_default_scenario_from_any_folder(
    installed: Path, tmp_path: Path
) -> None:
    done = _run(installed, tmp_path, "simulate", "--policy", "dragonet", "--json")
    assert done.returncode == 0, done.stderr
    assert '"dragonet"' in done.stdout and "gang-deadlock" in done.stdout


def test_render_and_serve_help_run_from_any_folder(installed: Path, tmp_path: Path) -> None:
    for name in ("job1.yaml", "nodes.yaml"):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    done = _run(installed, tmp_path, "render", "job1.yaml", "--nodes", "nodes.yaml")
    assert done.returncode == 0, done.stderr
    assert "kind: Pod" in done.stdout and "Admitted" in done.stderr
    done = _run(installed, tmp_path, "serve", "--help")
    assert done.returncode == 0 and "DRAGONET_" in done.stdout


def test_version_is_the_distributions(installed: Path, tmp_path: Path) -> None:
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    done = _run(installed, tmp_path, "--version")
    assert done.returncode == 0 and done.stdout.strip() == f"dragonet {declared}"
