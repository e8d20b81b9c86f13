"""The reaper's settings, from ``DRAGONET_REAPER_*`` environment variables (the chart's
``reaper`` values set them)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from webhooks.health import ProbedSettings


class ReaperSettings(ProbedSettings):
    model_config = SettingsConfigDict(env_prefix="DRAGONET_REAPER_", frozen=True)

    # The jobs are listed at least this often: a job that finishes between two lists is
    # deleted at most this late after its expiry.
    interval_seconds: float = Field(default=30.0, gt=0, le=3600)
    # Jobs are listed in pages of this many (the API server's limit/continue).
    page_size: int = Field(default=500, ge=1, le=10_000)
    # Timeout of each Kubernetes API call.
    api_timeout_seconds: float = Field(default=10.0, gt=0)
    log_level: str = "info"
    # Kubeflow's training-operator runs the jobs not marked for Dragonet (the chart's
    # kubeflow.coexist, docs/kubeflow.md): list only the jobs labelled for Dragonet, so that
    # Kubeflow's are Kubeflow's to delete.
    kubeflow_coexist: bool = False
    # /healthz, /readyz and /metrics: webhooks.health.ProbedSettings.

    def default_stall_seconds(self) -> float:
        """Three intervals and a minute."""
        return 3 * self.interval_seconds + 60
