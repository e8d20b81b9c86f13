"""Dragonet's functional core: no I/O, no clock reads, no globals.

Every function takes the observed state and ``now`` as arguments; ``policy.snapshot.sync``
is the whole sync hook as a pure function.
"""
