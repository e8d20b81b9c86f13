"""Settings from the environment (``DRAGONET_*``), as the Helm chart sets them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from policy.config import PolicyConfig, PolicyName


class LabelSelector(BaseModel):
    model_config = ConfigDict(extra="forbid")
    matchLabels: dict[str, str] | None = None
    matchExpressions: list[dict[str, Any]] | None = None

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DRAGONET_", frozen=True)

    # Which Nodes form the training pool (a LabelSelector; empty selects every node).
    pool_selector: LabelSelector = Field(default_factory=LabelSelector)
    policy: PolicyName = "dragonet"
    binding: Literal["affinity", "nodeName"] = "affinity"
    starvation_seconds: float = Field(default=30.0, ge=0)
    idle_seconds: float = Field(default=60.0, ge=0)
    cluster_domain: str = ""
    # Count every pod on the pool's nodes, not only Dragonet's (costlier hook requests).
    watch_all_pods: bool = False
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

    def policy_config(self) -> PolicyConfig:
        return PolicyConfig(
            policy=self.policy,
            binding=self.binding,
            cluster_domain=self.cluster_domain,
            starvation_seconds=self.starvation_seconds,
            idle_seconds=self.idle_seconds,
        )
