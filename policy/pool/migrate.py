"""Migrate: the pool's answer to Migration requests, and the moves it makes on its own.

The last step of a cycle, so a move takes only room that no repair, admission or growth
took. A move is make-before-break: the Admission places the worker's slot on the target
under a new pod name (``{job}-worker-{i}-m{n}``) and names the node it leaves (``from``);
the job's sync creates the replacement there and deletes the old pod once the replacement
runs. Same replica index: the same TF_CONFIG entry and Service, so no peer restarts.

Everything is recomputed from the API each cycle: the durable move count per worker slot
and the answer to each request live in the job's Admission (``moves``, ``migrations``),
and a replacement's name carries its move number too (an Admission rebuilt from scratch
still knows it). A decided answer stays decided (``Refused`` and ``Done`` never change);
asking again is a new request.

Targets: never the source node, never a node without room for the pod's requests (DRAGON
charged the target without checking), never a node the pod's constraints exclude. The
``dragon`` score is DRAGON's limits-based load (lowest wins; no move when the source is
among the best); the ``dragonet`` score is the worker's expected speed: next to its
parameter servers, then the CPU share its limits would get. A requested move (not
``Manual``) must make the worker ``minGain`` faster under ``dragonet``.

The planner's own moves: ``balance`` (on under ``dragonet``) moves a running CPU worker
off a node whose CPU its workers oversubscribe to a node with idle CPU where the score
finds it ``minGain`` faster, one a cycle, in the queue's order. The monitor asks for the
workers of a node that stands out from the pool, not for those of a node as full as the
others but shared by more (container-migration's speed-b: two busy nodes, one empty).
``consolidate`` and ``defragment`` (off by default) are below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from policy.model.admission import Slot
from policy.model.cluster import Pod
from policy.model.gpushare import without_device
from policy.model.jobs import WORKER, Job, child_name
from policy.model.migration import (
    ALREADY_MOVING,
    CHIEF_MOVABLE_ANNOTATION,
    DISABLED,
    DONE,
    IS_CHIEF,
    MOVE_CAP_REACHED,
    MOVING,
    NO_GAIN,
    NO_ROOM,
    NOT_A_WORKER,
    NOT_RUNNING,
    PENDING,
    PLANNED,
    REFUSED,
    STALE,
    THROTTLED,
    MigrationAnswer,
    MigrationRequest,
    Moves,
    move_of,
    pod_name,
)
from policy.pool.admit import gang_fits
from policy.pool.ledger import Ledger
from policy.pool.move_score import MoveRefused, NodeLoad
from policy.pool.rules import MigrationRules
from policy.pool.running import Running, cpu_worker, current_pod
from policy.pool.running import bursting as is_bursting

BALANCE = "Balance"
CONSOLIDATE = "Consolidate"
MANUAL = "Manual"


@dataclass(frozen=True)
class Move:
    """A worker slot on its way from ``source`` to ``target`` under pod name ``pod``."""

    source: str
    target: str
    pod: str


@dataclass(frozen=True)
class JobMoves:
    """What a cycle decided about one job's migrations (written into its Admission)."""

    names: Mapping[Slot, str] = field(default_factory=dict)  # pod names not {job}-{t}-{i}
    moving: Mapping[Slot, Move] = field(default_factory=dict)  # moves in flight (and new)
    moves: tuple[Moves, ...] = ()  # durable counts, per worker slot
    decisions: tuple[MigrationAnswer, ...] = ()  # answers to the job's live requests
    wake_at: datetime | None = None  # when a throttled request may move


