"""A hard time limit per hook request, for the threads that answer hooks.

gunicorn's own ``timeout`` never fires for a busy worker: its event loop keeps reporting
the process alive while a request thread works for ever. Nor can a thread be
stopped from outside in Python, and ``signal.setitimer`` interrupts only the main thread.
What CPython does offer is to schedule an exception in another thread
(``PyThreadState_SetAsyncExc``): it is raised there at the next bytecode boundary.

So one watchdog thread per process watches the deadlines of the requests in flight. At a
request's deadline it raises ``RequestTimeout`` in that request's thread; the policy is
pure Python, so the exception lands within milliseconds and the request is answered with
a JSON error (``webhooks.shell``). A thread that has not come back long after its
deadline is stuck inside one C call (the exception waits for the call to return); nothing
in the process can free it, so the watchdog ends the process and gunicorn starts a fresh
worker. That is the backstop that keeps a stuck worker from staying stuck.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("dragonet.webhooks")

_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
_set_async_exc.restype = ctypes.c_int


# The WSGI environ's key for when the request's first byte arrived (``time.monotonic()``),
# set by the server (``webhooks.wire``): a request's time limit counts from it.
FIRST_BYTE = "dragonet.first_byte"


class RequestTimeout(Exception):
    """Raised inside a request's thread at its deadline."""


@dataclass
class _Entry:
    thread: int
    limit: float
    deadline: float
    stuck_at: float
    on_stuck: Callable[[dict[str, Any]], None]
    about: dict[str, Any] = field(default_factory=dict)  # for the log line if it is stuck
    fired: bool = False


def _raise_in(thread: int, exc: type[BaseException] | None) -> None:
    # A NULL exception clears one that is scheduled and not yet raised.
    _set_async_exc(thread, exc if exc is not None else ctypes.py_object())


def exit_stuck_worker(about: dict[str, Any]) -> None:
    """gunicorn's arbiter sees the worker exit and forks a new one at once. Requests other
    threads of this process were answering get a closed connection; Metacontroller retries
    them."""
    log.critical("request stuck past its time limit: restarting this worker", extra=about)
    logging.shutdown()
    os._exit(70)  # EX_SOFTWARE; gunicorn halts only on its own boot/app-load codes 3 and 4


class _Watchdog:
    """The deadlines of the requests in flight in this process, and the one thread that
    enforces them (started lazily, again in a forked child, which inherits no threads)."""

    def __init__(self) -> None:
        self._active: dict[int, _Entry] = {}
        self._cond = threading.Condition()
        self._pid = 0
        # When the watchdog thread next wakes by itself. A request whose deadline is later
        # does not wake it (one wake per time limit, not a thread switch per request).
        self._wake = float("inf")

    def add(self, entry: _Entry) -> None:
        if self._pid != os.getpid():
            with self._cond:
                if self._pid != os.getpid():
                    self._active.clear()  # the parent's requests are not ours
                    thread = threading.Thread(target=self._run, name="dragonet-watchdog")
                    thread.daemon = True
                    thread.start()
                    self._pid = os.getpid()
        with self._cond:
            self._active[entry.thread] = entry
            if entry.deadline < self._wake:
                self._wake = entry.deadline
                self._cond.notify()

    def remove(self, entry: _Entry) -> None:
        with self._cond:
            self._active.pop(entry.thread, None)
            if entry.fired:
                _raise_in(entry.thread, None)

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                wake = float("inf")
                for entry in list(self._active.values()):
                    if not entry.fired and now >= entry.deadline:
                        entry.fired = True
                        _raise_in(entry.thread, RequestTimeout)
                    if entry.fired and now >= entry.stuck_at:
                        del self._active[entry.thread]
                        entry.on_stuck({**entry.about, "limit_seconds": entry.limit})
                        continue
                    wake = min(wake, entry.stuck_at if entry.fired else entry.deadline)
                self._wake = wake
                self._cond.wait(None if wake == float("inf") else max(0.001, wake - now))


_WATCHDOG = _Watchdog()


class TimeLimit:
    """A time limit for requests. ``stuck_after``: how long past its deadline a request may
    take to unwind before the process is given up on (``on_stuck``)."""

    def __init__(
        self,
        limit: float,
        stuck_after: float | None = None,
        on_stuck: Callable[[dict[str, Any]], None] = exit_stuck_worker,
    ) -> None:
        self.limit = limit
        self.stuck_after = stuck_after if stuck_after is not None else max(2.0, limit)
        self.on_stuck = on_stuck

    @contextmanager
    def guard(
        self, about: dict[str, Any] | None = None, started: float | None = None
    ) -> Iterator[None]:
        """Run the body under the limit: ``RequestTimeout`` is raised in it at the deadline,
        ``limit`` seconds after ``started`` (a ``time.monotonic()``; default: now). Once this
        has returned or raised, nothing is pending for the thread any more."""
        deadline = (time.monotonic() if started is None else started) + self.limit
        if started is not None and deadline <= time.monotonic():
            raise RequestTimeout(f"{self.limit:g} s")  # spent before it began: not begun
        entry = _Entry(
            threading.get_ident(),
            self.limit,
            deadline,
            deadline + self.stuck_after,
            self.on_stuck,
            about or {},
        )
        _WATCHDOG.add(entry)
        timed_out = False
        try:
            yield
        except RequestTimeout:
            timed_out = True
        finally:
            # The watchdog fires at most once per entry and never after it is removed, but
            # until then its exception may land anywhere, even in here: retry until the
            # entry is removed with nothing left pending.
            while True:
                try:
                    _WATCHDOG.remove(entry)
                    break
                except RequestTimeout:
                    timed_out = True
        if timed_out:
            raise RequestTimeout(f"{self.limit:g} s")
