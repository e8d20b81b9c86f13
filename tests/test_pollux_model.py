"""Pollux's own application model, ported (sim/pollux_model.py).

What users would notice if these broke: Pollux's workloads replayed with job sizes or speeds
other than Pollux's simulator gives them, so no figure could be set beside Pollux's. The
expected values are Pollux's, not ours: the isolated GPU-hours of each configuration as
``shared/reference/pollux-published.md`` lists them, and run times of single jobs that
Pollux's artifact simulator (``osdi21-artifact``, ``simulator.py``'s ``Job``, fixed batch,
60 s steps) gave on this machine.
"""

from __future__ import annotations

import pytest

from sim.pollux_model import (
    RESTART_S,
    application,
    canonical,
    isolated_gpu_hours,
    packed,
    pollux_profile,
)


@pytest.mark.parametrize(
    ("app", "batch", "gpus", "published"),
    [
        ("ncf", 32768, 1, 0.013),
        ("cifar10", 2048, 6, 1.5),
        ("cifar10", 4096, 16, 2.1),
        ("bert", 384, 6, 5.2),
        ("bert", 384, 16, 5.9),
        ("deepspeech2", 320, 6, 6.9),
        ("deepspeech2", 640, 12, 8.3),
        ("yolov3", 64, 4, 15.7),
        ("imagenet", 3200, 24, 212.0),
        ("imagenet", 6400, 48, 263.0),
    ],
)
def test_isolated_gpu_hours_are_pollux_published_ones(
    app: str, batch: int, gpus: int, published: float
) -> None:
    assert isolated_gpu_hours(app, batch, gpus) == pytest.approx(published, rel=0.02)


# (application, global batch, placement as the artifact writes it, its run time in seconds)
ARTIFACT_RUNS = [
    ("cifar10", 2048, "42", 940),
    ("cifar10", 2048, "1111", 1344),
    ("bert", 384, "44", 2489),
    ("yolov3", 64, "4", 14132),
    ("yolov3", 64, "22", 24881),
    ("deepspeech2", 640, "444", 2507),
    ("imagenet", 6400, "44444444", 27461),
    ("imagenet", 6400, "444444444444", 19719),
]


@pytest.mark.parametrize(("app", "batch", "placement", "seconds"), ARTIFACT_RUNS)
def test_a_job_alone_runs_as_long_as_in_pollux_simulator(
    app: str, batch: int, placement: str, seconds: float
) -> None:
    model = application(app)
    where = tuple(int(c) for c in placement)
    run = RESTART_S + model.steps(batch, sum(where)) * model.iteration_time(where, batch)
    # The artifact rounds each epoch to whole seconds: up to 0.5 s x 100 epochs (cifar10).
    assert run == pytest.approx(seconds, rel=0.015)


def test_spreading_a_job_costs_what_pollux_placement_profiles_say() -> None:
    # pollux-published.md: spread/packed speed 0.81-1.23 at the workloads' batch sizes.
    for app, batch, gpus in [("cifar10", 2048, 4), ("bert", 384, 4), ("deepspeech2", 320, 4)]:
        model = application(app)
        ratio = model.iteration_time(packed(gpus), batch) / model.iteration_time((1,) * gpus, batch)
        assert 0.8 < ratio < 1.25, app
    yolo = application("yolov3")  # the one that loses: 14,132 s packed vs 24,881 s on "22"
    assert yolo.iteration_time((4,), 64) < yolo.iteration_time((2, 2), 64)


def test_growth_at_a_fixed_batch_gains_what_pollux_model_gives() -> None:
    # pollux-published.md: imagenet from 24 to 48 GPUs at a fixed batch, 1.18x (not ~1.8x).
    model = application("imagenet")
    speedup = model.iteration_time(packed(24), 3200) / model.iteration_time(packed(48), 3200)
    assert speedup == pytest.approx(1.18, abs=0.03)


def test_placements_are_read_in_pollux_normal_form() -> None:
    assert canonical((4, 2)) == canonical((2, 4)) == (2, 4)
    assert canonical((1, 0, 3)) == (1, 3)
    assert packed(10) == (4, 4, 2)
    with pytest.raises(ValueError, match="at least one GPU"):
        canonical((0, 0))


def test_a_batch_size_pollux_never_validated_is_refused() -> None:
    with pytest.raises(ValueError, match=r"ncf: batch_size 64 outside .*256\.\.32768"):
        pollux_profile("ncf", 64)
    with pytest.raises(KeyError, match="unknown application 'gpt5'"):
        application("gpt5")


def test_the_profile_times_the_workers_placement_and_keeps_progress_when_stopped() -> None:
    prof = pollux_profile("cifar10", 2048)
    model = application("cifar10")
    assert prof.rate_on([2, 2, 2], 6, 0, 2) == pytest.approx(
        1 / model.iteration_time((2, 2, 2), 2048)
    )
    assert prof.rate(6, 0, 2) == pytest.approx(1 / model.iteration_time((4, 2), 2048))
    assert prof.rate_on([2, 2, 2], 6, 0, 2) < prof.rate(6, 0, 2)  # spread is slower here
    assert prof.saves_on_stop and prof.restore_s == RESTART_S


def test_workers_beyond_pollux_measurements_add_nothing_and_never_fail() -> None:
    # An elastic policy may offer imagenet up to max-instances = 96 workers; Pollux
    # measured up to 16 nodes and 64 GPUs.
    prof = pollux_profile("imagenet", 6400)
    assert prof.rate(96, 0, 24) == pytest.approx(prof.rate(64, 0, 16))
    assert prof.rate(64, 0, 16) > prof.rate(48, 0, 12)
