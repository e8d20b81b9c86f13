"""A TensorFlow 1.x parameter-server job whose batch size the pool chooses (issue 37,
docs/speedup.md, *Batch sizes a job can take*): the TFJob declares the global batch sizes
it can train at (``dragonet.io/batch-size: "MIN-MAX"``, tfjob.yaml), each worker trains at
the share the pool gave it, read once at start, and worker 0 reports what Pollux's agent
measures, so that the pool can choose the batch and the workers together for goodput.

* **The batch.** ``DRAGONET_BATCH_SIZE_PER_REPLICA`` is this worker's batch per step,
  ``DRAGONET_BATCH_SIZE`` the global batch the pool chose (every worker's share added
  up). A pod started without them (the job declared nothing, or a pool without the
  feature) trains at ``MIN`` (``batch_from_env``). When the pool changes the batch, the
  job's sync restarts the workers (the parameter server keeps the model), and they read
  the new share here. Scale the learning rate with the batch as your model needs (linear
  for SGD here: ``learning_rate``).
* **The speed** (``stepsPerSecond``, ``batch``): the global batch's steps per second, so
  that examples per second = ``stepsPerSecond x batch``. Each asynchronous worker step
  trains one share, so that is the parameter server's global step rate times the share
  over the global batch (``steps_of_the_global_batch``).
* **The gradient's statistics** (``gradSqr``, ``gradVar``): every report, worker 0
  computes the gradient of ``COUNT`` independent batches of its share and estimates, as
  adaptdl's ``GradientNoiseScale`` does (``adaptdl/torch/gradient_noise_scale.py``: from
  the mean of their squared norms and the squared norm of their mean), the squared norm
  of the true gradient and the variance of a gradient of ``MIN`` examples
  (``grad_stats``). They are noisy from one report to the next; the monitor keeps the
  latest and the pool reads their ratio, the gradient noise scale.
* How far it is (``step``, ``totalSteps``) is left out: the pool reads it in steps of
  ``MIN`` examples (Pollux's progress), and this loop stops after ``global_steps`` steps
  of whatever share it has. A program that counts its progress in examples can report
  ``examples / MIN`` of ``total examples / MIN`` (``report``'s ``progress``).

The chief runs inside the PS pod and only initialises the model (as
examples/preemptible/train.py: a worker may restart at any time without losing it).
Every report carries the pod's own token for the monitor (docs/monitor.md). A monitor
that does not answer never stops training.

Run: ``python train.py ps|chief|worker``. Needs TensorFlow 1.15
(``tensorflow/tensorflow:1.15.5-py3``); downloads MNIST at start.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from collections.abc import Sequence

CHIEF_PORT = 2223
SEED = 10000
COUNT = 4  # independent gradients per estimate of the gradient's statistics
BASE_RATE = 0.05  # the learning rate at MIN examples per step
TOKEN_FILE = "/var/run/secrets/dragonet.io/monitor/token"
BATCH_ENV = "DRAGONET_BATCH_SIZE"
BATCH_PER_REPLICA_ENV = "DRAGONET_BATCH_SIZE_PER_REPLICA"


def declared_min(text: str) -> int:
    """``MIN`` of the job's ``"MIN-MAX"`` declaration (passed in ``BATCH_RANGE``)."""
    low, _, _ = text.partition("-")
    return int(low)


def batch_from_env(env: dict[str, str] | os._Environ[str], minimum: int) -> tuple[int, int]:
    """(global batch, this worker's share) the pool gave the pod; ``minimum`` each when
    it gave none."""
    share = int(env.get(BATCH_PER_REPLICA_ENV, minimum))
    return int(env.get(BATCH_ENV, share)), share


def learning_rate(share: int, minimum: int) -> float:
    """The linear scaling rule (Goyal et al., 2017): the rate grows with the batch."""
    return BASE_RATE * share / minimum


def grad_stats(grads: Sequence[Sequence[float]], share: int, minimum: int) -> tuple[float, float]:
    """(squared norm of the true gradient, variance of a gradient of ``minimum`` examples)
    from ``grads``: at least two gradients, each of ``share`` independent examples.

    With ``n`` gradients ``g_i``, ``local`` the mean of ``|g_i|^2`` and ``total`` =
    ``|mean g_i|^2``: E[local] = |G|^2 + V and E[total] = |G|^2 + V/n (V: a gradient's
    variance at ``share``), so |G|^2 = (n total - local)/(n - 1) and V = (local - total)
    n/(n - 1); the variance at ``minimum`` examples is V x share/minimum (adaptdl
    ``GradientNoiseScale._final_callback``: ``grad_sqr``, ``grad_var``)."""
    n = len(grads)
    if n < 2:
        raise ValueError("grad_stats needs two gradients or more")
    width = len(grads[0])
    mean = [sum(g[j] for g in grads) / n for j in range(width)]
    local = sum(sum(x * x for x in g) for g in grads) / n
    total = sum(x * x for x in mean)
    sqr = (n * total - local) / (n - 1)
    var = (local - total) * n / (n - 1) * share / minimum
    return max(sqr, 1e-12), max(var, 0.0)  # the monitor takes a norm above 0, a variance >= 0


