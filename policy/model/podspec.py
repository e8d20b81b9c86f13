"""What a pod spec asks of its node: its request (what the kube-scheduler reserves), the
host ports it takes (``policy.model.hostports``) and its limits (what it may use), as
resource vectors. A parser of a pod spec finds all of it here.

Read for every pod of a pool at every cold sync (``policy.model.cluster.Pod``) and for
every replica template of a job (``policy.model.jobs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from policy.model.hostports import ONE
from policy.model.resources import HOST_PORT, PODS, Resources, to_milli

_NONE = Resources()  # the host ports most pods take (immutable, so shared)


def pod_request(pod_spec: Mapping[str, Any]) -> Resources:
    """What the scheduler reserves for a pod: containers' requests (limits where a container
    gives only limits, as the API server defaults them), at least each init container's,
    plus overhead and one ``pods`` slot. A sidecar (an init container that restarts
    ``Always``) runs beside the containers and the init containers after it, so it adds up
    (component-helpers' ``PodRequests``)."""

    def container_request(c: Mapping[str, Any]) -> dict[str, int]:
        res = c.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {k: to_milli(v) for k, v in merged.items()}

    total: dict[str, int] = {}
    for c in pod_spec.get("containers") or []:
        for k, v in container_request(c).items():
            total[k] = total.get(k, 0) + v
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in pod_spec.get("initContainers") or []:
        own = container_request(c)
        if c.get("restartPolicy") == "Always":
            for k, v in own.items():
                total[k] = total.get(k, 0) + v
                sidecars[k] = sidecars.get(k, 0) + v
            step = sidecars
        else:
            step = {k: own.get(k, 0) + sidecars.get(k, 0) for k in own.keys() | sidecars.keys()}
        for k, v in step.items():
            init_peak[k] = max(init_peak.get(k, 0), v)
    for k, v in init_peak.items():
        total[k] = max(total.get(k, 0), v)
    for k, v in (pod_spec.get("overhead") or {}).items():
        total[k] = total.get(k, 0) + to_milli(v)
    total[PODS] = total.get(PODS, 0) + to_milli(1)
    return Resources(total)


def host_ports(pod_spec: Mapping[str, Any], added: Iterable[int] = ()) -> Resources:
    """The host ports the pod's containers take, one unit each (empty for most pods): a
    container's ``ports[].hostPort`` (protocol TCP unless said), and with ``hostNetwork:
    true`` every ``containerPort`` (the API server defaults ``hostPort`` to it).
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


def pod_limits(pod_spec: Mapping[str, Any]) -> Resources:
    """The containers' limits (a container without a limit on a resource counts its request
    there): what a burstable pod may use, DRAGON's per-node "load" (§7.3)."""
    total: dict[str, int] = {}
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        merged = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        for k, v in merged.items():
            total[k] = total.get(k, 0) + to_milli(v)
    return Resources(total)


def pod_needs(pod_spec: Mapping[str, Any]) -> tuple[Resources, Resources]:
    """A running pod's (request, limits): its request with the host ports it takes (held
    on its node like any resource), and its limits. The pool reads both of every pod."""
    request = pod_request(pod_spec)
    if ports := host_ports(pod_spec):
        request = request + ports
    return request, pod_limits(pod_spec)
