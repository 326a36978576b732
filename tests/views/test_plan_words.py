"""Plan lines an architect reads without the source (issue #14, "Plan text"): what limits the
plan is listed by share of the step, the largest first (a 2 % link never before 72 %
compute), parts under 2 % left out; the power lines say what runs and what each GPU draws
("modelled draw", never a "power cap" at full clock), and the step model in words, not
"per micro-batch 0.95 clocked + 0.03 other"."""

from __future__ import annotations

import re
from pathlib import Path


from gclc.compiler.driver import check_file
from gclc.dsl.numbers import percent
from gclc.solver.jobs import plan_design
from gclc.views.limits import WORDS, limits_sentence, step_parts
from gclc.views.plan_json import outcome_json
from gclc.views.plan_text import outcome_text

DATA = Path(__file__).resolve().parents[1] / "data"
DESIGN = """
import "std/nvidia"
cluster Lab {{ units = 4 x DGX_H100  scaleout = NDR_FatTree  power {{ budget = 1 MW  pue = 1.3 }} }}
model M {{ arch = dense  layers = 32  hidden = 4096  heads = 32  kv_heads = 8  ffn = 14336  vocab = 32000  seq = 4096 }}
train t {{ model = M  on = Lab  tokens = 100 B  batch = 128  precision = bf16  parallelism {{ pp = 2 }}
          subject to {{ power <= {budget} }} }}
"""


def _outcome(tmp_path: Path, budget: str):
    path = tmp_path / "lab.gcl"
    path.write_text(DESIGN.format(budget=budget))
    return plan_design(check_file(str(path)).design)


def test_the_limits_are_listed_largest_first(tmp_path):
    outcome = _outcome(tmp_path, "1 MW")
    plan = outcome.plan
    rows = {k: v / plan.best.step_time for k, v in plan.best.breakdown.rows()}
    parts = step_parts(plan)
    shares = [share for _, share, _ in parts]
    assert shares == sorted(shares, reverse=True) and shares[0] == max(rows.values())
    assert {key for key, _, _ in parts} == {k for k, share in rows.items() if share >= 0.02}
    sentence = limits_sentence(plan)
    first = WORDS[parts[0][0]]
    assert sentence.startswith(f"{first[0].upper()}{first[1:]} takes {percent(parts[0][1])} of the step")
    named = [sentence.index(f"{words} {percent(share)}") for _, share, words in parts[1:4]]
    assert named == sorted(named)                      # in the order of their shares
    assert f"  limits     {sentence}" in outcome_text(outcome)


def test_the_power_lines_say_what_runs_and_what_it_draws(tmp_path):
    loose = _outcome(tmp_path, "1 MW")                # the limit does not bind: full clock
    free = outcome_text(loose)
    head = next(line for line in free.splitlines() if line.startswith("power limit"))
    assert re.search(r"32 of 32 GPUs at full clock, [\d.,]+(?: [kM])? tokens/s", head) and "power cap" not in free
    assert re.search(r"binds +GPU count .*; full clock", free)
    assert "clocked +" not in free and "per micro-batch" not in free
    bound = _outcome(tmp_path, "40 kW")                # the limit binds: fewer GPUs or a lower clock
    tight = outcome_text(bound)
    data = outcome_json(bound)
    head = next(line for line in tight.splitlines() if line.startswith("power limit"))
    assert "binds            power" in tight
    if data["power_budget"]["power_cap_w"] is not None:   # below full clock the cap is a setting, named as such
        assert "clock (power cap" in head and "under a power cap of" in tight
    else:
        assert "at full clock" in head

def test_a_runner_up_at_another_power_cap_names_the_cap_in_words():
    """A runner-up that differs in its operating point names the cap in watts (issue 28), never
    a raw float or Python's None."""
    from gclc.views.plan_text import _setting
    assert _setting(1124.6651562499999, "power_cap_w") == "1.12 kW"
    assert _setting(None, "power_cap_w") == "none"