def steps_of_the_global_batch(worker_steps_per_s: float, share: int, batch: int) -> float:
    """Steps of the global batch per second, from asynchronous worker steps of ``share``."""
    return worker_steps_per_s * share / batch


def token(path: str | None = None) -> str | None:
    try:
        with open(path or os.environ.get("MONITOR_TOKEN_FILE", TOKEN_FILE)) as f:
            return f.read().strip() or None
    except OSError:
        return None


def report(
    url: str,
    pod: str,
    steps_per_s: float,
    batch: int,
    grad: tuple[float, float] | None = None,
    progress: tuple[int, int] | None = None,
    timeout: float = 2.0,
) -> int | None:
    """POST the job's speed, gradient statistics and progress to the node's monitor
    (``/throughput``); the HTTP status, or None if it did not answer."""
    body: dict[str, object] = {"pod": pod, "stepsPerSecond": steps_per_s, "batch": batch}
    if grad is not None:
        body.update(gradSqr=grad[0], gradVar=grad[1])
    if progress is not None:
        step, total = progress
        body.update(step=min(step, total), totalSteps=total)
    headers = {"Content-Type": "application/json"}
    if bearer := token():
        headers["Authorization"] = f"Bearer {bearer}"
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return None


def cluster_and_task(tf_config: str, role: str) -> tuple[dict[str, list[str]], str, int]:
    """The cluster with the chief in the PS pod, and this process's job name and index."""
    config = json.loads(tf_config)
    cluster = {k: list(v) for k, v in config["cluster"].items()}
    cluster["chief"] = [f"{cluster['ps'][0].rsplit(':', 1)[0]}:{CHIEF_PORT}"]
    if role == "chief":
        return cluster, "chief", 0
    task = config["task"]
    return cluster, task["type"], int(task["index"])


def main(role: str) -> None:
    import numpy as np
    import tensorflow as tf

    cluster, job, index = cluster_and_task(os.environ["TF_CONFIG"], role)
    minimum = declared_min(os.environ.get("BATCH_RANGE", "32-32"))
    batch, share = batch_from_env(os.environ, minimum)
    last = int(os.environ.get("global_steps", "20000"))  # noqa: SIM112
    filters = ["/job:ps", f"/job:{job}/task:{index}"]
    server = tf.train.Server(
        tf.train.ClusterSpec(cluster),
        job_name=job,
        task_index=index,
        config=tf.ConfigProto(device_filters=filters),
    )
    if job == "ps":
        server.join()
        return
    (x_train, y_train), _ = tf.keras.datasets.mnist.load_data()
    x_train = x_train.reshape(-1, 784).astype("float32") / 255.0
    tf.set_random_seed(SEED)
    with tf.device(tf.train.replica_device_setter(cluster=cluster, worker_device=filters[1])):
        images = tf.placeholder(tf.float32, [None, 784])
        labels = tf.placeholder(tf.int64, [None])
        weights = tf.Variable(tf.zeros([784, 10]))
        bias = tf.Variable(tf.zeros([10]))
        loss = tf.losses.sparse_softmax_cross_entropy(labels, tf.matmul(images, weights) + bias)
        step = tf.train.get_or_create_global_step()
        optimizer = tf.train.GradientDescentOptimizer(learning_rate(share, minimum))
        train = optimizer.minimize(loss, global_step=step)
        gradient = tf.concat([tf.reshape(g, [-1]) for g in tf.gradients(loss, [weights, bias])], 0)

    hooks = [tf.train.StopAtStepHook(last_step=last)]
    with tf.train.MonitoredTrainingSession(
        master=server.target, is_chief=(job == "chief"), hooks=hooks
    ) as session:
        if job == "chief":  # initialises the model, then waits for the last step
            while not session.should_stop():
                time.sleep(10)
            return
        url, pod = os.environ.get("SPEED_URL", ""), os.environ.get("POD_NAME", "")
        every = float(os.environ.get("speed_interval", "10"))  # noqa: SIM112
        rng = np.random.RandomState(SEED + index)
        before = (time.monotonic(), int(session.run(step)))
        while not session.should_stop():
            pick = rng.randint(0, len(x_train), share)
            _, now = session.run([train, step], {images: x_train[pick], labels: y_train[pick]})
            if index != 0 or not url or time.monotonic() - before[0] < every:
                continue
            at = (time.monotonic(), int(now))
            rate = (at[1] - before[1]) / (at[0] - before[0])
            before = at
            grads = []
            for _ in range(COUNT):
                pick = rng.randint(0, len(x_train), share)
                feed = {images: x_train[pick], labels: y_train[pick]}
                grads.append(session.run(gradient, feed).tolist())
            stats = grad_stats(grads, share, minimum)
            steps = steps_of_the_global_batch(rate, share, batch)
            answer = report(url, pod, steps, batch, stats) if rate > 0 else None
            print("STEP", at[1], steps, stats, answer, flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("ps", "chief", "worker"):
        raise SystemExit("usage: train.py ps|chief|worker")
    main(sys.argv[1])
