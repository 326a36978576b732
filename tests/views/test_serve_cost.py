"""Serve plans on a cluster with `economics` report USD per million output tokens: the share
of the cluster's cost of ownership their GPUs take, over the tokens they serve."""

from pathlib import Path

import attrs

from gclc.compiler.driver import check_file
from gclc.compiler.lower import lower_cluster
from gclc.compiler.cost.tco import job_cluster, tco
from gclc.solver.serve.plan import plan_serve, serve_entity
from gclc.views.serve import serve_cost, serve_json, serve_text

DESIGN = check_file(str(Path(__file__).parent.parent / "data" / "serve_cost.gcl")).design
PLAN = plan_serve(serve_entity(DESIGN))


def test_cost_per_token_by_hand():
    """TCO of the cluster x the GPUs' share / (tokens/s x the seconds of its life at load)."""
    entity = serve_entity(DESIGN)
    t = tco(job_cluster(entity), PLAN.graph)
    share = PLAN.used_gpus / PLAN.graph.gpus
    cost = serve_cost(PLAN)
    assert cost["gpu_share"] == share
    assert abs(cost["cost_per_token_usd"] - t.total * share / (PLAN.tokens_per_s * t.lifetime_seconds)) \
        <= 1e-12 * cost["cost_per_token_usd"]
    assert serve_json(PLAN)["cost"] == cost
    assert "USD per million output tokens" in serve_text(PLAN)


def test_using_fewer_gpus_charges_their_share():
    half = attrs.evolve(PLAN, decode=attrs.evolve(PLAN.decode, count=PLAN.decode.count // 2))
    assert serve_cost(half)["tco_usd"] == serve_cost(PLAN)["tco_usd"] / 2


def test_no_economics_no_cost():
    assert serve_cost(attrs.evolve(PLAN, entity=None)) is None
    assert lower_cluster(job_cluster(serve_entity(DESIGN))).gpus == 16


def test_the_batch_binding_names_the_limit_the_next_batch_breaks(tmp_path):
    """Regression: "a larger batch breaks the SLOs or memory" was said with no SLO at all."""
    binding = [b for b in PLAN.binding if b.startswith("batch:")]
    batch = PLAN.decode.replica.config.batch
    assert binding == [f"batch: {2 * batch:,} sequences per replica would break memory"]
    pinned = tmp_path / "cap.gcl"   # a cap the search stops at: nothing broke, the search ended
    pinned.write_text((Path(__file__).parent.parent / "data" / "serve_cost.gcl").read_text().replace(
        "output = 200", "output = 200\n  engine { max_batch = 8 }"))
    capped = plan_serve(serve_entity(check_file(str(pinned)).design))
    assert "batch: 8 sequences per replica, the largest searched" in capped.binding
