"""``kubectl dragonet explain JOB``: why a job waits, shrank or was preempted, what would
let it run, its Events and its Admission, from what the API server holds.

The why is the pool's own words (the job's ``status.scheduling``, written from its
Admission by ``policy/pool/explain.py``); the gang it needs is computed by the pool's own
code (``policy.pool.placement``, ``policy.pool.explain.describe_gang``). What is new here
is only the hint per reason code of what would change the outcome, and the free room of
each node from the pool's status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from live.table import columns
from live.views import age, job_pool, place
from policy.model import admission as codes
from policy.model.cluster import L_OPERATOR, OPERATOR_NAME
from policy.model.jobs import (
    COEXIST_SELECTOR,
    DRAGONET,
    MULTIKUEUE,
    InvalidJob,
    JobKind,
    labels_of,
    managed_elsewhere,
    parse_job,
)
from policy.model.kinds import BY_KIND, TFJOB
from policy.model.kinds import KINDS as ALL_KINDS
from policy.model.resources import PODS, Resources
from policy.pool.explain import describe_gang
from policy.pool.placement import required_slots, slots

Obj = Mapping[str, Any]
KINDS: dict[str, JobKind] = {k.singular: k for k in ALL_KINDS}  # by kubectl's word

# What would let a job that waits for this reason run (the reason codes of
# policy/model/admission.py), in words for the person asking.
_HINTS = {
    codes.WAITING_FOR_CAPACITY: (
        "room for its whole gang: the jobs ahead of it in the queue are admitted first, "
        "and running jobs give room back as they finish or shrink"
    ),
    codes.WAITING_FOR_SHRINK: (
        "nothing to do: workers of running jobs are being removed to make its room; it "
        "starts once they have terminated"
    ),
    codes.WAITING_FOR_PREEMPTION: (
        "nothing to do: the jobs it preempted are terminating; it starts once they are gone"
    ),
    codes.PREEMPTED: (
        "its pods terminate first; then it is queued again as a whole gang and admitted "
        "when the gang fits (a higher priority, less attained service or, if it reports how "
        "far it is, less training left puts it earlier)"
    ),
    codes.NO_SHRINK_HELPS: (
        "running jobs finishing: it has waited past the starvation time and no shrink of "
        "the jobs it may shrink would make room"
    ),
    codes.BLOCKED_BEHIND_HEAD: (
        "the head of the queue being admitted first (policy dragon admits no one behind "
        "a starving head; policy dragonet lets smaller jobs pass it)"
    ),
    codes.TOO_LARGE: (
        "larger or more nodes in the pool, or a smaller gang (fewer min-instances, "
        "smaller requests): it does not fit even in the empty pool"
    ),
    codes.NO_FEASIBLE_NODE: (
        "a node its pods may use: compare their nodeSelector, affinity and tolerations "
        "with the pool's nodes (kubectl dragonet nodes)"
    ),
    codes.NO_NODES: "nodes in its pool: the pool's spec.nodeSelector matches none",
    codes.NO_SUCH_POOL: (
        "a TrainingPool of the name it gives (spec.runPolicy.schedulingPolicy.queue), or "
        "naming one that exists (kubectl get trainingpools)"
    ),
    codes.NO_KUBESHARE: (
        "a pool with KubeShare (spec.kubeshare v1 or v2), or asking for whole GPUs"
    ),
    codes.WAITING_FOR_POOL: (
        "its pool's sync: check that Metacontroller runs and Dragonet's controllers exist "
        "(kubectl get compositecontrollers)"
    ),
    codes.PODS_WAITING_FOR_ROOM: "room for its missing pods on the nodes they may use",
    codes.POOL_HELD: (
        "its pool being released (kubectl dragonet release, by whoever may patch "
        "TrainingPools): the pool's spec.stopPolicy holds it"
    ),
}


def runner(job: Obj, pods: Iterable[Obj]) -> str | None:
    """Who runs ``job`` when Dragonet does not (None: Dragonet), in words: told by its own
    marks (``runPolicy.managedBy`` and the label ``dragonet.io/managed-by``, the rule the
    pool and the job's sync follow), else by the pods it controls, whose
    ``training.kubeflow.org/operator-name`` says which operator made them (beside Kubeflow,
    docs/kubeflow.md: ``tfjob-controller``)."""
    spec = job.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    run = spec.get("runPolicy")
    owner = run.get("managedBy") if isinstance(run, Mapping) else None
    if managed_elsewhere(spec, labels_of(job)):
        if owner == MULTIKUEUE:
            return f"MultiKueue (runPolicy.managedBy: {MULTIKUEUE})"
        return (
            f"Kubeflow's training-operator (labelled {COEXIST_SELECTOR}, but its "
            f"runPolicy.managedBy is {owner or 'unset'}, not {DRAGONET})"
        )
    uid = (job.get("metadata") or {}).get("uid")
    for pod in pods:
        meta = pod.get("metadata") or {}
        refs = meta.get("ownerReferences") or ()
        if not any(
            isinstance(r, Mapping) and r.get("controller") and r.get("uid") == uid for r in refs
        ):
            continue
        made_by = labels_of(pod).get(L_OPERATOR)
        if isinstance(made_by, str) and made_by and made_by != OPERATOR_NAME:
            kubeflows = made_by == f"{str(job.get('kind', '')).lower()}-controller"
            who = "Kubeflow's training-operator" if kubeflows else f"operator {made_by}"
            return f"{who} (its pods say {L_OPERATOR}: {made_by})"
    return None


def kind_of(obj: Obj) -> JobKind:
    return BY_KIND.get(str(obj.get("kind"))) or TFJOB


def gang_need(job: Obj) -> tuple[str, Resources] | None:
    """What the job's gang asks for at once, as the pool computes it (None for a job the
    pool cannot read: its status says why)."""
    try:
        parsed = parse_job(job, kind_of(job))
    except (InvalidJob, ValueError, TypeError):
        return None
    gang = [*required_slots(parsed), *slots(parsed.worker, parsed.min_workers)]
    return describe_gang(gang), Resources.total(s.request for s in gang).without(PODS)


def free_by_node(pool: Obj | None) -> dict[str, Resources]:
    """Each node's free room, from the pool's ``status.nodeAllocation``."""
    rows = ((pool or {}).get("status") or {}).get("nodeAllocation") or []
    return {
        r["name"]: Resources.parse(r.get("allocatable")) - Resources.parse(r.get("allocated"))
        for r in rows
        if isinstance(r, Mapping) and r.get("name")
    }


def _room(need: Resources, free: Mapping[str, Resources]) -> str:
    """Where the gang's room stands now: on one node, across nodes, or not at all."""
    if not free:
        return ""
    whole = [n for n, room in sorted(free.items()) if need.fits_in(room)]
    if whole:
        return f"it would fit on {whole[0]} now" + (
            f" (and {len(whole) - 1} more)" if len(whole) > 1 else ""
        )
    total = Resources.total(free.values())
    if need.fits_in(total):
        return "the pool has that much free in all, but on no single node"
    short = {k: need[k] - total[k] for k in need if need[k] > total[k]}
    return "the pool is short of " + ", ".join(
        f"{Resources({k: v}).describe()}" for k, v in sorted(short.items())
    ).replace(", ", " and ")


