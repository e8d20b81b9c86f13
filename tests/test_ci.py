"""CI runs every test: `.ci/run` calls the README's `make test` (the tests not marked slow)
and then `make test-slow` (the ones marked slow), so a test marked slow leaves `make test`
but never CI."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _recipe(makefile: str, target: str) -> str:
    """The recipe lines of ``target``, with the Makefile's variables expanded once."""
    variables = dict(re.findall(r"^([A-Z_]+)\s*:?=\s*(.*)$", makefile, re.M))
    block = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)*)", makefile, re.M)
    assert block, f"no target {target} in the Makefile"
    return re.sub(r"\$\(([A-Z_]+)\)", lambda m: variables.get(m[1], m[0]), block[1])


def test_ci_runs_make_test_then_the_slow_tests() -> None:
    steps = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.startswith("make ")
    ]
    assert steps == ["make test", "make test-slow"]
    assert "make test " in (ROOT / "README.md").read_text()  # the README's command


def test_make_test_and_make_test_slow_split_the_tests_by_the_slow_mark() -> None:
    makefile = (ROOT / "Makefile").read_text()
    fast, slow = _recipe(makefile, "test"), _recipe(makefile, "test-slow")
    assert "pytest" in fast and '-m "not slow"' in fast
    assert "pytest" in slow and "-m slow" in slow
    for recipe in (fast, slow):  # on every core, a module's fixtures made once
        assert "-n auto" in recipe and "--dist loadfile" in recipe
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^\s*"slow: ', pyproject, re.M), "the slow mark is registered"
    assert "--strict-markers" in pyproject  # a misspelt mark is an error, not a new mark
