"""The reads ``kubectl dragonet`` makes, through the official client, as kubectl makes
them: the kubeconfig (``--kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``) and
its current context (or ``--context``), in-cluster configuration when there is none.

Every failure is one ``LiveError`` whose message is the line the command prints: no
cluster, no permission, no such object, never a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POOLS = "/apis/dragonet.io/v1alpha1/trainingpools"
NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
_PAGE = 500


class LiveError(Exception):
    """What went wrong, in one line (the command prints it and exits 1)."""


class NotFound(LiveError):
    """The API server has no such object (404)."""


class Forbidden(LiveError):
    """The caller may not read it (403): a command that can read less falls back."""


def job_path(plural: str, namespace: str, name: str = "") -> str:
    base = f"/apis/kubeflow.org/v1/namespaces/{namespace}/{plural}"
    return f"{base}/{name}" if name else base


def admission_path(namespace: str, name: str) -> str:
    return f"/apis/dragonet.io/v1alpha1/namespaces/{namespace}/admissions/{name}"


def events_path(namespace: str) -> str:
    return f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"


def _check_kubeconfig(file: str) -> None:
    """A file that is no kubeconfig, in our words (the client's are a TypeError)."""
    import yaml

    try:
        data = yaml.safe_load(Path(file).expanduser().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise LiveError(f"no cluster: {file}: not a kubeconfig ({_one_line(err)})") from None
    if not isinstance(data, dict) or not any(k in data for k in ("clusters", "contexts", "users")):
        raise LiveError(
            f"no cluster: {file}: not a kubeconfig (a YAML mapping with clusters, contexts "
            "and users; kind: Config)"
        )


class Kube:
    """One API client for the chosen context; ``namespace`` is the context's (or default)."""

    def __init__(
        self,
        kubeconfig: str | None = None,
        context: str | None = None,
        timeout: float | None = 10.0,
    ) -> None:
        from kubernetes import client, config

        path = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube/config")
        self.namespace = "default"
        configuration = client.Configuration()
        # $KUBECONFIG is a list, merged, its missing files skipped (kubectl's rule); the
        # --kubeconfig flag names one file, which must exist.
        files = [path] if kubeconfig else [p for p in path.split(os.pathsep) if p]
        found = [f for f in files if Path(f).expanduser().exists()]
        if kubeconfig is None and not found and _in_cluster():
            config.load_incluster_config(client_configuration=configuration)
            own = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
            if own.exists():
                self.namespace = own.read_text().strip() or "default"
        else:
            if not found:
                raise LiveError(
                    f"no cluster: no kubeconfig at {os.pathsep.join(files) or path} "
                    "(set --kubeconfig)"
                )
            for file in found:
                _check_kubeconfig(file)
            path = os.pathsep.join(found)
            try:
                config.load_kube_config(
                    config_file=path, context=context, client_configuration=configuration
                )
                contexts, active = config.list_kube_config_contexts(config_file=path)
            except (config.ConfigException, OSError, ValueError, TypeError) as err:
                raise LiveError(f"no cluster: {path}: {_one_line(err)}") from None
            chosen = next((c for c in contexts if c.get("name") == context), active)
            self.namespace = ((chosen or {}).get("context") or {}).get("namespace") or "default"
        self.host = configuration.host
        self.client = client.ApiClient(configuration)
        self.timeout = timeout

    def get(self, path: str, **query: str | int) -> dict[str, Any]:
        """One GET, its JSON body; ``LiveError`` (``NotFound`` for 404) on any failure."""
        return self.send("GET", path, **query)

    def send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        **query: str | int,
    ) -> dict[str, Any]:
        """One request (a GET, a PATCH with ``body`` as ``content_type``, a DELETE with
        DeleteOptions), its JSON body; ``LiveError`` (``NotFound`` for 404) on any failure."""
        params = [(k, v) for k, v in query.items() if v not in (None, "")]
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self.client.param_serialize(
            method=method,
            resource_path=path,
            query_params=params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.client.call_api(*request, _request_timeout=self.timeout)
            response.read()
        except Exception as err:  # refused, timed out, TLS, DNS: there is no cluster here
            raise LiveError(f"no cluster at {self.host}: {_one_line(err)}") from None
        answered = _json(response.data)
        if response.status >= 400:
            raise _error(response.status, answered, path)
        return answered

    def list(self, path: str, **query: str) -> Iterator[dict[str, Any]]:
        """Every item of a list, page by page, as the API server serves a large one."""
        token = ""
        while True:
            page = self.get(path, **{"limit": _PAGE, "continue": token, **query})
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return


def shown() -> tuple[tuple[str, str, str, str, bool], ...]:
    """What a pool's page shows (``dragonet view --live``): (API path, plural, apiVersion,
    kind, namespaced), the kinds of ``kubectl get nodes,pods,trainingpools,tfjobs,...,
    admissions``: every job kind of ``KINDS`` (imported here, when a page is drawn)."""
    from policy.model.kinds import KINDS

    return (
        ("/api/v1", "nodes", "v1", "Node", False),
        ("/api/v1", "pods", "v1", "Pod", True),
        (
            "/apis/dragonet.io/v1alpha1",
            "trainingpools",
            "dragonet.io/v1alpha1",
            "TrainingPool",
            False,
        ),
        *((f"/apis/{k.api_version}", k.plural, k.api_version, k.kind, True) for k in KINDS),
        ("/apis/dragonet.io/v1alpha1", "admissions", "dragonet.io/v1alpha1", "Admission", True),
    )


@dataclass(frozen=True)
class Read:
    """What ``objects`` read: the items, the namespace of the namespaced ones (None: every
    namespace), and the resources the caller may not list there (left out)."""

    items: list[dict[str, Any]]
    namespace: str | None
    unread: tuple[str, ...] = ()


def objects(kube: Kube, namespace: str | None) -> Read:
    """Every Node and TrainingPool, and the Pods, jobs (every kind) and Admissions of
    ``namespace`` (of every namespace when None), each with its apiVersion and kind, as
    ``kubectl get ... -o json`` lists them. A kind whose CRD is not installed is left out.

    What the caller may not read (RBAC's 403) is left out and named in ``unread``; a caller
    who may not list across namespaces (a tenant's Role) gets its context's namespace. One
    who may list no job kind there is a ``Forbidden`` naming the permission."""
    if namespace is None:
        try:
            return _objects(kube, None, strict=True)
        except Forbidden:  # a namespaced kind across namespaces: the context's namespace
            namespace = kube.namespace
    return _objects(kube, namespace, strict=False)


def _objects(kube: Kube, namespace: str | None, strict: bool) -> Read:
    out: list[dict[str, Any]] = []
    unread: list[str] = []
    jobs_read = jobs_refused = 0
    for group, plural, api_version, kind, namespaced in shown():
        path = f"{group}/namespaces/{namespace}/{plural}" if namespaced and namespace else ""
        try:
            items = list(kube.list(path or f"{group}/{plural}"))
        except NotFound:  # that kind's CRD is not installed
            continue
        except Forbidden:
            if strict and namespaced:
                raise
            unread.append(plural)
            jobs_refused += group == "/apis/kubeflow.org/v1"
            continue
        jobs_read += group == "/apis/kubeflow.org/v1"
        out += [{**o, "apiVersion": api_version, "kind": kind} for o in items]
    if jobs_refused and not jobs_read:
        where = f"in namespace {namespace}" if namespace else "in every namespace"
        from policy.model.kinds import KINDS

        plurals = one_of([k.plural for k in KINDS]).replace(" or ", " and ")
        raise Forbidden(
            f"no permission to list {one_of([k.kind + 's' for k in KINDS])} {where} (list on "
            f"{plurals} of kubeflow.org: examples/rbac/kubectl-dragonet-tenant.yaml)"
        )
    return Read(out, namespace, tuple(unread))


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _json(data: Any) -> dict[str, Any]:
    try:
        body = json.loads(data or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _error(status: int, body: Mapping[str, Any], path: str) -> LiveError:
    said = _one_line(body.get("message") or body.get("reason") or "")
    if status == 404:
        return NotFound(said or f"{path}: not found")
    if status == 401:
        return LiveError("not logged in: the API server refused the kubeconfig's credentials")
    if status == 403:
        return Forbidden(f"no permission: {said or path}")
    return LiveError(f"the API server answered {status}: {said or path}")


def _one_line(err: Any) -> str:
    return " ".join(str(err).split())


def one_of(words: list[str] | tuple[str, ...]) -> str:
    """``TFJob, MXJob or PyTorchJob``: the kinds a name may be, as a sentence says them."""
    words = list(words)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