def migrate(
    ledger: Ledger,
    running: Sequence[Running],
    requests: Mapping[str, Sequence[MigrationRequest]],
    rules: MigrationRules | None,
    now: datetime,
    waiting: Job | None = None,
) -> dict[str, JobMoves]:
    """Every running job's moves and every job's answers, by job key. ``waiting``: the
    first queued gang that found no room in this cycle (defragmentation's beneficiary)."""
    defragment = rules is not None and rules.defragment and waiting is not None
    balance = rules is not None and rules.balance
    busy = [
        r
        for r in running
        if defragment or (balance and r.bursts) or not _quiet(r, requests.get(r.job.key, ()), rules)
    ]
    states: list[tuple[_JobState, list[MigrationAnswer], list[datetime]]] = []
    if busy:  # (the load of every node: only worth reading when something may move)
        load = NodeLoad.of(ledger.cluster.pods, ledger.allocatable)
        for r in busy:
            states.append(_job_moves(ledger, load, r, requests.get(r.job.key, ()), rules, now))
    if balance and rules is not None and not any(st.moving for st, _, _ in states):
        # One move a cycle, the first job in the queue's order first (and it waits for its
        # crowded workers still starting): idle CPU goes to one job, which then finishes
        # sooner, rather than a little of it to each.
        for st in sorted((st for st, _, _ in states), key=_queued):
            if _balance(st, rules) is not False:
                break
    if defragment and waiting is not None and rules is not None:
        _defragment(ledger, [st for st, _, _ in states], waiting, rules)
    out: dict[str, JobMoves] = {}
    for state, decisions, wakes in states:
        out[state.r.job.key] = JobMoves(
            state.names,
            state.moving,
            tuple(sorted(state.counts.values(), key=lambda m: (m.type, m.index))),
            tuple(decisions),
            min(wakes) if wakes else None,
        )
    for key, reqs in requests.items():
        if key not in out:  # queued, finished or unknown: nothing runs to move
            out[key] = JobMoves(decisions=tuple(_not_running(q) for q in reqs))
    return out


def _quiet(r: Running, reqs: Sequence[MigrationRequest], rules: MigrationRules | None) -> bool:
    """Nothing to decide, carry or finish for this job: no request, no move on record or in
    flight, no moved pod, no consolidation. Its moves would be empty; most jobs, most cycles."""
    if reqs or (rules is not None and rules.consolidate):
        return False
    return not r.has_moves


def _queued(st: _JobState) -> tuple[float, str]:
    """A job's place in the queue's order: enqueue time, then key."""
    enqueued = st.r.job.enqueued
    return (enqueued.timestamp() if enqueued else 0.0, st.r.job.key)


def _idle(state: _JobState) -> Callable[[str], bool]:
    """Nodes with CPU that no pod there would use."""
    return lambda n: state.load.idle(n) > 0


def _not_running(q: MigrationRequest) -> MigrationAnswer:
    return MigrationAnswer(
        q.name, q.uid, q.pod, REFUSED, NOT_RUNNING, f"{q.pod}'s job is not running", q.node
    )


