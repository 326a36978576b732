"""`gclc.testing`: hypothesis strategies and one-line helpers for properties of GCL designs.

Strategies generate small frozen *specs* (`ChipSpec`, `NodeSpec`, ..., `TrainSpec`) that
render to GCL text through the canonical formatter, so every generated value is valid by
construction, shrinks field by field (toward fewer GPUs, smaller models, round numbers)
and a failure is reported as the minimal `.gcl` file that still fails::

    from hypothesis import given
    from gclc.testing import designs, load_profile

    load_profile()                      # GCLC_HYPOTHESIS=ci (default) or deep

    @given(designs())
    def test_plans_never_exceed_hbm(d):
        plan = d.plan()                 # d.text, d.design, d.graph, d.job, d.plan()
        assert plan.best is None or plan.best.memory.total <= plan.best.hbm

`designs(like="my.gcl", vary={...})` perturbs a design of your own instead: params
(`{"racks": range(1, 100)}`) by substitution in the text (or `--set` when the param is
imported), fields (`{"H100_SXM.power.tdp": (500, 700)}`) by substitution in your file, or,
for a part declared in an imported file, by a derived copy (`chip H100_SXM_varied extends
H100_SXM { power.tdp = ... }`) that your file's references are pointed at.

Helpers take a generated design, a spec, a path or GCL text: `compile_design` (the checked
`Design`, or an `AssertionError` that shows every diagnostic and the text), `graph_of`,
`job_of`, `plan_of`.
"""


from .designs import designs, sources
from .generated import GeneratedDesign
from .edit import edit_source
from .helpers import check, compile_design, graph_of, job_of, plan_of
from .parts import chips, clusters, facility_power, fabrics, models, nics, nodes, train_jobs
from .profiles import PROFILE_ENV, PROFILES, load_profile, register_profiles
from .gcl_tree import GclText
from .specs import (ChipSpec, ClusterSpec, CpuSpec, ExpertsSpec, FabricSpec, ModelSpec, NicSpec, NodeSpec,
                    PartitionSpec, SwitchSpec, TrainSpec)

__all__ = [
    "PROFILE_ENV", "PROFILES", "register_profiles", "load_profile",
    "ChipSpec", "NicSpec", "CpuSpec", "SwitchSpec", "FabricSpec", "NodeSpec", "PartitionSpec", "ClusterSpec",
    "ExpertsSpec", "ModelSpec", "TrainSpec", "GeneratedDesign", "GclText",
    "chips", "nics", "fabrics", "nodes", "clusters", "models", "train_jobs", "designs", "sources",
    "check", "compile_design", "graph_of", "job_of", "plan_of", "edit_source", "facility_power",
]
