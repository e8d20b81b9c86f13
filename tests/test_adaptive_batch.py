"""Batch sizes a job can take (issue 37): the declaration, what its pods are given, and the
pool's choice of batch and replicas from the job's reports."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from policy.model.admission import Admission, BatchSize, Placement
from policy.model.batch import ANNOTATION, MAX_BATCH, BatchRange, GradStats, parse_range
from policy.model.bounds import OutOfBounds
from policy.model.jobs import WORKER, InvalidJob, parse_job
from policy.model.kinds import MXJOB, TFJOB
from policy.model.speedup import PRIOR, Speedup, estimate
from policy.model.throughput import ANNOTATION as THROUGHPUT
from policy.model.throughput import Config, History, Progress, Reading
from policy.pool.batch import Terms as BatchTerms
from policy.pool.batch import chosen_batch
from tests import metacontroller as mc
from tests.conftest import Hook, pods_of
from tests.kube_schema import ROOT, validate_child, validate_custom
from tests.poolbuilder import PoolBuilder
from tests.test_mxjob import mxjob

TRACE = ROOT / "tests" / "fixtures" / "traces" / "workload-1.csv"
JOB = "dragon-job1-cpu.yaml"  # 1 PS + 4 workers, min 1, max 4
NODES = [mc.node("n-1", cpu="64", memory="256Gi")]
ALL = [("PS", 0, "n-1"), *(("Worker", i, "n-1") for i in range(4))]


def _declaring(value: str = "64-1024") -> dict[str, Any]:
    job = mc.tfjob(JOB)
    job["metadata"]["annotations"] = {ANNOTATION: value}
    return job


# --- the declaration --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "lo", "hi"),
    [("64-1024", 64, 1024), (" 32 - 32 ", 32, 32), ("1-1048576", 1, MAX_BATCH)],
)
def test_a_declared_range_is_read(raw: str, lo: int, hi: int) -> None:
    assert parse_range(raw) == BatchRange(lo, hi)
    job = parse_job(_declaring(raw), TFJOB)
    assert job.batch_range == BatchRange(lo, hi)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("1024-64", "MIN (1024) is greater than MAX (64)"),
        ("0-64", "1..1048576"),
        ("64-2000000", "1..1048576"),
        ("64", "MIN-MAX"),
        ("64..1024", "MIN-MAX"),
        ("-64-1024", "MIN-MAX"),
        ("64-1024.5", "MIN-MAX"),
        ("sixty-four", "MIN-MAX"),
        ("", "MIN-MAX"),
    ],
)
def test_a_bad_range_is_refused_naming_the_annotation(raw: str, why: str) -> None:
    with pytest.raises(OutOfBounds, match="batch-size"):
        parse_range(raw)
    with pytest.raises(InvalidJob) as err:
        parse_job(_declaring(raw), TFJOB)
    assert ANNOTATION in str(err.value) and why in str(err.value)


def test_a_bad_range_fails_the_job_with_the_annotation_named(hook: Hook) -> None:
    job = _declaring("1024-64")
    body = hook.job_sync(mc.job_request(mc.world(job, NODES), None))
    failed = next(c for c in body["status"]["conditions"] if c["type"] == "Failed")
    assert ANNOTATION in failed["message"] and "'1024-64'" in failed["message"]
    assert pods_of(body) == {}


def test_a_job_that_declares_nothing_has_no_range_and_an_mxjob_may_declare() -> None:
    assert parse_job(mc.tfjob(JOB), TFJOB).batch_range is None
    raw = mxjob()
    raw["metadata"]["annotations"] = {ANNOTATION: "128-4096"}
    assert parse_job(raw, MXJOB).batch_range == BatchRange(128, 4096)


# --- the pods ---------------------------------------------------------------------------------


def _with_batch(job: dict[str, Any], size: int, per: int) -> dict[str, Any]:
    admission = mc.admission(job, ALL, workers=4)
    admission["spec"]["batch"] = {"size": size, "perReplica": per}
    return admission


def _env(pod: dict[str, Any]) -> dict[str, str]:
    main = next(c for c in pod["spec"]["containers"] if c["name"] == "tensorflow")
    return {e["name"]: e.get("value", "") for e in main.get("env") or []}


def test_the_chosen_batch_is_in_every_pod_at_start(hook: Hook) -> None:
    job = _declaring()
    admission = _with_batch(job, 512, 128)
    validate_custom(admission)
    Admission.from_object(admission)  # the pool's own type reads it
    body = hook.job_sync(mc.job_request(mc.world(job, NODES), admission))
    # The job's status says which batch it was given (kubectl get tfjob -o yaml).
    assert body["status"]["scheduling"]["batch"] == {"size": 512, "perReplica": 128}
    pods = pods_of(body)
    assert sorted(pods) == ["job1-ps-0", *(f"job1-worker-{i}" for i in range(4))]
    for pod in pods.values():
        validate_child(pod)
        env = _env(pod)
        assert env["DRAGONET_BATCH_SIZE"] == "512"
        assert env["DRAGONET_BATCH_SIZE_PER_REPLICA"] == "128"
        assert "TF_CONFIG" in env  # beside the cluster spec, not instead of it


def test_a_job_whose_admission_chose_no_batch_gets_no_batch_variable(hook: Hook) -> None:
    job = mc.tfjob(JOB)
    body = hook.job_sync(mc.job_request(mc.world(job, NODES), mc.admission(job, ALL, workers=4)))
    assert "batch" not in body["status"]["scheduling"]
    for pod in pods_of(body).values():
        assert not any(k.startswith("DRAGONET_BATCH") for k in _env(pod))


@pytest.mark.parametrize("bad", [{"size": 0, "perReplica": 1}, {"size": 64}])
def test_an_admission_with_an_unreadable_batch_is_refused(bad: dict[str, Any]) -> None:
    job = _declaring()
    admission = mc.admission(job, ALL, workers=4)
    admission["spec"]["batch"] = bad
    with pytest.raises(ValueError, match="unreadable Admission"):
        Admission.from_object(admission)


# --- the pool's choice of batch and replicas, from the job's reports ----------------------------
#
# A job whose true step time is 0.04 s fixed + 0.5 ms per example on each worker + 4 ms per
# worker (a parameter server that slows as workers are added): at its smallest batch (64) a
# third worker adds 2 %, but with a larger batch each worker's share of the fixed cost falls.

MIN, MAX = 64, 4096
DECLARED = BatchRange(MIN, MAX)


def step_time(workers: int, batch: int) -> float:
    return 0.04 + 0.0005 * batch / workers + 0.004 * workers


def true_goodput(workers: int, batch: int, noise_scale: float) -> float:
    """Examples per second times Pollux's statistical efficiency (PGNS form)."""
    return batch / step_time(workers, batch) * (noise_scale + MIN) / (noise_scale + batch)


