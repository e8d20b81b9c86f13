"""Output as kubectl prints it: a table by default (``-o wide`` adds columns), or the
same rows as JSON or YAML."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

Row = Mapping[str, Any]
Column = tuple[str, Callable[[Row], Any]]


def columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as kubectl prints a table: left-aligned columns, three spaces apart."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def cell(value: Any) -> str:
    if value is None or value == "":
        return "<none>"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "<none>"
    return str(value)


def table(rows: Sequence[Row], cols: Sequence[Column]) -> list[str]:
    header = [name for name, _ in cols]
    return columns([header, *([cell(get(r)) for _, get in cols] for r in rows)])


def emit(data: Any, output: str, lines: Callable[[], list[str]], out: TextIO | None = None) -> None:
    """``data`` as JSON or YAML, else the table ``lines`` makes (on stdout by default)."""
    out = out or sys.stdout
    if output == "json":
        out.write(json.dumps(data, indent=2) + "\n")
    elif output == "yaml":
        import yaml

        out.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
    else:
        for line in lines():
            out.write(line + "\n")


def resource_label(name: str) -> str:
    """A column name for a resource: ``GPU`` for any ``.../gpu``, else its name."""
    return "GPU" if name.endswith("gpu") else name.upper()
