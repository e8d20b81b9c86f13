"""The recorder: writes the Kubernetes Events that tell each training job's story (admitted,
waiting, preempted, shrunk, grown, migrated, succeeded, failed, deleted by its TTL).

It exists because a hook answer cannot keep a history: Metacontroller applies what a sync
answers as the children's desired state, and an Event is a record of a moment, not a
desired state. One small process lists the Admissions, the jobs and the pools, derives
what happened from what they hold (``recorder.story``, pure), and writes each fact once
as an ``events.k8s.io/v1`` Event whose name is derived from the fact, so a restarted
recorder finds what it already wrote instead of writing it again (``recorder.write``).
"""
