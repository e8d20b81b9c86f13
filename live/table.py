"""The cells of kubectl's tables: columns three spaces apart, ``<none>`` for an empty
value, and a resource's column name (``live/printer.py`` prints the rows)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


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


def resource_label(name: str) -> str:
    """A column name for a resource: ``GPU`` for any ``.../gpu``, else its name."""
    return "GPU" if name.endswith("gpu") else name.upper()
