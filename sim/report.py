"""Human output of `dragonet simulate`: a live progress view and a policy comparison table.

Everything here reads :mod:`sim.results` only, so the simulator never depends on ``rich``
beyond this module; ``--json`` prints the raw summary instead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

from rich import progress as rp
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sim.results import Progress, SimResult

GPU = "nvidia.com/gpu"
GIB = 2.0**30
NONE = "—"
BEST = "bold green"

_LABELS = {GPU: "GPU", "cpu": "CPU", "memory": "Memory"}
_HOUR_UNITS = {GPU: "GPU-h", "cpu": "cpu-h", "memory": "GiB-h"}
_AMOUNT_UNITS = {GPU: "GPU", "cpu": "CPU", "memory": "GiB"}


# --- formatting -----------------------------------------------------------------------------


def format_duration(seconds: float | None) -> str:
    """Rounded to what a reader compares: "4.5 s", "48 s", "12m 05s", "1h 02m", "2d 03h"."""
    if seconds is None or math.isnan(seconds):
        return NONE
    if math.isinf(seconds):
        return "∞"
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 9.95:
        return f"{seconds:.1f} s"
    if round(seconds) < 60:
        return f"{round(seconds)} s"
    if round(seconds) < 3600:
        m, s = divmod(round(seconds), 60)
        return f"{m}m {s:02d}s"
    if round(seconds / 60) < 24 * 60:
        h, m = divmod(round(seconds / 60), 60)
        return f"{h}h {m:02d}m"
    d, h = divmod(round(seconds / 3600), 24)
    return f"{d}d {h:02d}h"


def format_clock(seconds: float) -> str:
    """Simulated time as h:mm:ss (hours keep counting past a day)."""
    h, rest = divmod(max(int(seconds), 0), 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}"


def format_percent(fraction: float | None) -> str:
    return NONE if fraction is None else f"{100.0 * fraction:.1f}%"


def format_count(n: float | None) -> str:
    return NONE if n is None else f"{round(n):,}"


def format_ms(ms: float | None) -> str:
    if ms is None:
        return NONE
    return f"{ms:.0f} ms" if ms >= 100 else f"{ms:.1f} ms"


def _decimal(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if x == 0 or abs(x) >= 0.1:
        return f"{x:.1f}"
    return f"{x:.2g}"


def _short_name(resource: str) -> str:
    return resource.rsplit("/", 1)[-1]


def resource_label(resource: str) -> str:
    """Row label of a Kubernetes resource name: "GPU", "CPU", "Memory", else the name."""
    return _LABELS.get(resource, resource)


def format_amount(resource: str, amount: float | None) -> str:
    """A quantity in the unit people think in: memory bytes as GiB, GPUs and cores as counts."""
    if amount is None:
        return NONE
    if resource == "memory":
        amount /= GIB
    unit = _AMOUNT_UNITS.get(resource, _short_name(resource))
    number = f"{round(amount):,}" if float(amount).is_integer() else _decimal(amount)
    return f"{number} {unit}"


def format_resource_hours(resource: str, resource_seconds: float | None) -> str:
    """Resource-seconds as resource-hours: "12.5 GPU-h", "3.0 cpu-h", "40.0 GiB-h"."""
    if resource_seconds is None:
        return NONE
    hours = resource_seconds / 3600.0
    if resource == "memory":
        hours /= GIB
    return f"{_decimal(hours)} {_HOUR_UNITS.get(resource, _short_name(resource) + '-h')}"


def ordered_resources(results: Iterable[SimResult]) -> list[str]:
    """Resources any run has capacity for: GPU first, then cpu, memory, the rest by name."""
    names = {r for res in results for r, cap in res.capacity.items() if cap and cap > 0}
    head = [r for r in (GPU, "cpu", "memory") if r in names]
    return head + sorted(names - set(head))


# --- summary table --------------------------------------------------------------------------

Better = Literal["lower", "higher"] | None


@dataclass(frozen=True)
class _Row:
    label: str
    values: list[Any]  # the raw number per result, compared for the highlight
    cells: list[str]
    better: Better = None
    among_most_finished: bool = False  # averages over finished jobs: compare like with like
    style: str | None = None


def _get(summary: Mapping[str, Any], key: str, sub: str | None = None) -> Any:
    value = summary.get(key)
    if sub is not None:
        value = value.get(sub) if isinstance(value, Mapping) else None
    return value


def _best(row: _Row, finished: list[Any]) -> set[int]:
    """Columns to highlight: the strictly best value(s), none if every column ties.

    For times averaged over finished jobs, a policy that finished fewer jobs looks faster
    only because its slow jobs never ended, so only runs that finished the most compete.
    """
    if row.better is None:
        return set()
    candidates = [i for i, v in enumerate(row.values) if isinstance(v, int | float)]
    if row.among_most_finished:
        top = max((f for f in finished if f is not None), default=None)
        candidates = [i for i in candidates if finished[i] == top]
    pick = min if row.better == "lower" else max
    if not candidates:
        return set()
    best = pick(row.values[i] for i in candidates)
    winners = {i for i in candidates if row.values[i] == best}
    return set() if len(winners) == len(row.values) else winners


def _rows(results: Sequence[SimResult]) -> list[_Row]:
    sums = [r.summary for r in results]

    def metric(label: str, key: str, fmt: Callable[[Any], str], **kw: Any) -> _Row:
        values = [_get(s, key) for s in sums]
        return _Row(label, values, [fmt(v) for v in values], **kw)

    def nested(label: str, key: str, sub: str, fmt: Callable[[Any], str], **kw: Any) -> _Row:
        values = [_get(s, key, sub) for s in sums]
        return _Row(label, values, [fmt(v) for v in values], **kw)

    resources = ordered_resources(results)
    finished = [_get(s, "jobs_finished") for s in sums]
    controllers = sorted({c for s in sums for c in s.get("sync_calls_by_controller") or {}})
    times = {"better": "lower", "among_most_finished": True}
    rows = [
        _Row(
            "Capacity",
            [None] * len(results),
            [
                " · ".join(
                    format_amount(r, res.capacity.get(r)) for r in resources if r in res.capacity
                )
                or NONE
                for res in results
            ],
        ),
        _Row(
            "Jobs finished",
            finished,
            [
                f"{format_count(f)} / {format_count(_get(s, 'jobs'))}"
                for f, s in zip(finished, sums, strict=True)
            ],
            better="higher",
        ),
        metric("Avg JCT", "avg_jct_s", format_duration, **times),
        metric("p50 JCT", "p50_jct_s", format_duration, **times),
        metric("p95 JCT", "p95_jct_s", format_duration, **times),
        _Row(
            "Makespan",
            [math.inf if s.get("stopped_at_horizon") else _get(s, "makespan_s") for s in sums],
            [
                f"cut at {format_duration(_get(s, 'horizon_s'))}"
                if s.get("stopped_at_horizon")
                else format_duration(_get(s, "makespan_s"))
                for s in sums
            ],
            **times,
        ),
        metric("Avg queue", "avg_queue_s", format_duration, **times),
        _Row(
            "Lower bound: makespan / avg JCT",
            [None] * len(results),
            [
                f"{format_duration(_get(s, 'lower_bounds', 'makespan_s'))} / "
                f"{format_duration(_get(s, 'lower_bounds', 'avg_jct_s'))}"
                for s in sums
            ],
            style="dim",
        ),
    ]
    for r in resources:
        rows.append(
            nested(
                f"{resource_label(r)} utilization",
                "utilization",
                r,
                format_percent,
                better="higher",
            )
        )
    for r in resources:
        rows.append(
            nested(
                f"Deadlocked {resource_label(r)}",
                "deadlocked_resource_seconds",
                r,
                lambda v, r=r: format_resource_hours(r, v),
                better="lower",
            )
        )
    rows += [
        metric("Scale actions", "scale_actions", format_count),
        metric("Pod restarts", "pod_restarts", format_count),
        metric("Sync calls", "sync_calls", format_count),
        *(
            nested(f"  {name}", "sync_calls_by_controller", name, format_count, style="dim")
            for name in controllers
        ),
        nested("Sync latency p50", "sync_latency_ms", "p50", format_ms),
        nested("Sync latency p99", "sync_latency_ms", "p99", format_ms),
        metric("Wall time", "wall_time_s", format_duration),
    ]
    return rows


def summary_table(results: Sequence[SimResult]) -> Table:
    """One column per policy, one row per metric; the best value of a row in bold green."""
    scenarios = {r.scenario for r in results}
    title = f"Scenario: {next(iter(scenarios))}" if len(scenarios) == 1 else None
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("Metric", style="cyan", no_wrap=True)
    for r in results:
        header = r.policy if title is not None else f"{r.policy}\n{r.scenario}"
        table.add_column(header, justify="right")
    for row in _rows(results):
        best = _best(row, [_get(r.summary, "jobs_finished") for r in results])
        cells = [
            Text(cell, style=BEST if i in best else (row.style or ""))
            for i, cell in enumerate(row.cells)
        ]
        table.add_row(Text(row.label, style=row.style or ""), *cells)
    notes = [horizon_note(r.summary) for r in results]
    if any(notes):
        table.caption = "\n".join(n for n in notes if n)
        table.caption_justify = "left"
        table.caption_style = "yellow"
    return table


def horizon_note(summary: Mapping[str, Any]) -> str:
    """What a run cut by the simulator's horizon did not show ("" if it was not cut)."""
    if not summary.get("stopped_at_horizon"):
        return ""
    left = (summary.get("jobs") or 0) - (summary.get("jobs_finished") or 0)
    return (
        f"{summary.get('policy')}: stopped at the simulator's horizon "
        f"({format_duration(summary.get('horizon_s'))}) with {left} job(s) unfinished; "
        "its times cover the finished jobs only"
    )


