"""Fractional GPUs (KubeShare): what a pod asks of one GPU, and each node's GPUs as devices.

A fractional pod asks for a share of *one* device (``gpu_request`` in thousandths, and GPU
memory in bytes); a whole-GPU pod takes whole devices (``nvidia.com/gpu``). A device that any
fractional pod uses is no longer whole, so the two never collide: a node's free
``nvidia.com/gpu`` counts only the devices nobody touches.

Requests stay plain ``Resources`` vectors, with three keys for the fractional part (the total
share, the total GPU memory and the number of fractional pods; all the fractional pods of one
job ask alike, so the vector holds them exactly), and for a pod whose device is known (its
``kubeshare/GPUID`` or ``sharedgpu/gpu_uuid``) two more keys naming that device. A node's free
capacity in a KubeShare pool is a ``DeviceFree``: the vector, plus its devices. Arithmetic and
``fits_in`` on it place fractional pods on devices (best fit, then the next untouched device),
so every phase of the planner that checks and takes capacity does so device by device, and
pools without KubeShare never meet this code.

Where the devices come from (docs/kubeshare.md): their number is the node's allocatable
``nvidia.com/gpu`` (the device plugin's count); the memory of each is the first entry of
KubeShare's node annotation ``kubeshare/gpu_info`` (``<uuid>:<MiB>,...``, as DRAGON read it;
absent: memory is not checked); their ids are the ones running pods carry, and a device that
Dragonet opens gets a deterministic five-letter id like KubeShare's own ``NewGPUID(5)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from policy.model.resources import Resources

GPU = "nvidia.com/gpu"
SHARE = "dragonet.io/gpu-share"  # thousandths of one GPU, in milli-units of a GPU
GPU_MEMORY = "dragonet.io/gpu-memory"  # bytes, in milli-units
SHARED_PODS = "dragonet.io/gpu-shared-pods"  # fractional pods, in milli-units
ON = "dragonet.io/gpu-on."  # + device id: the share a placed pod holds on that device
MEMORY_ON = "dragonet.io/gpu-memory-on."  # + device id: its GPU memory there
ON_COUNT = "dragonet.io/gpu-placed-pods"  # fractional pods whose device is known
FRACTIONAL_KEYS = (SHARE, GPU_MEMORY, SHARED_PODS, ON_COUNT)
WHOLE = 1000  # one device, in thousandths


# KubeShare v1 (release-1.0): SharePod annotations.
V1_REQUEST = "kubeshare/gpu_request"
V1_LIMIT = "kubeshare/gpu_limit"
V1_MEMORY = "kubeshare/gpu_mem"
V1_GPUID = "kubeshare/GPUID"
GPU_INFO = "kubeshare/gpu_info"  # node annotation written by KubeShare: "<uuid>:<MiB>,..."
# KubeShare v2 (master): pod labels, and what its scheduler writes.
V2_REQUEST = "sharedgpu/gpu_request"
V2_LIMIT = "sharedgpu/gpu_limit"
V2_MEMORY = "sharedgpu/gpu_mem"
V2_UUID = "sharedgpu/gpu_uuid"
V2_SCHEDULER = "kubeshare-scheduler"
SHAREPOD_KIND = "SharePod"
SHAREPOD_API = "kubeshare.nthu/v1"
SHAREPODS = f"{SHAREPOD_KIND}.{SHAREPOD_API}"  # Metacontroller's map key
VGPU_POD = "kubeshare-vgpu"  # KubeShare v1 holds a physical GPU per vGPU with such a pod

_BIG = 1 << 62  # "not a constraint": no node has that many fractional pods


class BadShare(ValueError):
    """A fractional-GPU request that cannot be read (the message names the field)."""


@dataclass(frozen=True, order=True)
class GpuShare:
    """What one fractional pod asks of one device."""

    request: int  # thousandths of the device (0.5 -> 500)
    limit: int  # thousandths
    memory: int  # bytes

    def vector(self, device: str | None = None) -> dict[str, int]:
        out = {SHARE: self.request, GPU_MEMORY: self.memory * 1000, SHARED_PODS: 1000}
        if device is not None:
            out |= {ON + device: self.request, MEMORY_ON + device: self.memory * 1000}
            out[ON_COUNT] = 1000
        return out


def _fraction(raw: Any, where: str) -> int:
    try:
        value = Decimal(str(raw).strip())
    except InvalidOperation:
        raise BadShare(f"{where}: {raw!r} is not a number") from None
    if not 0 < value <= 1:
        raise BadShare(f"{where}: {raw!r} must be greater than 0 and at most 1.0")
    thousandths = value * 1000
    return int(thousandths.to_integral_value(rounding="ROUND_CEILING"))


def _bytes(raw: Any, where: str) -> int:
    text = str(raw).strip()
    if not text.isdigit():
        raise BadShare(f"{where}: {raw!r} must be a whole number of bytes")
    return int(text)


def share_of(
    annotations: Mapping[str, Any], labels: Mapping[str, Any], where: str = ""
) -> GpuShare | None:
    """The fractional request of a pod (template): v1 annotations or v2 labels, or None.

    ``gpu_limit`` defaults to the request and may not be below it; ``gpu_mem`` defaults to 0
    (KubeShare's own defaults)."""
    if not annotations and not labels:
        return None
    for source, (req, lim, mem), part in (
        (annotations, (V1_REQUEST, V1_LIMIT, V1_MEMORY), "annotations"),
        (labels, (V2_REQUEST, V2_LIMIT, V2_MEMORY), "labels"),
    ):
        if req not in source and lim not in source and mem not in source:
            continue
        at = f"{where}metadata.{part}"
        if req not in source:
            raise BadShare(f"{at}[{req!r}] is required with {lim!r} or {mem!r}")
        request = _fraction(source[req], f"{at}[{req!r}]")
        limit = _fraction(source[lim], f"{at}[{lim!r}]") if lim in source else request
        if limit < request:
            raise BadShare(f"{at}[{lim!r}] ({source[lim]}) is below {req!r} ({source[req]})")
        memory = _bytes(source[mem], f"{at}[{mem!r}]") if mem in source else 0
        return GpuShare(request, limit, memory)
    return None


def device_of(annotations: Mapping[str, Any]) -> str | None:
    """The device a running fractional pod uses: v1 ``kubeshare/GPUID``, v2 the scheduler's
    ``sharedgpu/gpu_uuid``."""
    for key in (V1_GPUID, V2_UUID):
        value = annotations.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def with_device(request: Resources, device: str) -> Resources:
    """A fractional pod's request once its device is known (an Admission's ``gpu``)."""
    n = request[SHARED_PODS] // 1000
    if n != 1:
        return request
    extra = {
        ON + device: request[SHARE],
        MEMORY_ON + device: request[GPU_MEMORY],
        ON_COUNT: 1000,
    }
    return request + Resources(extra)


def without_device(request: Resources) -> Resources:
    """A fractional pod's request as a new pod of its kind asks it (``with_device``
    undone): what moving it asks of another node, where its device is not."""
    if not request[ON_COUNT]:
        return request
    return Resources(
        {k: v for k, v in request.items() if k != ON_COUNT and not k.startswith((ON, MEMORY_ON))}
    )


def device_memory(annotations: Mapping[str, Any]) -> int | None:
    """Bytes of memory per GPU from ``kubeshare/gpu_info`` (its first entry, in MiB)."""
    info = annotations.get(GPU_INFO)
    if not isinstance(info, str):
        return None
    first = info.split(",")[0].split(":")
    if len(first) != 2 or not first[1].strip().isdigit():
        return None
    return int(first[1].strip()) * 2**20


def mint_id(node: str, n: int) -> str:
    """A deterministic five-letter device id (KubeShare v1 mints random ones)."""
    digest = hashlib.sha256(f"{node}/{n}".encode()).digest()
    return "".join(chr(ord("a") + b % 26) for b in digest[:5])


# --- devices --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Device:
    id: str
    free: int  # thousandths; WHOLE again once its last pod leaves (every share is > 0)
    memory: int  # bytes free (not checked when the node's device memory is unknown)


@dataclass(frozen=True)
class Devices:
    """A node's GPUs: the opened ones (shared by fractional pods) and how many are untouched."""

    node: str
    opened: tuple[Device, ...]  # sorted by id
    untouched: int  # free whole devices (below 0: over-committed, nothing more fits)
    memory: int | None  # bytes per device, None if unknown
    minted: int = 0  # ids minted so far (the next one is mint_id(node, minted))
    broken: bool = False  # holds more than it has (observed facts): no new fractional pod fits

    def _mem_ok(self, have: int, need: int) -> bool:
        return self.memory is None or need <= have

    def place(self, request: int, memory: int, count: int) -> tuple[Devices, list[str]] | None:
        """``count`` pods of one shape, each on the opened device it fills best (ties: the
        lowest id), else on an untouched one; None if they do not all fit."""
        opened = list(self.opened)
        untouched, minted = self.untouched, self.minted
        chosen: list[str] = []
        for _ in range(count):
            best = -1
            for i, d in enumerate(opened):
                roomy = d.free >= request and self._mem_ok(d.memory, memory)
                if roomy and (best < 0 or d.free < opened[best].free):
                    best = i
            if best < 0:
                if untouched <= 0 or not self._mem_ok(self.memory or 0, memory):
                    return None
                taken = {d.id for d in opened}
                new_id = mint_id(self.node, minted)
                minted += 1
                while new_id in taken:
                    new_id = mint_id(self.node, minted)
                    minted += 1
                untouched -= 1
                opened.append(Device(new_id, WHOLE, self.memory or 0))
                opened.sort(key=lambda d: d.id)
                best = next(i for i, d in enumerate(opened) if d.id == new_id)
            d = opened[best]
            opened[best] = Device(d.id, d.free - request, d.memory - memory)
            chosen.append(d.id)
        return replace(self, opened=tuple(opened), untouched=untouched, minted=minted), chosen

    def on(self, device: str, request: int, memory: int) -> Devices:
        """Pods known to be on ``device`` (their own id says so): taken there, as facts."""
        opened = {d.id: d for d in self.opened}
        untouched = self.untouched
        d = opened.get(device)
        if d is None:
            untouched -= 1
            d = Device(device, WHOLE, self.memory or 0)
        d = Device(d.id, d.free - request, d.memory - memory)
        opened[device] = d
        broken = self.broken or d.free < 0 or (self.memory is not None and d.memory < 0)
        return replace(
            self,
            opened=tuple(sorted(opened.values(), key=lambda x: x.id)),
            untouched=untouched,
            broken=broken,
        )

    def off(self, device: str, request: int, memory: int) -> Devices:
        """Pods on ``device`` leave; a device nobody uses any more is whole again."""
        opened = {d.id: d for d in self.opened}
        d = opened.get(device)
        if d is None:
            return self
        d = Device(d.id, min(WHOLE, d.free + request), d.memory + memory)
        untouched = self.untouched
        if d.free >= WHOLE:
            del opened[device]
            untouched += 1
        else:
            opened[device] = d
        return replace(
            self, opened=tuple(sorted(opened.values(), key=lambda x: x.id)), untouched=untouched
        )

    def vector(self) -> dict[str, int]:
        """The GPU part of the node's free vector, as the devices say."""
        whole = max(self.untouched, 0)
        shares = sum(d.free for d in self.opened) + whole * WHOLE
        memory = _BIG
        if self.memory is not None:
            memory = (sum(max(d.memory, 0) for d in self.opened) + whole * self.memory) * 1000
        return {
            GPU: self.untouched * 1000,
            SHARE: -1 if self.broken else shares,
            GPU_MEMORY: -1 if self.broken else memory,
            SHARED_PODS: -1 if self.broken else _BIG,
            ON_COUNT: _BIG,
        }


def _shape(request: Resources) -> tuple[int, int, int]:
    """(pods, thousandths each, bytes each) of a request's fractional pods whose device is not
    named (they ask alike: the pods of one job)."""
    n = (request[SHARED_PODS] - request[ON_COUNT]) // 1000
    if n <= 0:
        return 0, 0, 0
    named_share = sum(v for k, v in request.items() if k.startswith(ON))
    named_mem = sum(v for k, v in request.items() if k.startswith(MEMORY_ON))
    share = (request[SHARE] - named_share) // n
    memory = (request[GPU_MEMORY] - named_mem) // 1000 // n
    return n, share, memory


def _named(request: Resources) -> list[tuple[str, int, int]]:
    """(device, thousandths, bytes) a request holds on named devices."""
    return [
        (k[len(ON) :], v, request[MEMORY_ON + k[len(ON) :]] // 1000)
        for k, v in sorted(request.items())
        if k.startswith(ON)
    ]


def _is_gpu_key(k: str) -> bool:
    return k in (GPU, *FRACTIONAL_KEYS) or k.startswith((ON, MEMORY_ON))


class DeviceFree(Resources):
    """A GPU node's free capacity in a KubeShare pool: the vector and the devices behind it.
    Taking a request places its fractional pods on devices; adding back a pod's request
    frees the device it names."""

    __slots__ = ("devices",)
    plain = False

    def __init__(self, values: Mapping[str, int] | None, devices: Devices) -> None:
        base = {k: v for k, v in (values or {}).items() if not _is_gpu_key(k)}
        super().__init__({**base, **devices.vector()})
        self.devices = devices

    @classmethod
    def empty(cls, node: str, allocatable: Resources, memory: int | None) -> DeviceFree:
        return cls(allocatable, Devices(node, (), allocatable[GPU] // 1000, memory))

    def __hash__(self) -> int:
        return hash((frozenset(self._v.items()), self.devices))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, DeviceFree) and self._v == other._v and self.devices == other.devices
        )

    def take(self, request: Resources) -> tuple[Devices, list[str]]:
        """The devices once ``request`` is taken, and the devices its unnamed pods got."""
        devices = self.devices
        for device, share, memory in _named(request):
            devices = devices.on(device, share, memory)
        chosen: list[str] = []
        n, share, memory = _shape(request)
        if n:
            placed = devices.place(share, memory, n)
            if placed is None:
                devices = replace(devices, broken=True)
            else:
                devices, chosen = placed
        whole = -(-request[GPU] // 1000)
        if whole:
            devices = replace(devices, untouched=devices.untouched - whole)
        return devices, chosen

    def __sub__(self, other: Resources) -> DeviceFree:
        base = {k: self._v.get(k, 0) - other[k] for k in self._v.keys() | other.keys()}
        return DeviceFree(base, self.take(other)[0])

    def __add__(self, other: Resources) -> DeviceFree:
        devices = self.devices
        for device, share, memory in _named(other):
            devices = devices.off(device, share, memory)
        whole = other[GPU] // 1000
        if whole:
            devices = replace(devices, untouched=devices.untouched + whole)
        base = {k: self._v.get(k, 0) + other[k] for k in self._v.keys() | other.keys()}
        return DeviceFree(base, devices)

    def holds(self, request: Resources) -> bool:
        """Whether the request's fractional pods find devices (its vector fits already)."""
        if not request[SHARED_PODS]:
            return True
        devices = self.take(request)[0]
        return not devices.broken and devices.untouched >= 0

    def times(self, request: Resources) -> int:
        """How many copies of ``request`` fit at once."""
        if not request[SHARED_PODS]:
            return Resources.times_in(request, Resources(self._v))
        count, left = 0, self
        while request.fits_in(left):
            left = left - request
            count += 1
        return count


def observe_devices(
    node: str, allocatable: Resources, memory: int | None, requests: Iterable[Resources]
) -> DeviceFree:
    """A node's free capacity from the requests of the pods that hold its room: those on a
    named device there first, then the others (fractional pods not on a device yet, e.g. a
    KubeShare v2 pod its scheduler has not bound), largest first."""
    free = DeviceFree.empty(node, allocatable, memory)
    unnamed: list[Resources] = []
    for r in requests:
        if r[SHARED_PODS] > r[ON_COUNT]:
            unnamed.append(r)
        else:
            free = free - r
    for r in sorted(unnamed, key=lambda r: (-r[SHARE], -r[GPU_MEMORY])):
        free = free - r
    return free
