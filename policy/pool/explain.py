"""Words for users: why a job waits, in the status message ``kubectl get tfjob`` shows.

Each is written into the job's Admission and from there into its status, so a message
changes only when its reason does: a word that changed with every pod event (how much is
free right now) would rewrite every waiting job's Admission and status on every event.

Each is read by the job's tenant, with access to its own namespace only: a job of its
namespace is named, one of another namespace never is ("a job in another namespace",
``named``). The pool's own status, cluster-scoped and for admins, may name any.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from policy.model.admission import (
    NO_FEASIBLE_NODE,
    NO_NODES,
    TOO_LARGE,
    WAITING_FOR_CAPACITY,
    Refusal,
)
from policy.model.cluster import Cluster, Pod
from policy.model.jobs import WORKER, Job, child_name
from policy.model.priority import Priorities
from policy.model.refusal import refused_note
from policy.model.resources import HOST_PORT, PODS, Resources, amount
from policy.pool.filters import rejection
from policy.pool.placement import Eligible, PodRequest, required_slots, slots


def wait_reason(
    cluster: Cluster, gang_types: Sequence[str], eligible: Eligible, fits: bool, fits_empty: bool
) -> str:
    """The code of what ``wait_message`` says, without building the words."""
    if not cluster.nodes:
        return NO_NODES
    if any(not eligible.get(t) for t in gang_types):
        return NO_FEASIBLE_NODE
    return WAITING_FOR_CAPACITY if fits or fits_empty else TOO_LARGE


ELSEWHERE = "a job in another namespace"
HIGHER_ELSEWHERE = "a higher-priority job in another namespace"


def named(key: str, namespace: str, elsewhere: str = ELSEWHERE) -> str:
    """A job's ``key`` (namespace/name) as words a tenant of ``namespace`` reads: the key
    itself when the job is in that namespace, else ``elsewhere``."""
    return key if key.partition("/")[0] == namespace else elsewhere


def listed(keys: Sequence[str], namespace: str, shown: int = 3) -> str:
    """Jobs as a tenant of ``namespace`` reads them: its own by name (the first
    ``shown``), the others counted ("a, b, 2 more and 3 jobs in other namespaces")."""
    mine = [k for k in keys if k.partition("/")[0] == namespace]
    others = len(keys) - len(mine)
    parts = list(mine[:shown])
    if len(mine) > shown:
        parts.append(f"{len(mine) - shown} more")
    if others:
        parts.append(ELSEWHERE if others == 1 else f"{others} jobs in other namespaces")
    return ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else "".join(parts)


_NAMES = {"PS": "parameter server", "Chief": "chief", "Master": "master", "Evaluator": "evaluator"}


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def describe_gang(slots: Sequence[PodRequest]) -> str:
    counts: dict[str, int] = {}
    for s in slots:
        counts[s.type] = counts.get(s.type, 0) + 1
    parts = [_count(n, _NAMES.get(t, t.lower())) for t, n in counts.items() if t != WORKER]
    text = " and ".join(parts) if parts else ""
    if WORKER in counts:
        w = _count(counts[WORKER], "worker")
        text = f"{text} plus {w}" if text else w
    return text


def _amounts(have: Resources, names: Sequence[str]) -> str:
    return ", ".join(amount(k, have[k]) for k in names) or "nothing"


def _largest(allocatable: Mapping[str, Resources], need: Resources, nodes: Sequence[str]) -> str:
    """The node that covers most of ``need`` (ties: first by name)."""
    names = [k for k in need if k != PODS]

    def cover(n: str) -> float:
        return sum(min(allocatable[n][k], need[k]) / max(need[k], 1) for k in names)

    return min(nodes, key=lambda n: (-cover(n), n))


def wait_message(
    job: Job,
    cluster: Cluster,
    eligible: Eligible,
    allocatable: Mapping[str, Resources],
    ahead: Sequence[str],
    fits_without_claims: bool,
    fits_when_empty: bool,
    static: bool = False,
) -> str:
    """Why a queued job waits, in words that change only when the reason does: the job's
    status is rewritten on every change, so a message quoting free capacity would change
    with every pod that comes or goes (capacity per node is the pool's status).
    ``static``: the policy admits every worker of Worker.replicas at once, so that is the
    gang the words name (not min-instances)."""
    at_once = (job.worker.replicas if job.worker else 0) if static else job.min_workers
    gang = [*required_slots(job), *slots(job.worker, at_once)]
    if not cluster.nodes:
        return "the training pool has no nodes"
    for rtype in dict.fromkeys(s.type for s in gang):
        if not eligible.get(rtype):
            spec = job.replicas[rtype].template.get("spec") or {}
            why = [rejection(n, spec) for n in cluster.nodes][:3]
            return f"no node can take its {rtype} pods: {'; '.join(filter(None, why))}"
    if fits_without_claims:
        shown = listed(ahead, job.namespace)
        return f"jobs ahead in the queue ({shown}) claim the free capacity it needs"
    need = Resources.total(s.request for s in gang)
    # A job that is not elastic (an MXJob, a PyTorchJob without an elasticPolicy) has no
    # minimum: its gang is all its workers.
    scalable = job.kind.elastic and job.extension.scalable
    extra = (
        f" ({job.extension.min_field})"
        if job.worker and at_once and scalable and not static
        else ""
    )
    wants = f"needs {need.without(PODS).describe() or 'a pod slot'} for its "
    wants += f"{describe_gang(gang)}{extra} at once"
    if any(k.startswith(HOST_PORT) for k in need):
        wants += " (a node has each host port once: one such pod per node)"
    if fits_when_empty:
        return f"{wants}, more than is free now; it starts when running jobs give room back"
    names = [k for k in need if k != PODS] or [PODS]
    usable = sorted({n for s in gang for n in eligible[s.type]})
    room = sum(allocatable[n][PODS] for n in usable)
    if room < need[PODS]:  # a count of pods, not a size, is what no node set can take
        return (
            f"{wants}: {_count(len(gang), 'pod')}, more than the nodes it may use run in all "
            f"({_count(room // 1000, 'pod')} on {_count(len(usable), 'node')}): it waits "
            "for larger or more nodes"
        )
    best = _largest(allocatable, need, usable)
    return (
        f"{wants}, more than the pool's nodes hold even when empty (the largest, {best}, "
        f"has {_amounts(allocatable[best], names)}): it waits for larger or more nodes"
    )


def repair_message(
    job: Job, unplaced: Sequence[PodRequest], refused: Sequence[Refusal] = ()
) -> str:
    """An admitted job's pods that found no room (a lost node, a restart): what they need,
    not how much is free this second (that changes with every pod); and the nodes it may
    not use now because the kube-scheduler refused its pods there."""
    names = ", ".join(child_name(job, s.type, s.index) for s in unplaced[:3])
    more = f" and {len(unplaced) - 3} more" if len(unplaced) > 3 else ""
    need = unplaced[0].request
    words = (
        f"{_count(len(unplaced), 'pod')} waiting for room ({names}{more}): each needs "
        f"{need.without(PODS).describe() or 'a pod slot'}, more than a node it may use has free"
    )
    return f"{words}; {refused_note(refused)}" if refused else words


def awaited_message(awaited: Sequence[tuple[str, Pod]], own: str) -> str:
    """Who the job waits for: "waiting for 2 workers of team-a/job3 to terminate"; the
    jobs of other namespaces than ``own``'s, counted together, unnamed."""
    namespace = own.partition("/")[0]
    elsewhere = {key for key, _ in awaited if key and key.partition("/")[0] != namespace}
    together = ELSEWHERE if len(elsewhere) == 1 else f"{len(elsewhere)} jobs in other namespaces"
    by_job: dict[str, dict[str, int]] = {}
    for key, pod in awaited:
        if key == own:
            continue
        label = together if key in elsewhere else key or "other jobs"
        kinds = by_job.setdefault(label, {})
        word = "worker" if pod.replica_type == "worker" else "pod"
        kinds[word] = kinds.get(word, 0) + 1
    parts = [
        " and ".join(_count(n, w) for w, n in kinds.items()) + f" of {key}"
        for key, kinds in sorted(by_job.items())
    ]
    if not parts:
        return "waiting for its room to be freed"
    return f"waiting for {', '.join(parts)} to terminate"


def blocked_message(head: str, namespace: str) -> str:
    return (
        f"waiting behind {named(head, namespace)}, which has waited longest and for which no "
        "shrink of running jobs can make room (policy dragon admits no one behind it)"
    )


def unhelped_message(explain: Callable[[], str]) -> str:
    return f"{explain()}; no shrink of the running jobs it may shrink would make room either"


def unknown_class_message(explain: Callable[[], str], name: str, priorities: Priorities) -> str:
    return (
        f"{explain()}; PriorityClass {name!r} does not exist, so the job is queued with the "
        f"default priority {priorities.default}"
    )
