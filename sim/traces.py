"""Turn public workload traces into simulator jobs (``JobSpec``s with real TFJob manifests).

Two sources (docs/traces.md): Pollux's flattened Philly trace (``philly.csv``) and Pollux's
§5.3 workloads (``workload-N.csv``). Each row becomes a DRAGON-style PS TFJob:

* workers = the row's GPUs, one GPU each (cpu 4, memory 16Gi, nvidia.com/gpu 1);
* ceil(workers / 4) parameter servers (cpu 2, memory 8Gi), the reference's recipe;
* ``min-instances`` = ceil(workers / 2), ``max-instances`` = 2 * workers: DRAGON's elastic
  range; policies with static sizes ignore it;
* the application (hence ``TrainingProfile``) from the job's GPU-time, as Pollux does;
* a checkpoint every ``CHECKPOINT_S`` of training (TensorFlow's default
  ``save_checkpoint_secs``), declared in ``dragonet.io/checkpoint-interval-seconds``: what a
  preemption costs it, and what makes it preemptible for least attained service;
* ``steps`` such that the job, alone with every worker next to its PS, trains for exactly
  its duration (after its checkpoint restore).

A Pollux workload row names its application, GPUs and global batch: its job trains as
Pollux's own simulator would train it at that fixed batch (``sim.pollux_model``: steps from
the statistical efficiency, speed from the workers' placement, 30 s restart, no progress
lost when preempted), and declares a checkpoint every ``POLLUX_CHECKPOINT_S`` (Pollux's
scheduling interval), so that a policy may preempt it after a minute of training.

Jobs come back sorted by arrival, the first one arriving at 0 s.
"""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from types import MappingProxyType

from policy.model.batch import ANNOTATION as BATCH_ANNOTATION
from policy.model.jobs import CHECKPOINT_ANNOTATION
from sim.profiles import profile
from sim.spec import JobSpec, TrainingProfile, tfjob_manifest
from webhooks.manifests import not_utf8

HOUR_S = 3600.0
WORKER_RESOURCES: Mapping[str, str] = MappingProxyType(
    {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}
)
PS_RESOURCES: Mapping[str, str] = MappingProxyType({"cpu": "2", "memory": "8Gi"})

# Seconds between a trace job's checkpoints: tf.train.MonitoredTrainingSession's default
# save_checkpoint_secs.
CHECKPOINT_S = 600.0

# Pollux's filter of the Philly trace (simulator/workload.py).
MIN_DURATION_S = 60.0
MAX_GPU_TIME_S = 1000 * HOUR_S

# Pollux's GPU-time buckets: (exclusive upper edge in GPU-hours, applications). Pollux draws
# at random inside a bucket; we alternate by the row's position to stay deterministic.
BUCKETS: tuple[tuple[float, tuple[str, ...]], ...] = (
    (1.0, ("cifar10", "ncf")),
    (10.0, ("deepspeech2", "bert")),
    (100.0, ("yolov3",)),
    (math.inf, ("imagenet",)),
)

# A Pollux workload job's checkpoint interval: Pollux re-decides every 60 s and its jobs
# save when stopped, so a minute of training makes one preemptible.
POLLUX_CHECKPOINT_S = 60.0

PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time")
POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
# Pods are named "<job>-worker-<index>" and must stay within 63 characters.
MAX_NAME = 50

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class PhillyRow:
    """One parsed ``philly.csv`` row; ``line`` is its line in the file, for messages."""

    line: int
    submitted: datetime
    duration_s: float
    gpus: int
    gpu_time_s: float

    @property
    def kept_by_pollux(self) -> bool:
        return self.duration_s >= MIN_DURATION_S and self.gpu_time_s < MAX_GPU_TIME_S


def application_for(gpu_time_s: float, position: int) -> str:
    """Pollux's application for a job of this GPU-time; ``position`` picks within a bucket."""
    for upper_h, apps in BUCKETS:
        if gpu_time_s < upper_h * HOUR_S:
            return apps[position % len(apps)]
    raise ValueError(f"GPU-time {gpu_time_s!r} fits no bucket")  # only NaN gets here


def ps_count(workers: int) -> int:
    """One parameter server per four workers (rounded up), the reference's recipe."""
    return max(1, math.ceil(workers / 4))