UNFINISHED_SHOWN = 20  # per policy; the rest are counted (--json lists every job)


def unfinished_table(results: Sequence[SimResult]) -> Table | None:
    """Every job a run did not finish, and why, in the pool's words (None: all finished).

    A policy's first ``UNFINISHED_SHOWN`` such jobs by arrival are named; a last row counts
    the others."""
    table = Table(title="Unfinished jobs", title_justify="left", header_style="bold")
    table.add_column("Policy", style="cyan", no_wrap=True)
    table.add_column("Job", no_wrap=True)
    table.add_column("State at the end")
    table.add_column("Why")
    rows = 0
    for r in results:
        left = sorted((j for j in r.jobs if j.finish_s is None), key=lambda j: j.arrival_s)
        for j in left[:UNFINISHED_SHOWN]:
            table.add_row(r.policy, j.key, j.state_at_end(), j.why_unfinished())
            rows += 1
        if len(left) > UNFINISHED_SHOWN:
            more = len(left) - UNFINISHED_SHOWN
            table.add_row(r.policy, f"… and {more} more", "", "see --json (job_records)")
    return table if rows else None


def print_summary(results: Sequence[SimResult], console: Console | None = None) -> None:
    """Print the comparison table, then the unfinished jobs and why (to stdout unless a
    console is given)."""
    console = console or Console()
    tables = [t for t in (summary_table(results), unfinished_table(results)) if t is not None]
    if not console.is_terminal:  # a file or a pipe: never cut columns to 80 characters
        narrow = console.width
        console.width = 1000
        console.width = max(narrow, *(console.measure(t).maximum for t in tables))
    for table in tables:
        console.print(table)


