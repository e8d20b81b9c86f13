"""A small Kubernetes API server over real HTTP on 127.0.0.1, for the monitor's real
server (``python -m monitor`` with a kubeconfig naming it): pods by field selector, the
pool, Migrations, and the TokenReview API as the API server answers it
(``authentication.k8s.io/v1``: a pod-bound token's pod in ``user.extra``, the audiences
checked against the token's own)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"


@dataclass
class FakeApiState:
    pods: list[dict[str, Any]] = field(default_factory=list)
    pool: dict[str, Any] = field(default_factory=dict)
    # token -> (its audiences, the user it authenticates)
    tokens: dict[str, tuple[list[str], dict[str, Any]]] = field(default_factory=dict)
    reviews: list[dict[str, Any]] = field(default_factory=list)  # TokenReview specs sent
    migrations: list[dict[str, Any]] = field(default_factory=list)
    patches: list[tuple[str, Any]] = field(default_factory=list)  # (path, body)

    def pod_token(
        self, p: dict[str, Any], audience: str = "dragonet-monitor", account: str = "default"
    ) -> str:
        """A projected ServiceAccount token bound to pod ``p``, as the kubelet mounts it."""
        meta = p["metadata"]
        token = f"tok-{meta['namespace']}-{meta['name']}-{audience}"
        self.tokens[token] = (
            [audience],
            {
                "username": f"system:serviceaccount:{meta['namespace']}:{account}",
                "uid": f"sa-{meta['namespace']}-{account}",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{meta['namespace']}"],
                "extra": {
                    "authentication.kubernetes.io/pod-name": [meta["name"]],
                    "authentication.kubernetes.io/pod-uid": [meta["uid"]],
                },
            },
        )
        return token

    def account_token(self, namespace: str, account: str, audience: str) -> str:
        """A token bound to no pod (``kubectl create token <account> --audience ...``)."""
        token = f"tok-{namespace}-{account}-unbound"
        self.tokens[token] = (
            [audience],
            {"username": f"system:serviceaccount:{namespace}:{account}", "uid": "sa"},
        )
        return token

    def review(self, spec: dict[str, Any]) -> dict[str, Any]:
        self.reviews.append(spec)
        found = self.tokens.get(spec.get("token", ""))
        if found is None:
            return {"authenticated": False, "error": "invalid bearer token"}
        audiences, user = found
        wanted = spec.get("audiences") or [API_AUDIENCE]
        both = [a for a in wanted if a in audiences]
        if not both:
            return {
                "authenticated": False,
                "error": f"token audiences {audiences} is invalid for the target audiences "
                f"{wanted}",
            }
        return {"authenticated": True, "user": user, "audiences": both}


def _handler(state: FakeApiState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def _send(self, status: int, obj: Any) -> None:
            raw = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _body(self) -> Any:
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n) or b"{}")

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            path, query = parts.path, parse_qs(parts.query)
            if path.endswith("/pods") and "fieldSelector" in query:
                fields = dict(f.split("=") for f in query["fieldSelector"][0].split(","))
                ns = path.split("/")[4] if "/namespaces/" in path else None
                items = [
                    p
                    for p in state.pods
                    if p["metadata"]["name"] == fields["metadata.name"]
                    and p["spec"]["nodeName"] == fields["spec.nodeName"]
                    and ns in (None, p["metadata"]["namespace"])
                ]
                return self._send(200, {"kind": "PodList", "metadata": {}, "items": items})
            if path.endswith("/pods") and "labelSelector" in query:
                label, job = query["labelSelector"][0].split("=")
                ns = path.split("/")[4]
                items = [
                    p
                    for p in state.pods
                    if p["metadata"]["labels"].get(label) == job
                    and p["metadata"]["namespace"] == ns
                ]
                return self._send(200, {"kind": "PodList", "metadata": {}, "items": items})
            if path == "/apis/dragonet.io/v1alpha1/trainingpools/default" and state.pool:
                return self._send(200, state.pool)
            if "/tfjobs/" in path or "/mxjobs/" in path:
                return self._send(200, {"metadata": {"name": path.rsplit("/", 1)[1]}})
            return self._send(404, {"kind": "Status", "reason": "NotFound"})

        def do_POST(self) -> None:
            body = self._body()
            if self.path.startswith("/apis/authentication.k8s.io/v1/tokenreviews"):
                status = state.review(body.get("spec") or {})
                return self._send(201, {**body, "status": status})
            if "/migrations" in self.path:
                state.migrations.append(body)
                return self._send(201, body)
            return self._send(404, {"kind": "Status", "reason": "NotFound"})

        def do_PATCH(self) -> None:
            state.patches.append((self.path, self._body()))
            return self._send(200, {})

    return Handler


@contextmanager
def serving(state: FakeApiState) -> Iterator[str]:
    """The fake API on a free port of 127.0.0.1; yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
