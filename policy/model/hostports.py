"""Host ports as resources: how the kube-scheduler's NodePorts plugin keeps two pods off a node.

What a pod takes is read with the rest of its spec (``policy.model.podspec.host_ports``: a
container's ``ports[].hostPort``, and on the host network every ``containerPort``). Two pods
that want one (protocol, port) cannot share a node, so each such port is a resource of which
a node has one: ``dragonet.io/host-port.TCP/2222``. The plan then counts host ports with the
same sums and fits as CPUs and GPUs (a gang of three such pods needs three nodes).

Upstream also lets two pods share a port on two different ``hostIP`` s; here any two uses
of one (protocol, port) conflict, as they do for the default ``hostIP`` 0.0.0.0. That is
stricter, never looser: a plan never puts two pods on a node where one could not start.
"""

from __future__ import annotations

from collections.abc import Iterable

from policy.model.resources import HOST_PORT, Resources

ONE = 1000  # one use, in milli-units


def capacity(keys: Iterable[str]) -> Resources:
    """What every node has of these host ports: one use each."""
    return Resources(dict.fromkeys(keys, ONE))


def wanted(requests: Iterable[Resources]) -> frozenset[str]:
    """The host ports any of these requests takes."""
    return frozenset(k for r in requests for k in r if k.startswith(HOST_PORT))
