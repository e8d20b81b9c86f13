"""``dragonet-reaper`` (or ``python -m reaper``): delete finished TFJobs and MXJobs once
their ``ttlSecondsAfterFinished`` has passed, until SIGTERM.

A setting it cannot use, or no Kubernetes API configuration, is one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import logging.config
import signal
import sys
import threading

from pydantic import ValidationError

from reaper.config import ReaperSettings
from reaper.loop import run
from webhooks.kubeapi import settings_problem


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if args:
        print(f"dragonet-reaper: takes no arguments (got {args[0]!r}); see --help", file=sys.stderr)
        return 2
    try:
        settings = ReaperSettings()
    except ValidationError as err:
        print(f"dragonet-reaper: {settings_problem(err)}", file=sys.stderr)
        return 2
    from reaper.kube import KubeJobs
    from webhooks import logs

    try:
        jobs = KubeJobs(settings.api_timeout_seconds, settings.page_size)
    except Exception as err:
        print(f"dragonet-reaper: no Kubernetes API configuration: {err}", file=sys.stderr)
        return 2
    logging.config.dictConfig(logs.config(settings.log_level))
    # One line per failed pass says what failed; not three more for urllib3's retries.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    run(jobs, settings.interval_seconds, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
