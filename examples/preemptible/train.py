"""A preemptible TensorFlow 1.x parameter-server training task (container-migration's
mnist-df-preemptible.py, made to run unchanged under Dragonet's TF_CONFIG).

Every worker is disposable: the model and ``global_step`` live on the parameter server,
and the **chief runs inside the PS pod** (``python train.py chief`` beside ``python
train.py ps``), so no worker is the chief. A worker killed and re-created elsewhere (a
migration) rejoins with the same task index and DNS name and carries on from the PS's
global step; ``StopAtStepHook`` keeps the total work the same. There is no checkpoint.

The chief's address is derived from TF_CONFIG, the same way in every process: the first
parameter server's host on ``CHIEF_PORT`` (2223), as job ``chief``. So the operator's
TF_CONFIG needs no change.

Workers report the accuracy of a fresh evaluation batch (not ``tf.metrics.accuracy``,
a running mean whose speed always decays, docs/monitor.md) every ``batch_interval`` local
steps to the Container Monitor on their node, ``POST $MONITOR_URL {"pod", "value"}``, and
stop reporting near the end (``global_steps - step <= 5 * max_workers``) so that no move
happens then. A monitor that does not answer never stops training.

The chief also reports the job's **speed** (docs/speedup.md): every ``speed_interval``
seconds (10) it reads the global step on the PS and posts the global steps per second
since its last reading, with the global batch (one worker's batch: asynchronous
training adds the workers' steps) and how far it is (the global step of ``global_steps``),
to ``POST $SPEED_URL {"pod", "stepsPerSecond", "batch", "step", "totalSteps"}`` (the
monitor on the PS pod's node, ``/throughput``). The monitor writes it to
the TFJob; the pool learns from it where another worker pays. It never stops training
either.

Every report carries the pod's own ServiceAccount token for the monitor's audience
(``Authorization: Bearer``), read at each report from ``$MONITOR_TOKEN_FILE`` (the
projected volume of tfjob.yaml; the kubelet renews the file before the token expires):
the monitor takes a report only from the pod it is about (docs/monitor.md).

Run: ``python train.py ps|chief|worker`` (the role; TF_CONFIG says the index). Needs
TensorFlow 1.15 (``tensorflow/tensorflow:1.15.5-py3``) and downloads MNIST at start.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request

CHIEF_PORT = 2223
SEED = 10000
BATCH = 16  # examples per step (each worker's step is one batch: asynchronous training)
# Where tfjob.yaml's projected serviceAccountToken volume (audience dragonet-monitor) is.
TOKEN_FILE = "/var/run/secrets/dragonet.io/monitor/token"


def cluster_and_task(tf_config: str, role: str) -> tuple[dict[str, list[str]], str, int]:
    """The cluster with the chief in the PS pod, and this process's job name and index."""
    config = json.loads(tf_config)
    cluster = {k: list(v) for k, v in config["cluster"].items()}
    ps_host = cluster["ps"][0].rsplit(":", 1)[0]
    cluster["chief"] = [f"{ps_host}:{CHIEF_PORT}"]
    if role == "chief":
        return cluster, "chief", 0
    task = config["task"]
    if task["type"] != role:
        raise SystemExit(f"train.py: role {role!r} but TF_CONFIG says {task['type']!r}")
    return cluster, task["type"], int(task["index"])


def should_report(local_step: int, global_step: int, interval: int, last: int, margin: int) -> bool:
    """Every ``interval`` local steps, and not in the last ``margin`` global steps."""
    return local_step % interval == 0 and last - global_step > margin


def token(path: str | None = None) -> str | None:
    """The pod's token for the monitor, read afresh (the kubelet rotates the file); None
    when there is none (the monitor then answers 401, and training goes on)."""
    try:
        with open(path or os.environ.get("MONITOR_TOKEN_FILE", TOKEN_FILE)) as f:
            return f.read().strip() or None
    except OSError:
        return None


def post(
    url: str, body: dict[str, object], timeout: float, token_file: str | None = None
) -> int | None:
    """POST ``body`` as JSON to the node's monitor, with the pod's token; the HTTP status,
    or None if it did not answer (training goes on either way)."""
    headers = {"Content-Type": "application/json"}
    bearer = token(token_file)
    if bearer:
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


