"""The serving simulator's test bench: one shipped serving design's model and partition, and
pools of its replicas, shared by the laws that compare two ways of running one simulation
(tests/solver/serve/test_sim_inline.py, test_sim_resume.py, test_sim_routing.py)."""

from __future__ import annotations

from pathlib import Path

from ..compiler.driver import check_file
from ..model.job import placement
from ..model.serve.inference import Engine, ServeConfig, replica
from ..model.shape import ModelShape
from ..solver.serve.plan import serve_entity
from ..solver.serve.sim import Pool

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "chat_serve_features.gcl"
ENTITY = serve_entity(check_file(str(EXAMPLE)).design)
GRAPH, PARTITION = placement(ENTITY)
SHAPE = ModelShape.from_entity(ENTITY.get("model"))


def pool(engine: Engine, batch: int, cache: float, count: int, partition=PARTITION) -> Pool:
    """`count` fp8 replicas of one GPU with batch `batch` and `cache` of the cache 90 % of HBM holds."""
    r = replica(SHAPE, ServeConfig(1, batch, "fp8"), partition, engine)
    return Pool(r, count, batch, cache * r.kv_capacity_tokens(0.9 * r.hbm))
