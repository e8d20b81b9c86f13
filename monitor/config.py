"""The monitor's settings, from the environment, as the chart's DaemonSet sets them:
``NODE_NAME`` from the downward API, everything else ``DRAGONET_MONITOR_*``."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class MonitorSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="DRAGONET_MONITOR_", frozen=True, populate_by_name=True
    )

    # The node this monitor runs on (the DaemonSet sets it from spec.nodeName).
    node_name: str = Field(
        min_length=1, validation_alias=AliasChoices("NODE_NAME", "DRAGONET_MONITOR_NODE_NAME")
    )
    # The TrainingPool whose nodes this node is compared with.
    pool: str = "default"
    host: str = "0.0.0.0"
    port: int = Field(default=8081, ge=1, le=65535)
    threads: int = Field(default=4, ge=1)
    log_level: str = "info"
    # A node is overloaded when its load exceeds the pool's mean by this many standard
    # deviations (the reference's OVERLOAD_THREESHOLD).
    threshold: float = Field(default=1.0, ge=0)
    # At most one request per pod per this many seconds.
    throttle_seconds: float = Field(default=3.0, ge=0)
    # A Refused request older than this may be deleted and asked again; each further
    # refusal of the same pod doubles the wait, up to max_retry_seconds.
    retry_seconds: float = Field(default=60.0, ge=0)
    max_retry_seconds: float = Field(default=1800.0, ge=0)
    # Pods that have not reported for this long are forgotten.
    forget_seconds: float = Field(default=120.0, gt=0)
    # At most this many pods are tracked at once (more get 429).
    max_pods: int = Field(default=256, ge=1)
    # How often the pool's loads are read (TrainingPool status, node metrics).
    refresh_seconds: float = Field(default=30.0, gt=0)
    # Report bodies larger than this are refused (413).
    max_body_bytes: int = Field(default=4096, ge=64)
    # Speed reports (POST /throughput, docs/speedup.md): a job's window of reports closes
    # this often (and its history is written at most this often), and is written only
    # when a configuration's speed moved by more than this share.
    throughput_window_seconds: float = Field(default=60.0, ge=10)
    throughput_change: float = Field(default=0.10, ge=0, le=10)
    # Who may report (monitor/auth.py, docs/monitor.md): "token" takes a report only from
    # the pod it is about, proven by the pod's projected ServiceAccount token for
    # token_audience (checked with TokenReview); "none" takes any report, from anyone who
    # reaches the port (any pod on the node can then move another tenant's GPUs).
    auth: Literal["token", "none"] = "token"
    token_audience: str = Field(default="dragonet-monitor", min_length=1)
    # A token's review is kept this long (a refusal 5 s), for at most 4 x max_pods tokens.
    token_cache_seconds: float = Field(default=60.0, ge=0, le=3600)
    # Tokens not in that cache are reviewed at most this often on average (twice that at
    # once); past it a report is answered 429, so made-up tokens cannot flood the API.
    token_reviews_per_second: float = Field(default=20.0, gt=0)
    # In addition, take a report only from the reported pod's own IP address (off: a
    # report through a node's hostPort may arrive SNATed, from the node's address, under
    # some network plugins; turn it on where reports arrive from the pods' own IPs).
    check_source_ip: bool = False
    # Timeout of each Kubernetes API call.
    api_timeout_seconds: float = Field(default=5.0, gt=0)
