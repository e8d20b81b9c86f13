"""What a pool tells a job whose pods name a gang scheduler the pool does not use.

A template's ``schedulerName: kube-batch`` (Kubeflow's ``--enable-gang-scheduling``) asks for
kube-batch's PodGroup. Only a pool whose ``gangScheduler`` is that backend writes one, so
the job is told which pools do (the default pool sees them all) or what to change. The job
still runs as its pool runs jobs: what its pods wait for is said by its own status.
"""

from __future__ import annotations

from collections.abc import Sequence

from policy.model.admission import Gang
from policy.model.jobs import GANG_SCHEDULERS, Job, template_schedulers
from policy.model.pool import DEFAULT_SCHEDULER_NAMES, PoolSpec

# A pool the default pool sees: (name, gangScheduler, the pods' schedulerName there).
PoolGang = tuple[str, str, str]


def gang_of(spec: PoolSpec) -> Gang | None:
    """The Admission's ``gang`` for a pool's jobs (None without a gang scheduler)."""
    if spec.gangScheduler == "none":
        return None
    return Gang(scheduler=spec.gangScheduler, scheduler_name=spec.scheduler_name)


def backend_named(name: str, pools: Sequence[PoolGang] = ()) -> str | None:
    """The gang backend a schedulerName stands for, if any."""
    for _pool, backend, scheduler in pools:
        if scheduler == name:
            return backend
    return next((b for b, n in DEFAULT_SCHEDULER_NAMES.items() if n == name), None)


def note(job: Job, pool: str, spec: PoolSpec, others: Sequence[PoolGang] | None) -> str:
    """Why the job's PodGroup will not be what its templates ask for, and what to change;
    "" when they ask for nothing the pool does not do. ``others`` None: this pool cannot
    see the other pools (only the default pool watches them)."""
    known = {s for _, _, s in others or ()}
    own = spec.scheduler_name
    wanted = next(
        (n for n in template_schedulers(job) if n != own and (n in GANG_SCHEDULERS or n in known)),
        None,
    )
    if wanted is None:
        return ""
    backend = backend_named(wanted, others or ())
    if spec.gangScheduler == "none":
        here = (
            f"TrainingPool {pool!r} has no gang scheduler (gangScheduler: none), so no "
            "PodGroup is written for it"
        )
    else:
        here = (
            f"TrainingPool {pool!r} writes {spec.gangScheduler} PodGroups and binds with "
            f"schedulerName {own}"
        )
    using = sorted(p for p, _, s in others or () if s == wanted)
    if using:
        where = (
            f"pools that use {wanted}: {', '.join(using)} (name one in "
            "spec.runPolicy.schedulingPolicy.queue)"
        )
    elif others is not None:
        where = f"no pool uses {wanted}: create one with gangScheduler: {backend or wanted}"
    else:
        where = (
            f"name a pool with gangScheduler: {backend or wanted} in "
            "spec.runPolicy.schedulingPolicy.queue"
        )
    change = (
        "or remove schedulerName from its templates"
        if spec.gangScheduler == "none"
        else f"or remove schedulerName from its templates (the pool gives them {own})"
    )
    return f"its pods name schedulerName {wanted}, but {here}; {where}, {change}"
