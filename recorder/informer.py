"""List, then watch: each change of an Admission, a job or a pool reaches the recorder as
it happens, so its Event is written within about a second instead of at the next poll.

``Informer`` follows client-go's reflector (``k8s.io/client-go/tools/cache/reflector.go``,
``ListAndWatch``): list every object (each one is handed on, as a changed object is) and
watch from the list's resourceVersion with bookmarks, so the resourceVersion to resume
from keeps moving even when nothing of ours changes. A watch that ends (the API server's
``timeoutSeconds``) or whose connection drops is resumed from the last resourceVersion
seen; one the API server answers 410 Gone (that version is older than it keeps) starts
again from a list. Failures wait a backoff that doubles from 1 s up to 30 s.

Handing an object on twice is harmless: the recorder writes each fact once, by name.

Each informer also keeps what it has seen in a ``Cache`` (client-go's store: the objects
as of the last list and every change since, deletions included), which the pools'
metrics read at scrape time, as kube-state-metrics reads its informers' stores.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from recorder.kube import Change, Gone, Objects, Resource
from webhooks.kubeapi import ApiError

log = logging.getLogger("dragonet.recorder")
Emit = Callable[[Resource, Mapping[str, Any]], None]


@dataclass
class Backoff:
    """1 s, 2 s, 4 s, ... 30 s; back to 1 s after a watch that worked."""

    first: float = 1.0
    most: float = 30.0
    _next: float = 0.0

    def next(self) -> float:
        self._next = min(self.most, self._next * 2) if self._next else self.first
        return self._next

    def reset(self) -> None:
        self._next = 0.0


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


class Cache:
    """The objects of one resource an informer has seen, as the API server holds them now
    (as of its watch). Written by the informer's thread, read whole by others: ``version``
    moves with each change, so a reader knows when to read again."""

    def __init__(self) -> None:
        self._objects: dict[str, Mapping[str, Any]] = {}
        self.version = 0
        self.synced = False  # listed whole at least once

    def replace(self, items: list[Mapping[str, Any]]) -> None:
        self._objects = {_key(o): o for o in items}
        self.synced = True
        self.version += 1

    def apply(self, change: Change) -> None:
        if change.type in ("ADDED", "MODIFIED"):
            self._objects[_key(change.object)] = change.object
        elif change.type == "DELETED":
            self._objects.pop(_key(change.object), None)
        else:
            return
        self.version += 1

    def items(self) -> list[Mapping[str, Any]]:
        return list(self._objects.copy().values())  # a copy is one step under the GIL


@dataclass
class Informer:
    """One resource's list-then-watch, handing each listed, added or modified object to
    ``emit`` until ``stop`` is set. ``lists`` and ``watches`` count its requests."""

    objects: Objects
    resource: Resource
    emit: Emit
    stop: threading.Event
    watch_seconds: int = 300
    backoff: Backoff | None = None
    cache: Cache | None = None
    lists: int = 0
    watches: int = 0

    def run(self) -> None:
        backoff = self.backoff or Backoff()
        version: str | None = None  # None: list first
        while not self.stop.is_set():
            try:
                if version is None:
                    self.lists += 1
                    listing = self.objects.list(self.resource)
                    if self.cache is not None:
                        self.cache.replace(listing.items)
                    for obj in listing.items:
                        self.emit(self.resource, obj)
                    version = listing.resource_version
                self.watches += 1
                for change in self.objects.watch(self.resource, version, self.watch_seconds):
                    if self.stop.is_set():
                        return
                    version = change.resource_version or version
                    if self.cache is not None:
                        self.cache.apply(change)
                    if change.type in ("ADDED", "MODIFIED"):
                        self.emit(self.resource, change.object)
                backoff.reset()
            except Gone:
                log.info("watch of %s expired (410): listing again", self.resource.plural)
                version = None
            except ApiError as err:
                wait = backoff.next()
                log.warning("cannot watch %s: %s (again in %g s)", self.resource.plural, err, wait)
                self.stop.wait(wait)
            except Exception:  # a bug here must not end the watch: list again after a wait
                log.exception("watching %s failed", self.resource.plural)
                version = None
                self.stop.wait(backoff.next())
