"""A serve plan's goodput is the demand's rate times the share of the measured requests that
meet every SLO, in the text and the JSON alike: it had been the measured requests over their
own arrival window, a Poisson draw's rate, which read 40.5 requests/s beside a demand of 40
(deepseek_v3_serve) and 26.9 beside 30 with every request within its SLOs
(chat_serve_features), as if a tenth of them missed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gclc.compiler.driver import check_file
from gclc.dsl.numbers import number
from gclc.solver.serve.plan import plan_serve, serve_entity
from gclc.views.serve import goodput, serve_json, serve_text

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def chat():
    design = check_file(str(ROOT / "examples" / "chat_serve_features.gcl")).design
    return plan_serve(serve_entity(design))


def test_goodput_is_the_rate_times_the_share_within_the_slos(chat):
    o = chat.outcome
    assert 0 < o.met <= len(o.ttft)
    expected = chat.demand.rate * o.met / len(o.ttft)
    assert goodput(chat) == pytest.approx(expected, rel=1e-12) and goodput(chat) <= chat.demand.rate
    data = serve_json(chat)
    assert data["goodput_rps"] == goodput(chat) and data["goodput_rps"] <= data["demand_rps"]
    assert f"goodput {number(goodput(chat))} requests/s within the SLOs" in serve_text(chat)


def test_an_eager_engine_states_a_graph_limit_of_zero_not_null():
    """`graph_batch = 0` runs every iteration eagerly (exported as --enforce-eager): the JSON says 0,
    where null would read as no limit."""
    import attrs
    from gclc.model.serve.engines import profile
    from gclc.views.serve import engine_json
    eager = attrs.evolve(profile("vllm_v1").engine(), graph_batch=0, graph_tokens=0)
    assert engine_json(eager, False)["cuda_graph_max_batch"] == 0
    assert engine_json(profile("vllm_v1").engine(), False)["cuda_graph_max_batch"] == profile("vllm_v1").engine().graph_batch
