"""The webhook process's settings, from the environment (``DRAGONET_*``), as the chart sets them.

Only what concerns the process and how a job's pods are written lives here. How a pool
schedules (its nodes, policy, binding, thresholds) is the TrainingPool's spec, read from
the API on every pool sync (``policy.model.pool``).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DRAGONET_", frozen=True)

    # Appended after ".svc" in TF_CONFIG addresses (Kubeflow's CUSTOM_CLUSTER_DOMAIN).
    cluster_domain: str = ""
    port: int = 8080
    workers: int = Field(default=2, ge=1)
    threads: int = Field(default=4, ge=1)
    # Syncs one process works on at once; more get HTTP 429 + Retry-After at once, which
    # Metacontroller retries without error backoff. 0 = one fewer than the threads (so a
    # thread stays free for health checks and refusals).
    max_inflight: int = Field(default=0, ge=0)
    log_level: str = "info"

    def inflight_limit(self) -> int:
        return self.max_inflight or max(1, self.threads - 1)
