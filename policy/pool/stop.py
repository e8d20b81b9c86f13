"""Stop: a pool on hold admits nothing new; a drained pool also stops every admitted job.

Kueue's ClusterQueue ``spec.stopPolicy`` (``apis/kueue/v1beta1/clusterqueue_types.go``),
for a pool (``TrainingPool.spec.stopPolicy``). While it is anything but ``None`` the pool is
inactive: it makes no new reservation. Then

* ``Hold``: admitted jobs run to completion. They keep what they were admitted with (an
  admitted Workload keeps its quota): their missing or restarting pods are placed again,
  lost workers are replaced up to their worker target, their TensorBoards are placed and
  Migration requests are answered. No queued job is admitted, no job grows into idle room
  (more workers would be a new reservation, as an elastic Workload's new slice is), and no
  job is shrunk or preempted for a waiting one (none could be admitted).
* ``HoldAndDrain``: every admitted job is also stopped, as a preemption stops it (Kueue
  evicts each admitted Workload, reason ``ClusterQueueStopped``): its pods go, with their
  grace period to checkpoint, and it queues again as a whole gang, its record saying it
  was preempted by ``TrainingPool NAME`` because the pool is drained.

Every waiting job says why (reason ``PoolHeld``), and the pool's status carries Kueue's
``Active`` condition: False, reason ``Stopped``, while the pool is held. Releasing the pool
(``None``) admits the queue again in its usual order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from policy.model.admission import POOL_HELD
from policy.model.pool import StopPolicy
from policy.pool.ledger import Ledger, Stopped
from policy.pool.rules import Rules
from policy.pool.running import Running

ACTIVE = "Active"  # the pool's status condition (Kueue's ClusterQueue condition)
STOPPED = "Stopped"  # its reason while the pool is held (Kueue's)
READY = "Ready"  # its reason while the pool admits (Kueue's)
INVALID_SPEC = "InvalidSpec"  # its reason while the pool's spec cannot be used


def holds(rules: Rules) -> bool:
    """Whether the pool admits nothing new (``Hold`` or ``HoldAndDrain``)."""
    return rules.stop != "None"


def drainer(pool: str) -> str:
    """Who a drained job's preemption record says stopped it."""
    return f"TrainingPool {pool}"


def drain(ledger: Ledger, running: Sequence[Running], pool: str) -> tuple[str, ...]:
    """Under ``HoldAndDrain``, stop every admitted job that has not ended, as a preemption:
    its pods' room is releasing and it queues again as a whole gang. The jobs stopped."""
    if ledger.rules.stop != "HoldAndDrain":
        return ()
    by = drainer(pool)  # a pool, not a job: every tenant may read its name
    stopped = Stopped(by, "the pool is drained: spec.stopPolicy is HoldAndDrain", False, by)
    out = []
    for r in running:
        key = r.job.key
        if r.verdict.outcome is not None or key in ledger.preempted:
            continue
        ledger.stop(key, stopped, [p for p in r.pods if p.occupies and not p.terminating])
        out.append(key)
    if out:
        ledger.mark_acted()
    return tuple(out)


def held_reason(pool: str, stop: StopPolicy) -> tuple[str, partial[str]]:
    """Why a queued job of a held pool waits: the code and its words."""
    return POOL_HELD, partial(held_message, pool, stop)


def held_message(pool: str, stop: StopPolicy) -> str:
    what = "drained" if stop == "HoldAndDrain" else "held"
    return (
        f"waiting: TrainingPool {pool} is {what} (spec.stopPolicy: {stop}), so it admits no "
        f"job; it admits its queue again once released (kubectl dragonet release {pool})"
    )


def active_condition(
    stop: StopPolicy | None, observed: Any, stamp: str, problem: str = ""
) -> dict[str, Any]:
    """The pool's ``Active`` condition (a metav1.Condition, as Kueue's ClusterQueue has):
    True while it admits; False while it is held (``Stopped``) or its spec cannot be read
    (``stop`` None, ``InvalidSpec``). Its transition time is the observed one while its
    status stays, so a status written again is the same."""
    if problem or stop is None:
        status, reason, message = "False", INVALID_SPEC, f"Can't admit new jobs: {problem}"
    elif stop == "None":
        status, reason, message = "True", READY, "Can admit new jobs"
    else:
        running = (
            "its admitted jobs are preempted"
            if stop == "HoldAndDrain"
            else "its admitted jobs run to completion"
        )
        status, reason = "False", STOPPED
        message = f"Can't admit new jobs: spec.stopPolicy is {stop}; {running}"
    old = _observed(observed)
    since = old.get("lastTransitionTime") if old.get("status") == status else None
    return {
        "type": ACTIVE,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since if isinstance(since, str) and since else stamp,
    }


def _observed(status: Any) -> Mapping[str, Any]:
    """The ``Active`` condition of the pool's observed status, or {} (a status of any
    shape is read without failing)."""
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    if not isinstance(conditions, list):
        return {}
    for c in conditions:
        if isinstance(c, Mapping) and c.get("type") == ACTIVE:
            return c
    return {}