class _JobState:
    """One job's slots, pods, counts and moves while its requests are decided."""

    def __init__(self, ledger: Ledger, load: NodeLoad, r: Running, now: datetime) -> None:
        self.ledger, self.load, self.r, self.now = ledger, load, r, now
        job = r.job
        self.by_slot: dict[Slot, list[Pod]] = {}
        for p in r.pods:
            slot = job.slot(p.replica_type, p.index)
            if slot is not None and p.live:
                self.by_slot.setdefault(slot, []).append(p)
        self.by_name = {p.name: p for p in r.pods}
        admission = r.admission
        self.counts: dict[Slot, Moves] = {}
        if admission is not None:
            self.counts = {(m.type, m.index): m for m in admission.moves}
        for slot, pods in self.by_slot.items():
            seen = max(move_of(p.name) for p in pods)
            known = self.counts.get(slot)
            if seen > (known.count if known else 0):  # an Admission rebuilt: the names know
                self.counts[slot] = Moves(slot[0], slot[1], seen, None)
        self.names: dict[Slot, str] = {}
        self.moving: dict[Slot, Move] = {}
        self.finished: set[Slot] = set()
        self.called_off: dict[Slot, str] = {}  # moves given up, and why
        self._in_flight()
        for slot, pods in self.by_slot.items():
            if slot not in self.names:
                current = current_pod(job, slot, pods, admission)
                if current.name != child_name(job, *slot):
                    self.names[slot] = current.name

    def _in_flight(self) -> None:
        """Moves the Admission records: still moving, or done once the replacement runs
        and the old pod is gone."""
        admission = self.r.admission
        if admission is None or not admission.admitted:
            return
        for p in admission.pods:
            if not p.pod or not p.source:
                if p.pod:
                    self.names[p.slot] = p.pod
                continue
            replacement = self.by_name.get(p.pod)
            others = [q for q in self.by_slot.get(p.slot, ()) if q.name != p.pod]
            if replacement is not None and (
                replacement.phase in ("Succeeded", "Failed")
                or (replacement.phase == "Running" and not replacement.terminating and not others)
            ):
                self.names[p.slot] = p.pod
                self.finished.add(p.slot)
            elif replacement is None and p.node not in self.ledger.cluster.by_name:
                # Its target left the pool: the move is off, the old pod stays.
                self.called_off[p.slot] = f"{p.node} left the pool before {p.pod} started"
            elif replacement is not None and replacement.stuck and others:
                # The kube-scheduler found no room for it (a plan from a stale view): the
                # old pod stays, the replacement goes (the job's sync omits a stuck pod).
                self.called_off[p.slot] = f"{p.node} had no room for {p.pod} after all"
            else:
                self.names[p.slot] = p.pod
                self.moving[p.slot] = Move(p.source, p.node or p.source, p.pod)

    def base_slot(self, pod: str) -> Slot | None:
        """The slot a pod name (``{job}-{type}-{index}`` or ``...-m<n>``) belongs to."""
        pod_obj = self.by_name.get(pod)
        if pod_obj is not None:
            return self.r.job.slot(pod_obj.replica_type, pod_obj.index)
        for slot, name in self.names.items():
            if name == pod:
                return slot
        return None

    def throttled_until(self, slot: Slot, interval: timedelta) -> datetime | None:
        m = self.counts.get(slot)
        last = m.time if m is not None else None
        if last is not None and self.now < last + interval:
            return last + interval
        return None


def _job_moves(
    ledger: Ledger,
    load: NodeLoad,
    r: Running,
    reqs: Sequence[MigrationRequest],
    rules: MigrationRules | None,
    now: datetime,
) -> tuple[_JobState, list[MigrationAnswer], list[datetime]]:
    state = _JobState(ledger, load, r, now)
    previous = {d.request: d for d in (r.admission.migrations if r.admission else ())}
    decisions: list[MigrationAnswer] = []
    wakes: list[datetime] = []
    for q in sorted(reqs, key=lambda q: (q.created, q.name)):
        prev = previous.get(q.name)
        if prev is not None and prev.uid in ("", q.uid):
            if prev.phase in (REFUSED, DONE):
                decisions.append(prev)
                continue
            if prev.phase == MOVING:
                decisions.append(_progress(state, prev))
                continue
        decided, wake = _decide(state, q, rules)
        decisions.append(decided)
        if wake is not None:
            wakes.append(wake)
    if rules is not None and rules.consolidate:
        _consolidate(state, rules)
    return state, decisions, wakes


def _progress(state: _JobState, d: MigrationAnswer) -> MigrationAnswer:
    """A Moving answer, a cycle later: still moving, done, or called off."""
    replacement = _replacement(d)
    slot = state.base_slot(d.pod) or state.base_slot(replacement)
    if slot is not None and slot in state.moving:
        return d
    if slot is not None and slot in state.called_off:
        why = state.called_off[slot]
        return MigrationAnswer(
            d.request, d.uid, d.pod, REFUSED, NO_ROOM, why, d.source, None, d.move
        )
    if slot is not None and state.names.get(slot) == replacement:
        return _with_phase(d, DONE)
    message = f"{d.pod}'s worker was removed from the job while it moved"
    return MigrationAnswer(
        d.request, d.uid, d.pod, REFUSED, NOT_RUNNING, message, d.source, None, d.move
    )


