"""For tests of the official client against a small in-memory API server at the HTTP
layer (there is no cluster here): a kubeconfig that names a server nobody calls, the
client's answer objects, and the patch that routes the client's requests to a fake."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.rest import RESTResponse

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://api.example:6443"}}]
users: [{name: u, user: {token: "t"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def answer(status: int, obj: Any) -> RESTResponse:
    """What the client reads from the API server: ``obj`` as JSON, with ``status``."""
    raw = SimpleNamespace(
        status=status,
        reason="x",
        data=json.dumps(obj).encode(),
        headers={"Content-Type": "application/json"},
    )
    response = RESTResponse(raw)
    response.read()
    return response


def use_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a cluster, the client reads ``$KUBECONFIG``: this one."""
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def route(api_client: Any, request: Callable[..., RESTResponse], mp: pytest.MonkeyPatch) -> None:
    """Every request of ``api_client`` goes to ``request`` (the fake server)."""
    mp.setattr(api_client.rest_client, "request", request)


def granted(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(API group, resource, verb) of every permission a ClusterRole grants."""
    return {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
