"""``dragonet-recorder`` (or ``python -m recorder``): write the Kubernetes Events that tell
each TFJob's and MXJob's story (admitted, waiting, preempted, shrunk, grown, migrated,
succeeded, failed, deleted by its TTL) and its pool's, until SIGTERM; export the pools'
metrics (``recorder/metrics.py``) and its probes on ``DRAGONET_RECORDER_PORT`` (8080).

A setting it cannot use, or no Kubernetes API configuration, is one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import sys
from datetime import timedelta

from recorder.config import RecorderSettings
from webhooks import process

NAME = "dragonet-recorder"


def main(argv: list[str] | None = None) -> int:
    try:
        settings = process.settings(NAME, __doc__, argv, RecorderSettings)
        from policy.model.jobs import COEXIST_SELECTOR
        from recorder.kube import KubeEvents, KubeObjects
        from recorder.loop import Writer, caches, run
        from recorder.metrics import RecorderMetrics
        from recorder.probe import ObservedEvents, ObservedObjects
        from recorder.write import TokenBucket, Written
        from webhooks import health
        from webhooks.kubeapi import Api

        api = process.connect(NAME, lambda: Api(settings.api_timeout_seconds))
        metrics, pulse = RecorderMetrics(), health.Pulse(settings.liveness_seconds)
        if settings.port:
            app = health.create_app(NAME, pulse, metrics.registry)
            health.serve(NAME, app, settings.host, settings.port)
    except process.Exit as done:
        return done.status
    stop = process.until_signalled(settings.log_level)
    jobs_selector = COEXIST_SELECTOR if settings.kubeflow_coexist else ""
    writer = Writer(
        ObservedEvents(KubeEvents(api, settings.page_size), metrics, pulse),
        Written(timedelta(seconds=settings.max_age_seconds)),
        settings.instance,
        # Waiting for a token ends at SIGTERM; then nothing more is written.
        TokenBucket(settings.qps, settings.burst, sleep=stop.wait),
        stop,
    )
    cached = caches()
    metrics.follow((r.kind, r.plural, cache) for r, cache in cached.items())
    objects = ObservedObjects(KubeObjects(api, settings.page_size, jobs_selector), metrics, pulse)
    run(objects, writer, settings.watch_seconds, cached=cached, tick=metrics.refresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