def trace_job(
    name: str,
    *,
    workers: int,
    arrival_s: float,
    duration_s: float,
    prof: TrainingProfile,
    checkpoint_s: float = CHECKPOINT_S,
) -> JobSpec:
    """The elastic PS TFJob that trains ``duration_s`` when alone at ``workers`` packed workers."""
    ps = ps_count(workers)
    manifest = tfjob_manifest(
        name,
        workers=workers,
        ps=ps,
        min_workers=math.ceil(workers / 2),
        max_workers=2 * workers,
        worker_resources=WORKER_RESOURCES,
        ps_resources=PS_RESOURCES,
    )
    manifest["metadata"]["annotations"] = {CHECKPOINT_ANNOTATION: f"{checkpoint_s:g}"}
    return JobSpec(
        manifest=manifest,
        arrival_s=arrival_s,
        steps=duration_s * prof.rate(local=workers, remote=0, ps=ps),
        profile=prof,
        trace_duration_s=duration_s,
    )


def load_philly(
    path: PathLike,
    *,
    jobs: int = 1000,
    start: int = 0,
    load: float = 1.0,
    max_gpus: int | None = None,
) -> list[JobSpec]:
    """``jobs`` consecutive Philly jobs after the first ``start``, in submit order.

    Rows pass Pollux's filter (duration >= 60 s, GPU-time < 1000 GPU-hours) and, if
    ``max_gpus`` is given, are dropped when they need more GPUs than that (a rigid job
    larger than the cluster could never start); ``start`` and ``jobs`` count the rows
    left. Arrivals are submit times after the first selected job's, divided by ``load``
    (2.0 doubles the arrival rate). A job is named ``philly-NNNN`` after its position in
    the Pollux-filtered trace sorted by submit time; that position also alternates the
    application within a GPU-time bucket, so a row keeps its name and application whatever
    the window or ``max_gpus``. Fewer than ``jobs`` jobs come back if the trace runs out.
    """
    _check_window(jobs, start, load, max_gpus)
    rows = sorted(_philly_rows(path), key=lambda r: r.submitted)
    kept = [(i, r) for i, r in enumerate(r for r in rows if r.kept_by_pollux)]
    if max_gpus is not None:
        kept = [(i, r) for i, r in kept if r.gpus <= max_gpus]
    window = kept[start : start + jobs]
    if not window:
        return []
    t0 = window[0][1].submitted
    return [
        trace_job(
            f"philly-{i:04d}",
            workers=r.gpus,
            arrival_s=(r.submitted - t0).total_seconds() / load,
            duration_s=r.duration_s,
            prof=profile(application_for(r.gpu_time_s, i)),
        )
        for i, r in window
    ]


def load_pollux(
    path: PathLike,
    *,
    load: float = 1.0,
    jobs: int | None = None,
    start: int = 0,
    adaptive: bool = False,
) -> list[JobSpec]:
    """The jobs of a Pollux workload CSV (``name,time,application,num_replicas,batch_size``):
    ``jobs`` of them (default all) after the first ``start``, in arrival order, as for
    Philly, the first one selected arriving at 0 s.

    Workers = ``num_replicas`` at the fixed global ``batch_size`` (the "TunedJobs" size);
    the job trains as Pollux's model says (``sim.pollux_model``), so its duration alone and
    packed is what Pollux's simulator gives that row. ``adaptive``: every job declares the
    batch sizes it can take (``adaptive_job``), its row's batch ignored.
    """
    # Pollux's model needs scipy (half a second to import): only a Pollux workload loads it.
    from sim.pollux_model import MAX_EPOCHS, pollux_profile

    _check_window(jobs if jobs is not None else 0, start, load, None)
    parsed: list[tuple[float, int, str, str, int, int]] = []
    names: dict[str, int] = {}
    for line, row in _rows(path, POLLUX_COLUMNS):
        where = f"{os.fspath(path)}:{line}"
        app = row["application"].strip()
        if app not in MAX_EPOCHS:
            known = ", ".join(sorted(MAX_EPOCHS))
            raise ValueError(f"{where}: unknown application {app!r} (known: {known})")
        try:
            name = dns_label(row["name"])
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        if name in names:
            raise ValueError(f"{where}: job name {name!r} repeats line {names[name]}")
        names[name] = line
        time = _number(row, "time", where)
        replicas = _positive_int(row, "num_replicas", where)
        batch = _positive_int(row, "batch_size", where)
        try:
            pollux_profile(app, batch)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        parsed.append((time, line, name, app, replicas, batch))
    parsed.sort()
    parsed = parsed[start : None if jobs is None else start + jobs]
    if not parsed:
        return []
    t0 = parsed[0][0]
    make = adaptive_job if adaptive else pollux_job
    return [
        make(name, app, replicas=replicas, batch_size=batch, arrival_s=(time - t0) / load)
        for time, _, name, app, replicas, batch in parsed
    ]