# --- live view ------------------------------------------------------------------------------


class LiveView:
    """Live progress of the simulation: one bar per policy on a terminal, else a plain line
    every ``plain_interval_s`` seconds (and at each policy's start and end) with an estimate.

    The simulator calls :meth:`update` after every event, so updates only store the snapshot
    and redraw at most ``refresh_per_second`` times per wall-clock second; the latest snapshot
    is always drawn before a new policy starts and on exit, so final counts are exact.
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        enabled: bool = True,
        refresh_per_second: float = 8.0,
        plain_interval_s: float = 5.0,
        policies: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.plain = enabled and not self.console.is_terminal
        self._interval = 1.0 / refresh_per_second
        self._plain_interval = plain_interval_s
        self._policies = max(policies, 1)
        self._clock = clock
        self._bars: rp.Progress | None = None
        self._tasks: dict[str, rp.TaskID] = {}
        self._policy: str | None = None
        self._pending: Progress | None = None
        self._next_draw = -math.inf
        self._started = clock()
        self._policy_started = self._started
        self._done_policies: list[float] = []  # wall seconds each finished policy took
        self._last_plain: Progress | None = None

    def __enter__(self) -> LiveView:
        self._started = self._policy_started = self._clock()
        if self.enabled:
            self._bars = rp.Progress(
                rp.TextColumn("[bold]{task.description}"),
                rp.BarColumn(),
                rp.MofNCompleteColumn(),
                rp.TextColumn("jobs · sim [cyan]{task.fields[sim_time]}[/]"),
                rp.TextColumn(
                    "· {task.fields[training]} training · {task.fields[waiting]} waiting"
                    " · {task.fields[syncs]} syncs"
                ),
                rp.TimeElapsedColumn(),
                console=self.console,
                auto_refresh=False,  # no thread: we redraw from update(), throttled
            )
            self._bars.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.plain:
            self._plain_done()
            return
        if self._bars is None:
            return
        self._draw_pending()
        self._bars.stop()
        self._bars = None

    def update(self, p: Progress) -> None:
        """Record a snapshot; redraw if the last redraw is old enough or the policy changed."""
        if self.plain:
            self._plain_update(p)
            return
        if self._bars is None:
            return
        if p.policy != self._policy:
            self._draw_pending()  # the previous policy's final state
            self._policy = p.policy
        elif self._clock() < self._next_draw:
            self._pending = p
            return
        self._pending = p
        self._draw_pending()

    # --- off a terminal: plain lines ---------------------------------------------------

    def _plain_update(self, p: Progress) -> None:
        now = self._clock()
        if p.policy != self._policy:
            self._plain_done()
            self._policy, self._policy_started = p.policy, now
            self._last_plain = p
            self._next_draw = now + self._plain_interval
            return
        self._last_plain = p
        if now >= self._next_draw:
            self._print_plain(p, now)

    def _plain_done(self) -> None:
        """The finished policy's last line, with its exact counts."""
        if self._last_plain is None:
            return
        now = self._clock()
        self._done_policies.append(now - self._policy_started)
        self._print_plain(self._last_plain, now, "done")
        self._last_plain = None

    def _print_plain(self, p: Progress, now: float, event: str = "") -> None:
        elapsed = now - self._started
        line = (
            f"simulate: {p.policy} ({len(self._done_policies) + (event != 'done')}/"
            f"{self._policies}){' done' if event else ''}: {p.jobs_done}/{p.jobs_total} "
            f"jobs done, {p.jobs_training} training, {p.jobs_waiting} waiting, sim "
            f"{format_clock(p.sim_time_s)}, {p.sync_calls:,} syncs, "
            f"{format_duration(elapsed)} elapsed"
        )
        left = self._estimate(p, now, finished=event == "done")
        if left:
            line += f", about {format_duration(left)} left"
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        self._next_draw = now + self._plain_interval

    def _estimate(self, p: Progress, now: float, *, finished: bool) -> float | None:
        """Wall seconds left: this policy's pace over its finished jobs, and the policies
        still to run at the average time of those done (or of this one's estimate)."""
        spent = now - self._policy_started
        remaining_policies = self._policies - len(self._done_policies) - (not finished)
        if finished:
            this_total, this_left = spent, 0.0
        elif p.jobs_done == 0:
            return None
        else:
            this_total = spent * p.jobs_total / p.jobs_done
            this_left = this_total - spent
        per_policy = (
            sum(self._done_policies) / len(self._done_policies)
            if self._done_policies
            else this_total
        )
        return this_left + max(remaining_policies, 0) * per_policy

    # --- on a terminal: rich bars ------------------------------------------------------

    def _draw_pending(self) -> None:
        p, bars = self._pending, self._bars
        if p is None or bars is None:
            return
        fields = {
            "sim_time": format_clock(p.sim_time_s),
            "training": p.jobs_training,
            "waiting": p.jobs_waiting,
            "syncs": f"{p.sync_calls:,}",
        }
        task = self._tasks.get(p.policy)
        if task is None:
            task = bars.add_task(p.policy, total=p.jobs_total, **fields)
            self._tasks[p.policy] = task
        bars.update(task, completed=p.jobs_done, total=p.jobs_total, **fields)
        bars.refresh()
        self._pending = None
        self._next_draw = self._clock() + self._interval
