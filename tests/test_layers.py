"""The import graph has tiers that only go down, and no circle (docs/architecture.md, Layers).

Every module of the product is read with ``ast`` (nothing is imported), including imports
inside functions and under ``TYPE_CHECKING``: a lazy import is still an arrow. Run it alone
with ``.venv/bin/pytest -q tests/test_layers.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("policy", "webhooks", "reaper", "recorder", "monitor", "sim", "live", "cli")

# Bottom first. A module may import its own layer's group and any lower layer; groups that
# share a rank are siblings and never import each other.
LAYERS: tuple[tuple[int, str], ...] = (
    (0, "policy.memo"),  # the memo the shell owns and passes in; imports nothing of ours
    (1, "policy.model"),  # the facts both tiers read
    (2, "policy.pool"),  # tier 1: one planner per pool
    (2, "policy.job"),  # tier 2: one job, from its own Admission
    (3, "policy"),  # the package itself (its docstring)
    (4, "webhooks"),  # the HTTP shell
    (5, "reaper"),  # deletes finished jobs (uses the shell's API client)
    (5, "recorder"),  # writes each job's Events (the same)
    (5, "monitor"),  # the Container Monitor (the same)
    (6, "sim"),  # drives the real webhook, reaper and monitor
    (6, "live"),  # kubectl dragonet: reads a live cluster, explains with policy/
    (7, "cli"),  # the dragonet command: serves the shell, runs the simulator
)

# Known circles (the modules of each strongly connected part of the graph), each only until
# the change that breaks it lands; the test below fails once one is gone, so the exception
# goes with it. None now: issue 27's pool half broke the last one (ledger -> rules ->
# move_score -> grow -> ledger, for the one constant REMOTE, now policy/pool/locality.py).
EXPECTED_CYCLES: frozenset[frozenset[str]] = frozenset()


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imported(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every module of ours that ``module`` imports."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _ours(node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                # ``from policy.model import conditions`` imports the module itself.
                sub = f"{base}.{alias.name}"
                yield from _ours(node.lineno, sub if sub in MODULES else base)


def _ours(line: int, name: str) -> Iterator[tuple[int, str]]:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    if name and name.split(".")[0] in PACKAGES:
        yield line, name


def _layer(module: str) -> tuple[int, str]:
    """The rank and group of the most specific layer that holds the module."""
    best = max(
        (g for g in LAYERS if module == g[1] or module.startswith(g[1] + ".")),
        key=lambda g: len(g[1]),
    )
    return best


GRAPH: dict[str, set[str]] = {
    m: {t for _, t in _imported(m, p) if t != m} for m, p in sorted(MODULES.items())
}


def test_every_module_of_ours_has_a_layer() -> None:
    assert set(PACKAGES) <= set(MODULES), "a package moved: update PACKAGES and LAYERS"
    for module in MODULES:
        _layer(module)  # max() of nothing raises


def test_imports_only_go_down_or_stay_in_their_group() -> None:
    """An arrow up (the shell importing the simulator), or between siblings (the job tier
    importing the pool tier), names its file and line."""
    wrong = []
    for module, path in sorted(MODULES.items()):
        rank, group = _layer(module)
        for line, target in _imported(module, path):
            to_rank, to_group = _layer(target)
            if to_group != group and to_rank >= rank:
                where = f"{path.relative_to(ROOT)}:{line}"
                wrong.append(f"{where}: {module} ({group}) imports {target} ({to_group})")
    assert wrong == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_module_imports_itself_through_others() -> None:
    found = {frozenset(c) for c in _cycles(GRAPH)}
    unexpected = sorted(sorted(c) for c in found - EXPECTED_CYCLES)
    assert unexpected == [], "import circles (break each, or name it in EXPECTED_CYCLES)"


def test_an_expected_cycle_that_is_gone_is_taken_off_the_list() -> None:
    """So the exception cannot outlive the circle it excuses."""
    found = {frozenset(c) for c in _cycles(GRAPH)}
    assert sorted(sorted(c) for c in EXPECTED_CYCLES - found) == []


@pytest.mark.parametrize(
    ("graph", "cycles"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set(), "c": {"b"}}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
    ],
)
def test_the_cycle_finder_finds_circles_and_only_circles(
    graph: dict[str, set[str]], cycles: list[list[str]]
) -> None:
    assert _cycles(graph) == cycles


def test_the_import_reader_sees_lazy_and_submodule_imports() -> None:
    """The graph is only as good as its reader: ``from policy.model import conditions``
    is an arrow to that module, and an import inside a function counts."""
    assert "policy.model.conditions" in GRAPH["policy.model.jobs"]
    assert "sim.cli" in GRAPH["cli.main"]  # imported inside main()