def pollux_job(name: str, app: str, *, replicas: int, batch_size: int, arrival_s: float) -> JobSpec:
    """A Pollux workload row as a PS TFJob that trains as Pollux's model says."""
    from sim.pollux_model import application, pollux_profile

    prof = pollux_profile(app, batch_size)
    steps = application(app).steps(batch_size, replicas)
    job = trace_job(
        name,
        workers=replicas,
        arrival_s=arrival_s,
        duration_s=steps / prof.rate(replicas, 0, ps_count(replicas)),
        prof=prof,
        checkpoint_s=POLLUX_CHECKPOINT_S,
    )
    return replace(job, steps=steps)  # exact, not duration x rate


def adaptive_job(
    name: str, app: str, *, replicas: int, batch_size: int, arrival_s: float
) -> JobSpec:
    """A Pollux workload row as a PS TFJob that declares the batch sizes it can take, the
    artifact's bounds for its application (``dragonet.io/batch-size``,
    ``sim.pollux_model.declared_range``), and may grow as far as Pollux lets a job
    (``max_replicas``); it trains at the batch its pods are given, its progress in Pollux's
    units (``AdaptiveProfile``). Its size, arrival and checkpoints are the row's, as
    ``pollux_job``'s."""
    from sim.pollux_model import adaptive_profile, declared_range, max_replicas

    fixed = pollux_job(name, app, replicas=replicas, batch_size=batch_size, arrival_s=arrival_s)
    manifest = fixed.manifest
    lo, hi = declared_range(app)
    manifest["metadata"]["annotations"][BATCH_ANNOTATION] = f"{lo}-{hi}"
    spec = manifest["spec"]
    spec["max-instances"] = max(spec["max-instances"], max_replicas(app))
    prof = adaptive_profile(app)
    return replace(fixed, manifest=manifest, profile=prof, steps=prof.total())


_NOT_LABEL = re.compile(r"[^a-z0-9]+")


def dns_label(raw: str) -> str:
    """``raw`` as a DNS-1035 label (what TFJob names must be), short enough for pod names."""
    label = _NOT_LABEL.sub("-", raw.strip().lower()).strip("-")
    if not label:
        raise ValueError(f"job name {raw!r} has no letters or digits")
    if not label[0].isalpha():
        label = f"j-{label}"
    return label[:MAX_NAME].rstrip("-")


def _check_window(jobs: int, start: int, load: float, max_gpus: int | None) -> None:
    if jobs < 0 or start < 0:
        raise ValueError(f"jobs ({jobs}) and start ({start}) must not be negative")
    _check_load(load)
    if max_gpus is not None and max_gpus < 1:
        raise ValueError(f"max_gpus must be at least 1, got {max_gpus}")


def _check_load(load: float) -> None:
    if not (load > 0 and math.isfinite(load)):
        raise ValueError(f"load must be a positive number, got {load!r}")


def _philly_rows(path: PathLike) -> Iterator[PhillyRow]:
    for line, row in _rows(path, PHILLY_COLUMNS):
        where = f"{os.fspath(path)}:{line}"
        try:
            submitted = datetime.fromisoformat(row["timestamp"].strip())
        except ValueError:
            raise ValueError(f"{where}: timestamp {row['timestamp']!r} is not a date") from None
        duration = _number(row, "duration", where)
        gpu_time = _number(row, "gpu_time", where)
        if duration < 0 or gpu_time < 0:
            raise ValueError(f"{where}: duration and gpu_time must not be negative")
        yield PhillyRow(line, submitted, duration, _positive_int(row, "num_gpus", where), gpu_time)


def _rows(path: PathLike, required: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) for each data row; ``ValueError`` names the file and line of a bad one."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        try:
            missing = [c for c in required if c not in (reader.fieldnames or ())]
            if missing:
                raise ValueError(f"{os.fspath(path)}:1: missing column(s) {', '.join(missing)}")
            for row in reader:
                if None in row or any(row[c] is None for c in required):
                    raise ValueError(
                        f"{os.fspath(path)}:{reader.line_num}: expected "
                        f"{len(reader.fieldnames or ())} fields, got a different number"
                    )
                yield reader.line_num, row
        except UnicodeDecodeError as err:
            raise ValueError(not_utf8(os.fspath(path), err)) from None


def _number(row: Mapping[str, str], column: str, where: str) -> float:
    try:
        value = float(row[column])
    except ValueError:
        raise ValueError(f"{where}: {column} {row[column]!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{where}: {column} {row[column]!r} is not finite")
    return value


def _positive_int(row: Mapping[str, str], column: str, where: str) -> int:
    text = row[column].strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{where}: {column} {text!r} is not an integer") from None
    if value < 1:
        raise ValueError(f"{where}: {column} must be at least 1, got {value}")
    return value
