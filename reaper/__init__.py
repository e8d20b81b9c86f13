"""The reaper: deletes finished training jobs once their ``ttlSecondsAfterFinished`` has
passed, as Kubeflow's controller does (``policy.model.ttl`` is the rule).

It exists because a Metacontroller hook cannot delete its own parent: the job's sync only
says in its status when the job goes. One small process lists the jobs every
``DRAGONET_REAPER_INTERVAL_SECONDS`` (and wakes at the next expiry it knows of), and
deletes each expired job by its uid. It keeps nothing: any replica, restarted at any
moment, deletes the same jobs.
"""
