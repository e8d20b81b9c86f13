"""The page of a live pool, from the cluster's objects: a dump (the Kubernetes ``List``
that ``kubectl get nodes,pods,trainingpools,tfjobs,mxjobs,admissions -A -o json`` returns,
:func:`load`) or the objects read from the cluster itself (:func:`from_objects`, which
``dragonet view --live`` calls with what ``live/`` lists).

A dump has no clock: "now" is its latest timestamp (a live read passes its own). Each
job's stretch of waiting runs from its creation to its Admission's ``admittedTime`` (or
now), its training from then on with the workers it runs now; a finished job stops at its
Succeeded or Failed condition. Its story is its Admission's words (phase, reason, message,
last scaling, preemptions, moves), its pods and their nodes, and its status conditions.
Other kinds are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import plotly.colors
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from policy.model.cluster import L_JOB, L_TYPE
from policy.model.jobs import pod_request
from policy.model.kinds import BY_KIND, KINDS, kinds_text
from policy.model.resources import Resources
from sim.view import page, timeline
from sim.view.timeline import Mark, Row, Span

JOB_KINDS = tuple(k.kind for k in KINDS)
SHOWN = ("Node", "Pod", "TrainingPool", "Admission", *JOB_KINDS)
GPU = "nvidia.com/gpu"
GIB = 2.0**30
Obj = Mapping[str, Any]


class DumpError(ValueError):
    """A dump that is not a readable List of objects: one line naming file and field."""


@dataclass
class JobState:
    """One job as the dump shows it."""

    kind: str
    namespace: str
    name: str
    obj: Obj
    admission: Obj | None = None
    pods: list[Obj] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"

    @property
    def label(self) -> str:
        own = f"{self.namespace}/{self.name}"
        return own if self.kind == "TFJob" else f"{own} ({self.kind})"


@dataclass(frozen=True)
class Dump:
    nodes: tuple[Obj, ...]
    pods: tuple[Obj, ...]
    pools: tuple[Obj, ...]
    jobs: tuple[JobState, ...]
    now: datetime | None
    until: str = "the dump's latest timestamp"  # what "now" is


def load(path: str | Path) -> Dump:
    """Read a dump; :class:`DumpError` names the file and the field that is wrong."""
    import orjson
    import yaml

    where = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise DumpError(f"{where}: {e.strerror or e}") from None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            doc = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise DumpError(
                f"{where}: neither JSON nor YAML ({' '.join(str(e).split())})"
            ) from None
    if not isinstance(doc, dict) or doc.get("kind") != "List":
        found = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
        raise DumpError(
            f"{where}: kind: expected List (kubectl get nodes,pods,trainingpools,"
            f"{','.join(k.plural for k in KINDS)},admissions -A -o json), found {found!r}"
        )
    items = doc.get("items")
    if not isinstance(items, list):
        raise DumpError(f"{where}: items: expected a list of objects")
    return from_objects(items, where)


def from_objects(items: Sequence[Any], where: str, now: datetime | None = None) -> Dump:
    """The pool as ``items`` show it (each with its ``kind``; other kinds are left out);
    ``now`` the moment they were read (default: their latest timestamp). :class:`DumpError`
    names ``where`` and the item that is wrong."""
    by_kind: dict[str, list[Obj]] = {k: [] for k in SHOWN}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("kind"), str):
            raise DumpError(f"{where}: items[{i}].kind: every item needs a kind")
        meta = item.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise DumpError(f"{where}: items[{i}].metadata.name: every item needs a name")
        if item["kind"] in by_kind:
            by_kind[item["kind"]].append(item)
    jobs = {
        (o["kind"], _ns(o), o["metadata"]["name"]): JobState(
            o["kind"], _ns(o), o["metadata"]["name"], o
        )
        for kind in JOB_KINDS
        for o in by_kind[kind]
    }
    for a in by_kind["Admission"]:
        ref = (a.get("spec") or {}).get("job") or {}
        job = jobs.get((str(ref.get("kind")), _ns(a), str(ref.get("name"))))
        if job is not None:
            job.admission = a
    for p in by_kind["Pod"]:
        name = (p["metadata"].get("labels") or {}).get(L_JOB)
        owner = next(iter(p["metadata"].get("ownerReferences") or ()), {})
        job = jobs.get((str(owner.get("kind")), _ns(p), str(name)))
        if job is not None:
            job.pods.append(p)
    if not jobs and not by_kind["Node"]:
        raise DumpError(f"{where}: items: no Nodes and no {kinds_text('or')} to show")
    ordered = sorted(jobs.values(), key=lambda j: (_created(j.obj) or "", j.key))
    until = "the moment they were read"
    if now is None:
        stamps = [t for o in items if isinstance(o, dict) for t in _times(o)]
        now = max((t for t in map(_parse, stamps) if t is not None), default=None)
        until = "the dump's latest timestamp"
    return Dump(
        tuple(by_kind["Node"]),
        tuple(by_kind["Pod"]),
        tuple(by_kind["TrainingPool"]),
        tuple(ordered),
        now,
        until,
    )


def _ns(o: Obj) -> str:
    return str(o["metadata"].get("namespace") or "default")


def _created(o: Obj) -> str | None:
    return o["metadata"].get("creationTimestamp")


def _times(o: Obj) -> list[str]:
    """Every timestamp an object carries that says something happened."""
    out = [_created(o) or ""]
    spec = o.get("spec") or {}
    status = o.get("status") or {}
    out.append(str(spec.get("admittedTime") or "") if isinstance(spec, dict) else "")
    if isinstance(status, dict):
        out.append(str(status.get("startTime") or ""))
        out.append(str(status.get("completionTime") or ""))
        for c in status.get("conditions") or ():
            if isinstance(c, dict):
                out += [str(c.get("lastTransitionTime") or ""), str(c.get("lastUpdateTime") or "")]
    out.append(str(o["metadata"].get("deletionTimestamp") or ""))
    if isinstance(spec, dict) and isinstance(spec.get("lastScale"), dict):
        out.append(str(spec["lastScale"].get("time") or ""))
    return [t for t in out if t]


def _parse(stamp: Any) -> datetime | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _done(job: JobState) -> tuple[str, datetime] | None:
    """("Succeeded" or "Failed", when) for a finished job."""
    for c in (job.obj.get("status") or {}).get("conditions") or ():
        if c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True":
            t = _parse(c.get("lastTransitionTime"))
            if t is not None:
                return str(c["type"]), t
    return None


def _declared_workers(job: JobState) -> int:
    """A finished job's workers as its spec declares them (its Admission is gone)."""
    spec = job.obj.get("spec") or {}
    kind = BY_KIND.get(job.kind)
    replicas = spec.get(kind.replica_specs_field) if kind else None
    if isinstance(replicas, dict):
        for name, replica in (replicas or {}).items():
            if str(name).lower() == "worker" and isinstance(replica, dict):
                value = replica.get("replicas", 1)
                return value if isinstance(value, int) else 0
    return 0


