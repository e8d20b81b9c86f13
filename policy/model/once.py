"""``cached_property`` without the lock Python 3.11's takes on every first read.

A cold pool sync of 1,000 nodes computes some 30,000 cached properties of the objects it
parsed (each pod's ``plan_key``, each job's ``key``, ``enqueued``, shapes...), and 3.11's
``functools.cached_property`` holds an ``RLock`` around each: 6 % of the sync (issue 36).
Python 3.12 dropped that lock; this is its behaviour. The values are pure functions of
immutable objects, so two threads reading one at once at worst compute it twice, alike.
"""

from __future__ import annotations

import functools
from typing import Any


class cached_property(functools.cached_property):
    """Computed on first read, then kept in the instance's ``__dict__`` (which later reads
    find before this descriptor)."""

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = self.func(instance)
        instance.__dict__[self.attrname] = value
        return value
