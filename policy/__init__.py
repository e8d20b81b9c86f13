"""Dragonet's functional core: no I/O, no clock reads, no globals.

Every function takes the observed state and ``now`` as arguments. Two tiers:
``policy.pool`` plans a pool's whole queue once per pool event (``policy.pool.sync``), and
``policy.job`` turns one job's Admission into its pods, Services and status
(``policy.job.sync``); ``policy.model`` holds the facts both read.
"""
