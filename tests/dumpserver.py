"""A fake API server that serves a simulator dump (``dragonet simulate --dump``) at the
HTTP layer the official client calls: the GETs ``kubectl dragonet`` makes (lists, pages,
label and field selectors, single objects), and the failures a real one answers (403 for
a resource the user may not read, 404 for a CRD that is not installed)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes.client.rest import RESTResponse

from tests.kubefake import answer

# Resource path segments -> the dump's (apiVersion, kind).
RESOURCES = {
    ("api", "v1", "nodes"): ("v1", "Node"),
    ("api", "v1", "pods"): ("v1", "Pod"),
    ("apis", "dragonet.io/v1alpha1", "trainingpools"): ("dragonet.io/v1alpha1", "TrainingPool"),
    ("apis", "dragonet.io/v1alpha1", "admissions"): ("dragonet.io/v1alpha1", "Admission"),
    ("apis", "kubeflow.org/v1", "tfjobs"): ("kubeflow.org/v1", "TFJob"),
    ("apis", "kubeflow.org/v1", "mxjobs"): ("kubeflow.org/v1", "MXJob"),
    ("apis", "events.k8s.io/v1", "events"): ("events.k8s.io/v1", "Event"),
}


def _field(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return "" if node is None else str(node)


def _selected(obj: Mapping[str, Any], fields: str, labels: str) -> bool:
    for term in filter(None, fields.split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if _field(obj, key) == value:
                return False
        else:
            key, value = term.split("=", 1)
            if _field(obj, key) != value:
                return False
    have = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, labels.split(",")):
        key, _, value = term.partition("=")
        if have.get(key) != value:
            return False
    return True


class DumpServer:
    """Serves the items of a ``List``; ``forbidden`` resources answer 403, ``missing``
    ones 404 (a CRD that is not installed). ``calls`` records each GET's path.

    ``namespaces``: the caller is bound only to Roles in these namespaces (a tenant), so
    every cluster-scoped read (Nodes, TrainingPools, a list across namespaces) and every
    read in another namespace answers 403, as RBAC does. None: a ClusterRole."""

    def __init__(self, state: Mapping[str, Any]) -> None:
        self.items = list(state["items"])
        self.namespaces: set[str] | None = None
        self.forbidden: set[str] = set()
        self.missing: set[str] = set()
        self.calls: list[str] = []

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.items if o["kind"] == kind]

    def request(self, method: str, url: str, headers=None, body=None, **_: Any) -> RESTResponse:
        parts = urlsplit(url)
        self.calls.append(parts.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        segs = parts.path.strip("/").split("/")
        if method != "GET":
            return answer(405, {"kind": "Status", "reason": "MethodNotAllowed"})
        if segs[0] == "api":
            root, rest = ("api", "v1"), segs[2:]
        else:
            root, rest = ("apis", f"{segs[1]}/{segs[2]}"), segs[3:]
        namespace = None
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        resource, name = rest[0], (rest[1] if len(rest) > 1 else None)
        outside = self.namespaces is not None and namespace not in self.namespaces
        if resource in self.forbidden or outside:
            verb = "get" if name else "list"
            where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
            return answer(
                403,
                {
                    "kind": "Status",
                    "reason": "Forbidden",
                    "message": f'{resource} is forbidden: User "alice" cannot {verb} resource '
                    f'"{resource}"{where}',
                },
            )
        known = RESOURCES.get((*root, resource))
        if known is None or resource in self.missing:
            return answer(404, {"kind": "Status", "reason": "NotFound", "message": "not found"})
        api_version, kind = known
        found = [
            o
            for o in self.items
            if o.get("apiVersion") == api_version
            and o["kind"] == kind
            and (namespace is None or o["metadata"].get("namespace") == namespace)
        ]
        if name is not None:
            for o in found:
                if o["metadata"]["name"] == name:
                    return answer(200, o)
            return answer(
                404,
                {
                    "kind": "Status",
                    "reason": "NotFound",
                    "message": f'{resource} "{name}" not found',
                },
            )
        found = [
            o
            for o in found
            if _selected(o, query.get("fieldSelector", ""), query.get("labelSelector", ""))
        ]
        limit = int(query.get("limit", len(found) or 1))
        start = int(query.get("continue", "0") or 0)
        page = found[start : start + limit]
        meta = {"continue": str(start + limit)} if start + limit < len(found) else {}
        items = [
            {k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
            if root == ("api", "v1")
            else o
            for o in page
        ]
        return answer(
            200,
            {"apiVersion": api_version, "kind": f"{kind}List", "metadata": meta, "items": items},
        )


def serve_dump(
    state: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, now: datetime
) -> DumpServer:
    """Every request of every client made in the test goes to a server of ``state``, and the
    live views' clock reads ``now``."""
    from kubernetes.client import rest

    import live.views
    from tests.kubefake import use_kubeconfig

    use_kubeconfig(tmp_path, monkeypatch)
    fake = DumpServer(state)
    monkeypatch.setattr(
        rest.RESTClientObject,
        "request",
        lambda self, method, url, **kw: fake.request(method, url, **kw),
    )
    monkeypatch.setattr(live.views, "utc_now", lambda: now)
    return fake
