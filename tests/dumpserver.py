"""A fake API server that serves a simulator dump (``dragonet simulate --dump``) at the
HTTP layer the official client calls: the GETs ``kubectl dragonet`` makes (lists, pages,
label and field selectors, single objects), and the failures a real one answers (403 for
a resource the user may not read, 404 for a CRD that is not installed)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
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


class DumpServer:
    """Serves the items of a ``List``; ``forbidden`` resources answer 403, ``missing``
    ones 404 (a CRD that is not installed). ``calls`` records each GET's path."""

    def __init__(self, state: Mapping[str, Any]) -> None:
        self.items = list(state["items"])
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
        if resource in self.forbidden:
            where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
            return answer(
                403,
                {
                    "kind": "Status",
                    "reason": "Forbidden",
                    "message": f'{resource} is forbidden: User "alice" cannot list resource '
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
