"""``dragonet-recorder`` (or ``python -m recorder``): write the Kubernetes Events that tell
each TFJob's and MXJob's story (admitted, waiting, preempted, shrunk, grown, migrated,
succeeded, failed, deleted by its TTL) and its pool's, until SIGTERM.

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
        from recorder.kube import KubeEvents, KubeObjects
        from recorder.loop import Writer, run
        from recorder.write import TokenBucket, Written
        from webhooks.kubeapi import Api

        api = process.connect(NAME, lambda: Api(settings.api_timeout_seconds))
    except process.Exit as done:
        return done.status
    stop = process.until_signalled(settings.log_level)
    writer = Writer(
        KubeEvents(api, settings.page_size),
        Written(timedelta(seconds=settings.max_age_seconds)),
        settings.instance,
        # Waiting for a token ends at SIGTERM; then nothing more is written.
        TokenBucket(settings.qps, settings.burst, sleep=stop.wait),
        stop,
    )
    run(KubeObjects(api, settings.page_size), writer, settings.watch_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
