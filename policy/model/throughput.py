"""What a job's measured speed looks like in the API: a bounded history of readings, one
per configuration the job ran in, kept in the job's annotation ``dragonet.io/throughput``.

A reading says: with ``workers`` workers and ``ps`` parameter servers, ``remote`` of the
workers on a node without a parameter server, the workers on ``nodes`` nodes, the job made
``stepsPerSecond`` global steps per second (the median of a minute of its own reports),
over ``reports`` such minutes. A job that says how far it is (its global ``step`` of
``totalSteps``, as a training loop with a step limit knows) also gets ``progress``: with
the speed of its latest configuration, how much training it has left (``left_worker_s``).
The job's writer (the Container Monitor, or the simulator's
stand-in: ``monitor/throughput.py``) adds a reading to it, at most once a minute and only
when it says something new; the pool reads it as one of the job's facts (its planner sees
the job objects already: no other object, no other watch).

Nothing in it is trusted: an annotation anyone can write is read through bounds (at most
``MAX_READINGS`` readings, ``MAX_TEXT`` characters, counts within ``MAX_REPLICAS``, speeds
finite and positive), and one that breaks them is refused whole, naming the field: the job
is then planned exactly as a job that reports nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson

from policy.model.batch import GradStats
from policy.model.bounds import MAX_REPLICAS, OutOfBounds, number, whole

ANNOTATION = "dragonet.io/throughput"
VERSION = 1
MAX_READINGS = 16  # configurations remembered per job (the oldest updated goes first)
MAX_TEXT = 4096  # characters of the annotation (16 readings take about 1.5 KiB)
MAX_STEPS_PER_S = 1e6  # a global step every microsecond: no real job is near it
MAX_BATCH = 10**7
MAX_STEPS = 10**12  # a step count no training loop reaches
# A configuration's speed is the mean of its last ``MAX_WEIGHT`` minutes at most: a job
# whose speed drifts (a noisy neighbour left) is believed again within that many minutes.
MAX_WEIGHT = 8
MAX_GRAD = 1e30  # a gradient statistic beyond this is no measurement


@dataclass(frozen=True, order=True)
class Config:
    """Where a job's workers ran: the facts of its pods, read by the writer."""

    workers: int
    ps: int
    remote: int = 0  # workers on a node without a parameter server
    nodes: int = 1  # nodes its workers are on
    # The global batch it trained at, for a job whose batch the pool chooses (its reports
    # carry gradient statistics: a reading per batch); 0: the job's one batch.
    batch: int = 0

    @property
    def spread(self) -> bool:
        """Its workers cross the network to sync (several nodes, or a PS elsewhere)."""
        return self.nodes > 1 or self.remote > 0

    def checked(self, where: str) -> Config:
        if not 1 <= self.workers <= MAX_REPLICAS:
            raise OutOfBounds(f"{where}.workers is {self.workers}; give 1 to {MAX_REPLICAS}")
        if self.remote > self.workers or self.nodes > self.workers:
            raise OutOfBounds(
                f"{where}: remote ({self.remote}) and nodes ({self.nodes}) cannot exceed "
                f"workers ({self.workers})"
            )
        if self.nodes < 1:
            raise OutOfBounds(f"{where}.nodes is {self.nodes}; a worker runs on a node")
        return self


@dataclass(frozen=True)
class Reading:
    config: Config
    steps_per_s: float
    reports: int = 1  # minutes of reports behind it (weight in the fit), at most MAX_WEIGHT


@dataclass(frozen=True)
class Progress:
    """How far a job is: ``step`` of the ``total`` global steps its training loop runs."""

    step: int
    total: int

    @property
    def left(self) -> int:
        return max(self.total - self.step, 0)