def explain(
    job: Obj,
    admission: Obj | None,
    pool: Obj | None,
    events: Iterable[Obj],
    now: datetime,
    run_by: str | None = None,
) -> dict[str, Any]:
    """Everything ``explain`` shows, as one plain dict (``-o json|yaml`` prints it).
    ``run_by``: who runs the job, when not Dragonet (``runner``): nothing of a queue."""
    meta, status = job.get("metadata") or {}, job.get("status") or {}
    if run_by is not None:
        out = {"job": f"{meta.get('namespace')}/{meta.get('name')}", "kind": job.get("kind", "")}
        out |= {"pool": "", "phase": "", "reason": "", "message": "", "runBy": run_by}
        out |= _finished(status)
        out["events"] = event_rows(events, meta.get("uid"), now)
        return out
    scheduling = status.get("scheduling") or {}
    if not scheduling and admission is not None:
        # Under Kubeflow's TFJob CRD (docs/kubeflow.md) the job's status.scheduling is
        # pruned: the pool's decision is read from the Admission it is copied from.
        decided = admission.get("spec") or {}
        scheduling = {k: decided[k] for k in ("phase", "reason", "message") if decided.get(k)}
    key = f"{meta.get('namespace')}/{meta.get('name')}"
    phase = scheduling.get("phase") or ("Queued" if admission is None else "")
    # A job no sync has written a status for yet waits for its pool, as its own sync says.
    unseen = admission is None and not scheduling and phase == "Queued"
    reason = scheduling.get("reason") or (codes.WAITING_FOR_POOL if unseen else "")
    out: dict[str, Any] = {
        "job": key,
        "kind": job.get("kind", ""),
        "pool": scheduling.get("pool") or job_pool(job),
        "phase": phase,
        "reason": reason,
        "message": scheduling.get("message", ""),
    }
    # Its place in line: its own status's (readable with access to its namespace alone),
    # else the pool's list (the first 100).
    place = scheduling.get("queue") if phase == "Queued" else None
    entry = _queue_entry(pool, key, out["kind"])
    if isinstance(place, Mapping) and place.get("position"):
        out["position"] = place["position"]
        out["queued"] = place.get("length")
        out["queue"] = dict(place)
    elif entry is not None:
        out["position"] = entry.get("position")
        out["queued"] = ((pool or {}).get("status") or {}).get("queued")
    enqueued = (entry or {}).get("enqueued") or (
        status.get("enqueueTime") if "position" in out else None
    )
    if enqueued:
        out["enqueued"] = enqueued
        out["waited"] = age(enqueued, now)
    if scheduling.get("workers"):
        out["workers"] = scheduling["workers"]
    need = gang_need(job)
    if need is not None and phase == "Queued":
        words, amount = need
        out["needs"] = f"{amount.describe() or 'a pod slot'} at once, for its {words}"
        room = _room(amount, free_by_node(pool))
        if room:
            out["room"] = room
    hint = _hint(phase, reason, scheduling)
    if hint:
        out["wouldRun"] = hint
    service = scheduling.get("service") or {}
    last = service.get("lastPreemption")
    if last:
        out["preempted"] = {**last, "count": service.get("preemptions", 1)}
    scale = scheduling.get("lastScale")
    if scale:
        direction = "shrank" if scale.get("to", 0) < scale.get("from", 0) else "grew"
        out["lastScale"] = {"change": direction, **scale}
    if admission is not None:
        out["admission"] = _admission(admission)
    out |= _finished(status)
    out["events"] = event_rows(events, meta.get("uid"), now)
    return out


