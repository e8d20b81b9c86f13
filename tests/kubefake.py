"""For tests of the official client against a small in-memory API server at the HTTP
layer (there is no cluster here): a kubeconfig that names a server nobody calls, the
client's answer objects, and the patch that routes the client's requests to a fake."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlsplit

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


class WatchStream:
    """A watch's answer as urllib3 streams it: one JSON line per event; ``DROP`` in the
    events breaks the connection there (urllib3's ProtocolError), as a lost API server
    does. Past its events it waits ``idle`` seconds and ends, as the API server's
    ``timeoutSeconds`` ends a watch."""

    DROP = object()

    def __init__(self, events: list[Any], idle: float = 0.05) -> None:
        self.status, self.reason, self.headers = 200, "OK", {}
        self.data = b""
        self._events, self._idle = events, idle

    def stream(self, amt: Any = None, decode_content: Any = None) -> Any:
        import time

        from urllib3.exceptions import ProtocolError

        for event in self._events:
            if event is WatchStream.DROP:
                raise ProtocolError("Connection broken: IncompleteRead")
            yield (json.dumps(event) + "\n").encode()
        time.sleep(self._idle)

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


class FakeApi:
    """A small in-memory API server at the HTTP layer, for any client that routes its
    requests to ``request``: objects by (group/version, plural), namespaced or not; list
    (paged with ``limit``/``continue``, filtered by an equality ``labelSelector``, with the
    store's resourceVersion), get, create (409 if the name is taken), merge patch, delete,
    and watch: each watch of a (group/version, plural) answers the next script queued in
    ``watches`` (a list of events and ``WatchStream.DROP``, a ``WatchStream``, an HTTP
    status such as 410, or a function called then that returns one of those), and an
    empty watch once none is left; ``watched`` records each watch's query.
    ``used`` records each (API group, resource, verb) called, to compare with what a
    ClusterRole grants; ``fail`` answers every request with that status; ``writes``
    counts creates, patches and deletes."""

    def __init__(self) -> None:
        # (group/version, plural) -> {(namespace, name): object}
        self.store: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}
        self.used: set[tuple[str, str, str]] = set()
        self.writes = 0
        self.fail: int | None = None
        self.patch_types: list[str] = []  # Content-Type of each patch
        self._uid = 0
        self.version = 0  # the store's resourceVersion
        self.watches: dict[tuple[str, str], list[Any]] = {}
        self.watched: list[tuple[str, dict[str, list[str]]]] = []  # (plural, query)
        self.lists: list[tuple[str, str]] = []  # each list's plural and resourceVersion

    def put(self, gv: str, plural: str, obj: dict[str, Any]) -> None:
        """Store ``obj`` as the cluster holds it (a uid and a resourceVersion added)."""
        meta = obj.setdefault("metadata", {})
        self._uid += 1
        self.version += 1
        meta.setdefault("uid", f"uid-{self._uid}")
        meta["resourceVersion"] = str(self.version)
        key = (str(meta.get("namespace") or ""), meta["name"])
        self.store.setdefault((gv, plural), {})[key] = obj

    def change(self, gv: str, plural: str, obj: dict[str, Any], kind: str = "MODIFIED") -> Any:
        """Store ``obj`` and return the watch event that tells it (as a list item: no
        apiVersion or kind)."""
        self.put(gv, plural, obj)
        shown = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        return {"type": kind, "object": json.loads(json.dumps(shown))}

    def bookmark(self) -> Any:
        """A BOOKMARK event at the store's resourceVersion."""
        return {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self.version)}}}

    def objects(self, gv: str, plural: str) -> list[dict[str, Any]]:
        return list(self.store.get((gv, plural), {}).values())

    def request(self, method: str, url: str, headers=None, body=None, **_: Any) -> RESTResponse:
        parts = urlsplit(url)
        seg = parts.path.strip("/").split("/")
        if seg[0] == "api":  # the core group: /api/v1/...
            gv, group, rest = seg[1], "", seg[2:]
        elif seg[0] == "apis" and len(seg) >= 3:
            gv, group, rest = f"{seg[1]}/{seg[2]}", seg[1], seg[3:]
        else:
            return answer(404, {"kind": "Status", "reason": "NotFound"})
        namespace = ""
        if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
            namespace, rest = rest[1], rest[2:]
        if not rest:
            return answer(404, {"kind": "Status", "reason": "NotFound"})
        plural, name = rest[0], (rest[1] if len(rest) > 1 else None)
        query = parse_qs(parts.query)
        watching = method == "GET" and name is None and query.get("watch") == ["true"]
        verb = (
            "watch"
            if watching
            else {
                ("GET", False): "list",
                ("GET", True): "get",
                ("POST", False): "create",
                ("PATCH", True): "patch",
                ("PUT", True): "update",
                ("DELETE", True): "delete",
            }.get((method, name is not None))
        )
        if verb is None:
            return answer(405, {"kind": "Status", "reason": "MethodNotAllowed"})
        self.used.add((group, plural, verb))
        if verb == "patch":
            self.patch_types.append((headers or {}).get("Content-Type", ""))
        if self.fail:
            return answer(self.fail, {"kind": "Status", "message": "injected"})
        bucket = self.store.setdefault((gv, plural), {})
        payload = json.loads(body) if isinstance(body, (str, bytes)) else body
        if verb == "watch":
            self.watched.append((plural, query))
            script = self.watches.get((gv, plural)) or []
            step = script.pop(0) if script else []
            if callable(step):  # what happens by the time of this watch
                step = step()
            if isinstance(step, WatchStream):
                return RESTResponse(step)
            if isinstance(step, int):
                return answer(step, {"kind": "Status", "code": step, "reason": "Expired"})
            return RESTResponse(WatchStream(step))
        if verb == "list":
            self.lists.append((plural, str(self.version)))
            return self._list(bucket, namespace, query)
        if verb == "create":
            meta = payload["metadata"]
            if (namespace, meta["name"]) in bucket:
                return answer(409, {"kind": "Status", "reason": "AlreadyExists"})
            self.writes += 1
            self.put(gv, plural, {**payload, "metadata": {**meta, "namespace": namespace}})
            return answer(201, bucket[(namespace, meta["name"])])
        found = bucket.get((namespace, name or ""))
        if found is None:
            return answer(404, {"kind": "Status", "reason": "NotFound"})
        if verb == "get":
            return answer(200, found)
        self.writes += 1
        if verb == "delete":
            del bucket[(namespace, name or "")]
            return answer(200, {"kind": "Status", "status": "Success"})
        merged = {**found, **payload} if verb == "patch" else dict(payload)
        bucket[(namespace, name or "")] = merged
        return answer(200, merged)

    def _list(
        self, bucket: dict[tuple[str, str], dict[str, Any]], namespace: str, query: dict
    ) -> RESTResponse:
        items = [o for (ns, _), o in sorted(bucket.items()) if not namespace or ns == namespace]
        for term in (query.get("labelSelector") or [""])[0].split(","):
            if term:
                k, _, v = term.partition("=")
                items = [o for o in items if (o["metadata"].get("labels") or {}).get(k) == v]
        start = int(query.get("continue", ["0"])[0])
        limit = int(query.get("limit", [str(len(items) or 1)])[0])
        page = items[start : start + limit]
        meta: dict[str, str] = {"resourceVersion": str(self.version)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        return answer(200, {"kind": "List", "metadata": meta, "items": page})
