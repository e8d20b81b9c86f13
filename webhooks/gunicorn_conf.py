"""gunicorn settings for the webhook, and the garbage collector's for its processes.

Metacontroller runs up to 5 sync calls per controller at once (``--workers``), each a
CPU-bound Python request: a few processes for parallelism, a few threads each so one
slow request never makes the others wait for a free worker.
"""

from __future__ import annotations

import gc
from typing import Any

from webhooks import logs, metrics, wire
from webhooks.config import Settings


def tune_gc() -> None:
    """A pool's request is one JSON tree of up to millions of objects, and the memo keeps
    many long-lived ones: with CPython's default thresholds the collector walks them again
    and again while a request is parsed (measured: 12 MiB parsed in 306 ms instead of 62
    ms). Nothing the webhook builds needs the cycle collector to be freed, so collect
    seldom: every 100,000 allocations for the youngest generation. (And not at all while a
    large request is answered: ``webhooks.shell.Collector``.)"""
    gc.set_threshold(100_000, 50, 100)


def _post_worker_init(worker: Any) -> None:
    tune_gc()


def _child_exit(server: Any, worker: Any) -> None:
    metrics.compact(worker.pid)


def options(settings: Settings) -> dict[str, Any]:
    # HTTPS when a certificate is given: the chart mounts a kubernetes.io/tls Secret.
    tls = {"certfile": settings.tls_cert_file, "keyfile": settings.tls_key_file}
    return {
        "bind": f"{settings.host}:{settings.port}",
        "workers": settings.workers,
        # uvicorn workers (h11, asyncio): each request read in full on the event loop
        # within the deadline from its first byte, then answered by the Flask app in one of
        # ``threads`` threads (webhooks/wire.py). Connections per process: when more are
        # open, the oldest not being answered is closed; idle ones after ``keepalive`` s.
        "worker_class": wire.worker_class(settings),
        # A worker whose event loop stops for this long is killed. The loop runs on while
        # a request's thread is busy: per-request limits are webhooks/deadline.py's.
        "timeout": 30,
        # A stopping worker answers what it has read (up to the deadline, then its
        # threads' time limit) before the arbiter kills it.
        "graceful_timeout": int(settings.request_timeout_seconds) + 5,
        "keepalive": settings.idle_seconds,
        "loglevel": settings.log_level,
        # JSON lines on stderr; one per hook request from the shell instead of the access log.
        "accesslog": None,
        "logconfig_dict": logs.config(settings.log_level),
        # Recycle workers now and then: no state lives in them.
        "max_requests": settings.max_requests,
        "max_requests_jitter": settings.max_requests // 10,
        # No control socket: the image's root filesystem is read-only.
        "control_socket_disable": True,
        "post_worker_init": _post_worker_init,
        "child_exit": _child_exit,
        **(tls if settings.tls_cert_file else {}),
    }