def _replacement(d: MigrationAnswer) -> str:
    return d.pod if not d.move else pod_name(_base(d.pod), d.move)


def _base(name: str) -> str:
    n = move_of(name)
    return name[: -len(f"-m{n}")] if n else name


def _with_phase(d: MigrationAnswer, phase: str) -> MigrationAnswer:
    message = f"{d.pod} moved from {d.source} to {d.target} (move {d.move})"
    return MigrationAnswer(
        d.request, d.uid, d.pod, phase, d.reason, message, d.source, d.target, d.move
    )  # type: ignore[arg-type]


def _refuse(q: MigrationRequest, reason: str, message: str) -> MigrationAnswer:
    return MigrationAnswer(q.name, q.uid, q.pod, REFUSED, reason, message, q.node)


def _decide(
    state: _JobState, q: MigrationRequest, rules: MigrationRules | None
) -> tuple[MigrationAnswer, datetime | None]:
    job = state.r.job
    if rules is None:
        return _refuse(q, DISABLED, "the pool's spec.migration.enabled is false"), None
    pod = state.by_name.get(q.pod)
    if pod is None or pod.assumed:
        return _refuse(q, STALE, f"pod {q.pod} does not exist (any more)"), None
    if pod.node != q.node:
        where = f"on {pod.node}" if pod.node else "not on any node"
        message = f"{q.pod} is {where}, not on {q.node}: asked on a stale view"
        return _refuse(q, STALE, message), None
    slot = job.slot(pod.replica_type, pod.index)
    if slot is None or slot[0] != WORKER:
        what = slot[0] if slot else pod.replica_type
        return _refuse(q, NOT_A_WORKER, f"{q.pod} is a {what}: only workers move"), None
    if slot in state.moving or slot in state.finished:
        return _refuse(q, ALREADY_MOVING, f"worker {slot[1]} is being moved already"), None
    if pod.phase != "Running" or pod.terminating:
        return _refuse(q, NOT_RUNNING, f"{q.pod} is {pod.phase}, not Running"), None
    if _is_chief(job, slot):
        return _refuse(
            q,
            IS_CHIEF,
            f"worker 0 is {job.name}'s chief; give the job a Chief replica, or annotate it "
            f"{CHIEF_MOVABLE_ANNOTATION}=true if it survives losing worker 0",
        ), None
    count = state.counts.get(slot)
    if count is not None and count.count >= rules.max_moves:
        return _refuse(
            q, MOVE_CAP_REACHED, f"worker {slot[1]} has moved {count.count} times (the cap)"
        ), None
    until = state.throttled_until(slot, rules.min_interval)
    if until is not None:
        message = f"worker {slot[1]} moved less than {rules.min_interval.total_seconds():g} s ago"
        return MigrationAnswer(q.name, q.uid, q.pod, PENDING, THROTTLED, message, q.node), until
    manual = q.reason == MANUAL
    bursting = rules.balance and not manual and is_bursting(pod)
    if bursting and not state.load.full_without(pod.node or "", pod):
        message = f"{pod.node} would leave CPU idle without {q.pod}: it stays"
        return _refuse(q, NO_GAIN, message), None
    among = _idle(state) if bursting else None
    target, why = _target(state, pod, slot, rules, manual, among)
    if target is None and why[0] == NO_ROOM and among is not None:
        message = f"no other node has idle CPU for {q.pod}: a move would only take CPU from others"
        return _refuse(q, NO_GAIN, message), None
    if target is None:
        return _refuse(q, why[0], why[1]), None
    move = _start(state, pod, slot, target, q.reason)
    message = f"moving {q.pod} from {pod.node} to {target} as {move.pod}"
    n = state.counts[slot].count
    return MigrationAnswer(q.name, q.uid, q.pod, MOVING, why[0], message, pod.node, target, n), None