def _finished(status: Mapping[str, Any]) -> dict[str, Any]:
    for c in status.get("conditions") or ():
        if c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True":
            return {"finished": {"condition": c["type"], "time": c.get("lastTransitionTime")}}
    return {}


def _queue_entry(pool: Obj | None, key: str, kind: str) -> Mapping[str, Any] | None:
    for entry in ((pool or {}).get("status") or {}).get("queue") or []:
        if entry.get("job") == key and entry.get("kind", kind) == kind:
            return entry
    return None


def _hint(phase: str, reason: str, scheduling: Mapping[str, Any]) -> str:
    if phase == "Suspended":
        return "resuming it (spec.runPolicy.suspend: false); it then joins the back of the queue"
    if phase in ("Finished", "Invalid"):
        return ""
    if phase == "Admitted" and not reason:
        return ""
    return _HINTS.get(reason, "")


def _admission(admission: Obj) -> dict[str, Any]:
    spec = admission.get("spec") or {}
    pods = {}
    for p in spec.get("pods") or []:
        name = p.get("pod") or f"{p.get('type', '').lower()}-{p.get('index')}"
        pods[name] = p.get("node") or "(kube-scheduler)"
    out = {
        "name": (admission.get("metadata") or {}).get("name"),
        "phase": spec.get("phase"),
        "workers": spec.get("workers", 0),
        "pods": pods,
    }
    if spec.get("admittedAt"):
        out["admittedAt"] = spec["admittedAt"]
    return out


def _place_words(queue: Mapping[str, Any], job: str) -> str:
    """ "position 3 of 4 in the queue" (ranges past ten: "position 11-20 of 21-50"), and
    its place among its namespace's waiting jobs when that says more."""
    words = f"position {place(queue)} of {place(queue, 'length')} in the queue"
    mine = (place(queue, "positionInNamespace"), place(queue, "lengthInNamespace"))
    if mine != (place(queue), place(queue, "length")):
        words += f" ({mine[0]} of {mine[1]} in namespace {job.partition('/')[0]})"
    return words


