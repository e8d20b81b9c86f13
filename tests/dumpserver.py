"""A fake API server that serves a simulator dump (``dragonet simulate --dump``) at the
HTTP layer the official client calls: the GETs ``kubectl dragonet`` makes (lists, pages,
label and field selectors, single objects), the writes of its control verbs (a JSON merge
patch, a DELETE with its options and uid precondition, either with ``dryRun=All``), and the
failures a real one answers (403 for a resource the user may not read or a verb they may
not use, 404 for a CRD that is not installed, 409 for a failed precondition, a field a CRD
without it prunes)."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes.client.rest import RESTResponse

from tests.kubefake import KUBECONFIG, answer

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


class BadSelector(ValueError):
    """A label selector the API server cannot parse (it answers 400)."""


_SET = re.compile(
    r"^\s*(!?)\s*([\w./-]+)\s*(?:(in|notin)\s*\(([^()]*)\)|(==|=|!=)\s*([\w./-]*))?\s*$"
)


def _requirements(selector: str) -> list[str]:
    """The selector's requirements: split at commas outside parentheses."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            out.append(selector[start:i])
            start = i + 1
    return [r for r in [*out, selector[start:]] if r.strip()]


def labels_match(selector: str, have: Mapping[str, str]) -> bool:
    """Whether labels ``have`` satisfy a label selector in the API's string form
    (``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``)."""
    for term in _requirements(selector):
        m = _SET.match(term)
        if m is None or (m.group(1) and (m.group(3) or m.group(5))):
            raise BadSelector(f"unable to parse requirement: {term.strip()!r}")
        negated, key, set_op, values, op, value = m.groups()
        if set_op:
            listed = {v.strip() for v in values.split(",")}
            if (have.get(key) in listed) != (set_op == "in") or (
                set_op == "in" and key not in have
            ):
                return False
        elif op:
            if (have.get(key) == value) != (op != "!="):
                return False
        elif (key in have) == bool(negated):
            return False
    return True


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
    return labels_match(labels, (obj.get("metadata") or {}).get("labels") or {})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: what a JSON merge patch makes of ``target`` (null deletes a key)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


@dataclass(frozen=True)
class Write:
    """One write the server received, as sent."""

    method: str
    path: str
    content_type: str
    body: Any
    query: Mapping[str, str]


def _forbidden(verb: str, resource: str, namespace: str | None) -> RESTResponse:
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


class DumpServer:
    """Serves the items of a ``List``; ``forbidden`` resources answer 403, ``missing``
    ones 404 (a CRD that is not installed); ``denied`` (verb, resource) pairs answer 403 to
    that verb alone; ``pruned`` spec fields ("stopPolicy", "runPolicy.suspend") are
    dropped from what a patch stores, as a CRD without them prunes them. ``calls`` records
    each request's path, ``writes`` each PATCH and DELETE.

    ``namespaces``: the caller is bound only to Roles in these namespaces (a tenant), so
    every cluster-scoped read (Nodes, TrainingPools, a list across namespaces) and every
    read in another namespace answers 403, as RBAC does. None: a ClusterRole."""

    def __init__(self, state: Mapping[str, Any]) -> None:
        self.items = list(state["items"])
        self.namespaces: set[str] | None = None
        self.forbidden: set[str] = set()
        self.missing: set[str] = set()
        self.denied: set[tuple[str, str]] = set()
        self.pruned: set[str] = set()
        self.calls: list[str] = []
        self.writes: list[Write] = []

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.items if o["kind"] == kind]

    def request(self, method: str, url: str, headers=None, body=None, **_: Any) -> RESTResponse:
        parts = urlsplit(url)
        self.calls.append(parts.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        segs = parts.path.strip("/").split("/")
        if method not in ("GET", "PATCH", "DELETE"):
            return answer(405, {"kind": "Status", "reason": "MethodNotAllowed"})
        if segs[0] == "api":
            root, rest = ("api", "v1"), segs[2:]
        else:
            root, rest = ("apis", f"{segs[1]}/{segs[2]}"), segs[3:]
        namespace = None
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        resource, name = rest[0], (rest[1] if len(rest) > 1 else None)
        verb = {"PATCH": "patch", "DELETE": "delete"}.get(method, "get" if name else "list")
        outside = self.namespaces is not None and namespace not in self.namespaces
        if resource in self.forbidden or (verb, resource) in self.denied or outside:
            return _forbidden(verb, resource, namespace)
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
                    if method != "GET":
                        return self._write(method, parts.path, query, headers or {}, body, o)
                    return answer(200, o)
            return answer(
                404,
                {
                    "kind": "Status",
                    "reason": "NotFound",
                    "message": f'{resource} "{name}" not found',
                },
            )
        try:
            found = [
                o
                for o in found
                if _selected(o, query.get("fieldSelector", ""), query.get("labelSelector", ""))
            ]
        except BadSelector as err:
            return answer(400, {"kind": "Status", "reason": "BadRequest", "message": str(err)})
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

    def _write(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        body: Any,
        obj: dict[str, Any],
    ) -> RESTResponse:
        """A PATCH (JSON merge patch only) or DELETE of ``obj``; ``dryRun=All`` keeps
        nothing."""
        content_type = headers.get("Content-Type", "")
        self.writes.append(Write(method, path, content_type, copy.deepcopy(body), dict(query)))
        dry = query.get("dryRun") == "All"
        if method == "DELETE":
            uid = ((body or {}).get("preconditions") or {}).get("uid")
            if uid is not None and uid != obj["metadata"].get("uid"):
                return answer(
                    409,
                    {
                        "kind": "Status",
                        "reason": "Conflict",
                        "message": f"Precondition failed: UID in precondition: {uid}, UID in "
                        f"object meta: {obj['metadata'].get('uid')}",
                    },
                )
            if not dry:
                self.items.remove(obj)
            return answer(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
        if content_type != "application/merge-patch+json":
            return answer(415, {"kind": "Status", "reason": "UnsupportedMediaType"})
        patched = merge_patch(obj, body)
        for field in self.pruned:
            *parents, last = field.split(".")
            node = patched.get("spec")
            for part in parents:
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node.pop(last, None)
        if not dry:
            self.items[self.items.index(obj)] = patched
        return answer(200, patched)


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


@contextmanager
def served_over_http(fake: DumpServer, tmp_path: Path) -> Iterator[Path]:
    """``fake`` answering real HTTP on 127.0.0.1, for a program in another process; yields
    a kubeconfig that names it."""
    import threading

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answered = fake.request("GET", f"http://127.0.0.1{self.path}")
            self.send_response(answered.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answered.data)))
            self.end_headers()
            self.wfile.write(answered.data)

        def log_message(self, *_: Any) -> None:
            return

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    config = tmp_path / "kubeconfig-http"
    config.write_text(
        KUBECONFIG.replace("https://api.example:6443", f"http://127.0.0.1:{http.server_port}")
    )
    try:
        yield config
    finally:
        http.shutdown()
        http.server_close()
