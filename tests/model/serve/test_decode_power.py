"""Decode power (issue 28): a serving GPU's SMs compute for the GEMMs' FLOPs at a well-filled
shape's rate and stall on streamed weights and cache for the rest of a memory-bound step, so
decode draws far below the TDP. Ma, Afzal, Eitzinger, Wellein, "The Illusion of Power Capping
in LLM Decode" (arXiv:2605.11999, abstract): decode draws 137-300 W on a 700 W H200. The low
end sets model/power.py's STREAMING_ACTIVITY; the batches that reach the high end are the
check here (the model's compute share grows with the batch)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower_cluster
from gclc.model.power import power_at, serving_activity
from gclc.model.serve.inference import ServeConfig, estimate, replica
from gclc.model.shape import ModelShape
from gclc.testing import load_profile
from gclc.testing.model_texts import llama3_8b
from gclc.testing.profiles import scaled_examples

load_profile()

DESIGN = check_text('import "std/nvidia"\ncluster Box {\n  units = 1 x HGX_H200\n}\n' + llama3_8b("Llama8B", '''
  params   = 8.03 B
  source   = "Llama 3 Herd of Models (arXiv:2407.21783) Table 3"'''), path="<decode>").design
PARTITION = lower_cluster(DESIGN["Box"]).partitions[0]
SHAPE = ModelShape.from_entity(DESIGN["Llama8B"])


def _decode_watts(batch: int, tp: int = 1) -> float:
    e = estimate(replica(SHAPE, ServeConfig(tp, batch, "bf16"), PARTITION), 1000, 500, "decode")
    return power_at(PARTITION, serving_activity(e.busy))


def test_decode_on_an_h200_draws_within_the_measured_range():
    watts = [_decode_watts(b) for b in (1, 8, 32, 64, 128)]
    assert all(137 * 0.97 <= w <= 300 * 1.05 for w in watts), watts
    assert watts[0] < 160 and watts[-1] > 240            # memory-bound at batch 1, compute growing by 128
    assert watts == sorted(watts)                          # a larger batch computes a larger share


@settings(max_examples=scaled_examples(20), deadline=None)
@given(st.integers(1, 512), st.sampled_from([1, 2, 4, 8]), st.integers(1, 4000), st.integers(1, 2000),
       st.sampled_from(["both", "decode", "prefill"]))
def test_the_computing_share_is_a_share(batch, tp, prompt, output, role):
    cfg = ServeConfig(tp, 1 if role == "prefill" else batch, "bf16")
    e = estimate(replica(SHAPE, cfg, PARTITION), prompt, output, role)
    assert 0.0 <= e.busy <= 1.0
    chip = PARTITION.node.accelerator
    assert chip.idle <= power_at(PARTITION, serving_activity(e.busy)) <= chip.tdp
