"""The Admission's wire format: what a running cluster stored still reads, and an unchanged
Admission is written back byte for byte (else every pool sync would rewrite it).

The two objects below are what the first, hand-written writer wrote for these Admissions
(every optional field set, and none): the pydantic schema that now reads and writes them
must give the very same bytes back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from policy.model.admission import Admission, Placement

EVERY_FIELD: dict[str, Any] = {
    "apiVersion": "dragonet.io/v1alpha1",
    "kind": "Admission",
    "metadata": {
        "name": "tfjob-mnist",
        "namespace": "team-a",
        "labels": {"dragonet.io/pool": "gpu", "dragonet.io/job-name": "mnist"},
    },
    "spec": {
        "pool": "gpu",
        "job": {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "mnist", "uid": "u-1"},
        "phase": "Admitted",
        "reason": "",
        "message": "",
        "binding": "nodeName",
        "workers": 2,
        "pods": [
            {"type": "PS", "index": 0, "node": "node-1", "hostname": "host-1"},
            {"type": "Worker", "index": 0, "node": "node-1", "hostname": "host-1"},
            {
                "type": "Worker",
                "index": 1,
                "node": "node-2",
                "pod": "mnist-worker-1-m1",
                "from": "node-3",
                "gpu": "GPU-7",
            },
            {"type": "TensorBoard", "index": 0},
        ],
        "admittedTime": "2026-11-21T09:00:00Z",
        "lastScale": {"time": "2026-11-21T09:05:00Z", "from": 1, "to": 2, "reason": "grew"},
        "gang": {"scheduler": "volcano", "schedulerName": "volcano"},
        "gangNote": "note",
        "moves": [
            {
                "type": "Worker",
                "index": 1,
                "count": 1,
                "time": "2026-11-21T09:06:00Z",
                "from": "node-3",
                "to": "node-2",
                "reason": "Manual",
            }
        ],
        "migrations": [
            {
                "request": "mnist-worker-1",
                "uid": "u-9",
                "pod": "mnist-worker-1",
                "phase": "Moving",
                "reason": "Planned",
                "message": "moving",
                "from": "node-3",
                "to": "node-2",
                "move": 1,
            }
        ],
        "kubeshare": "v1",
        "service": {
            "gpuSeconds": 12.346,
            "preemptions": 1,
            "lasPreemptions": 0,
            "lastPreemption": {
                "time": "2026-11-21T08:00:00Z",
                "by": "team-a/big",
                "reason": "higher priority",
            },
        },
        "gracePeriodSeconds": 30,
    },
}

NO_OPTIONAL_FIELD: dict[str, Any] = {
    "apiVersion": "dragonet.io/v1alpha1",
    "kind": "Admission",
    "metadata": {
        "name": "mxjob-q",
        "namespace": "team-a",
        "labels": {"dragonet.io/pool": "gpu", "dragonet.io/job-name": "q"},
    },
    "spec": {
        "pool": "gpu",
        "job": {"apiVersion": "kubeflow.org/v1", "kind": "MXJob", "name": "q", "uid": ""},
        "phase": "Queued",
        "reason": "WaitingForCapacity",
        "message": "waiting: no room",
        "binding": "affinity",
        "workers": 0,
        "pods": [],
    },
}


@pytest.mark.parametrize("stored", [EVERY_FIELD, NO_OPTIONAL_FIELD], ids=["every", "none"])
def test_a_stored_admission_is_written_back_byte_for_byte(stored: dict[str, Any]) -> None:
    admission = Admission.from_object(stored)
    assert orjson.dumps(admission.to_object()) == orjson.dumps(stored)


def test_the_placement_read_is_the_one_the_job_renders() -> None:
    admission = Admission.from_object({**EVERY_FIELD, "metadata": {"namespace": "team-a"}})
    moved = admission.slots[("Worker", 1)]
    assert moved == Placement(
        type="Worker",
        index=1,
        node="node-2",
        pod="mnist-worker-1-m1",
        source="node-3",
        gpu="GPU-7",
    )
    assert admission.slots[("PS", 0)].host == "host-1"  # pinned by its hostname label
    assert admission.slots[("TensorBoard", 0)].host is None  # the kube-scheduler places it
    assert admission.job_key == "team-a/mnist"
    assert admission.moves[0].source == "node-3" and admission.moves[0].count == 1
    assert admission.migrations[0].target == "node-2" and admission.migrations[0].move == 1
    assert admission.service is not None and admission.service.last is not None
    assert admission.service.last.by == "team-a/big"


def test_metadata_stays_out_of_the_written_spec() -> None:
    stored = {**EVERY_FIELD, "metadata": {**EVERY_FIELD["metadata"], "generation": 7}}
    admission = Admission.from_object(stored)
    assert admission.generation == 7
    spec = admission.to_object()["spec"]
    assert "namespace" not in spec and "generation" not in spec


def test_an_unreadable_entry_makes_the_whole_admission_unreadable() -> None:
    broken = {**EVERY_FIELD, "spec": {**EVERY_FIELD["spec"], "moves": [{"type": "Worker"}]}}
    with pytest.raises(ValueError, match="unreadable Admission spec"):
        Admission.from_object(broken)
    no_record = {**EVERY_FIELD, "spec": {**EVERY_FIELD["spec"], "service": {}}}
    with pytest.raises(ValueError, match="unreadable Admission spec"):
        Admission.from_object(no_record)  # a record always holds its GPU-seconds


def test_an_admission_built_with_a_misspelt_field_is_refused_not_dropped() -> None:
    """Issue 38: the planner's Admission is built by field names; a typo must fail loudly."""
    from pydantic import ValidationError

    from policy.model.admission import Admission, JobRef

    ref = JobRef(api_version="kubeflow.org/v1", kind="TFJob", name="a", uid="u")
    with pytest.raises(ValidationError, match="mesage"):
        Admission(pool="default", namespace="ns", job=ref, phase="Queued", mesage="hi")


def test_an_admission_read_back_leaves_out_what_a_newer_writer_added() -> None:
    from policy.model.admission import Admission

    obj = {
        "metadata": {"namespace": "ns", "generation": 2},
        "spec": {
            "pool": "default",
            "job": {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "a", "uid": "u"},
            "phase": "Admitted",
            "admittedTime": "2026-01-01T00:00:00Z",
            "fieldOfANewerVersion": {"x": 1},
        },
    }
    adm = Admission.from_object(obj)
    assert (adm.phase, adm.admitted_at, adm.generation) == (
        "Admitted",
        datetime(2026, 1, 1, tzinfo=UTC),
        2,
    )
