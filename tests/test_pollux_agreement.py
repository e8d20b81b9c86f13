"""Dragonet's simulator agrees with Pollux's on Pollux's Tiresias (docs/traces.md).

What users would notice if this broke: a comparison with a published scheduler that means
nothing, because the two simulators disagree on the same policy and the same jobs. The
expected JCTs are the artifact's (petuum/adaptdl osdi21-artifact ``simulator.py --policy
tiresias``, 16 nodes x 4 GPUs, on these 16 jobs, re-run here with
``benchmarks/pollux_artifact.py``); the 160-job runs are benchmarks
(``benchmarks/pollux_agreement.py``).
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from policy.model.pool import pool_object
from sim.engine import SimConfig, Simulation
from sim.pollux_model import TIRESIAS_POOL
from sim.scenario import from_trace

WORKLOAD = Path(__file__).parent / "fixtures" / "traces" / "workload-1.csv"

# Pollux's simulator, Tiresias, the first 16 jobs of workload-1 (seconds, submission to end).
ARTIFACT_JCT_S = {
    "cifar10-0": 953, "deepspeech2-1": 4182, "ncf-2": 122, "deepspeech2-3": 2545,
    "cifar10-4": 516, "ncf-5": 78, "ncf-6": 86, "ncf-7": 115, "cifar10-8": 702, "ncf-9": 124,
    "cifar10-10": 944, "imagenet-11": 27585, "cifar10-12": 904, "cifar10-13": 1164,
    "cifar10-14": 1674, "cifar10-15": 2060,
}  # fmt: skip


@pytest.fixture(scope="module")
def jcts() -> dict[str, float]:
    scenario = from_trace(WORKLOAD, jobs=16)
    scenario = replace(scenario, objects=(pool_object(**TIRESIAS_POOL),))
    # Cost-free: Pollux's simulator charges nothing for a control plane.
    result = Simulation(scenario, SimConfig(policy="tiresias").cost_free()).run()
    return {r.key.split("/")[1]: r.jct_s for r in result.jobs}


def test_average_jct_is_within_ten_percent_of_pollux_simulator(jcts: dict[str, float]) -> None:
    assert set(jcts) == set(ARTIFACT_JCT_S)
    ours, theirs = statistics.fmean(jcts.values()), statistics.fmean(ARTIFACT_JCT_S.values())
    assert ours == pytest.approx(theirs, rel=0.10)


def test_each_long_job_takes_as_long_as_in_pollux_simulator(jcts: dict[str, float]) -> None:
    # Jobs of a few minutes differ by the scheduling tick (Pollux decides every 60 s, the
    # webhook at once): compare the ones longer than ten minutes.
    for name, theirs in ARTIFACT_JCT_S.items():
        if theirs > 600:
            assert jcts[name] == pytest.approx(theirs, rel=0.15), name


def test_the_example_pool_is_the_one_measured() -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "pollux-tiresias-pool.yaml"
    spec = yaml.safe_load(example.read_text())["spec"]
    assert spec == {**TIRESIAS_POOL, "lasThresholdsGPUHours": [16]}