def grad_of(noise_scale: float) -> GradStats:
    """Gradient statistics of that noise scale (var at the smallest batch)."""
    return GradStats(sqr=1.0, var=noise_scale / MIN)


MEASURED = [(1, 64), (2, 64), (3, 64), (2, 256)]


def reported(noise_scale: float | None, measured=MEASURED) -> History:
    h = History()
    for w, b in measured:
        h = h.put(Reading(Config(w, 1, batch=b), 1 / step_time(w, b), 8))
    return h.with_batch(64).with_grad(None if noise_scale is None else grad_of(noise_scale))


@pytest.mark.parametrize("noise_scale", [10.0, 100.0, 1000.0, 10_000.0])
@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_the_chosen_batch_is_the_best_goodput_for_the_size(
    noise_scale: float, workers: int
) -> None:
    """Each (noise scale, workers) row: the batch chosen from the reports gives at least
    99 % of the best goodput any whole batch in the range gives under the true model."""
    model = estimate(reported(noise_scale), MIN)
    choice = model.best_batch(Config(workers, 1), DECLARED)
    assert MIN <= choice.size <= MAX and choice.size == choice.per_replica * workers
    best = max(
        true_goodput(workers, per * workers, noise_scale)
        for per in range(max(1, -(-MIN // workers)), MAX // workers + 1)
    )
    assert true_goodput(workers, choice.size, noise_scale) >= 0.99 * best


def test_the_batch_grows_with_the_noise_scale_and_with_the_workers() -> None:
    sizes = {
        (s, w): estimate(reported(s), MIN).best_batch(Config(w, 1), DECLARED).size
        for s in (10.0, 1000.0, 10_000.0)
        for w in (1, 2, 4)
    }
    for w in (1, 2, 4):
        assert sizes[(10.0, w)] <= sizes[(1000.0, w)] <= sizes[(10_000.0, w)]
    for s in (1000.0, 10_000.0):
        assert sizes[(s, 1)] <= sizes[(s, 2)] <= sizes[(s, 4)]
    assert sizes[(10_000.0, 4)] > 4 * sizes[(10.0, 1)]


def test_without_gradient_statistics_each_worker_trains_at_the_smallest_batch() -> None:
    """The linear scaling rule, within the largest batch declared."""
    for w in (1, 3, 8):
        choice = estimate(reported(None), MIN).best_batch(Config(w, 1), DECLARED)
        assert choice.size == MIN * w and choice.per_replica == MIN
    assert PRIOR.best_batch(Config(4, 1), DECLARED).size == 4 * MIN
    choice = PRIOR.best_batch(Config(100, 1), DECLARED)  # 100 x 64 is beyond 4,096
    assert choice.per_replica == MAX // 100 and choice.size == 100 * (MAX // 100)


def test_one_batch_measured_makes_a_larger_batch_look_cheaper_as_pollux_assumes() -> None:
    """Measured at one per-worker batch only, half the compute counts as a fixed cost per
    step (Pollux's prior), so the job tries a larger batch; the speed where it was
    measured is unchanged."""
    one = [(1, 64), (2, 128)]
    model = estimate(reported(10_000.0, one), MIN)
    for w, b in one:
        assert model.throughput(Config(w, 1, batch=b)) == pytest.approx(1 / step_time(w, b))
    assert model.best_batch(Config(2, 1), DECLARED).size > 128


def _annotated(job: dict[str, Any], history: History, declare: bool) -> dict[str, Any]:
    annotations = {THROUGHPUT: history.text()}
    if declare:
        annotations[ANNOTATION] = DECLARED.text()
    job["metadata"]["annotations"] = annotations
    return job


def _twins(noise_scale: float) -> PoolBuilder:
    """Two jobs that ran alike (1 PS and 2 workers each on node ``a``, Worker.replicas 2,
    up to 6), room for 6 more workers; ``adaptive`` declares its batch sizes."""
    b = PoolBuilder(policy="dragonet", pool_spec={"restartSeconds": 30})
    b.node("a", 12)
    for name in ("fixed", "adaptive"):
        b.running(name, ("PS-0@a", "Worker-0@a", "Worker-1@a"), ps=1, low=1, high=6)
    fixed = reported(None, [(1, 64), (2, 64), (3, 64)])
    b.jobs[0] = _annotated(b.jobs[0], replace(fixed, readings=tuple(
        Reading(replace(r.config, batch=0), r.steps_per_s, r.reports) for r in fixed.readings
    )), declare=False)  # fmt: skip
    b.jobs[1] = _annotated(b.jobs[1], reported(noise_scale), declare=True)
    return b


def test_the_pool_chooses_replicas_and_batch_together_from_the_reports() -> None:
    """At its batch of 64 a third worker adds 2 % to either job (under minGainPerWorker):
    the job that keeps its batch stays at 2; the one that declared its batch sizes, with a
    large gradient noise scale, gains goodput from each worker at a larger batch, so it
    grows, and its Admission carries the batch chosen for its new size."""
    body = Hook().pool_sync(_twins(10_000.0).request())
    got = {c["spec"]["job"]["name"]: c["spec"] for c in body["children"]}
    for child in body["children"]:
        validate_custom(child)
    assert got["fixed"]["workers"] == 2 and "batch" not in got["fixed"]
    grown = got["adaptive"]["workers"]
    assert grown > 2
    batch = got["adaptive"]["batch"]
    model = estimate(reported(10_000.0), MIN)
    expected = model.best_batch(Config(grown, 1), DECLARED)
    assert batch == {"size": expected.size, "perReplica": expected.per_replica}
    assert batch["size"] > 2 * MIN


def test_with_a_small_noise_scale_a_larger_batch_is_worth_nothing_and_the_job_stays() -> None:
    body = Hook().pool_sync(_twins(1.0).request())
    got = {c["spec"]["job"]["name"]: c["spec"] for c in body["children"]}
    assert got["adaptive"]["workers"] == 2
    assert got["adaptive"]["batch"]["size"] < 2 * MIN


# --- the simulator's --adaptive-batch ---------------------------------------------------------


def test_adaptive_trace_jobs_declare_the_artifacts_bounds_and_train_by_progress() -> None:
    from sim.pollux_model import AdaptiveProfile, application, declared_range
    from sim.traces import load_pollux

    fixed = load_pollux(TRACE, jobs=12)
    adaptive = load_pollux(TRACE, jobs=12, adaptive=True)
    for f, a in zip(fixed, adaptive, strict=True):
        app = f.profile.name
        job = parse_job(a.manifest, TFJOB)
        assert job.batch_range == BatchRange(*declared_range(app))
        assert parse_job(f.manifest, TFJOB).batch_range is None  # as before without the flag
        assert isinstance(a.profile, AdaptiveProfile)
        model = application(app)
        assert a.steps == pytest.approx(model.progress(model.max_epochs))
        assert a.arrival_s == f.arrival_s and job.worker.replicas == f.manifest["spec"][
            "tfReplicaSpecs"]["Worker"]["replicas"]  # fmt: skip


def test_a_larger_batch_makes_more_progress_per_step_and_the_epoch_moves_it() -> None:
    """Pollux's model as the simulator runs a declaring job, the batch being what its
    workers were given: early in training the small batch makes more progress per second
    on 4 GPUs of one node, late in training (the gradient noisier) the large one."""
    from sim.pollux_model import adaptive_profile

    prof = adaptive_profile("cifar10")
    late = 0.9 * prof.total()
    rates = {}
    for when, at in (("early", 0.0), ("late", late)):
        small, _, b1 = prof.adaptive_rate([4], [32, 32, 32, 32], at)
        large, _, b2 = prof.adaptive_rate([4], [256, 256, 256, 256], at)
        assert (b1, b2) == (128, 1024)
        rates[when] = (small, large)
    assert rates["early"][0] > rates["early"][1] and rates["late"][1] > rates["late"][0]
    assert prof.next_change(0.0) is not None and prof.next_change(0.0) > 0
    assert prof.adaptive_rate([4], [None] * 4, 0.0)[2] == 128  # none given: the smallest


# --- a new batch while the job runs -----------------------------------------------------------


def test_workers_started_with_another_share_restart_to_read_the_new_batch(hook: Hook) -> None:
    """The pool changed a running job's batch: its workers (which read their share at
    start) go, its parameter server keeps running, and the next sync starts the workers
    again with the new share."""
    job = _declaring()
    first = pods_of(hook.job_sync(mc.job_request(mc.world(job, NODES), _with_batch(job, 512, 128))))
    running = [mc.observed_pod(job, p) for p in first.values()]
    changed = _with_batch(job, 1024, 256)
    kept = pods_of(hook.job_sync(mc.job_request(mc.world(job, NODES, pods=running), changed)))
    assert sorted(kept) == ["job1-ps-0"]  # the workers are deleted, the PS is not
    ps = [p for p in running if p["metadata"]["name"] == "job1-ps-0"]
    again = pods_of(hook.job_sync(mc.job_request(mc.world(job, NODES, pods=ps), changed)))
    assert sorted(again) == ["job1-ps-0", *(f"job1-worker-{i}" for i in range(4))]
    for i in range(4):
        assert _env(again[f"job1-worker-{i}"])["DRAGONET_BATCH_SIZE_PER_REPLICA"] == "256"
    # The same batch again: nothing restarts.
    unchanged = mc.job_request(mc.world(job, NODES, pods=running), _with_batch(job, 512, 128))
    assert sorted(pods_of(hook.job_sync(unchanged))) == sorted(first)


def _model(noise_scale: float | None, left_steps: int | None = None) -> Speedup:
    h = reported(noise_scale)
    if left_steps is not None:
        h = h.with_progress(Progress(0, left_steps))
    return estimate(h, MIN)


@pytest.mark.parametrize(
    ("noise_scale", "left_steps", "running", "workers", "changes"),
    [
        # Every pod starts (admitted, or again after a preemption): the best batch.
        (10_000.0, None, None, 4, True),
        # Running at 64 with a large noise scale: far better at a larger batch; the
        # training left (2 GPU-h assumed) pays for the restart many times over.
        (10_000.0, None, 16, 4, True),
        # ... but with 20 steps left, the restart costs more than the job would save.
        (10_000.0, 20, 16, 4, False),
        # No gradient statistics: no evidence, no restart.
        (None, None, 16, 4, False),
        # A small noise scale: the running share is already within minGainPerWorker.
        (1.0, None, 16, 4, False),
        # Grown to 8 workers: the share kept (8 x 16 = 128 examples) unless a change pays.
        (1.0, None, 16, 8, False),
        # A share that no longer fits the range at this size must change.
        (1.0, None, 2048, 4, True),
    ],
)
def test_a_running_job_changes_its_batch_only_when_it_pays(
    noise_scale: float | None,
    left_steps: int | None,
    running: int | None,
    workers: int,
    changes: bool,
) -> None:
    """The pool's rule for a running job's batch (policy.pool.batch): its workers keep
    their share unless the best batch's goodput gain, over the training left, pays for
    restarting them (restartSeconds 30) and is at least minGainPerWorker (5 %)."""
    job = parse_job(_declaring(DECLARED.text()), TFJOB)
    model = _model(noise_scale, left_steps)
    placements = {("PS", 0): Placement("PS", 0, "n-1")}
    placements |= {(WORKER, i): Placement(WORKER, i, "n-1") for i in range(workers)}
    was = None if running is None else BatchSize(size=running * 4, perReplica=running)
    got = chosen_batch(job, model, placements, workers, was, BatchTerms(30.0, 0.05))
    assert got is not None and DECLARED.minimum <= got.size <= DECLARED.maximum
    best = model.best_batch(Config(workers, 1), DECLARED)
    if changes:
        assert (got.size, got.per_replica) == (best.size, best.per_replica)
    else:
        assert running is not None and got.per_replica == running
        assert got.size == running * workers
