"""``dragonet-monitor`` (or ``python -m monitor``): serve the Container Monitor on this
node with gunicorn, one process (the records live in its memory) and a few threads, and
re-read the pool's loads every ``DRAGONET_MONITOR_REFRESH_SECONDS`` in the background.

A setting it cannot use, or no Kubernetes API configuration, is one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import logging
import sys
import threading

from monitor.config import MonitorSettings
from monitor.kube import Cluster
from monitor.service import Monitor
from webhooks import process

NAME = "dragonet-monitor"
log = logging.getLogger("dragonet.monitor")


def refresh_forever(monitor: Monitor, stop: threading.Event) -> None:
    """Read the pool's loads now and every refresh period until ``stop`` is set; forget
    silent pods on the way (reports alone would not, if every pod went quiet)."""
    while not stop.is_set():
        try:
            monitor.refresh()
            monitor.forget(monitor.clock.monotonic())
        except Exception:  # a bug here must not end the refresher
            log.exception("refreshing the pool's loads failed")
        stop.wait(monitor.settings.refresh_seconds)


def main(argv: list[str] | None = None) -> int:
    try:
        settings = process.settings(NAME, __doc__, argv, MonitorSettings)
        from monitor.kube import KubeCluster

        cluster = process.connect(NAME, lambda: KubeCluster(settings.api_timeout_seconds))
    except process.Exit as done:
        return done.status
    serve(settings, cluster)
    return 0


def serve(settings: MonitorSettings, cluster: Cluster) -> None:
    from gunicorn.app.base import BaseApplication

    from monitor.app import create_app
    from webhooks import logs

    class Server(BaseApplication):
        def load_config(self) -> None:
            options = {
                "bind": f"{settings.host}:{settings.port}",
                "workers": 1,
                "worker_class": "gthread",
                "threads": settings.threads,
                "timeout": 30,
                "graceful_timeout": 5,
                "loglevel": settings.log_level,
                "accesslog": None,
                "logconfig_dict": logs.config(settings.log_level),
                "control_socket_disable": True,
            }
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self):
            monitor = Monitor(cluster, settings)
            stop = threading.Event()
            threading.Thread(
                target=refresh_forever, args=(monitor, stop), name="refresh", daemon=True
            ).start()
            return create_app(monitor)

    Server().run()


if __name__ == "__main__":
    sys.exit(main())