def _role(pod: Obj) -> str:
    return (pod["metadata"].get("labels") or {}).get(L_TYPE, "")


def _running(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get(
        "deletionTimestamp"
    )


def _request(pod: Obj) -> Resources:
    try:
        return pod_request(pod.get("spec") or {})
    except (ValueError, TypeError, KeyError):
        return Resources({})  # a pod whose quantities cannot be read holds nothing here


def workers_now(job: JobState) -> int:
    return sum(1 for p in job.pods if _role(p) == "worker" and _running(p))


def row(job: JobState, origin: datetime, now: datetime) -> Row:
    """A job's stretches, in seconds from ``origin``."""

    def at(t: datetime) -> float:
        return (t - origin).total_seconds()

    created = _parse(_created(job.obj)) or origin
    spec = (job.admission or {}).get("spec") or {}
    admitted = _parse(spec.get("admittedTime")) if spec.get("phase") == "Admitted" else None
    done = _done(job)
    if admitted is None and done is not None:  # its Admission went when it finished
        admitted = _parse((job.obj.get("status") or {}).get("startTime"))
    end = done[1] if done else now
    spans = []
    if admitted is None or admitted > end:
        spans.append(Span(at(created), at(end), "waiting"))
    else:
        if admitted > created:
            spans.append(Span(at(created), at(admitted), "waiting"))
        workers = workers_now(job) if done is None else int(spec.get("workers") or 0)
        if done is not None and not spec:
            workers = _declared_workers(job)
        spans.append(Span(at(admitted), at(end), "training", workers))
    marks = []
    last = ((spec.get("service") or {}).get("lastPreemption")) or {}
    if (t := _parse(last.get("time"))) is not None:
        marks.append(Mark(at(t), "preempted", f"preempted by {last.get('by')}"))
    for m in spec.get("moves") or ():
        if (t := _parse(m.get("time"))) is not None:
            slot = f"{str(m.get('type')).lower()}-{m.get('index')}"
            marks.append(Mark(at(t), "moved", f"moved {slot} {m.get('from')} -> {m.get('to')}"))
    return Row(job.label, job.key, tuple(s for s in spans if s.end_s >= s.start_s), tuple(marks))


def story(job: JobState, now: datetime) -> str:
    spec = (job.admission or {}).get("spec") or {}
    lines = [f"{job.namespace}/{job.name} ({job.kind})"]
    lines.append(f"created   {_created(job.obj) or '?'}")
    if spec:
        lines.append(f"pool      {spec.get('pool', '?')}: {spec.get('phase', '?')}")
        if spec.get("admittedTime"):
            lines.append(f"admitted  {spec['admittedTime']}")
        if spec.get("reason"):
            lines.append(f"reason    {spec['reason']}: {spec.get('message', '')}")
        lines.append(f"workers   target {spec.get('workers', 0)}, running {workers_now(job)}")
        if scale := spec.get("lastScale"):
            lines.append(
                f"scaled    {scale.get('time')} {scale.get('from')} -> {scale.get('to')}: "
                f"{scale.get('reason', '')}"
            )
        service = spec.get("service") or {}
        if service.get("preemptions"):
            last = service.get("lastPreemption") or {}
            lines.append(
                f"preempted {service['preemptions']} time(s); last {last.get('time')} by "
                f"{last.get('by')}: {last.get('reason', '')}"
            )
        for m in spec.get("moves") or ():
            lines.append(
                f"moved     {m.get('time')} {str(m.get('type')).lower()}-{m.get('index')} "
                f"{m.get('from')} -> {m.get('to')} ({m.get('reason', '')})"
            )
    elif (done := _done(job)) is not None:
        lines.append(
            f"pool      finished: {done[0]} at {done[1].strftime('%Y-%m-%dT%H:%M:%SZ')} "
            "(its Admission went with it)"
        )
    else:
        lines.append("pool      no Admission yet")
    for p in sorted(job.pods, key=lambda p: p["metadata"]["name"]):
        node = (p.get("spec") or {}).get("nodeName") or "(no node)"
        phase = (p.get("status") or {}).get("phase") or "?"
        lines.append(f"pod       {p['metadata']['name']} on {node}: {phase}")
    for c in (job.obj.get("status") or {}).get("conditions") or ():
        if c.get("status") == "True":
            lines.append(f"condition {c.get('type')}: {c.get('reason', '')} {c.get('message', '')}")
    if _done(job) is None:
        lines.append(f"as of     {now.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    return "\n".join(lines)


def build(dump: Dump) -> tuple[list[page.Section], dict[str, str]]:
    now = dump.now or datetime.now().astimezone()
    starts = [t for j in dump.jobs if (t := _parse(_created(j.obj))) is not None]
    origin = min(starts, default=now)
    rows = [row(j, origin, now) for j in dump.jobs]
    stories = {j.key: story(j, now) for j in dump.jobs}
    horizon = (now - origin).total_seconds()
    sections = [
        page.Section("Pools", html=pools_table(dump)),
        page.Section(
            "Allocation per node",
            nodes_figure(dump),
            id="nodes",
            note="What the pods bound to each node request, by job (hover a part for its "
            "job's story), against the node's allocatable (the black tick).",
            scroll=len(dump.nodes) > page.SCROLL_ROWS,
        ),
    ]
    if rows:
        sections.append(
            page.Section(
                f"Every job ({len(rows)}), by creation",
                timeline.figure(
                    [(", ".join(p["metadata"]["name"] for p in dump.pools) or "jobs", rows)],
                    [r.job for r in rows],
                    max(horizon, 1.0),
                ),
                id="timeline",
                note=f"Time from the first job's creation ({origin:%Y-%m-%d %H:%M:%S}) to "
                f"{dump.until}. Grey: waiting; green: admitted, shaded by the "
                "workers running now. Hover or click a bar for the job's story.",
                scroll=len(rows) > page.SCROLL_ROWS,
            )
        )
    return sections, stories


def pools_table(dump: Dump) -> str:
    rows = []
    for pool in dump.pools or ({"metadata": {"name": "(no TrainingPool)"}},):
        name = pool["metadata"]["name"]
        mine = [j for j in dump.jobs if ((j.admission or {}).get("spec") or {}).get("pool") == name]
        admitted = sum(
            1 for j in mine if (j.admission or {}).get("spec", {}).get("phase") == "Admitted"
        )
        rows.append(
            [
                name,
                _policy(pool),
                str(len(dump.nodes)),
                str(admitted),
                str(len(mine) - admitted),
            ]
        )
    return page.table(["Pool", "Policy", "Nodes", "Admitted", "Queued"], rows)


def _policy(pool: Obj) -> str:
    """The pool's policy (the CRD's default when its spec names none)."""
    from policy.model.pool import PoolSpec

    spec = pool.get("spec")
    if not isinstance(spec, dict):
        return ""
    return str(spec.get("policy") or PoolSpec().policy)


def nodes_figure(dump: Dump) -> go.Figure:
    """One panel per resource: each node's allocatable, and what each job's pods request."""
    alloc = {
        n["metadata"]["name"]: Resources.parse((n.get("status") or {}).get("allocatable") or {})
        for n in dump.nodes
    }
    names = sorted(alloc)
    resources = [r for r in (GPU, "cpu", "memory") if any(a.get(r, 0) for a in alloc.values())]
    resources = resources or ["cpu"]
    held: dict[str, dict[str, Resources]] = {}  # job key -> node -> requests
    labels: dict[str, str] = {}
    for job in dump.jobs:
        labels[job.key] = job.label
        for p in job.pods:
            node = (p.get("spec") or {}).get("nodeName")
            phase = (p.get("status") or {}).get("phase")
            if node in alloc and phase not in ("Succeeded", "Failed"):
                mine = held.setdefault(job.key, {})
                mine[node] = mine.get(node, Resources({})) + _request(p)
    titles = []
    for r in resources:
        total = sum(a.get(r, 0) for a in alloc.values()) / 1000
        used = sum(x.get(r, 0) for by in held.values() for x in by.values()) / 1000
        share = f"{100 * used / total:.0f}%" if total else "-"
        titles.append(f"{_label(r)}: {_amount(r, used)} of {_amount(r, total)} ({share})")
    fig = make_subplots(rows=1, cols=len(resources), shared_yaxes=True, subplot_titles=titles)
    palette = plotly.colors.qualitative.Dark24
    colors = {key: palette[i % len(palette)] for i, key in enumerate(sorted(held))}
    for col, r in enumerate(resources, start=1):
        for key, by_node in sorted(held.items()):
            on = [n for n in names if by_node.get(n, Resources({})).get(r, 0)]
            if not on:
                continue
            fig.add_trace(
                go.Bar(
                    orientation="h",
                    y=on,
                    x=[_scale(r, by_node[n].get(r, 0)) for n in on],
                    name=labels[key],
                    legendgroup=key,
                    marker={"color": colors[key]},
                    showlegend=False,
                    customdata=[key] * len(on),
                    hovertemplate=f"{labels[key]}<br>%{{y}}: %{{x}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        fig.add_trace(
            go.Scatter(
                mode="markers",
                y=names,
                x=[_scale(r, alloc[n].get(r, 0)) for n in names],
                marker={"symbol": "line-ns-open", "size": 16, "color": "black"},
                name="allocatable",
                showlegend=False,
                hovertemplate="%{y}: %{x} allocatable<extra></extra>",
            ),
            row=1,
            col=col,
        )
    fig.update_layout(
        barmode="stack",
        height=max(220, 22 * len(names) + 110),
        margin={"l": 10, "r": 10, "t": 50, "b": 30},
        plot_bgcolor="white",
    )
    fig.update_yaxes(
        type="category",
        categoryorder="array",
        categoryarray=list(reversed(names)),
        automargin=True,
    )
    fig.update_xaxes(rangemode="tozero", gridcolor="#eee")
    return fig


def _label(r: str) -> str:
    return {GPU: "GPU", "cpu": "CPU", "memory": "Memory"}.get(r, r)


def _scale(r: str, milli: float) -> float:
    units = milli / 1000
    return round(units / GIB, 2) if r == "memory" else round(units, 3)


def _amount(r: str, units: float) -> str:
    if r == "memory":
        return f"{units / GIB:,.0f} GiB"
    return f"{units:,.1f}".removesuffix(".0") + (" GPU" if r == GPU else " cores")


def render_page(
    dump: Dump, source: str, note: str = "", refresh: float | None = None, plotly_src: str = ""
) -> str:
    """A pool's page: where it was read and when, ``note`` after that (how it refreshes);
    ``refresh`` and ``plotly_src`` as :func:`page.render` takes them."""
    sections, stories = build(dump)
    when = dump.now.strftime("%Y-%m-%d %H:%M:%S %Z") if dump.now else "unknown time"
    subtitle = (
        f"{source}: {len(dump.nodes)} nodes, {len(dump.pods)} pods, {len(dump.jobs)} jobs, "
        f"as of {when}"
    )
    if note:
        subtitle += f". {note}"
    return page.render("Dragonet pool", subtitle, sections, stories, refresh, plotly_src)


def write_html(dump: Dump, path: str | Path, source: str, note: str = "") -> int:
    """Write a pool's page; its size in bytes."""
    return page.write(path, render_page(dump, source, note))


__all__: Sequence[str] = [
    "Dump",
    "DumpError",
    "build",
    "from_objects",
    "load",
    "render_page",
    "write_html",
]
