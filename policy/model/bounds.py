"""Bounds no real job or pool reaches, and the one reading of every number a tenant or an
admin controls, so that no value can make a sync's work or its arithmetic unbounded.

Every number read from a job (annotations, spec, status) or from a pool's spec goes
through a type or a function of this module: it is finite and within its bound, or it is
refused, naming the field. A job's refused value fails that job alone (a Failed
condition); a pool's puts the pool in an error status that keeps its Admissions as they
are. The CRDs state the same maximums (``crd/``, checked by ``tests/test_crd.py`` and
``tests/test_pool_crds.py``); the webhook checks them too, for objects stored before the
CRDs had them.

* 1,024 pods of one replica type, and ``max-instances`` 1,024: parameter servers saturate
  long before. Every pod's TF_CONFIG lists ``max-instances`` workers, so a job's sync
  answers pods x max-instances addresses: about 45 MB at the bound (at 2^31, a worker
  grew by gigabytes and never answered).
* Any duration (``activeDeadlineSeconds``, a checkpoint interval, a pool's thresholds and
  intervals, a grace period): 100 years, past any training run or any rule a cluster
  waits for, and every date plus it stays a date that a Kubernetes timestamp (and Python,
  to the year 9999) can represent.
* Attained service and the least-attained-service thresholds: 10^9 GPU-hours, 10,000 GPUs
  for 11 years; unit-seconds stay far inside a float's exact integers.
* Counts of events (preemptions, moves): 10^6, more than a job lives through.
* Kubeflow's int32 fields (``ttlSecondsAfterFinished``, ``backoffLimit``, ...): 2^31 - 1.

Arithmetic on these values can still reach past the horizon (a threshold divided by a
thousandth of a GPU): ``later`` says "never" for a time that far away instead of
overflowing.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import Field

MAX_REPLICAS = 1024
MAX_SECONDS = 100 * 365 * 24 * 3600
MAX_DEADLINE_SECONDS = MAX_SECONDS
MAX_GPU_HOURS = 10**9
MAX_GPU_SECONDS = MAX_GPU_HOURS * 3600
MAX_EVENTS = 10**6
# Kubeflow's and the PodGroups' int32 fields (ttlSecondsAfterFinished, backoffLimit,
# minAvailable, scheduleTimeoutSeconds).
MAX_INT32 = 2**31 - 1
MAX_TTL_SECONDS = MAX_INT32
# A place in a queue, or its length (int32, as Kueue's positions).
MAX_QUEUE = MAX_INT32
# A relative gain (a migration's minimum speed-up): 100 is a worker 101 times faster.
MAX_GAIN = 100.0

# The pydantic types of the wire models: finite, at least 0, at most the bound.
Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
WholeSeconds = Annotated[int, Field(ge=0, le=MAX_SECONDS)]
GpuHours = Annotated[float, Field(ge=0, le=MAX_GPU_HOURS, allow_inf_nan=False)]
GpuSeconds = Annotated[float, Field(ge=0, le=MAX_GPU_SECONDS, allow_inf_nan=False)]
Events = Annotated[int, Field(ge=0, le=MAX_EVENTS)]
Gain = Annotated[float, Field(ge=0, le=MAX_GAIN, allow_inf_nan=False)]


class OutOfBounds(ValueError):
    """A number that is not one, or not within its bound; the message names the field."""


def number(
    raw: Any, where: str, *, what: str, most: float, above: float = 0.0, example: str
) -> float:
    """``raw`` (a JSON number or its text, as annotations hold it) as a finite float with
    ``above < value <= most``, or ``OutOfBounds`` naming ``where`` and saying ``what`` it
    holds."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        value = math.nan
    else:
        try:
            value = float(str(raw).strip())
        except (ValueError, OverflowError):
            value = math.nan
    if not math.isfinite(value) or not above < value <= most:
        raise OutOfBounds(
            f"{where} is {raw!r}; give {what} as a number greater than {above:g} and at most "
            f"{most:.15g}, e.g. {example!r}"
        )
    return value


def whole(raw: Any, where: str, most: int) -> int:
    """``raw`` (a JSON integer, or a number without a fraction) as an int from 0 to
    ``most``, or ``OutOfBounds`` naming ``where``."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise OutOfBounds(f"{where} is {raw!r}, not a whole number")
    if not (math.isfinite(raw) and float(raw).is_integer() and 0 <= raw <= most):
        raise OutOfBounds(f"{where} is {raw!r}; give a whole number from 0 to {most}")
    return int(raw)


def later(t: datetime, seconds: float) -> datetime | None:
    """``t`` plus ``seconds`` (at least 0), or None for a time past the horizon: a wake-up
    more than ``MAX_SECONDS`` away never comes in a cluster's life, and could not be
    written as a date."""
    if not math.isfinite(seconds) or seconds > MAX_SECONDS:
        return None
    return t + timedelta(seconds=max(seconds, 0.0))


# An object nested deeper than this is none a Kubernetes schema describes (a Pod is about
# 12 levels deep); JSON encoders give up at 254, so nothing deeper is ever echoed back.
MAX_DEPTH = 64


def nested_within(value: Any, depth: int = MAX_DEPTH) -> bool:
    """Whether ``value`` (decoded JSON) is nested at most ``depth`` levels, without
    recursing (a value too deep for the encoder is too deep for Python's stack too)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if level >= depth:
            return False
        stack.extend((c, level + 1) for c in children)
    return True
