"""The Container Monitor: a small service on every pool node (a DaemonSet) that takes the
evaluation metric training tasks report, judges convergence and this node's load against
the pool's, and asks Dragonet to move a worker by creating a Migration (docs/monitor.md)."""
