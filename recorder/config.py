"""The recorder's settings, from ``DRAGONET_RECORDER_*`` environment variables (the chart's
``recorder`` values set them)."""

from __future__ import annotations

import socket

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from webhooks.health import ProbedSettings


class RecorderSettings(ProbedSettings):
    model_config = SettingsConfigDict(env_prefix="DRAGONET_RECORDER_", frozen=True)

    # The objects are listed once, then watched: each watch lasts this long before it is
    # renewed from where it left off (client-go's reflector: 5 to 10 minutes).
    watch_seconds: int = Field(default=300, ge=1, le=3600)
    # Its own API client's budget for Event writes (creates and series patches), apart
    # from Metacontroller's: writes a second on average, and at once. (Each object has
    # a budget of its own besides, client-go's: recorder.correlate.)
    qps: float = Field(default=2.0, ge=0, le=100)
    burst: int = Field(default=10, ge=1, le=1000)
    # Facts older than this are not written (the API server's --event-ttl, 1 h by default,
    # has deleted their Events by then: writing them again would tell an old story anew).
    max_age_seconds: float = Field(default=3600.0, gt=0)
    page_size: int = Field(default=500, ge=1, le=10_000)
    api_timeout_seconds: float = Field(default=10.0, gt=0)
    # reportingInstance: the pod's name (the chart sets it), else the host's.
    instance: str = Field(default_factory=socket.gethostname, min_length=1, max_length=128)
    log_level: str = "info"
    # Kubeflow's training-operator runs the jobs not marked for Dragonet (the chart's
    # kubeflow.coexist, docs/kubeflow.md): list only the jobs labelled for Dragonet, so
    # that Kubeflow's jobs get no Event of Dragonet's.
    kubeflow_coexist: bool = False
    # /healthz, /readyz and /metrics: webhooks.health.ProbedSettings.

    def default_stall_seconds(self) -> float:
        """Two watches and a minute, plus the wait for three write tokens: a watch ends after
        watch_seconds even when nothing changed, and the API server sends bookmarks."""
        return 2 * self.watch_seconds + 60 + (3 / self.qps if self.qps else 0)