@dataclass(frozen=True)
class History:
    """A job's readings, the least recently updated first."""

    readings: tuple[Reading, ...] = ()
    batch: int | None = None  # the job's global batch, if it said (examples = steps x batch)
    progress: Progress | None = None  # how far it was when the history was last written
    # The gradient's statistics as last reported (Pollux's agent's grad_sqr, grad_var): what
    # the pool chooses a batch from (policy.model.batch).
    grad: GradStats | None = None

    def left_worker_s(self) -> float | None:
        """Worker-seconds of training left at the speed of the latest configuration (its
        last reading), None without progress or readings."""
        if self.progress is None or not self.readings:
            return None
        last = self.readings[-1]
        return self.progress.left / last.steps_per_s * last.config.workers

    def get(self, config: Config) -> Reading | None:
        for r in self.readings:
            if r.config == config:
                return r
        return None

    def add(self, config: Config, steps_per_s: float) -> History:
        """With one more minute's median at ``config``: averaged into its reading (weight
        capped at ``MAX_WEIGHT``), which becomes the most recent; the least recently
        updated reading goes when there are more than ``MAX_READINGS``."""
        old = self.get(config)
        if old is None:
            new = Reading(config, steps_per_s, 1)
        else:
            weight = min(old.reports, MAX_WEIGHT - 1)
            mean = (old.steps_per_s * weight + steps_per_s) / (weight + 1)
            new = Reading(config, mean, weight + 1)
        rest = tuple(r for r in self.readings if r.config != config)
        return replace(self, readings=(*rest, new)[-MAX_READINGS:])

    def put(self, reading: Reading) -> History:
        """With ``reading`` replacing its configuration's (the most recent now)."""
        rest = tuple(r for r in self.readings if r.config != reading.config)
        return replace(self, readings=(*rest, reading)[-MAX_READINGS:])

    def with_batch(self, batch: int | None) -> History:
        return replace(self, batch=batch if batch is not None else self.batch)

    def with_progress(self, progress: Progress | None) -> History:
        return replace(self, progress=progress if progress is not None else self.progress)

    def with_grad(self, grad: GradStats | None) -> History:
        return replace(self, grad=grad if grad is not None else self.grad)

    def text(self) -> str:
        """The annotation's value (compact JSON, stable key order)."""
        body: dict[str, Any] = {"version": VERSION}
        if self.batch is not None:
            body["batch"] = self.batch
        body["readings"] = [
            {
                "workers": r.config.workers,
                "ps": r.config.ps,
                "remote": r.config.remote,
                "nodes": r.config.nodes,
                **({"batch": r.config.batch} if r.config.batch else {}),
                "stepsPerSecond": float(f"{r.steps_per_s:.6g}"),
                "reports": r.reports,
            }
            for r in self.readings
        ]
        if self.progress is not None:
            body["progress"] = {"step": self.progress.step, "totalSteps": self.progress.total}
        if self.grad is not None:
            body["grad"] = {
                "sqr": float(f"{self.grad.sqr:.6g}"),
                "var": float(f"{self.grad.var:.6g}"),
            }
        return orjson.dumps(body).decode()


def history_of(annotations: Mapping[str, str]) -> History | None:
    """The job's history, None if it has none; ``OutOfBounds`` naming the field if its
    annotation cannot be believed."""
    raw = annotations.get(ANNOTATION)
    return None if raw is None else parse(raw)


