"""An rl plan through every view: `gclc plan` text and JSON (validated by views/plan.schema.json,
exit 0, or 3 when infeasible), the report's RL step section with its timeline, and the pools
diagram of `gclc render --view placement`; all describe the same operating point."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest

from gclc.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "tests" / "data" / "rl_small.gcl"
VALIDATOR = jsonschema.Draft202012Validator(json.loads((ROOT / "views" / "plan.schema.json").read_text()))


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "internal error" not in out.err, out.err
    return code, out.out, out.err


@pytest.fixture(scope="module")
def planned():
    return {}


def test_the_json_keeps_the_contract_and_the_text_says_the_same(capsys, planned):
    code, out, _ = run(capsys, "plan", SMALL, "--json")
    data = json.loads(out)
    assert code == 0 and not list(VALIDATOR.iter_errors(data))
    assert data["kind"] == "rl" and data["status"] == "optimal"
    rl = data["rl"]
    assert rl["samples_per_step"] == 128 and rl["samples_per_s"] == pytest.approx(128 / data["step_time_s"])
    # the RL stack's release the host copies were priced for; the schema names the language's releases
    from gclc.compiler.schema import RL_STACKS
    assert rl["rl_stack"] == "nemo_rl"
    assert tuple(VALIDATOR.schema["properties"]["rl"]["properties"]["rl_stack"]["enum"]) == RL_STACKS
    # ... and the calibration its phases already carry (model/rl/stacks.py), so a reader can undo it
    from gclc.model.rl.stacks import NEMO_RL
    assert rl["calibration"] == {"engine_host_s": NEMO_RL.engine_host_s, "training": NEMO_RL.training,
                                 "sync": NEMO_RL.sync, "host_copies": NEMO_RL.host_copies}
    ends = {t["pool"]: t["end_s"] for t in rl["timeline"]}
    assert all(end == pytest.approx(data["step_time_s"]) for end in ends.values())
    code, text, _ = run(capsys, "plan", SMALL)
    g, t = data["placement"]["generate"], data["placement"]["train"]
    assert f"generate   on {g['partition']}: {g['gpus']} GPUs" in text
    assert f"train      on {t['partition']}: {t['gpus']} GPUs" in text
    assert "why        " in text and "samples/s" in text
    # each pool's HBM as its data sheet states it, as train and serve plans print it (issue 27)
    # (both partitions' GPUs are 80 GB parts: the A100's 80 GiB usable, the H100's 79.6)
    usable = {"h100": r"79\.6", "a100": "80"}
    assert re.search(rf"memory     generation .+ of 80 GB \({usable[g['partition']]} GiB usable\) per GPU; "
                     rf"training .+ of 80 GB \({usable[t['partition']]} GiB usable\)", text)
    assert "85.5 GB" not in text
    planned["data"] = data


def test_an_infeasible_rl_plan_keeps_the_contract_and_exits_3(capsys, tmp_path):
    path = tmp_path / "tight.gcl"
    path.write_text(SMALL.read_text().replace("memory <= 90%", "memory <= 6 GB"))
    code, out, err = run(capsys, "plan", path, "--json")
    data = json.loads(out)
    assert code == 3 and data["status"] == "infeasible" and not list(VALIDATOR.iter_errors(data))
    assert "infeasible" in err and data["binding"]


def test_the_report_draws_one_step_per_pool(capsys, tmp_path):
    out = tmp_path / "report.html"
    code, _, _ = run(capsys, "report", SMALL, "-o", out)
    page = out.read_text()
    assert code == 0 and "<h2>RL step</h2>" in page
    section = re.search(r"<h2>RL step</h2>.*?</section>", page, re.S)[0]
    assert "<svg" in section and "generation pool" in section and "training pool" in section
    assert "Why the pools go where they go" in section


def test_the_pools_diagram(capsys, tmp_path):
    if shutil.which("dot") is None:
        pytest.skip("graphviz's dot is not installed (bash .ci/setup installs it)")
    out = tmp_path / "pools.svg"
    code, _, _ = run(capsys, "render", SMALL, "-o", out, "--view", "placement")
    svg = out.read_text()
    assert code == 0 and "generation pool" in svg and "training pool" in svg and "weights" in svg


def test_the_mode_names_the_staleness_and_a_shared_partition_says_why_not_the_others(capsys, tmp_path):
    """The mode line states the staleness the plan runs at (it printed 1 whatever it was), and a plan
    whose two pools share one partition weighs each pool on each other partition the job may use."""
    deeper = tmp_path / "rl_deeper.gcl"
    deeper.write_text(SMALL.read_text().replace("staleness    = 1", "staleness    = 3"))
    code, text, _ = run(capsys, "plan", deeper, "--json")
    data = json.loads(text)
    chosen = data["rl"]["staleness"]
    _, text, _ = run(capsys, "plan", deeper)
    # at 3 steps off the batch's latency is spread over three chains: the plan runs asynchronous
    assert code == 0 and chosen == 3
    assert "asynchronous (staleness 3)" in text
    for path in (deeper, SMALL):
        code, out, _ = run(capsys, "plan", path, "--json")
        data = json.loads(out)
        _, text, _ = run(capsys, "plan", path)
        g, t = data["placement"]["generate"]["partition"], data["placement"]["train"]["partition"]
        other = ({"h100", "a100"} - {g}).pop()
        if g == t:
            assert f"generation on {other}, training on {t}:" in text
            assert f"generation on {g}, training on {other}:" in text
        else:
            assert f"generation on {t}, training on {g}:" in text
