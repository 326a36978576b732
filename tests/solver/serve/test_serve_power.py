"""A serve plan's power at its operating point (issue 28): each pool's GPUs compute for the work
the rate brings and stream the weights whenever a replica holds a request, idle for the rest
(solver/serve/screen.py pool_share); decode is memory-bound, so its GPUs draw less than their
TDP; near saturation a server draws like Offline. Laws: more load never lowers the power of a
fixed layout, nor does a larger pool at the same rate; the power never exceeds the pool's at
capacity (Offline, same batch) nor falls below the share of time its capacity is in use. The
plan's text and JSON state the same watts (one answer)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import assume, given, strategies as st

from gclc.cli.main import main
from gclc.compiler.driver import check_text
from gclc.model import dvfs
from gclc.model.power import gpu_watts_of
from gclc.solver.serve.plan import plan_serve
import attrs

from gclc.model.power import STREAMING_ACTIVITY, serving_activity
from gclc.solver.serve.screen import Side, pool_share, pools_power
from gclc.testing import load_profile
from gclc.views.power_view import serve_gpu_watts

load_profile()
ROOT = Path(__file__).resolve().parents[3]
TEXT = (ROOT / "tests" / "data" / "serve_cost.gcl").read_text().replace(
    "  prompt = 1000\n  output = 200\n", "  prompt = 1000\n  output = 200\n  rate = 80 req/s\n  requests = 400\n")
PLAN = plan_serve(check_text(TEXT, str(ROOT / "tests" / "data" / "day.gcl")).design["chat"])
SIDES = [Side(PLAN.decode.replica, PLAN.decode.estimate, PLAN.decode.count)]
CAPACITY = PLAN.decode.count * PLAN.decode.estimate.requests_per_s


@given(st.floats(0.0, 2.0), st.floats(0.0, 2.0))
def test_more_load_never_lowers_the_power_of_a_layout(x, y):
    low, high = sorted((x, y))
    a, b = (pools_power(PLAN.graph, PLAN.partition, SIDES, CAPACITY * s or None) for s in (low, high))
    saturated = pools_power(PLAN.graph, PLAN.partition, SIDES)
    if low > 0:
        assert a <= b * (1 + 1e-12) and b <= saturated * (1 + 1e-12)


def test_an_idle_layout_draws_its_idle_floor_and_a_saturated_one_more():
    chip = PLAN.partition.node.accelerator
    empty = pools_power(PLAN.graph, PLAN.partition, SIDES, 1e-12 * CAPACITY)
    gpus = PLAN.decode.count * PLAN.decode.replica.gpus
    # a replica with no request in flight idles: it does not draw a waiting GPU's share
    assert math.isclose(gpu_watts_of(PLAN.graph, PLAN.partition, gpus, empty), chip.idle, rel_tol=1e-6)
    assert empty < pools_power(PLAN.graph, PLAN.partition, SIDES)


def test_decode_draws_below_tdp_and_the_plans_outputs_agree(capsys, tmp_path):
    chip = PLAN.partition.node.accelerator
    watts = serve_gpu_watts(PLAN)
    assert chip.idle < watts < dvfs.draw(chip)          # memory-bound decode: below the TDP
    path = tmp_path / "chat.gcl"
    path.write_text(TEXT)
    assert main(["plan", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert math.isclose(data["power_w"], PLAN.power_w, rel_tol=1e-12)
    assert main(["plan", str(path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.lstrip().startswith("power "))
    assert f"{PLAN.power_w / 1e3:.3g} kW" in line


@given(st.integers(1, 6), st.integers(1, 6), st.floats(0.01, 1.0))
def test_a_larger_pool_at_the_same_rate_never_draws_less(a, b, share):
    """What the demand search's bound prunes by: its pools only grow, and the power with them."""
    low, high = sorted((a, b))
    rate = share * low * PLAN.decode.estimate.requests_per_s
    watts = [pools_power(PLAN.graph, PLAN.partition, [Side(PLAN.decode.replica, PLAN.decode.estimate, n)], rate)
             for n in (low, high)]
    assert watts[0] <= watts[1] * (1 + 1e-12)


