"""gunicorn settings for the webhook.

Metacontroller runs up to 5 sync calls per controller at once (``--workers``), each a
CPU-bound Python request: a few processes for parallelism, a few threads each so one
slow request never makes the others wait for a free worker.
"""

from __future__ import annotations

from typing import Any

from webhooks.config import Settings


def options(settings: Settings) -> dict[str, Any]:
    return {
        "bind": f"0.0.0.0:{settings.port}",
        "workers": settings.workers,
        "worker_class": "gthread",
        "threads": settings.threads,
        # Metacontroller gives up after its hook timeout (10 s by default).
        "timeout": 30,
        "graceful_timeout": 10,
        "keepalive": 5,
        "loglevel": settings.log_level,
        "accesslog": "-",
        # Recycle workers now and then: no state lives in them.
        "max_requests": 20000,
        "max_requests_jitter": 2000,
        # No control socket: the image's root filesystem is read-only.
        "control_socket_disable": True,
    }
