"""Scenarios: a cluster plus jobs, from a scenario file, plain manifests, or a trace.

A scenario file (YAML)::

    name: gang-deadlock
    nodes:                      # short-form nodes, or a path to a nodes file
      - {name: gpu-1, cpu: 16, memory: 64Gi, gpu: 4}
    jobs:
      - manifest: big.yaml      # a TFJob file next to the scenario, or the object inline
        arrival: 0              # seconds after the start
        steps: 4000             # global steps to train (the simulated program)
        profile: imagenet       # optional: a Pollux application's speed profile

A job without a ``profile`` trains at the CPU its pods get (``sim.cpu``): burstable pods
(limits above requests) compete for their node's CPU; a GPU worker steps at its GPUs' pace.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sim.engine import Scenario
from sim.kube import node_object
from sim.profiles import APPLICATIONS, MANIFEST_PROFILE, profile
from sim.spec import JobSpec, ScenarioError, as_mxjob
from sim.traces import load_philly, load_pollux
from webhooks.manifests import (
    ManifestError,
    load_documents,
    load_jobs,
    load_nodes,
    read_text,
    refuse_unsupported,
    short_node_lines,
    short_nodes,
)

DEFAULT_STEPS = 1000.0


class _JobEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    manifest: str | dict[str, Any]
    arrival: float = Field(default=0.0, ge=0)
    steps: float = Field(default=DEFAULT_STEPS, gt=0)
    profile: str | None = None

    @field_validator("profile")
    @classmethod
    def _known(cls, app: str | None) -> str | None:
        if app is not None and app not in APPLICATIONS:
            close = difflib.get_close_matches(app, APPLICATIONS, n=1)
            hint = f'did you mean "{close[0]}"? ' if close else ""
            raise ValueError(
                f"unknown application {app!r} ({hint}known: {', '.join(APPLICATIONS)})"
            )
        return app


class _ScenarioFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    nodes: str | list[Any]  # short-form nodes are checked by webhooks.manifests
    jobs: list[_JobEntry] = Field(min_length=1)


def _in_our_words(err: ValidationError) -> str:
    """A scenario file's first problem, in words: a missing or unknown field with the
    fields that are known there, else the field and what pydantic says of it."""
    errors = err.errors()  # a misspelt field first: it is why another seems missing
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = [str(p) for p in first["loc"]]
    where = ".".join(loc)
    model = _JobEntry if loc and loc[0] == "jobs" else _ScenarioFile
    known = ", ".join(model.model_fields)
    if first["type"] == "missing":
        return f"{where}: required (a scenario file has {known})"
    if first["type"] == "extra_forbidden":
        return f"{where}: unknown field (known: {known})"
    return f"{where}: {first['msg'].removeprefix('Value error, ')}"


def _tfjobs(path: Path, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """The TFJobs and MXJobs of a file; an empty file is refused, and one with another kind
    too unless ``skipped`` collects a line for each object left out."""
    try:
        return [doc for _, doc in load_jobs(path, skipped)]
    except ManifestError as err:
        raise ScenarioError(str(err)) from None


def _spec(manifest: Mapping[str, Any], arrival: float, steps: float, app: str | None) -> JobSpec:
    meta = dict(manifest.get("metadata") or {})
    meta.setdefault("namespace", "default")
    return JobSpec(
        manifest={**manifest, "metadata": meta},
        arrival_s=arrival,
        steps=steps,
        profile=profile(app) if app else MANIFEST_PROFILE,
    )


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        raw = load_documents(path)
        if len(raw) != 1:
            raise ScenarioError(f"{path}: a scenario file holds one YAML document")
        data = _ScenarioFile.model_validate(raw[0])
    except ValidationError as err:
        raise ScenarioError(f"{path}: {_in_our_words(err)}") from err
    base = path.parent
    if isinstance(data.nodes, str):
        nodes = load_nodes(base / data.nodes)
    else:
        (line, lines), *_ = short_node_lines(path).items() or [(1, [])]
        nodes = short_nodes(path, line, data.nodes, lines)
    jobs: list[JobSpec] = []
    for i, entry in enumerate(data.jobs):
        if isinstance(entry.manifest, str):
            manifests = _tfjobs(base / entry.manifest)
        else:
            try:
                refuse_unsupported(path, f"jobs.{i}.manifest", entry.manifest)
            except ManifestError as err:
                raise ScenarioError(str(err)) from None
            manifests = [entry.manifest]
        jobs.extend(_spec(m, entry.arrival, entry.steps, entry.profile) for m in manifests)
    return Scenario(data.name or path.stem, tuple(nodes), _checked(jobs, path))


def from_manifests(
    job_paths: Sequence[str | Path],
    nodes_path: str | Path,
    *,
    steps: float = DEFAULT_STEPS,
    spacing_s: float = 0.0,
    skipped: list[str] | None = None,
) -> Scenario:
    """Jobs from TFJob files, in order, ``spacing_s`` apart. With ``skipped``, objects of
    other kinds in them (a ConfigMap in a bundle) are left out with a line there."""
    manifests = [m for p in job_paths for m in _tfjobs(Path(p), skipped)]
    jobs = [_spec(m, i * spacing_s, steps, None) for i, m in enumerate(manifests)]
    name = ", ".join(Path(p).stem for p in job_paths)
    return Scenario(name, tuple(load_nodes(nodes_path)), _checked(jobs, name))


def gpu_cluster(nodes: int = 16, gpus: int = 4) -> tuple[dict[str, Any], ...]:
    """Pollux's testbed: g4dn.12xlarge nodes (48 vCPU, 192 GiB, 4 T4 GPUs)."""
    return tuple(
        node_object(f"gpu-{i:02d}", {"cpu": "48", "memory": "192Gi", "nvidia.com/gpu": str(gpus)})
        for i in range(1, nodes + 1)
    )


