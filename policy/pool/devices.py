"""KubeShare v1: the device (GPUID) each new fractional pod's SharePod names.

The cycle decides nodes; its capacity checks already placed every fractional pod on a
device of its node (``policy.model.gpushare``). This step names those devices for the
Admission, the same way: per node, from what is observed there (assumed pods included, so
a pod placed earlier keeps its device), each job's new pods best fit onto opened devices,
else onto an untouched one with a fresh id. A pod that finds no device here (the cycle
packed its node in another order) is left out of the Admission and placed again next sync,
never written without its GPU.
"""

from __future__ import annotations

from collections.abc import Mapping

from policy.model.admission import Placement, Slot
from policy.model.cluster import Cluster, Pod
from policy.model.gpushare import ON, DeviceFree
from policy.model.jobs import Job, child_name
from policy.model.resources import Resources


def device_of_pod(pod: Pod) -> str | None:
    """The device an observed (or assumed) fractional pod is on, from its request."""
    for key in pod.request:
        if key.startswith(ON):
            return key[len(ON) :]
    return None


def name_devices(
    cluster: Cluster, plans: Mapping[str, tuple[Job, Mapping[Slot, Placement]]]
) -> dict[str, dict[Slot, str | None]]:
    """job key -> slot -> GPUID for every fractional pod of the admitted jobs (``plans``:
    job key -> (job, its placements)); None for a new pod no device was found for."""
    by_name = {(p.namespace, p.name): p for p in cluster.pods}
    free: dict[str, Resources] = dict(cluster.free)
    out: dict[str, dict[Slot, str | None]] = {}
    for key, (job, placements) in plans.items():
        if job.gpu_share is None:
            continue
        named: dict[Slot, str | None] = {}
        new: dict[str, list[Slot]] = {}
        for slot, placed in sorted(placements.items()):
            node = placed.node
            replica = job.replicas.get(slot[0])
            if replica is None or replica.gpu_share is None or node is None:
                continue
            pod = by_name.get((job.namespace, child_name(job, *slot)))
            if pod is not None and pod.node in (None, node):
                named[slot] = device_of_pod(pod)  # (a pod moving away is new on its target)
            else:
                new.setdefault(node, []).append(slot)
        for node, slots in sorted(new.items()):
            left = free.get(node)
            if not isinstance(left, DeviceFree):
                named.update(dict.fromkeys(slots))
                continue
            request = job.replicas[slots[0][0]].request.scaled(len(slots))
            devices, chosen = left.take(request)
            if devices.broken or len(chosen) != len(slots):
                named.update(dict.fromkeys(slots))
                continue
            free[node] = left - request
            named.update(zip(slots, chosen, strict=True))
        out[key] = named
    return out
