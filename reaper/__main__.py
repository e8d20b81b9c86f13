"""``dragonet-reaper`` (or ``python -m reaper``): delete finished TFJobs and MXJobs once
their ``ttlSecondsAfterFinished`` has passed, until SIGTERM; serve its probes and metrics
on ``DRAGONET_REAPER_PORT`` (8080).

A setting it cannot use, or no Kubernetes API configuration, is one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import sys
import time

from reaper.config import ReaperSettings
from reaper.loop import run
from webhooks import process

NAME = "dragonet-reaper"


def main(argv: list[str] | None = None) -> int:
    try:
        settings = process.settings(NAME, __doc__, argv, ReaperSettings)
        from policy.model.jobs import COEXIST_SELECTOR
        from reaper.kube import KubeJobs
        from reaper.probe import ObservedJobs, ReaperMetrics
        from webhooks import health

        selector = COEXIST_SELECTOR if settings.kubeflow_coexist else ""
        jobs = process.connect(
            NAME, lambda: KubeJobs(settings.api_timeout_seconds, settings.page_size, selector)
        )
        metrics, pulse = ReaperMetrics(), health.Pulse(settings.liveness_seconds)
        if settings.port:
            app = health.create_app(NAME, pulse, metrics.registry)
            health.serve(NAME, app, settings.host, settings.port)
    except process.Exit as done:
        return done.status
    observed = ObservedJobs(jobs, metrics, pulse, time.time)
    run(observed, settings.interval_seconds, process.until_signalled(settings.log_level))
    return 0


if __name__ == "__main__":
    sys.exit(main())