def test_a_paced_server_near_saturation_draws_like_offline():
    """A batching server steps whenever it holds a request, streaming the weights at any batch:
    near saturation it draws nearly its Offline power (MLPerf Inference v5.1, Lenovo 8 x B200,
    Llama 2 70B Server at 96 % of the Offline rate: 10.44 vs 10.40 kW at the wall), where the
    share of capacity in use alone charged its GPUs 4 % of their draw less per 4 % of rate."""
    chip = PLAN.partition.node.accelerator
    gpus = PLAN.decode.count * PLAN.decode.replica.gpus
    offline = gpu_watts_of(PLAN.graph, PLAN.partition, gpus, pools_power(PLAN.graph, PLAN.partition, SIDES))
    paced = gpu_watts_of(PLAN.graph, PLAN.partition, gpus, pools_power(PLAN.graph, PLAN.partition, SIDES,
                                                                      0.96 * CAPACITY))
    assert offline - 0.96 * (offline - chip.idle) < paced <= offline
    # at half the rate it still streams while it holds a request: above half its range
    half = gpu_watts_of(PLAN.graph, PLAN.partition, gpus, pools_power(PLAN.graph, PLAN.partition, SIDES,
                                                                     CAPACITY / 2))
    assert half > chip.idle + 0.5 * (offline - chip.idle)


def estimates(role: str | None = None):
    """A replica's full-batch estimate with any computing share and requests in flight."""
    return st.builds(lambda r, busy, flight, rate: attrs.evolve(PLAN.decode.estimate, role=r, busy=busy,
                                                                 lone_flight=flight, requests_per_s=rate),
                     st.just(role) if role else st.sampled_from(["both", "decode", "prefill"]),
                     st.floats(0.0, 1.0), st.floats(0.0, 1e4), st.floats(1e-3, 1e4))


def share_at(e, count: int, used: float | None) -> float:
    side = Side(PLAN.decode.replica, e, count)
    return pool_share(side, used * count * e.requests_per_s if used is not None else None)


@given(estimates(), st.integers(1, 64), st.floats(1e-9, 2.0), st.floats(1e-9, 2.0))
def test_more_rate_never_lowers_a_pools_draw_nor_passes_its_offline_draw(e, count, x, y):
    low, high = sorted((x, y))
    a, b, offline = share_at(e, count, low), share_at(e, count, high), share_at(e, count, None)
    assert a <= b * (1 + 1e-12) + 1e-15
    assert b <= offline * (1 + 1e-12) and math.isclose(offline, serving_activity(e.busy), rel_tol=1e-12)
    # a replica holding any request completes them no faster than its capacity: it is held at
    # least the share of its capacity in use, so it draws at least that share of its Offline draw
    assert a >= min(low, 1.0) * offline * (1 - 1e-12)


@given(estimates(), st.integers(1, 64), st.integers(1, 64), st.floats(1e-6, 1e6))
def test_a_larger_pool_of_any_layout_at_the_same_rate_never_draws_less(e, a, b, rate):
    low, high = sorted((a, b))
    watts = [n * pool_share(Side(PLAN.decode.replica, e, n), rate) for n in (low, high)]
    assert watts[0] <= watts[1] * (1 + 1e-12) + 1e-15


@given(estimates("decode"), st.floats(1e-6, 1.0))
def test_the_computing_share_is_the_work_the_rate_brings(e, used):
    """Whatever streams, the computing part is conserved: at a share `used` of capacity, a pool
    whose replicas never wait between requests (`lone_flight` huge) draws the computing share
    `used` x busy at full power and streams for the rest of the time."""
    assume(e.busy > 0)
    saturated = attrs.evolve(e, lone_flight=1e9)
    expected = used * e.busy + STREAMING_ACTIVITY * (1.0 - used * e.busy)
    assert math.isclose(share_at(saturated, 3, used), expected, rel_tol=1e-9)
