"""Keys hashed once: a pool's sync hashes the same plan keys and shapes on every event."""

from __future__ import annotations


class HashedTuple(tuple):
    """A tuple that hashes its items once (a plain tuple hashes them on every look-up)."""

    _hash: int

    def __new__(cls, items: tuple) -> HashedTuple:
        made = super().__new__(cls, items)
        made._hash = tuple.__hash__(made)
        return made

    def __hash__(self) -> int:
        return self._hash