def _is_chief(job: Job, slot: Slot) -> bool:
    movable = str(job.annotations.get(CHIEF_MOVABLE_ANNOTATION, "")).lower() == "true"
    return job.chief_type is None and slot == (WORKER, 0) and not movable


def _target(
    state: _JobState,
    pod: Pod,
    slot: Slot,
    rules: MigrationRules,
    manual: bool,
    among: Callable[[str], bool] | None = None,
) -> tuple[str | None, tuple[str, str]]:
    """The best node with room for the pod (and ``among`` the nodes it accepts), by the
    pool's score, or None and (reason, message). Never the source; never a node the
    pod's constraints exclude."""
    ledger = state.ledger
    source = pod.node or ""
    eligible = ledger.eligible(state.r.job)[slot[0]]
    wanted = without_device(pod.request)  # (a SharePod's device is on the source)
    roomy = sorted(
        n
        for n in eligible
        if n != source
        and n in ledger.free
        and wanted.fits_in(ledger.free[n])
        and (among is None or among(n))
    )
    if not roomy:
        return None, (NO_ROOM, f"no other node has room for {pod.name}'s requests")
    chosen = rules.target(state.load, pod, roomy, state.r.ps_nodes, rules.min_gain, manual)
    if isinstance(chosen, MoveRefused):
        return None, (chosen.reason, chosen.message)
    return chosen, (PLANNED, "")


def _start(state: _JobState, pod: Pod, slot: Slot, target: str, reason: str) -> Move:
    """Claim the target's room and record the move (its count, time and the new name)."""
    ledger = state.ledger
    free = dict(ledger.free)
    free[target] = free[target] - without_device(pod.request)
    ledger.take(state.r.job.key, free)
    source = pod.node or ""
    state.load.move(pod, source, target)
    before = state.counts.get(slot)
    n = (before.count if before else 0) + 1
    state.counts[slot] = Moves(slot[0], slot[1], n, state.now, source, target, reason)
    move = Move(source, target, pod_name(child_name(state.r.job, *slot), n))
    state.moving[slot] = move
    state.names[slot] = move.pod
    return move


def _consolidate(state: _JobState, rules: MigrationRules) -> None:
    """Move one lonely running worker onto its parameter servers' node when room is there
    and the move pays (``minGain``). At most one per job per cycle."""
    r = state.r
    if not r.ps_nodes:
        return
    for slot, pods in sorted(state.by_slot.items()):
        if slot[0] != WORKER or slot in state.moving or slot in state.finished:
            continue
        if _is_chief(r.job, slot) or len(pods) != 1:
            continue
        pod = pods[0]
        if pod.phase != "Running" or pod.node in r.ps_nodes or pod.node is None:
            continue
        count = state.counts.get(slot)
        if count is not None and count.count >= rules.max_moves:
            continue
        if state.throttled_until(slot, rules.min_interval) is not None:
            continue
        target, _ = _target(state, pod, slot, rules, manual=False)
        if target is not None and target in r.ps_nodes:
            _start(state, pod, slot, target, CONSOLIDATE)
            return


