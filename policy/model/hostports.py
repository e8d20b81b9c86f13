"""Host ports a pod takes on its node, as the kube-scheduler's NodePorts plugin reads them.

A container's ``ports[].hostPort`` (protocol TCP unless said), and with ``hostNetwork: true``
every ``containerPort`` (the API server defaults ``hostPort`` to it). Two pods that want one
(protocol, port) cannot share a node, so each such port is a resource of which a node has
one: ``dragonet.io/host-port.TCP/2222``. The plan then counts host ports with the same sums
and fits as CPUs and GPUs (a gang of three such pods needs three nodes).

Upstream also lets two pods share a port on two different ``hostIP`` s; here any two uses
of one (protocol, port) conflict, as they do for the default ``hostIP`` 0.0.0.0. That is
stricter, never looser: a plan never puts two pods on a node where one could not start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from policy.model.resources import HOST_PORT, Resources

ONE = 1000  # one use, in milli-units
_NONE = Resources()  # what most pods take (immutable, so shared)


def host_ports(pod_spec: Mapping[str, Any], added: Iterable[int] = ()) -> Resources:
    """The host ports the pod's containers take, one unit each (empty for most pods).
    ``added``: TCP container ports the operator adds to the pod it renders (a TF task's
    port when its template lists none), host ports too on the host network."""
    on_host = pod_spec.get("hostNetwork") is True
    taken: dict[str, int] = {}
    for c in pod_spec.get("containers") or ():
        for p in c.get("ports") or ():
            port = p.get("hostPort") or (on_host and p.get("containerPort"))
            if port and isinstance(port, int) and port > 0:
                taken[f"{HOST_PORT}{p.get('protocol') or 'TCP'}/{port}"] = ONE
    if on_host:
        taken.update({f"{HOST_PORT}TCP/{port}": ONE for port in added})
    return Resources(taken) if taken else _NONE


def capacity(keys: Iterable[str]) -> Resources:
    """What every node has of these host ports: one use each."""
    return Resources(dict.fromkeys(keys, ONE))


def wanted(requests: Iterable[Resources]) -> frozenset[str]:
    """The host ports any of these requests takes."""
    return frozenset(k for r in requests for k in r if k.startswith(HOST_PORT))
