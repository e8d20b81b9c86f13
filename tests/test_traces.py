"""Trace replay: which jobs a trace yields, what TFJobs they become, and how fast they train.

What users would notice if these broke: a replay with jobs Pollux excludes, arrivals at the
wrong rate, manifests the webhook rejects, or jobs that run longer or shorter than in the
trace.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from policy.model.jobs import parse_job
from policy.model.kinds import TFJOB
from sim.profiles import DEFAULT_PROFILE, PROFILES, derive_profile, parse_placements, profile
from sim.spec import JobSpec
from sim.traces import dns_label, load_philly, load_pollux

TRACES = Path(__file__).parent / "fixtures" / "traces"
PHILLY = TRACES / "philly-excerpt.csv"
WORKLOAD = TRACES / "workload-1.csv"
ALL = 10_000  # more jobs than the excerpt has


def replicas(job: JobSpec, rtype: str) -> dict:
    return job.manifest["spec"]["tfReplicaSpecs"][rtype]


def workers(job: JobSpec) -> int:
    return replicas(job, "Worker")["replicas"]


def requests(job: JobSpec, rtype: str) -> dict[str, str]:
    return replicas(job, rtype)["template"]["spec"]["containers"][0]["resources"]["requests"]


def by_duration(jobs: list[JobSpec], duration_s: float) -> JobSpec:
    (job,) = [j for j in jobs if j.trace_duration_s == duration_s]
    return job


# --- Philly ------------------------------------------------------------------------------


def test_philly_keeps_exactly_the_rows_pollux_keeps() -> None:
    jobs = load_philly(PHILLY, jobs=ALL)

    assert len(jobs) == 273  # 283 rows: 7 run < 60 s, 3 use >= 1000 GPU-hours
    assert min(j.trace_duration_s or 0 for j in jobs) >= 60
    durations = {j.trace_duration_s for j in jobs}
    assert 30.0 not in durations  # the 8-GPU job that ran 30 s
    assert 908661.0 not in durations  # 4 GPUs x 252 h = 1009 GPU-hours
    assert 193256.0 in durations  # 8 GPUs x 54 h = 429 GPU-hours: kept


def test_philly_arrivals_follow_submit_times_from_zero() -> None:
    jobs = load_philly(PHILLY, jobs=ALL)
    arrivals = [j.arrival_s for j in jobs]

    assert arrivals == sorted(arrivals)
    assert arrivals[0] == 0.0
    # Kept rows span 2017-09-29 07:58:32 .. 2017-10-27 12:49:12 (file order is not time order).
    assert arrivals[-1] == 28 * 86400 + 4 * 3600 + 50 * 60 + 40


def test_load_two_halves_every_arrival() -> None:
    base = load_philly(PHILLY, jobs=ALL)
    doubled = load_philly(PHILLY, jobs=ALL, load=2.0)

    assert [j.name for j in doubled] == [j.name for j in base]
    assert [j.arrival_s for j in doubled] == [j.arrival_s / 2 for j in base]
    assert [j.steps for j in doubled] == [j.steps for j in base]


def test_window_takes_consecutive_jobs_and_rebases_them() -> None:
    full = load_philly(PHILLY, jobs=ALL)
    window = load_philly(PHILLY, start=100, jobs=20)

    assert [j.name for j in window] == [j.name for j in full[100:120]]
    assert [j.profile for j in window] == [j.profile for j in full[100:120]]
    offset = full[100].arrival_s
    assert [j.arrival_s for j in window] == [j.arrival_s - offset for j in full[100:120]]
    assert window[0].arrival_s == 0.0
    assert load_philly(PHILLY, start=270, jobs=20)[-1].name == full[-1].name  # runs out: 3


def test_eight_gpu_row_becomes_elastic_ps_job_the_webhook_accepts() -> None:
    job = by_duration(load_philly(PHILLY, jobs=ALL), 193256.0)

    parsed = parse_job(job.manifest, TFJOB)
    assert parsed.replicas["PS"].replicas == 2
    assert parsed.replicas["Worker"].replicas == 8
    assert (parsed.min_workers, parsed.max_workers) == (4, 16)
    assert requests(job, "Worker") == {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}
    assert requests(job, "PS") == {"cpu": "2", "memory": "8Gi"}
    assert job.profile.name == "imagenet"  # 429 GPU-hours: > 100


@pytest.mark.parametrize(
    ("gpus", "ps", "low", "high"), [(1, 1, 1, 2), (2, 1, 1, 4), (12, 3, 6, 24), (32, 8, 16, 64)]
)
def test_ps_count_and_elastic_range_follow_worker_count(
    gpus: int, ps: int, low: int, high: int
) -> None:
    job = next(j for j in load_philly(PHILLY, jobs=ALL) if workers(j) == gpus)

    parsed = parse_job(job.manifest, TFJOB)
    assert parsed.replicas["PS"].replicas == ps
    assert (parsed.min_workers, parsed.max_workers) == (low, high)


def test_every_replayed_manifest_is_a_valid_tfjob() -> None:
    for job in load_philly(PHILLY, jobs=ALL) + load_pollux(WORKLOAD):
        parsed = parse_job(job.manifest, TFJOB)
        assert parsed.min_workers <= workers(job) <= parsed.max_workers


def test_alone_and_packed_a_job_trains_for_its_trace_duration() -> None:
    for job in load_philly(PHILLY, jobs=ALL):
        ps = replicas(job, "PS")["replicas"]
        seconds = job.steps / job.profile.rate(local=workers(job), remote=0, ps=ps)
        assert seconds == pytest.approx(job.trace_duration_s, rel=1e-9)


def test_spreading_a_replayed_job_makes_it_slower_than_the_trace() -> None:
    job = by_duration(load_philly(PHILLY, jobs=ALL), 193256.0)  # imagenet, 8 workers, 2 PS

    spread = job.steps / job.profile.rate(local=2, remote=6, ps=2)
    assert spread > 193256.0 * 1.5


def test_application_follows_pollux_gpu_time_buckets() -> None:
    buckets = [
        (3600, {"cifar10", "ncf"}),
        (10 * 3600, {"deepspeech2", "bert"}),
        (100 * 3600, {"yolov3"}),
        (math.inf, {"imagenet"}),
    ]
    seen: set[str] = set()
    for job in load_philly(PHILLY, jobs=ALL):
        gpu_time = (job.trace_duration_s or 0) * workers(job)
        allowed = next(apps for upper, apps in buckets if gpu_time < upper)
        assert job.profile.name in allowed, job.name
        seen.add(job.profile.name)
    assert seen == set(PROFILES)  # both halves of the shared buckets occur


def test_max_gpus_drops_jobs_bigger_than_the_cluster_but_keeps_the_count() -> None:
    capped = load_philly(PHILLY, jobs=ALL, max_gpus=8)

    assert len(capped) == 273 - 6  # 3 x 16, 2 x 32 and 1 x 12 GPUs
    assert max(workers(j) for j in capped) == 8
    assert len(load_philly(PHILLY, jobs=5, start=0, max_gpus=1)) == 5
    full = {j.name: j.profile for j in load_philly(PHILLY, jobs=ALL)}
    assert all(full[j.name] == j.profile for j in capped)  # same row, same name and app


def test_malformed_row_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
        "2017-10-09 07:02:55,66.0,two,132.0,11cb48\n"
    )
    with pytest.raises(ValueError, match=r"bad\.csv:3: num_gpus 'two' is not an integer"):
        load_philly(bad)


def test_missing_column_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,duration,num_gpus,cluster\n2017-10-09 07:01:55,66.0,1,11cb48\n")
    with pytest.raises(ValueError, match=r"bad\.csv:1: missing column\(s\) gpu_time"):
        load_philly(bad)


def test_short_row_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("name,time,application,num_replicas,batch_size\nncf-0,10,ncf\n")
    with pytest.raises(ValueError, match=r"bad\.csv:2: expected 5 fields"):
        load_pollux(bad)


# --- Pollux workloads ----------------------------------------------------------------------


def test_pollux_workload_keeps_every_job_and_its_size() -> None:
    jobs = load_pollux(WORKLOAD)

    # shared/traces/README.md: workload 1 has 160 jobs asking for 1,092 GPUs, largest 32.
    assert len(jobs) == 160
    assert sum(workers(j) for j in jobs) == 1092
    assert max(workers(j) for j in jobs) == 32
    assert [j.arrival_s for j in jobs][:3] == [0.0, 3.0, 28.0]  # times 107, 110, 135
    assert jobs[-1].arrival_s == 27695 - 107


def test_pollux_job_trains_as_long_as_pollux_models_its_batch() -> None:
    jobs = {j.name: j for j in load_pollux(WORKLOAD, load=2.0)}
    cifar = jobs["cifar10-0"]  # 6 replicas, batch 2048: 1.50 GPU-hours in Pollux's model
    speech = jobs["deepspeech2-3"]  # 12 replicas, batch 640: 8.27 GPU-hours, 155 s after

    assert cifar.trace_duration_s == pytest.approx(1.4955 * 3600 / 6, rel=1e-3)
    assert speech.trace_duration_s == pytest.approx(8.2674 * 3600 / 12, rel=1e-3)
    assert (cifar.profile.name, speech.profile.name) == ("cifar10", "deepspeech2")
    assert speech.arrival_s == (262 - 107) / 2


def test_pollux_rejects_a_batch_size_its_model_never_validated(tmp_path: Path) -> None:
    bad = tmp_path / "w.csv"
    bad.write_text("name,time,application,num_replicas,batch_size\nb,1,bert,4,8\n")
    with pytest.raises(ValueError, match=r"w\.csv:2: bert: batch_size 8 outside .*12\.\.384"):
        load_pollux(bad)


def test_pollux_rejects_unknown_application_and_repeated_names(tmp_path: Path) -> None:
    bad = tmp_path / "w.csv"
    bad.write_text("name,time,application,num_replicas,batch_size\nx,1,gpt5,1,256\n")
    with pytest.raises(ValueError, match=r"w\.csv:2: unknown application 'gpt5'"):
        load_pollux(bad)
    bad.write_text("name,time,application,num_replicas,batch_size\nA,1,ncf,1,256\na,2,ncf,1,256\n")
    with pytest.raises(ValueError, match=r"w\.csv:3: job name 'a' repeats line 2"):
        load_pollux(bad)


@pytest.mark.parametrize(
    ("raw", "label"),
    [("cifar10-0", "cifar10-0"), ("My_Job.7", "my-job-7"), ("7up", "j-7up"), ("-x-", "x")],
)
def test_names_become_dns_labels(raw: str, label: str) -> None:
    assert dns_label(raw) == label


def test_long_name_still_fits_pod_names(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text(f"name,time,application,num_replicas,batch_size\n{'n' * 80},0,bert,64,384\n")
    (job,) = load_pollux(path)
    parse_job(job.manifest, TFJOB)  # raises if "<name>-worker-<i>" exceeds 63 characters


# --- profiles ------------------------------------------------------------------------------

# performance-anchors §3.2 at the small batch: t(1 GPU), efficiency of "4" and of "1111".
REFERENCE = {
    "bert": (0.46, 0.85, 0.38),
    "cifar10": (0.04, 0.74, 0.34),
    "deepspeech2": (0.47, 0.70, 0.63),
    "imagenet": (0.15, 0.92, 0.44),
    "ncf": (0.007, 0.60, 0.35),
    "yolov3": (0.27, 0.58, 0.39),
}


@pytest.mark.parametrize("app", sorted(REFERENCE))
def test_profile_reproduces_measured_packing_and_spreading(app: str) -> None:
    t1, packed, spread = REFERENCE[app]
    p = profile(app)

    assert p.step_time_s == pytest.approx(t1, rel=0.1)
    assert p.efficiency(4, 1) == pytest.approx(packed, abs=0.01)
    # Four spread workers (all remote) against four packed ones: the measured ratio.
    spread_vs_packed = p.rate(local=0, remote=4, ps=1) / p.rate(local=4, remote=0, ps=1)
    assert spread_vs_packed == pytest.approx(spread / packed, abs=0.02)


def test_communication_heavy_models_suffer_more_from_spreading() -> None:
    assert profile("bert").remote_factor < 0.5  # 0.85 packed vs 0.38 spread at batch 4
    assert profile("deepspeech2").remote_factor > 0.85  # compute-bound
    assert profile("bert").remote_factor < profile("yolov3").remote_factor


def test_restore_costs_are_sias_and_the_default_is_pollux() -> None:
    restores = {app: p.restore_s for app, p in PROFILES.items()}
    assert restores == {
        "ncf": 15.0,
        "deepspeech2": 25.0,
        "cifar10": 50.0,
        "yolov3": 80.0,
        "bert": 120.0,
        "imagenet": 250.0,
    }
    assert (DEFAULT_PROFILE.restore_s, DEFAULT_PROFILE.remote_factor) == (30.0, 0.65)


def test_missing_spread_measurement_falls_back_to_defaults_and_warns() -> None:
    times = parse_placements("placement,local_bsz,step_time\n1,8,0.5\n4,8,0.8\n11,8,0.9\n")
    with pytest.warns(UserWarning, match="default contention and remote_factor"):
        p = derive_profile("toy", times, restore_s=40.0)

    assert (p.step_time_s, p.restore_s) == (0.5, 40.0)
    assert (p.contention, p.remote_factor) == (
        DEFAULT_PROFILE.contention,
        DEFAULT_PROFILE.remote_factor,
    )


def test_smallest_complete_batch_is_used() -> None:
    times = parse_placements(
        "placement,local_bsz,step_time\n"
        "1,4,0.1\n4,4,0.2\n"  # batch 4 lacks "1111"
        "1,8,0.3\n4,8,0.4\n1111,8,0.8\n"
        "1,16,0.6\n4,16,0.6\n1111,16,0.3\n"
    )
    p = derive_profile("toy", times, restore_s=1.0)

    assert p.step_time_s == 0.3
    assert p.efficiency(4, 1) == pytest.approx(0.3 / 0.4)
    assert p.remote_factor == pytest.approx(0.5)


def test_unknown_application_is_named() -> None:
    with pytest.raises(KeyError, match="known: bert"):
        profile("gpt5")
