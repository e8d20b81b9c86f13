"""``kubectl dragonet``: views of a live cluster's pools, queues, jobs and nodes, and the
verbs that control them.

The views (``status``, ``queue``, ``explain``, ``nodes``: ``live/commands.py``) only read;
the control verbs (``suspend``, ``resume``, ``delete`` a job, ``hold``, ``drain``,
``release`` a pool: ``live/control.py``) each write one object. Both use the current
kubeconfig context with the official client, and the webhook never imports this package.
Installed as ``kubectl-dragonet`` (the same program as ``dragonet``), so kubectl finds it
as a plugin.
"""