def parse(raw: Any) -> History:
    where = f"annotation {ANNOTATION}"
    if not isinstance(raw, str):
        raise OutOfBounds(f"{where} must be a string")
    if len(raw) > MAX_TEXT:
        raise OutOfBounds(f"{where} is {len(raw)} characters; at most {MAX_TEXT}")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise OutOfBounds(f"{where} is not JSON: {err}") from err
    if not isinstance(body, dict):
        raise OutOfBounds(f"{where} must be a JSON object")
    if body.get("version") != VERSION:
        raise OutOfBounds(f"{where}.version is {body.get('version')!r}; this reads {VERSION}")
    unknown = set(body) - {"version", "batch", "readings", "progress", "grad"}
    if unknown:
        raise OutOfBounds(f"{where}: unknown field {sorted(unknown)[0]!r}")
    batch = None
    if body.get("batch") is not None:
        batch = whole(body["batch"], f"{where}.batch", MAX_BATCH)
    items = body.get("readings")
    if not isinstance(items, list):
        raise OutOfBounds(f"{where}.readings must be a list")
    if len(items) > MAX_READINGS:
        raise OutOfBounds(f"{where}.readings has {len(items)}; at most {MAX_READINGS}")
    readings: list[Reading] = []
    seen: set[Config] = set()
    for i, item in enumerate(items):
        at = f"{where}.readings[{i}]"
        if not isinstance(item, dict):
            raise OutOfBounds(f"{at} must be an object")
        extra = set(item) - {
            "workers",
            "ps",
            "remote",
            "nodes",
            "batch",
            "stepsPerSecond",
            "reports",
        }
        if extra:
            raise OutOfBounds(f"{at}: unknown field {sorted(extra)[0]!r}")
        if "workers" not in item or "stepsPerSecond" not in item:
            raise OutOfBounds(f"{at}: workers and stepsPerSecond are required")
        config = Config(
            whole(item["workers"], f"{at}.workers", MAX_REPLICAS),
            whole(item.get("ps", 0), f"{at}.ps", MAX_REPLICAS),
            whole(item.get("remote", 0), f"{at}.remote", MAX_REPLICAS),
            whole(item.get("nodes", 1), f"{at}.nodes", MAX_REPLICAS),
            whole(item.get("batch", 0), f"{at}.batch", MAX_BATCH),
        ).checked(at)
        if config in seen:
            raise OutOfBounds(f"{at}: a second reading of the same configuration")
        seen.add(config)
        speed = number(
            item["stepsPerSecond"],
            f"{at}.stepsPerSecond",
            what="global steps per second",
            most=MAX_STEPS_PER_S,
            example="2.5",
        )
        reports = whole(item.get("reports", 1), f"{at}.reports", MAX_WEIGHT)
        if reports < 1 or not math.isfinite(speed):
            raise OutOfBounds(f"{at}.reports is {reports}; give 1 to {MAX_WEIGHT}")
        readings.append(Reading(config, speed, reports))
    return History(
        tuple(readings),
        batch,
        _progress(body.get("progress"), f"{where}.progress"),
        grad_stats(body.get("grad"), f"{where}.grad"),
    )


def grad_stats(raw: Any, where: str) -> GradStats | None:
    """``{"sqr", "var"}``: finite, ``sqr`` above 0, ``var`` at least 0, both within
    ``MAX_GRAD`` (``OutOfBounds`` naming the field)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise OutOfBounds(f"{where} must be an object with sqr and var")
    extra = set(raw) - {"sqr", "var"}
    if extra:
        raise OutOfBounds(f"{where}: unknown field {sorted(extra)[0]!r}")
    if "sqr" not in raw or "var" not in raw:
        raise OutOfBounds(f"{where}: sqr and var are required")
    sqr = number(
        raw["sqr"], f"{where}.sqr", what="the gradient's squared norm", most=MAX_GRAD,
        example="0.02",
    )  # fmt: skip
    var = number(
        raw["var"], f"{where}.var", what="the gradient's variance (0 or more)", most=MAX_GRAD,
        above=-1.0, example="0.5",
    )  # fmt: skip
    if var < 0:
        raise OutOfBounds(f"{where}.var is {raw['var']!r}; a variance is 0 or more")
    return GradStats(sqr, var)


def _progress(raw: Any, where: str) -> Progress | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise OutOfBounds(f"{where} must be an object with step and totalSteps")
    extra = set(raw) - {"step", "totalSteps"}
    if extra:
        raise OutOfBounds(f"{where}: unknown field {sorted(extra)[0]!r}")
    if "step" not in raw or "totalSteps" not in raw:
        raise OutOfBounds(f"{where}: step and totalSteps are required")
    total = whole(raw["totalSteps"], f"{where}.totalSteps", MAX_STEPS)
    step = whole(raw["step"], f"{where}.step", MAX_STEPS)
    if total < 1 or step > total:
        raise OutOfBounds(
            f"{where}: step {step} of totalSteps {total}; give 1 <= totalSteps, step <= it"
        )
    return Progress(step, total)
