"""How Dragonet's controller processes (the recorder, the reaper, the Container Monitor)
start and stop, written once: ``--help``, settings from the environment, an API client,
then a loop until SIGTERM. What they cannot use is one line on stderr naming the process
and exit status 2, never a traceback."""

from __future__ import annotations

import logging.config
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from webhooks import env, logs
from webhooks.kubeapi import settings_problem

S = TypeVar("S", bound=BaseSettings)
T = TypeVar("T")


class Exit(Exception):
    """The process ends before it runs, with ``status``: 0 after ``--help``, 2 after the
    one line that says what it could not use."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def settings(
    name: str,
    doc: str | None,
    argv: list[str] | None,
    load: type[S],
    environ: Mapping[str, str] | None = None,
) -> S:
    """The settings ``load`` reads from the environment, once ``argv`` (``sys.argv``'s by
    default) asked for no ``--help`` and holds nothing else (settings come from the
    environment: an argument would be silently ignored), and the environment holds no
    variable under ``load``'s prefix that it has no setting for (a misspelt one would be
    as silently ignored)."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print((doc or "").strip())
        raise Exit(0)
    if args:
        print(f"{name}: takes no arguments (got {args[0]!r}); see --help", file=sys.stderr)
        raise Exit(2)
    unknown = env.unknown_variable(os.environ if environ is None else environ, load, name)
    if unknown is not None:
        print(f"{name}: {unknown}", file=sys.stderr)
        raise Exit(2)
    try:
        return load()
    except ValidationError as err:
        print(f"{name}: {settings_problem(err)}", file=sys.stderr)
        raise Exit(2) from err


def connect(name: str, make: Callable[[], T]) -> T:
    """The API client ``make`` builds; with no in-cluster configuration and no usable
    kubeconfig, the process cannot do anything and says so."""
    try:
        return make()
    except Exception as err:
        print(f"{name}: no Kubernetes API configuration: {err}", file=sys.stderr)
        raise Exit(2) from err


def until_signalled(log_level: str) -> threading.Event:
    """Logging as JSON lines at ``log_level``, and the event SIGTERM or SIGINT sets: the
    process's loop runs until it is set."""
    logging.config.dictConfig(logs.config(log_level))
    # One line per failed pass says what failed; not three more for urllib3's retries.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    return stop
