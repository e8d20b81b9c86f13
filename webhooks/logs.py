"""Structured logs: one JSON object per line, gunicorn's own lines included.

Every line written while a hook request is being answered carries the hook and the
parent it is about (``namespace`` and ``job``, or ``pool``), so that ``kubectl logs``
piped through ``jq 'select(.job == "job1")'`` shows one job's story.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson
from flask import g, has_request_context

# Fields a record may carry (``extra=``) that go into the line as they are.
FIELDS = (
    "hook",
    "namespace",
    "job",
    "pool",
    "status",
    "latency_ms",
    "request_bytes",
    "response_bytes",
    "remote",
    "error",
    "limit_seconds",
)


def request_context() -> dict[str, Any]:
    """The hook and parent of the request this thread is answering (set by the shell)."""
    if not has_request_context():
        return {}
    return dict(g.get("dragonet_log") or {})


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        line.update(request_context())
        for key in FIELDS:
            value = record.__dict__.get(key)
            if value is not None:
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def config(level: str) -> dict[str, Any]:
    """``logging.config.dictConfig`` for the server: gunicorn's loggers and ours, to stderr
    as JSON. gunicorn's access log is off: the shell writes one richer line per hook
    request (``dragonet.access``)."""
    level = level.upper()
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"stderr": handler},
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {
            "gunicorn.error": {"level": level, "handlers": ["stderr"], "propagate": False},
            "gunicorn.access": {"level": "CRITICAL", "handlers": [], "propagate": False},
        },
    }