def from_trace(
    path: str | Path,
    *,
    jobs: int = 1000,
    start: int = 0,
    load: float = 1.0,
    nodes_path: str | Path | None = None,
    mx_share: float = 0.0,
    adaptive: bool = False,
) -> Scenario:
    """A Philly CSV (``timestamp,duration,num_gpus,...``) or a Pollux workload CSV;
    ``mx_share`` of its jobs (every 1/share-th, deterministically) replayed as MXJobs;
    ``adaptive``: a Pollux workload's jobs declare the batch sizes they can take."""
    path = Path(path)
    nodes = tuple(load_nodes(nodes_path)) if nodes_path else gpu_cluster()
    gpus = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in nodes)
    header = read_text(path).split("\n", 1)[0]
    if adaptive and not header.startswith("name,time,"):
        raise ScenarioError(f"{path}: --adaptive-batch needs a Pollux workload (name,time,...)")
    if header.startswith("timestamp,"):
        specs = load_philly(path, jobs=jobs, start=start, load=load, max_gpus=gpus)
        name = f"{path.stem}[{start}:{start + jobs}]"
    elif header.startswith("name,time,"):
        specs = load_pollux(path, jobs=jobs, start=start, load=load, adaptive=adaptive)
        whole = start == 0 and len(specs) < jobs  # the file ran out: every job
        name = path.stem if whole else f"{path.stem}[{start}:{start + len(specs)}]"
    else:
        raise ScenarioError(f"{path}: not a Philly or Pollux trace (header {header!r})")
    if load != 1.0:
        name += f" x{load:g} load"
    if adaptive:
        name += ", adaptive batch"
    if mx_share:
        specs = mix_mxjobs(specs, mx_share)
        name += f", {mx_share:.0%} MXJobs"
    return Scenario(name, nodes, _checked(specs, path))


def mix_mxjobs(specs: list[JobSpec], share: float) -> list[JobSpec]:
    """Every job whose position crosses a multiple of ``1/share`` becomes the MXJob of the
    same shape (``sim.spec.as_mxjob``): exactly ``share`` of them, spread evenly."""
    if not 0.0 <= share <= 1.0:
        raise ScenarioError(f"the MXJob share must lie between 0 and 1, not {share}")
    return [
        replace(s, manifest=as_mxjob(s.manifest))
        if math.floor((i + 1) * share) > math.floor(i * share)
        else s
        for i, s in enumerate(specs)
    ]


def _checked(jobs: list[JobSpec], where: object) -> tuple[JobSpec, ...]:
    seen: set[str] = set()
    for j in jobs:
        if j.key in seen:
            raise ScenarioError(f"{where}: two jobs are named {j.key}")
        seen.add(j.key)
    return tuple(sorted(jobs, key=lambda j: j.arrival_s))


__all__ = ["ScenarioError", "from_manifests", "from_trace", "gpu_cluster", "load_scenario"]
