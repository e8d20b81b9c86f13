"""Flags and printing as ``kubectl get`` has them, for every ``kubectl dragonet`` verb:
``-o wide|json|yaml|name``, ``--no-headers``, ``-l/--selector``, ``-w/--watch``,
``--watch-only``, ``--output-watch-events``, and a poll interval for the watch.

What kubectl does, followed here (kubectl's pkg/cmd/get and cli-runtime's printers):
* ``-o json|yaml``: several objects (or none) as a ``List`` (apiVersion v1, kind List,
  items); one object asked for by name as that object alone.
* ``-o name``: ``kind.group/name`` per object (``node/NAME`` for the core group).
* an empty table is a line on stderr, so that stdout holds only rows.
* ``-w``: the table once, then each object that changed, as a row under the same header;
  ``-o json|yaml`` prints each changed object as its own document; ``--output-watch-events``
  adds the change (``ADDED``, ``MODIFIED``, ``DELETED``) as an EVENT column or a
  ``{type, object}`` envelope. The API is polled (``--watch-interval``): only rows whose
  objects changed are printed, not those whose ages moved with the clock.

Ctrl-C ends a watch with exit status 0 and no traceback (kubectl exits 1 there).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from live.items import Item
from live.table import cell

FORMATS = ("wide", "json", "yaml", "name")
_sleep = time.sleep  # between two reads of a watch (a test's clock replaces it)
# kubectl's own formats we do not print: said in one line with what to use instead.
_KUBECTL_ONLY = ("jsonpath", "custom-columns", "go-template", "template", "templatefile")


def output_format(allowed: Sequence[str]) -> Callable[[str], str]:
    """The ``-o`` argument type: one of ``allowed``, else one line saying which are."""

    def parse(text: str) -> str:
        if text in allowed or text == "":  # "": the default (a table, or text)
            return text
        listed = ", ".join(allowed)
        if text.split("=", 1)[0] in _KUBECTL_ONLY:
            raise argparse.ArgumentTypeError(
                f"{text.split('=', 1)[0]} is kubectl's, not kubectl dragonet's (allowed: "
                f"{listed}); pipe -o json into jq to pick fields"
            )
        raise argparse.ArgumentTypeError(
            f"unable to match a printer suitable for the output format {text!r}, allowed "
            f"formats are: {listed}"
        )

    return parse


def add_output_flags(
    p: argparse.ArgumentParser,
    *,
    formats: Sequence[str] = FORMATS,
    listing: bool = True,
    selects: str = "",
) -> None:
    """``-o`` always; for a verb that lists (``listing``), ``--no-headers``, the watch flags
    and, when ``selects`` names what, ``-l/--selector``."""
    from live.durations import positive_duration

    p.add_argument(
        "-o",
        "--output",
        type=output_format(formats),
        default="",
        metavar="FORMAT",
        help=f"one of {', '.join(formats)} (default: a table)"
        if listing
        else f"one of {', '.join(formats)} (default: text)",
    )
    if not listing:
        return
    p.add_argument(
        "--no-headers",
        action="store_true",
        help="print the table without its header row",
    )
    if selects:
        p.add_argument(
            "-l",
            "--selector",
            metavar="SELECTOR",
            help=f"label selector on the {selects}, as kubectl takes it "
            "(-l team=a, -l 'env in (prod,test)', -l '!canary'; the API server reads it)",
        )
    p.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="after printing, print each row again when it changes (Ctrl-C to stop)",
    )
    p.add_argument(
        "--watch-only",
        action="store_true",
        help="print only the rows that change, not the current ones first",
    )
    p.add_argument(
        "--output-watch-events",
        action="store_true",
        help="with -w or --watch-only, say what changed: an EVENT column (ADDED, "
        "MODIFIED, DELETED), or {type, object} with -o json|yaml",
    )
    p.add_argument(
        "--watch-interval",
        type=positive_duration,
        default=2.0,
        metavar="DURATION",
        help="with -w, how often to read the cluster again (default 2s; 500ms, 10s, 1m)",
    )


def usage_problem(args: argparse.Namespace) -> str | None:
    """Flags that do not go together, in kubectl's words where it has them."""
    watching = getattr(args, "watch", False) or getattr(args, "watch_only", False)
    if getattr(args, "output_watch_events", False) and not watching:
        return "--output-watch-events option can only be used with --watch or --watch-only"
    return None


