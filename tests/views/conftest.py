"""The examples at sizes the export tests can afford, checked, lowered and planned once; a
priced heterogeneous design and a serve design planned once per module (`hetero`, `serve`)."""

from __future__ import annotations

import functools
from pathlib import Path

import attrs
import pytest

from gclc.compiler.driver import check_file
from gclc.compiler.lower import lower
from gclc.model.job import hetero_entity
from gclc.solver.split.plan import plan_hetero
from gclc.solver.serve.plan import plan_serve, serve_entity
from gclc.views.export.jobs import job_entity, job_plan
from gclc.views.export.layout import layout

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "exports"
JOBS = ROOT / "tests" / "data"
# Every example, with settings that keep its cluster small and its plan feasible.
SETTINGS = {
    "a100_cluster": (),
    "custom_dsa": ("cubes=4",),
    "dgx_h100_superpod": (),
    "gb200_nvl72_100k": ("racks=64",),
    "hetero_h100_a100": (),
    "mi300x_roce": (),
}


@attrs.frozen
class Example:
    name: str

    @property
    def path(self) -> str:
        return str(ROOT / "examples" / f"{self.name}.gcl")

    @property
    def settings(self) -> tuple[str, ...]:
        return SETTINGS[self.name]

    @property
    def design(self):
        return _design(self.name)

    @property
    def graph(self):
        return lower(self.design)

    @property
    def layout(self):
        return layout(self.graph, self.design)

    @property
    def job(self):
        return _job(self.name)


@functools.cache
def _design(name: str):
    result = check_file(str(ROOT / "examples" / f"{name}.gcl"), list(SETTINGS[name]))
    assert result.design is not None, result.diagnostics
    return result.design


@functools.cache
def _job(name: str):
    entity = job_entity(_design(name), None)
    return job_plan(entity) if entity is not None else None


@pytest.fixture(params=sorted(SETTINGS), scope="module")
def example(request) -> Example:
    return Example(request.param)


def tiers_as_node_groups(partition) -> list[int]:
    """From the IR alone: nodes per domain of each tier that spans several nodes, innermost
    first (a tier no wider than the one below it adds no level)."""
    sizes: list[int] = []
    for tier in partition.tiers:
        size = min(partition.nodes, tier.group_gpus // partition.node.gpus)
        if size > 1 and (not sizes or size > sizes[-1]):
            sizes.append(size)
    return sizes


@pytest.fixture(scope="session")
def ir_levels():
    return tiers_as_node_groups


@pytest.fixture(scope="session")
def named():
    """Example by name, for tests about one design."""
    return Example


def _variant_plan(pins: str, model: str = "window = window"):
    """The dense-variants design (tests/data/dense_variants.gcl) with other pins, planned."""
    from gclc.compiler.driver import check_text

    path = ROOT / "tests" / "data" / "dense_variants.gcl"
    text = path.read_text().replace(
        "parallelism { tp = 1 pp = 1 zero = 3 shard = shard recompute = full recompute_every = 2 offload = offload }",
        pins).replace("window = window", model).replace("software  = fsdp", "software  = megatron_core")
    result = check_text(text, str(path))
    assert result.design is not None, result.diagnostics
    return job_plan(job_entity(result.design, None))


@pytest.fixture(scope="session")
def variant_plan():
    """Plan the dense-variants design under other pins (sharding, recompute, offload, attention)."""
    return _variant_plan


@pytest.fixture(scope="session")
def shared_cluster_train():
    """examples/shared_cluster.gcl's train jobs, each planned as `gclc export` plans it (on the
    partition its plan chose; `timed=False`: the engines' and frameworks' exports need no time
    limit), once per run: [(name, plan)]."""
    design = check_file(str(ROOT / "examples" / "shared_cluster.gcl"), []).design
    assert design is not None
    return [(entity.name, job_plan(entity, timed=False)) for entity in design.of_kind("train")]


@pytest.fixture(scope="module")
def hetero():
    design = check_file(str(JOBS / "hetero_cost.gcl")).design
    return design, plan_hetero(hetero_entity(design))


@pytest.fixture(scope="module")
def serve():
    design = check_file(str(JOBS / "serve_cost.gcl")).design
    return design, plan_serve(serve_entity(design))
