"""A pinned pp x vp that does not divide the layers is planned as written (`gclc check` warns
`uneven-pipeline`; Megatron's layout flags run such recipes, Qwen3-235B's 94 layers over 8 x 2),
where the planner used to call the published configuration infeasible; a free vp still takes
equal chunks only."""

from gclc.compiler.driver import check_text
from gclc.model.job import train_job
from gclc.solver.train.enumerate import vp_candidates
from gclc.solver.train.plan import plan

DESIGN = """import "std/nvidia"
cluster C { units = 2 x DGX_H100  scaleout = NDR_FatTree }
model M { arch = dense  layers = 24  hidden = 4096  heads = 32  ffn = 11008  vocab = 32000  seq = 4096 }
train job {
  model = M  on = C  batch = 64  precision = bf16  software = megatron_core
  parallelism { tp = 2 pp = 4 dp = 2 VP microbatch = 1 recompute = selective zero = 1 }
}
"""


def _job(vp: str):
    checked = check_text(DESIGN.replace("VP", vp), "uneven.gcl")
    assert checked.ok, [str(d) for d in checked.diagnostics]
    assert any(d.code == "uneven-pipeline" for d in checked.diagnostics) or not vp
    return train_job(checked.design)


def test_a_pinned_uneven_interleaving_plans_as_written():
    p = plan(_job("vp = 4 schedule = interleaved"))
    assert p.best is not None and (p.best.config.pp, p.best.config.vp) == (4, 4)


def test_a_free_vp_takes_equal_chunks_only():
    job = _job("")
    free = vp_candidates(job, 4)
    assert 1 in free and all(24 % (4 * v) == 0 for v in free if v > 1)
