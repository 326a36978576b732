"""Slurm's QOS limits on running jobs (settings.QosLimits; https://slurm.schedmd.com/qos.html,
https://slurm.schedmd.com/resource_limits.html): what each QOS, and each user within it,
holds now, kept from the runs started and stopped (no pass over the running jobs), and
whether a job may start on so many GPUs without passing GrpTRES=gres/gpu,
MaxTRESPerUser=gres/gpu or MaxJobsPerUser of its QOS. A job's QOS is its priority class
(the export's qos.sh makes one per class); a job with no `user` counts as one user, the
one who submits (as every job `sbatch` submits from one login is)."""

from __future__ import annotations

import collections

from .records import SchedJob
from .settings import QosLimits


class QosUsage:
    def __init__(self) -> None:
        self.gpus: collections.Counter[str] = collections.Counter()                 # QOS -> GPUs held
        self.user_gpus: collections.Counter[tuple[str, str]] = collections.Counter()   # (QOS, user) -> GPUs
        self.user_jobs: collections.Counter[tuple[str, str]] = collections.Counter()   # (QOS, user) -> jobs
        self.held: dict[str, int] = {}

    def started(self, job: SchedJob, gpus: int) -> None:
        self.held[job.name] = gpus
        self.gpus[job.label] += gpus
        self.user_gpus[job.label, job.user] += gpus
        self.user_jobs[job.label, job.user] += 1

    def stopped(self, job: SchedJob) -> None:
        gpus = self.held.pop(job.name, None)
        if gpus is None:
            return
        self.gpus[job.label] -= gpus
        self.user_gpus[job.label, job.user] -= gpus
        self.user_jobs[job.label, job.user] -= 1

    def allows(self, limits: QosLimits, job: SchedJob, gpus: int) -> bool:
        """Whether `job` may start on `gpus` GPUs within its QOS's limits."""
        qos, mine = job.label, (job.label, job.user)
        grp, per_user, jobs = (limits.grp_gpus.get(qos), limits.max_gpus_per_user.get(qos),
                               limits.max_jobs_per_user.get(qos))
        return ((grp is None or self.gpus[qos] + gpus <= grp)
                and (per_user is None or self.user_gpus[mine] + gpus <= per_user)
                and (jobs is None or self.user_jobs[mine] + 1 <= jobs))
