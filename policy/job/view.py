"""What a job's sync knows: the job, its own pods, how it stands, and its Admission."""

from __future__ import annotations

from dataclasses import dataclass

from policy.model.admission import FINISHED, INVALID, SUSPENDED, Admission, JobPhase
from policy.model.cluster import Pod
from policy.model.jobs import Job
from policy.model.lifecycle import Assessment

__all__ = ["FINISHED", "INVALID", "SUSPENDED", "JobSyncView"]


@dataclass(frozen=True)
class JobSyncView:
    """What a job's own sync reads (tier 2); the pool's cycle reads a job through
    ``policy.pool.view.JobView``."""

    job: Job
    pool: str
    pods: tuple[Pod, ...]
    assessment: Assessment
    phase: JobPhase
    admission: Admission | None  # the job's own, if the pool has written one
    # The Admission is older than a pod created from it: our view of it is stale, so the
    # sync creates and deletes nothing on its word.
    stale: bool = False
    # What the pool's gang scheduler says of the job's PodGroup ("" if nothing).
    pod_group: str = ""

    @property
    def resumed(self) -> bool:
        """Resumed just now, as the job's status says it: ``Job.resumed`` (its spec no
        longer asks for suspension, its status still says Suspended), but never a finished
        job. The two differ only there: ``Job.resumed`` (which the pool and the job's
        assessment read) holds for a finished job too, while the job's status keeps a
        finished job's times and conditions as they were (``policy.job.status``)."""
        return self.job.resumed and self.phase != FINISHED
