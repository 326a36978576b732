"""Slurm's QOS limits (GrpTRES, MaxTRESPerUser, MaxJobsPerUser on gres/gpu) under the `slurm`
policy: a law that no cycle leaves a QOS or a user above them, a held job that blocks no one,
and the `user` of a trace row read from its column."""

import collections
import importlib.util
from pathlib import Path

import attrs
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_text
from gclc.solver.schedule.catalog import policy
from gclc.solver.schedule.jobs import build
from gclc.solver.schedule.settings import QosLimits, SlurmSettings
from gclc.solver.schedule.simulate import Simulation, simulate
from gclc.testing import load_profile

load_profile()
_spec = importlib.util.spec_from_file_location("schedule_cluster", Path(__file__).with_name("_cluster.py"))
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)
H = fx.HOUR


def slurm(**limits):
    return policy("slurm", SlurmSettings(qos_limits=QosLimits(**limits)))


@st.composite
def users_jobs(draw):
    out = []
    for i in range(draw(st.integers(1, 8))):
        hours = draw(st.integers(1, 6))
        job = fx.job(f"j{i}", draw(st.sampled_from((1, 2, 4, 8))), hours=hours, priority=draw(st.integers(1, 2)),
                     submit=draw(st.floats(0, 4)), partitions=draw(st.sampled_from((("a",), ("b",), ("a", "b")))),
                     limit=hours)
        out.append(attrs.evolve(job, user=draw(st.sampled_from(("ana", "bo", "")))))
    return out


LIMITS = {"grp_gpus": {"1": 20}, "max_gpus_per_user": {"1": 12, "2": 16}, "max_jobs_per_user": {"2": 2}}


@given(users_jobs())
def test_no_cycle_leaves_a_qos_or_a_user_above_its_limits(drawn):
    """After every cycle (with failures): the GPUs each QOS's running jobs hold, and each
    user's GPUs and jobs within it, are within GrpTRES, MaxTRESPerUser and MaxJobsPerUser;
    and every job ends (each fits the limits alone: a held job waits, it is not lost)."""
    def within(sim):
        gpus, user_gpus, user_jobs = collections.Counter(), collections.Counter(), collections.Counter()
        for name, alloc in sim.state.allocations.items():
            job = sim.runs[name].job
            gpus[job.label] += alloc.gpus
            user_gpus[job.label, job.user] += alloc.gpus
            user_jobs[job.label, job.user] += 1
        assert all(gpus[q] <= n for q, n in LIMITS["grp_gpus"].items()), gpus
        assert all(g <= LIMITS["max_gpus_per_user"].get(q, g) for (q, _), g in user_gpus.items()), user_gpus
        assert all(j <= LIMITS["max_jobs_per_user"].get(q, j) for (q, _), j in user_jobs.items()), user_jobs

    runs = Simulation(fx.workload(drawn), slurm(**LIMITS), failures=True, check=within, epochs=0, seed=3).run().runs
    assert all(run.phase in ("done", "timeout") for run in runs), [(r.job.name, r.phase) for r in runs]


def test_a_job_a_limit_holds_blocks_nobody_behind_it():
    """`ana` may run one job of QOS 2 (MaxJobsPerUser=1): her second waits for her first to
    end, while `bo`'s lower-priority job behind it starts at once on the same partition (the
    main loop skips a held job instead of stopping at it, as slurmctld does)."""
    jobs = [attrs.evolve(fx.job("first", 4, hours=2, priority=2, partitions=("a",), limit=2), user="ana"),
            attrs.evolve(fx.job("second", 4, hours=1, priority=2, submit=0.1, partitions=("a",), limit=1), user="ana"),
            attrs.evolve(fx.job("other", 4, hours=1, priority=1, submit=0.2, partitions=("a",), limit=1), user="bo")]
    runs = {r.job.name: r for r in simulate(fx.workload(jobs), slurm(max_jobs_per_user={"2": 1}), failures=False).runs}
    assert runs["second"].first_start == 2 * H and runs["other"].first_start == 0.2 * H
    free = {r.job.name: r for r in simulate(fx.workload(jobs), slurm(), failures=False).runs}
    assert free["second"].first_start == 0.1 * H                    # the control: no limit, no wait
    grp = {r.job.name: r for r in simulate(fx.workload(jobs), slurm(grp_gpus={"2": 4}), failures=False).runs}
    assert grp["second"].first_start == 2 * H and grp["other"].first_start == 0.2 * H


def test_a_trace_rows_user_comes_from_its_column_or_the_workload():
    text = fx.DESIGN + """
scheduler slurm {
  on = K
  qos_max_jobs_per_user { low = 1 }
}
workload w {
  on       = K
  priority = low
  user     = "ana"
  job x { duration = 1 h  gpus = 4 }
  job y { duration = 1 h  gpus = 4  user = "bo" }
}
"""
    checked = check_text(text, "q.gcl")
    assert checked.ok, checked.diagnostics
    jobs = {j.name: j for j in build(checked.design).jobs}
    assert (jobs["w.x"].user, jobs["w.y"].user) == ("ana", "bo")
    bad = check_text(text.replace("qos_max_jobs_per_user { low = 1 }", "qos_max_jobs_per_user { lowest = 1 }"), "q.gcl")
    assert not bad.ok and any("lowest" in d.summary for d in bad.diagnostics)