def _last_seen(event: Obj) -> str | None:
    series = event.get("series") or {}
    return (
        series.get("lastObservedTime")
        or event.get("eventTime")
        or event.get("deprecatedLastTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
    )


def event_rows(events: Iterable[Obj], uid: str | None, now: datetime) -> list[dict[str, Any]]:
    """The job's Events (events.k8s.io/v1, regarding it), oldest first, as kubectl
    describe shows them: type, reason, when last seen, how often, note."""
    rows = []
    for e in events:
        regarding = e.get("regarding") or {}
        if uid and regarding.get("uid") and regarding.get("uid") != uid:
            continue  # an earlier job of the same name
        series = e.get("series") or {}
        count = series.get("count") or e.get("deprecatedCount") or 1
        rows.append(
            {
                "type": e.get("type", ""),
                "reason": e.get("reason", ""),
                "last": _last_seen(e),
                "age": age(_last_seen(e), now),
                "count": count,
                "note": e.get("note", ""),
            }
        )
    return sorted(rows, key=lambda r: r["last"] or "")


def render(info: Mapping[str, Any]) -> list[str]:
    """The explanation as lines of text (the default output)."""
    lines = []
    if info.get("runBy"):
        lines.append(
            f"{info['kind']} {info['job']}: run by {info['runBy']}; Dragonet does not queue, "
            "place or scale it (docs/kubeflow.md)"
        )
        if info.get("finished"):
            done = info["finished"]
            lines.append(f"Finished:   {done['condition']} at {done.get('time')}")
        return lines + _events(info)
    head = f"{info['kind']} {info['job']} in TrainingPool {info['pool']}: {info['phase'] or '?'}"
    if info.get("reason"):
        head += f" ({info['reason']})"
    if info.get("queue"):
        head += f", {_place_words(info['queue'], info['job'])}"
    elif info.get("position") is not None:
        head += f", position {info['position']} of {info.get('queued') or '?'} in the queue"
    if info.get("waited"):
        head += f", waited {info['waited']}"
    lines.append(head)
    if info.get("message"):
        lines.append(f"Why:        {info['message']}")
    if info.get("needs"):
        lines.append(
            f"Needs:      {info['needs']}" + (f"; {info['room']}" if info.get("room") else "")
        )
    if info.get("wouldRun"):
        lines.append(f"Would run:  {info['wouldRun']}")
    if "workers" in info:
        w = info["workers"]
        lines.append(
            f"Workers:    {w.get('current', 0)} running, target {w.get('target', 0)} "
            f"(min {w.get('min', 0)}, max {w.get('max', 0)})"
        )
    if info.get("lastScale"):
        s = info["lastScale"]
        lines.append(
            f"Last scale: {s['change']} from {s.get('from')} to {s.get('to')} workers at "
            f"{s.get('time')}: {s.get('reason', '')}"
        )
    if info.get("preempted"):
        p = info["preempted"]
        lines.append(
            f"Preempted:  at {p.get('time')} by {p.get('by')} ({p.get('reason', '')}); "
            f"{p.get('count')} time(s) in all"
        )
    adm = info.get("admission")
    if adm:
        lines.append(f"Admission:  {adm['name']}: {adm['phase']}, {adm['workers']} workers")
        lines += [f"  {pod:<22} {node}" for pod, node in adm["pods"].items()]
    elif info.get("finished"):
        done = info["finished"]
        lines.append(f"Finished:   {done['condition']} at {done.get('time')}")
        lines.append("Admission:  none (an Admission goes when its job finishes)")
    else:
        lines.append("Admission:  none yet")
    return lines + _events(info)


def _events(info: Mapping[str, Any]) -> list[str]:
    if info.get("eventsUnread"):  # not "<none>": none were read, which is not none exist
        return [f"Events:     {info['eventsUnread']}"]
    lines = ["Events:" if info["events"] else "Events:     <none>"]
    if info["events"]:
        table = [("TYPE", "REASON", "AGE", "COUNT", "MESSAGE")]
        table += [
            (e["type"], e["reason"], e["age"], str(e["count"]), e["note"]) for e in info["events"]
        ]
        lines += ["  " + line for line in columns(table)]
    return lines
