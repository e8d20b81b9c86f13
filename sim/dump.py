"""``dragonet simulate --dump``: the simulated API server's objects as ``kubectl get nodes,
pods,trainingpools,tfjobs,mxjobs,...,admissions -A -o json`` (every kind of ``KINDS``) would
return them, at the end of the run or as they stood at a simulated time (``--dump-at``),
for ``kubectl dragonet``'s tests and the HTML view.

The capture at a time watches the API server instead of adding an event to the run, so a
run with a dump decides and measures exactly what the same run without one does. So does
the recorder a dump runs beside it (``sim.recorder``, the chart's, on by default): the
dump holds the ``events.k8s.io/v1`` Events a cluster would have, each written as its fact
happened, and ``kubectl dragonet explain`` shows them as it would a cluster's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sim.apiserver import EPOCH, ApiServer, Obj


@dataclass
class StateDump:
    """Captures the objects as they were at simulated second ``at`` (None: the end): the
    first change after ``at`` is left out of the copy it takes then."""

    api: ApiServer
    clock: Callable[[], float]  # simulated seconds since the run began
    at: float | None = None
    events: bool = True  # run the recorder beside it, so the dump holds the Events
    _taken: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.at is not None:
            self.api.watchers.append(self._watch)
        if self.events:
            from sim.recorder import Recorder

            # After the capture's watcher: the change that ends the capture is left out,
            # and so are the Events written for it.
            Recorder(self.api, lambda: EPOCH + timedelta(seconds=self.clock())).start()

    def _watch(self, tkey: str, old: Obj | None, new: Obj | None) -> None:
        if self._taken is None and self.at is not None and self.clock() > self.at:
            self._taken = self.api.dump(undo=(tkey, old, new))

    def result(self, horizon: float | None = None) -> tuple[dict[str, Any], float]:
        """The List, and the simulated second it shows: ``at`` (a run that ended before
        it changes nothing after its end), else the end. ``horizon``: where a run the
        horizon cut stopped; past it nothing was simulated, so the List shows the end."""
        if self._taken is not None and self.at is not None:
            return self._taken, self.at
        if self.at is not None and (horizon is None or self.at <= horizon):
            return self.api.dump(), self.at
        return self.api.dump(), self.clock()

    def write(self, path: str | Path, horizon: float | None = None) -> float:
        """Write the List as JSON; returns the simulated second it shows."""
        import orjson

        state, when = self.result(horizon)
        Path(path).write_bytes(orjson.dumps(state, option=orjson.OPT_INDENT_2) + b"\n")
        return when