def report(
    url: str, pod: str, value: float, timeout: float = 2.0, token_file: str | None = None
) -> int | None:
    """POST the metric to the node's monitor; the HTTP status, or None if it did not answer."""
    return post(url, {"pod": pod, "value": float(value)}, timeout, token_file)


def steps_per_second(before: tuple[float, int], now: tuple[float, int]) -> float | None:
    """Global steps per second between two (time, global step) readings; None when no
    time passed or the step went back (the PS restarted: no speed to say)."""
    (t0, s0), (t1, s1) = before, now
    if t1 <= t0 or s1 < s0:
        return None
    return (s1 - s0) / (t1 - t0)


def report_speed(
    url: str,
    pod: str,
    speed: float,
    batch: int,
    progress: tuple[int, int] | None = None,
    timeout: float = 2.0,
    token_file: str | None = None,
) -> int | None:
    """POST the job's speed (and how far it is: global step, total steps) to the node's
    monitor; the HTTP status, or None."""
    body: dict[str, object] = {"pod": pod, "stepsPerSecond": speed, "batch": batch}
    if progress is not None:
        step, total = progress
        body.update(step=min(step, total), totalSteps=total)
    return post(url, body, timeout, token_file)


def main(role: str) -> None:
    import numpy as np
    import tensorflow as tf

    cluster, job, index = cluster_and_task(os.environ["TF_CONFIG"], role)
    # The reference's variable names, lower case, so its job YAMLs keep working.
    last = int(os.environ.get("global_steps", "1000"))  # noqa: SIM112
    interval = int(os.environ.get("batch_interval", "20"))  # noqa: SIM112
    margin = 5 * int(os.environ.get("max_workers", "1"))  # noqa: SIM112
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

    (x_train, y_train), (x_test, y_test) = tf.keras.datasets.mnist.load_data()
    x_train = x_train.reshape(-1, 784).astype("float32") / 255.0
    x_test = x_test.reshape(-1, 784).astype("float32") / 255.0
    tf.set_random_seed(SEED)
    with tf.device(tf.train.replica_device_setter(cluster=cluster, worker_device=filters[1])):
        images = tf.placeholder(tf.float32, [None, 784])
        labels = tf.placeholder(tf.int64, [None])
        weights = tf.Variable(tf.zeros([784, 10]))
        bias = tf.Variable(tf.zeros([10]))
        logits = tf.matmul(images, weights) + bias
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        step = tf.train.get_or_create_global_step()
        train = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=step)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))

    hooks = [tf.train.StopAtStepHook(last_step=last)]
    url, pod = os.environ.get("MONITOR_URL", ""), os.environ.get("POD_NAME", "")
    with tf.train.MonitoredTrainingSession(
        master=server.target, is_chief=(job == "chief"), hooks=hooks
    ) as session:
        if job == "chief":  # initializes the model, then waits for the workers to finish
            speed_url = os.environ.get("SPEED_URL", "")
            every = float(os.environ.get("speed_interval", "10"))  # noqa: SIM112
            before = (time.monotonic(), int(session.run(step)))
            while not session.should_stop():
                time.sleep(every)
                now_at = (time.monotonic(), int(session.run(step)))
                speed = steps_per_second(before, now_at)
                before = now_at
                answer = None
                if speed_url and pod and speed:  # nothing to say while no step is made
                    answer = report_speed(speed_url, pod, speed, BATCH, (now_at[1], last))
                print("STEP", now_at[1], speed, answer, flush=True)
            return
        local = 0
        while not session.should_stop():
            rng = np.random.RandomState(SEED + local)
            batch = rng.randint(0, len(x_train), BATCH)
            _, now = session.run([train, step], {images: x_train[batch], labels: y_train[batch]})
            local += 1
            if url and pod and should_report(local, now, interval, last, margin):
                sample = rng.randint(0, len(x_test), 256)
                value = session.run(accuracy, {images: x_test[sample], labels: y_test[sample]})
                print("ACC", now, value, report(url, pod, value), flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("ps", "chief", "worker"):
        raise SystemExit("usage: train.py ps|chief|worker")
    main(sys.argv[1])
