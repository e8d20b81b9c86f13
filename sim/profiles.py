"""Per-application training profiles, derived from Pollux's measured T4 step times.

Pollux (OSDI'21) measured every application on AWS g4dn.12xlarge nodes (4 T4 GPUs each) for
many placements and per-GPU batch sizes; the six ``placements.csv`` files are vendored
byte-identical under ``sim/data/pollux_throughput/<app>/``. Pollux trains with all-reduce,
not parameter servers, so we use the measurements only for their *shape* (docs/traces.md):

* local batch ``b``: the smallest per-GPU batch measured for placements ``1`` (one GPU),
  ``4`` (four GPUs in one node) and ``1111`` (four nodes with one GPU each). Small batches
  are the communication-bound end, where placement matters most.
* ``step_time_s = t("1")``.
* ``contention``: the per-replica efficiency of four packed GPUs, ``e4 = t("1") / t("4")``,
  equated with our one-PS fan-in model ``e4 = 1 / (1 + contention * 3)``.
* ``remote_factor = t("4") / t("1111")``: spread versus packed at the same GPU count,
  clamped to (0, 1].
* ``restore_s``: Sia's per-model checkpoint-restore cost (``sia-simulator/applications.py``).

If an application lacks one of the three placements at a common batch size, its
``contention`` and ``remote_factor`` (and ``step_time_s`` without placement ``1``) fall back
to ``TrainingProfile``'s defaults, and ``derive_profile`` warns.
"""

from __future__ import annotations

import csv
import io
import math
import warnings
from collections.abc import Mapping
from dataclasses import replace
from importlib import resources
from types import MappingProxyType

from sim.spec import TrainingProfile

APPLICATIONS: tuple[str, ...] = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")

# Sia's fitted checkpoint-restore cost per model (seconds); Pollux uses 30 s for every model.
RESTORE_S: Mapping[str, float] = MappingProxyType(
    {"ncf": 15.0, "deepspeech2": 25.0, "cifar10": 50.0, "yolov3": 80.0, "bert": 120.0,
     "imagenet": 250.0}
)  # fmt: skip

# What a job without a known application trains like: Pollux's 30 s restore, x0.65 cross-node.
DEFAULT_PROFILE = TrainingProfile()
# A user's own manifests (``dragonet simulate`` on job files or a scenario file): the same,
# with the CPU their pods imply (sim/cpu.py): burstable pods compete for their node's CPU.
MANIFEST_PROFILE = replace(DEFAULT_PROFILE, name="manifest", cpu_bound=True)

SINGLE, PACKED, SPREAD = "1", "4", "1111"

StepTimes = Mapping[tuple[str, int], float]  # (placement, local batch) -> seconds per step


def parse_placements(text: str, source: str = "placements.csv") -> dict[tuple[str, int], float]:
    """Step time per (placement, local batch) from a Pollux ``placements.csv``."""
    reader = csv.DictReader(io.StringIO(text))
    missing = {"placement", "local_bsz", "step_time"} - set(reader.fieldnames or ())
    if missing:
        raise ValueError(f"{source}:1: missing column(s) {', '.join(sorted(missing))}")
    times: dict[tuple[str, int], float] = {}
    for row in reader:
        try:
            key, step = (row["placement"].strip(), int(row["local_bsz"])), float(row["step_time"])
        except (AttributeError, TypeError, ValueError) as err:
            raise ValueError(f"{source}:{reader.line_num}: malformed row {row!r}") from err
        if not step > 0 or math.isinf(step):
            raise ValueError(f"{source}:{reader.line_num}: step_time must be positive, got {step}")
        times[key] = step
    return times


def derive_profile(app: str, step_times: StepTimes, *, restore_s: float) -> TrainingProfile:
    """The PS profile whose packed/spread behaviour matches ``app``'s measurements."""
    batches = sorted({b for _, b in step_times})
    full = [b for b in batches if all((p, b) in step_times for p in (SINGLE, PACKED, SPREAD))]
    if full:
        b = full[0]
        t1, t4, t_spread = (step_times[(p, b)] for p in (SINGLE, PACKED, SPREAD))
        return TrainingProfile(
            name=app,
            step_time_s=t1,
            contention=max(t4 / t1 - 1.0, 0.0) / 3.0,
            # Clamp: in our model spreading never speeds a worker up.
            remote_factor=min(t4 / t_spread, 1.0),
            restore_s=restore_s,
        )
    singles = [b for b in batches if (SINGLE, b) in step_times]
    step = step_times[(SINGLE, singles[0])] if singles else DEFAULT_PROFILE.step_time_s
    warnings.warn(
        f"{app}: no local batch size measured on placements {SINGLE}, {PACKED} and {SPREAD}; "
        f"using the default contention and remote_factor" + ("" if singles else " and step time"),
        stacklevel=2,
    )
    return TrainingProfile(name=app, step_time_s=step, restore_s=restore_s)


def _load() -> Mapping[str, TrainingProfile]:
    data = resources.files("sim") / "data" / "pollux_throughput"
    return MappingProxyType(
        {
            app: derive_profile(
                app,
                parse_placements(
                    (data / app / "placements.csv").read_text(encoding="utf-8"),
                    f"sim/data/pollux_throughput/{app}/placements.csv",
                ),
                restore_s=RESTORE_S[app],
            )
            for app in APPLICATIONS
        }
    )


# Read once at import: six small files, a few milliseconds.
PROFILES: Mapping[str, TrainingProfile] = _load()


def profile(app: str) -> TrainingProfile:
    """The profile of a Pollux application; ``KeyError`` names the known ones."""
    if app not in PROFILES:
        raise KeyError(f"unknown application {app!r}; known: {', '.join(APPLICATIONS)}")
    return PROFILES[app]
