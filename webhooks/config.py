"""The webhook process's settings, from the environment (``DRAGONET_*``), as the chart sets them.

Only what concerns the process and how a job's pods are written lives here. How a pool
schedules (its nodes, policy, binding, thresholds) is the TrainingPool's spec, read from
the API on every pool sync (``policy.model.pool``).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from webhooks import env

MiB = 1 << 20
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DRAGONET_", frozen=True)

    # Appended after ".svc" in TF_CONFIG addresses (Kubeflow's CUSTOM_CLUSTER_DOMAIN).
    cluster_domain: str = ""
    # Kubeflow's training-operator runs the jobs not marked for Dragonet on this cluster
    # (the chart's kubeflow.coexist, docs/kubeflow.md): each pool plans only the jobs
    # labelled dragonet.io/managed-by=dragonet, and counts the pods of Kubeflow's jobs on
    # its nodes as taken room.
    kubeflow_coexist: bool = False
    # Address gunicorn listens on: all interfaces in a pod; 127.0.0.1 for local runs.
    host: str = "0.0.0.0"
    port: int = Field(default=8080, ge=1, le=65535)
    workers: int = Field(default=2, ge=1)
    threads: int = Field(default=4, ge=1)
    # Syncs one process works on at once; more get HTTP 429 + Retry-After at once, which
    # Metacontroller retries without error backoff. 0 = one fewer than the threads (so a
    # thread stays free for health checks and refusals). Of large syncs (4 MiB or more),
    # one at a time (webhooks/shell.py: they share the process's core).
    max_inflight: int = Field(default=0, ge=0)
    log_level: str = "info"
    # A larger hook request is answered 413 before it is read. A pool of 1,000 nodes and
    # 5,000 pods sends ~12 MiB (benchmarks/sync_latency.py); 64 MiB leaves room for five
    # times that, and bounds what one request can make a worker parse.
    max_request_bytes: int = Field(default=64 * MiB, ge=1)
    # A hook request still being worked on after this long is answered 422 (webhooks/
    # deadline.py). Below Metacontroller's hook timeout (10 s in the chart), so the answer
    # still reaches it.
    request_timeout_seconds: float = Field(default=8.0, gt=0)
    # One cap, in bytes, on what a process keeps between requests: its memos (policy/memo.py:
    # objects parsed by earlier syncs and what is derived from them, three quarters: the
    # jobs' syncs an eighth of that, the pools' the rest, the pool synced least recently
    # forgotten first) and the request reader's last requests (webhooks/lazy.py, a
    # quarter: each parent's last request, about twice its size, the least recently read
    # forgotten first). Each entry
    # is charged when it is kept, by the bytes it came from times what parsing makes of
    # them (policy.memo.charge, calibrated with tracemalloc); what is forgotten is freed at
    # once. A pool of 1,000 nodes (13 MiB a sync) is charged ~61 MiB of memo and its last
    # request ~38 MiB, so the default keeps two such pools in memos, or dozens of 100
    # nodes. The chart's memory limit is workers x (this + a process's baseline + what
    # requests in flight take): chart/README.md. 0: nothing kept (every sync parses
    # afresh, the same answers).
    memory_cap_bytes: int = Field(default=192 * MiB, ge=0)
    # A connection that sends nothing for this long (new, or kept alive between requests)
    # is closed (gunicorn's keepalive). Metacontroller's Go client keeps its connections
    # idle up to 90 s and opens a new one when the old one was closed.
    idle_seconds: int = Field(default=5, ge=1)
    # Connections one worker process holds at once (idle, arriving, being answered); when
    # full, the oldest not being answered is closed (webhooks/wire.py). Each is a
    # file descriptor and a few KiB.
    max_connections: int = Field(default=1000, ge=16)
    # A worker process is replaced after about this many requests (10 % jitter), its open
    # connections answered or closed cleanly first (webhooks/wire.py). No state lives in it.
    max_requests: int = Field(default=20_000, ge=1)
    # When set, every hook request must carry "Authorization: Bearer <secret>" (what
    # Metacontroller's endpointConfigs[].authorization sends), else 401. The file form
    # reads a mounted Secret; surrounding whitespace (a trailing newline) is ignored.
    shared_secret: SecretStr = SecretStr("")
    shared_secret_file: str = ""
    # Serve HTTPS with this PEM certificate (chain) and key (gunicorn's certfile/keyfile).
    tls_cert_file: str = ""
    tls_key_file: str = ""

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, level: str) -> str:
        if level.lower() not in LOG_LEVELS:
            raise ValueError(f"{level!r} is not a log level (one of {', '.join(LOG_LEVELS)})")
        return level.lower()

    @model_validator(mode="after")
    def _one_of_each(self) -> Settings:
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("set both DRAGONET_TLS_CERT_FILE and DRAGONET_TLS_KEY_FILE or neither")
        if self.shared_secret.get_secret_value() and self.shared_secret_file:
            raise ValueError("set DRAGONET_SHARED_SECRET or DRAGONET_SHARED_SECRET_FILE, not both")
        return self

    def memory_shares(self) -> tuple[int, int]:
        """``memory_cap_bytes`` split: (the memos', the request reader's)."""
        reader = self.memory_cap_bytes // 4
        return self.memory_cap_bytes - reader, reader

    def inflight_limit(self) -> int:
        return self.max_inflight or max(1, self.threads - 1)

    def hook_secret(self) -> bytes | None:
        """The shared secret hook requests must carry, or None if none is required. Read
        once, when the app is made; an empty file is an error, never "no secret"."""
        if self.shared_secret_file:
            secret = Path(self.shared_secret_file).read_text().strip()
            if not secret:
                raise ValueError(f"DRAGONET_SHARED_SECRET_FILE {self.shared_secret_file} is empty")
            return secret.encode()
        secret = self.shared_secret.get_secret_value().strip()
        return secret.encode() if secret else None

    def serving_problem(self) -> str | None:
        """What ``serve`` could not start with, as one line naming its variable: read before
        gunicorn starts, so a missing or unreadable file is not a traceback per worker."""
        files = (
            ("DRAGONET_TLS_CERT_FILE", self.tls_cert_file),
            ("DRAGONET_TLS_KEY_FILE", self.tls_key_file),
            ("DRAGONET_SHARED_SECRET_FILE", self.shared_secret_file),
        )
        for name, path in files:
            if path and not Path(path).is_file():
                return f"{name}: {path}: no such file"
        if self.tls_cert_file:
            try:
                context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
            except (ssl.SSLError, OSError) as err:
                return (
                    "DRAGONET_TLS_CERT_FILE, DRAGONET_TLS_KEY_FILE: not a PEM certificate and "
                    f"its key ({err})"
                )
        try:
            self.hook_secret()
        except (OSError, UnicodeDecodeError, ValueError) as err:
            said = str(err)
            return said if said.startswith("DRAGONET_") else f"DRAGONET_SHARED_SECRET_FILE: {said}"
        return None


# Variables of Dragonet's other processes and of debugging, which a webhook may also see.
_OTHERS = ("DRAGONET_MONITOR_", "DRAGONET_RECORDER_", "DRAGONET_REAPER_", "DRAGONET_DEBUG")


def unknown_variable(environ: Mapping[str, str]) -> str | None:
    """A ``DRAGONET_*`` variable the webhook has no setting for (a typo would otherwise be
    ignored and its default used), as one line with the closest setting."""
    return env.unknown_variable(environ, Settings, "dragonet serve", _OTHERS)
