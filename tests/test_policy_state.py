"""``policy/`` keeps no state of its own between calls (DESIGN §1: no globals): what must be
remembered across syncs is passed in (``policy.memo``, owned by the shell). Read with
``ast``, so it holds for code no test happens to run.

Allowed: constants (a table no function changes), a memo that remembers nothing, and a
cache of a pure function of immutable values, each named below with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
POLICY = sorted((ROOT / "policy").rglob("*.py"))

# Module-level caches of pure functions: the argument is immutable (a string, bytes, a
# tuple of plain values), the answer depends on nothing else, and dropping the cache
# changes no answer, only how soon it is made.
PURE_CACHES = {
    "policy/model/resources.py:to_milli": "a quantity string or number",
    "policy/model/apischema.py:_checked_content": "a template's JSON bytes",
    "policy/model/apischema.py:_job_status_schemas": "no argument: the schema shipped",
    "policy/model/apischema.py:_schema": "no argument: the schema shipped",
    "policy/model/jobs.py:_interned": "a HashedTuple shape; which equal one comes back "
    "only lets look-ups compare by identity",
    "policy/model/kinds/tfjob.py:dense_cluster": "namespace, name, domain, a tuple of plain values",
    "policy/model/jobs.py:_analysed": "a frozen JobKind, a replica type and a template's "
    "JSON bytes",
    "policy/model/admission.py:_spec_keys": "no argument: the Admission model's fields",
    "policy/model/crdcheck.py:_checks": "no argument: the CRDs shipped",
}
_MUTATORS = frozenset(
    {"append", "extend", "insert", "pop", "popitem", "clear", "update", "setdefault"}
    | {"add", "discard", "remove", "sort", "reverse", "__setitem__", "__delitem__"}
)
_CONTAINERS = frozenset({"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "Counter"})


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _containers(tree: ast.Module) -> set[str]:
    """Module-level names bound to a mutable container."""
    out = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        mutable = isinstance(
            value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp
        ) or (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in _CONTAINERS
        )
        if mutable:
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out


def _mutations(tree: ast.Module, names: set[str]) -> list[str]:
    """Where a function changes one of ``names``, or declares a global."""
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Global):
                found.append(f"{node.lineno}: global {', '.join(node.names)}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                changes = node.func.attr in _MUTATORS
                if changes and isinstance(owner, ast.Name) and owner.id in names:
                    found.append(f"{node.lineno}: {owner.id}.{node.func.attr}()")
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
                targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else []
                if isinstance(node, ast.AugAssign):
                    targets = [node.target]
                for t in targets:
                    base = t.value if isinstance(t, ast.Subscript | ast.Attribute) else t
                    if isinstance(base, ast.Name) and base.id in names and base is not t:
                        found.append(f"{node.lineno}: {base.id}[...] changed")
    return sorted(found, key=lambda f: int(f.split(":")[0]))


def _cached(tree: ast.Module) -> list[str]:
    """Module-level functions under functools' cache or lru_cache."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                name = ast.unparse(d.func if isinstance(d, ast.Call) else d)
                if name.rsplit(".", 1)[-1] in ("cache", "lru_cache"):
                    out.append(node.name)
    return out


def _module_memos(tree: ast.Module) -> list[tuple[int, str]]:
    """Module-level ``Memo(...)`` instances, with their arguments."""
    out = []
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "Memo"
        ):
            out.append((node.lineno, ast.unparse(value)))
    return out


@pytest.mark.parametrize("path", POLICY, ids=_rel)
def test_no_function_changes_a_module_level_container(path: Path) -> None:
    tree = ast.parse(path.read_text())
    assert _mutations(tree, _containers(tree)) == [], _rel(path)


@pytest.mark.parametrize("path", POLICY, ids=_rel)
def test_every_cache_is_of_a_pure_function_and_says_so_here(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for name in _cached(tree):
        assert f"{_rel(path)}:{name}" in PURE_CACHES, f"{_rel(path)}: {name} is cached"


@pytest.mark.parametrize("path", POLICY, ids=_rel)
def test_a_module_level_memo_remembers_nothing(path: Path) -> None:
    for line, call in _module_memos(ast.parse(path.read_text())):
        assert call == "Memo(limit=0)", f"{_rel(path)}:{line}: {call}"


def test_every_named_cache_still_exists() -> None:
    """So the list cannot excuse a cache that is gone, or moved under another name."""
    present = {f"{_rel(p)}:{name}" for p in POLICY for name in _cached(ast.parse(p.read_text()))}
    assert set(PURE_CACHES) <= present


def test_the_reader_finds_a_module_level_cache_dict() -> None:
    """The shape ``policy/job/render.py`` had: a dict filled and emptied by a function."""
    tree = ast.parse(
        "_SEEN: dict[str, str] = {}\n"
        "def f(k):\n"
        "    if len(_SEEN) > 9:\n"
        "        _SEEN.clear()\n"
        "    _SEEN[k] = k\n"
        "    return k\n"
    )
    assert _mutations(tree, _containers(tree)) == ["4: _SEEN.clear()", "5: _SEEN[...] changed"]
