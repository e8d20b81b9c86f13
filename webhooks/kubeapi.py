"""What Dragonet's own controllers (the Container Monitor, the reaper, the recorder) share:
the official Kubernetes client with in-cluster configuration, else ``$KUBECONFIG`` as
kubectl reads it, every call with a timeout and every failure one ``ApiError`` that says
what happened; and the one line their processes print for a setting they cannot use."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any


class ApiError(Exception):
    """A call the API answered with an error (``status``), or could not be made (None):
    logged and counted; the caller keeps serving."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AlreadyExists(ApiError):
    """409 on create."""


class Api:
    """An ``ApiClient`` and the typed APIs made from it; ``call`` runs one request."""

    def __init__(self, timeout_seconds: float = 5.0) -> None:
        from kubernetes import client, config

        try:
            config.load_incluster_config()
        except config.ConfigException:  # outside a cluster: $KUBECONFIG, as kubectl reads it
            config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
        self.client = client.ApiClient()
        self.core = client.CoreV1Api(self.client)
        self.custom = client.CustomObjectsApi(self.client)
        self.models = client
        self.timeout = timeout_seconds

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return fn(*args, _request_timeout=self.timeout, **kwargs)
        except ApiException as err:
            kind = AlreadyExists if err.status == 409 else ApiError
            raise kind(f"{err.status} {err.reason}", err.status) from err
        except Exception as err:  # connection refused, timeout, TLS: the API is not there
            raise ApiError(f"{type(err).__name__}: {err}") from err

    def list_all(
        self, group: str, version: str, plural: str, page_size: int, **query: Any
    ) -> Iterator[Mapping[str, Any]]:
        """Every object of a custom resource in every namespace, ``page_size`` at a time
        (limit/continue), so a big cluster's list never arrives as one huge answer. The
        items carry no kind, as in any list."""
        token: str | None = None
        while True:
            page = self.call(
                self.custom.list_cluster_custom_object,
                group,
                version,
                plural,
                limit=page_size,
                **query,
                **({"_continue": token} if token else {}),
            )
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def delete_options(self, uid: str) -> Any:
        """Delete that object only while it is the one with ``uid`` (not one made since
        under its name), its dependents in the background, as ``kubectl delete`` does."""
        m = self.models
        return m.V1DeleteOptions(
            preconditions=m.V1Preconditions(uid=uid), propagation_policy="Background"
        )


def settings_problem(err: Exception) -> str:
    """A process's settings that cannot be used, in one line: which one, and why (its
    ``main`` prints it and exits 2, never a traceback)."""
    errors = getattr(err, "errors", None)
    if not callable(errors) or not errors():
        return str(err)
    first = errors()[0]
    return f"setting {'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