def _balance(state: _JobState, rules: MigrationRules) -> bool | None:
    """Move one running CPU worker off a node whose CPU its workers oversubscribe to a
    node with idle CPU, the one the score chooses, when that pays ``minGain``; never when
    its going would leave CPU idle on its node. It only puts idle CPU to work: where
    every node is busy, moving workers around only moves CPU from one job to another,
    and each move costs a restore. True: one moves; None: such a worker is still starting
    (created less than ``_STARTING`` ago: it may move once it runs; one that never starts
    holds nobody up for longer); False: none."""
    load = state.load
    starting = False
    for slot, pods in sorted(state.by_slot.items()):
        pod = pods[0]
        if slot[0] != WORKER or len(pods) != 1 or not cpu_worker(pod) or pod.node is None:
            continue
        if load.share(pod.node, pod) >= 1.0 or not load.full_without(pod.node, pod):
            continue
        if pod.phase == "Pending" and not pod.terminating and _new(pod, state.now):
            starting = True
        if not _movable(state, slot, pods, rules):
            continue
        target, _ = _target(state, pod, slot, rules, False, _idle(state))
        if target is not None:
            _start(state, pod, slot, target, BALANCE)
            return True
    return None if starting else False


_STARTING = timedelta(seconds=60)  # a Pending pod this young is starting, not stuck


def _new(pod: Pod, now: datetime) -> bool:
    created = pod.created
    return created is not None and now - created < _STARTING


DEFRAGMENT = "Defragment"
_MOST_MOVES = 2  # a defragmentation moves at most this many workers


def _movable(state: _JobState, slot: Slot, pods: Sequence[Pod], rules: MigrationRules) -> bool:
    if slot[0] != WORKER or slot in state.moving or slot in state.finished or len(pods) != 1:
        return False
    pod = pods[0]
    count = state.counts.get(slot)
    return (
        pod.phase == "Running"
        and not pod.terminating
        and pod.node is not None
        and not _is_chief(state.r.job, slot)
        and (count is None or count.count < rules.max_moves)
        and state.throttled_until(slot, rules.min_interval) is None
    )


def _defragment(
    ledger: Ledger, states: Sequence[_JobState], waiting: Job, rules: MigrationRules
) -> None:
    """Move at most two running workers off one node so that ``waiting``, whose gang fits
    in the pool's free room but on no placement of it, fits (volcano#3948,
    KAI-Scheduler#1311). Nothing while any move is in flight (one defragmentation at a
    time), nor when the gang would not fit even then. Workers go to the node with room
    that keeps them fastest (their parameter servers' node first); the freed node is the
    first, by name, that needs the fewest moves."""
    if any(st.moving for st in states) or gang_fits(ledger, waiting, ledger.free):
        return
    candidates: dict[str, list[tuple[_JobState, Slot, Pod]]] = {}
    for st in states:
        for slot, pods in sorted(st.by_slot.items()):
            if _movable(st, slot, pods, rules):
                candidates.setdefault(pods[0].node or "", []).append((st, slot, pods[0]))
    best: list[tuple[_JobState, Slot, Pod, str]] | None = None
    for node in sorted(candidates):
        plan = _clear(ledger, candidates[node], node, waiting)
        if plan is not None and (best is None or len(plan) < len(best)):
            best = plan
    for st, slot, pod, target in best or ():
        _start(st, pod, slot, target, DEFRAGMENT)


def _clear(
    ledger: Ledger, movable: Sequence[tuple[_JobState, Slot, Pod]], node: str, waiting: Job
) -> list[tuple[_JobState, Slot, Pod, str]] | None:
    """The fewest moves (at most two, largest requests first) off ``node`` after which the
    waiting gang fits, or None."""
    free = dict(ledger.free)
    moves: list[tuple[_JobState, Slot, Pod, str]] = []
    order = sorted(movable, key=lambda m: (-sum(m[2].request.values()), m[2].name))
    for st, slot, pod in order[:_MOST_MOVES]:
        eligible = ledger.eligible(st.r.job)[WORKER]
        wanted = without_device(pod.request)
        roomy = [n for n in sorted(eligible) if n != node and n in free and wanted.fits_in(free[n])]
        if not roomy:
            continue
        target = min(roomy, key=lambda n: (n not in st.r.ps_nodes, n))
        free[target] = free[target] - wanted
        free[node] = free[node] + pod.request
        moves.append((st, slot, pod, target))
        if gang_fits(ledger, waiting, free):
            return moves
    return None
