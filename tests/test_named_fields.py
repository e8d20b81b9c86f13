"""Named fields from the plan to the Admission: a field is passed by its name, and a name
that is not a field is refused where it is written (issue 40)."""

from __future__ import annotations

import pytest

from policy.model.admission import Placement
from policy.model.resources import Resources
from policy.model.slot import Slot, SlotLabel
from policy.pool.cycle import JobPlan
from policy.pool.ledger import Stopped
from policy.pool.sync import _admission_for
from tests.poolbuilder import PoolBuilder


def test_a_job_plan_is_built_by_field_names_only() -> None:
    view = PoolBuilder().node("a", 4).queued("q").view()
    q = view.assessed.queued[0]
    with pytest.raises(TypeError):
        JobPlan(q.job, q.pods, q.verdict, "Queued", 0)  # type: ignore[misc]
    plan = JobPlan(job=q.job, pods=q.pods, assessment=q.verdict, phase="Queued", workers_target=0)
    assert plan.workers_target == 0 and plan.reason == ""


def test_a_misspelt_admission_field_is_a_type_error_not_a_field_left_out() -> None:
    view = PoolBuilder().node("a", 4).queued("q").view()
    job = view.job("q")
    with pytest.raises(TypeError, match="mesage"):
        _admission_for(job, view.snap, "Queued", mesage="waiting")  # type: ignore[call-arg]
    admission = _admission_for(job, view.snap, "Queued", message="waiting", reason="R")
    assert (admission.message, admission.reason) == ("waiting", "R")


def test_a_slot_names_its_type_and_index_and_a_label_is_another_type() -> None:
    slot = Placement(type="Worker", index=1, node="a").slot
    assert type(slot) is Slot and (slot.rtype, slot.index) == ("Worker", 1)
    assert slot == ("Worker", 1)  # a key of the plan's placements, as before
    assert SlotLabel("worker", 1)._fields == ("label", "index")
    view = PoolBuilder().node("a", 4).running("r", ("Worker-0@a",)).view()
    labelled = view.run("r").admission.labelled
    assert labelled == {SlotLabel("worker", 0)}
    assert all(type(s) is SlotLabel for s in labelled)


def test_the_ledger_changes_through_its_methods() -> None:
    """A preemption is a typed record and its pods' room is releasing; a reservation
    never leaves less than nothing free."""
    view = PoolBuilder().node("a", 4).running("r", ("Worker-0@a", "Worker-1@a")).view()
    ledger, r = view.ledger, view.run("r")
    why = Stopped("default/q", "higher priority", las=False, shown="default/q")
    ledger.stop(r.job.key, why, r.pods)
    assert ledger.preempted == {"default/r": why}
    assert sorted(p.name for _, p in ledger.releasing["a"]) == ["r-worker-0", "r-worker-1"]
    ledger.reserve({"a": Resources.parse({"cpu": "100"})})
    assert ledger.free["a"]["cpu"] == 0
