"""Colours and line styles of the web view: one per policy, one per job state.

The policies take the Okabe-Ito palette (distinguishable with the common colour-vision
deficiencies) and a dash style each, so two policies never look alike even in grey.
"""

from __future__ import annotations

# The default policy (dragonet-las) solid, as in the PNG plots (sim/plot.py).
POLICY_STYLES: dict[str, tuple[str, str]] = {  # policy -> (colour, dash)
    "dragonet-las": ("#009E73", "solid"),
    "dragon": ("#0072B2", "dash"),
    "gang-fifo": ("#E69F00", "dot"),
    "kube-default": ("#555555", "dashdot"),
    "dragonet": ("#CC79A7", "longdash"),
    "tiresias": ("#D55E00", "longdashdot"),
}
_SPARE = ("#56B4E9", "#F0E442", "#000000")

WAITING = "#c8c8c8"  # queued: holds nothing
HOLDING = "#e4572e"  # holds pods, but its gang cannot train
PREEMPTED = "#b2182b"
MOVED = "#6a3d9a"
# Training, coloured by its worker count (light: few, dark: many).
WORKER_SCALE = [[0.0, "#b7e4b0"], [1.0, "#00441b"]]


def policy_style(policy: str, index: int = 0) -> tuple[str, str]:
    """(colour, dash) of a policy; an unknown one takes a spare colour by its index."""
    return POLICY_STYLES.get(policy, (_SPARE[index % len(_SPARE)], "solid"))