@dataclass(frozen=True)
class Column:
    header: str
    value: Callable[[Any], Any]


@dataclass
class Printer:
    """Prints items in one format; keeps a table's header and widths across a watch."""

    output: str
    columns: Sequence[Column]
    no_headers: bool = False
    events: bool = False
    out: TextIO = field(default_factory=lambda: sys.stdout)
    _widths: list[int] = field(default_factory=list)
    _documents: int = 0

    def print_list(self, items: Sequence[Item], empty: str) -> None:
        """Every item: a List, names, or a table (``empty`` on stderr when there are none)."""
        if self.output in ("json", "yaml"):
            self._document(
                {
                    "apiVersion": "v1",
                    "kind": "List",
                    "metadata": {"resourceVersion": ""},
                    "items": [i.document() for i in items],
                }
            )
        elif self.output == "name":
            self._names(items)
        elif not items:
            print(empty, file=sys.stderr)
        else:
            self._rows([("", i) for i in items])
        self.out.flush()

    def print_one(self, item: Item, text: Callable[[], Iterable[str]] | None = None) -> None:
        """One object asked for by name: itself (not a List), its name, or ``text``."""
        if self.output in ("json", "yaml"):
            self._document(item.document())
        elif self.output == "name":
            self._names([item])
        elif text is not None:
            for line in text():
                self.out.write(line + "\n")
        else:
            self._rows([("", item)])
        self.out.flush()

    def print_changes(self, changes: Sequence[tuple[str, Item]]) -> None:
        """Changed items during a watch, each with its event type."""
        if not changes:
            return
        if self.output in ("json", "yaml"):
            for kind, item in changes:
                doc = item.document()
                self._document({"type": kind, "object": doc} if self.events else doc)
        elif self.output == "name":
            self._names([i for _, i in changes])
        else:
            self._rows(changes)
        self.out.flush()

    def _document(self, doc: dict[str, Any]) -> None:
        if self.output == "json":
            self.out.write(json.dumps(doc, indent=4) + "\n")
        else:
            import yaml

            if self._documents:  # a watch's documents, one after another
                self.out.write("---\n")
            self.out.write(yaml.safe_dump(doc, sort_keys=False, default_flow_style=False))
        self._documents += 1

    def _names(self, items: Iterable[Item]) -> None:
        for item in items:
            self.out.write(item.regarding.resource_name + "\n")

    def _rows(self, rows: Sequence[tuple[str, Item]]) -> None:
        """Rows under the header printed first (once), as wide as every row so far."""
        prefix = [Column("EVENT", lambda _: "")] if self.events else []
        header = [c.header for c in [*prefix, *self.columns]]
        cells = [
            ([kind] if self.events else []) + [cell(c.value(item)) for c in self.columns]
            for kind, item in rows
        ]
        first = not self._widths
        shown = [header] if first and not self.no_headers else []
        measured = [*shown, *cells] if first else cells
        widths = [max(len(r[i]) for r in measured) for i in range(len(header))]
        if self.events:  # room for every event type from the first row on
            widths[0] = max(widths[0], len("MODIFIED"))
        self._widths = [max(a, b) for a, b in zip(self._widths or widths, widths, strict=True)]
        for row in [*shown, *cells]:
            line = "   ".join(c.ljust(w) for c, w in zip(row, self._widths, strict=True))
            self.out.write(line.rstrip() + "\n")


def watch(
    fetch: Callable[[], Sequence[Item]],
    printer_for: Callable[[Sequence[Item]], Printer],
    interval: float,
    *,
    only: bool = False,
) -> int:
    """Print the items, then each one that changes (by polling ``fetch``), until Ctrl-C:
    exit status 0. The table's columns are those of the first read (``printer_for``). A
    failed read ends the watch as it ends a command (``LiveError``)."""
    try:
        first = fetch()
        printer = printer_for(first)
        seen = {i.regarding.key: i for i in first}
        if not only:
            printer.print_changes([("ADDED", i) for i in first])
        while True:
            _sleep(interval)
            now = {i.regarding.key: i for i in fetch()}
            changes = [
                ("ADDED" if key not in seen else "MODIFIED", item)
                for key, item in now.items()
                if key not in seen or not item.unchanged(seen[key])
            ]
            changes += [("DELETED", item) for key, item in seen.items() if key not in now]
            printer.print_changes(changes)
            seen = now
    except KeyboardInterrupt:
        return 0
