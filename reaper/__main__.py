"""``dragonet-reaper`` (or ``python -m reaper``): delete finished TFJobs and MXJobs once
their ``ttlSecondsAfterFinished`` has passed, until SIGTERM.

A setting it cannot use, or no Kubernetes API configuration, is one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import sys

from reaper.config import ReaperSettings
from reaper.loop import run
from webhooks import process

NAME = "dragonet-reaper"


def main(argv: list[str] | None = None) -> int:
    try:
        settings = process.settings(NAME, __doc__, argv, ReaperSettings)
        from policy.model.jobs import COEXIST_SELECTOR
        from reaper.kube import KubeJobs

        selector = COEXIST_SELECTOR if settings.kubeflow_coexist else ""
        jobs = process.connect(
            NAME, lambda: KubeJobs(settings.api_timeout_seconds, settings.page_size, selector)
        )
    except process.Exit as done:
        return done.status
    run(jobs, settings.interval_seconds, process.until_signalled(settings.log_level))
    return 0


if __name__ == "__main__":
    sys.exit(main())
