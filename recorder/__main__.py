"""``dragonet-recorder`` (or ``python -m recorder``): write the Kubernetes Events that tell
each TFJob's and MXJob's story (admitted, waiting, preempted, shrunk, grown, migrated,
succeeded, failed, deleted by its TTL) and its pool's, until SIGTERM.

A setting it cannot use, or no Kubernetes API configuration, is one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import logging.config
import signal
import sys
import threading
from datetime import timedelta

from pydantic import ValidationError

from recorder.config import RecorderSettings
from webhooks.kubeapi import settings_problem


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if args:
        print(
            f"dragonet-recorder: takes no arguments (got {args[0]!r}); see --help",
            file=sys.stderr,
        )
        return 2
    try:
        settings = RecorderSettings()
    except ValidationError as err:
        print(f"dragonet-recorder: {settings_problem(err)}", file=sys.stderr)
        return 2
    from recorder.kube import KubeEvents, KubeObjects
    from recorder.loop import run
    from recorder.write import TokenBucket, Written
    from webhooks import logs
    from webhooks.kubeapi import Api

    try:
        api = Api(settings.api_timeout_seconds)
    except Exception as err:
        print(f"dragonet-recorder: no Kubernetes API configuration: {err}", file=sys.stderr)
        return 2
    logging.config.dictConfig(logs.config(settings.log_level))
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    run(
        KubeObjects(api, settings.page_size),
        KubeEvents(api, settings.page_size),
        Written(timedelta(seconds=settings.max_age_seconds)),
        settings.instance,
        # Waiting for a token ends at SIGTERM; then the pass writes nothing more.
        TokenBucket(settings.qps, settings.burst, sleep=stop.wait),
        settings.interval_seconds,
        stop,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
