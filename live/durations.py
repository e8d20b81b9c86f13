"""Durations on the command line as kubectl reads them: whole seconds, or a Go duration
(``5s``, ``1m30s``, ``250ms``, ``1.5h``)."""

from __future__ import annotations

import argparse
import math
import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def _seconds(text: str) -> float | None:
    """A whole number of seconds or a Go duration (``5s``, ``1m30s``, ``1.5h``); None when
    it is neither."""
    value = text.strip()
    seconds: float | None = None
    if value.isdigit():
        seconds = float(value)
    elif value and _DURATION_PART.sub("", value) == "":
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(value))
    return seconds if seconds is not None and math.isfinite(seconds) else None


def request_timeout(text: str) -> float | None:
    """kubectl's ``--request-timeout``: a whole number of seconds, or a Go duration
    (``5s``, ``1m30s``, ``1.5h``); 0 is no timeout (None). Negative or other: refused with
    kubectl's own words."""
    seconds = _seconds(text)
    if seconds is None:
        raise argparse.ArgumentTypeError(
            f"invalid timeout value {text!r}: a single integer in seconds, or an integer "
            "followed by a time unit (e.g. 1s | 2m | 3h)"
        )
    return seconds or None


def positive_duration(text: str) -> float:
    """An interval (``--watch-interval``, ``view --refresh``): seconds or a Go duration,
    at least 100ms (a poll that never rests would only load the API server)."""
    seconds = _seconds(text)
    if seconds is None or seconds < 0.1:
        raise argparse.ArgumentTypeError(
            f"invalid interval {text!r}: seconds, or a number with a unit (500ms, 2s, 1m), "
            "at least 100ms"
        )
    return seconds


__all__ = ["positive_duration", "request_timeout"]
