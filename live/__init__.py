"""``kubectl dragonet``: read-only views of a live cluster's pools, queues, jobs and nodes.

The commands (``status``, ``queue``, ``explain``, ``nodes``) read the current kubeconfig
context with the official client; nothing here writes to the cluster, and the webhook
never imports this package. Installed as ``kubectl-dragonet`` (the same program as
``dragonet``), so kubectl finds it as a plugin.
"""
