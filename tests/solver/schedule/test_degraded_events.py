"""Degradation events with durations in `gclc schedule` (solver/schedule/degraded.py): a NIC,
a leaf's uplink, a spine switch or a GPU slow or down from t0 to t1 slows the jobs on it, priced
by the plan's step on the degraded partition (model/network/degrade.py), and the schedule says
whom (JSON, text).

On the small 3:1 fat tree of gclc.testing.contention (leaves of 6 nodes of 4 GPUs), one 32-GPU job
alone, failures off:

- an event that touches the job stretches its run by exactly (t1 - t0) (1 - 1/f), f its
  degraded step over its healthy one (it runs at 1/f of its pace meanwhile);
- an event on a node, or under a leaf, the job does not hold, or before it starts, changes nothing;
- the job's network slowdown stays 1 (alone): the two causes are reported apart;
- under Slurm's and Kueue's own cycles, two jobs across leaves: a spine event slows both, a NIC
  event only the job on that node, and each job's contention and degradation come apart.
"""

import json

import jsonschema
import pytest

from gclc.model.network.degrade import Degradation, degrade
from gclc.model.train.step import estimate
from gclc.solver.schedule.catalog import policy
from gclc.solver.schedule.degraded import EventError, parse_event
from gclc.solver.schedule.simulate import simulate
from gclc.testing.contention import design
from gclc.views.schedule import schedule_json, schedule_text

from .test_contention import FIRST, SCHEMA, workload

ALONE = workload(more="")


def run(*events: str):
    outcome = simulate(ALONE, policy("priority"), failures=False, epochs=0,
                       degradations=tuple(parse_event(e) for e in events))
    data = schedule_json(ALONE, outcome, [])
    jsonschema.validate(data, SCHEMA)
    [job] = data["jobs"]
    return data, job


HEALTHY = run()[1]


def slowed_by(part: str, share: float) -> float:
    """The job's degraded step over its healthy step, from the model itself."""
    curve = ALONE.curves[("a", "K", 32)]
    partition = degrade(ALONE.graph, curve.partition, Degradation(part, share))
    return estimate(curve.shape, curve.config, partition).step_time / curve.step({})


@pytest.mark.parametrize("event, part, share", [("nic:0=50%@30-200", "nic", 0.5), ("spine=50%@30-200", "spine", 0.5),
                                                ("gpu:1=0.7@30-200", "gpu", 0.7), ("link:0=down@30-200", "link", 0.0)])
def test_an_event_on_the_jobs_parts_stretches_its_run_by_its_slower_step(event, part, share):
    data, job = run(event)
    f = slowed_by(part, share)
    assert f > 1.001
    start = job["start_s"]
    assert start < 30 and HEALTHY["end_s"] > 200       # the event lies inside the run
    assert job["end_s"] - HEALTHY["end_s"] == pytest.approx((200 - 30) * (1 - 1 / f), rel=1e-6)
    assert job["degradation_slowdown"] == pytest.approx((job["end_s"] - start) / (HEALTHY["end_s"] - start), rel=1e-9)
    assert job["network_slowdown"] == 1.0
    assert data["degradations"][0]["jobs"] == ["a"]
    assert "degraded   runs stretched by the degraded parts: a +" in schedule_text(data)


@pytest.mark.parametrize("event", ["nic:17=0.5@30-200", "link:2=down@30-200", "spine=0.5@400-500"])
def test_an_event_off_the_jobs_parts_or_after_it_changes_nothing(event):
    # the job holds nodes 0-7 (leaves 0 and 1) and ends before 400 s
    data, job = run(event)
    assert [d for d, _ in data["jobs"][0]["segments"][0]["domain_gpus"]] == list(range(8))
    assert job["end_s"] == HEALTHY["end_s"] and job["degradation_slowdown"] == 1.0
    assert data["degradations"][0]["jobs"] == []
    assert "slowed no running job" in schedule_text(data)


@pytest.mark.parametrize("text, says", [("nic=50%@1h-2h", "say which nic"), ("spine:1=down@0-1h", "no index"),
                                        ("fan:1=0.5@0-1h", "one of nic"), ("nic:1=150%@0-1h", "between 0"),
                                        ("nic:1=0.5@2h-1h", "ends after"), ("nic:1=0.5@soon-1h", "a time is"),
                                        ("nic:1=0.5", "write [PARTITION/]")])
def test_a_malformed_event_says_what_to_write(text, says):
    with pytest.raises(EventError, match=says.replace("[", r"\[")):
        parse_event(text)


def test_an_event_the_cluster_cannot_place_is_refused():
    for text, says in (("nic:18=down@0-1h", "18 scale-up domains"), ("Z/spine=down@0-1h", "no partition"),
                       ("gpu:0=down@0-1h", "a GPU down is a failure")):
        with pytest.raises(EventError, match=says):
            simulate(ALONE, policy("fifo"), failures=False, epochs=0, degradations=(parse_event(text),))


def test_the_cli_reports_the_event_and_refuses_a_bad_one(tmp_path, capsys):
    from gclc.cli.main import main

    path = tmp_path / "one.gcl"
    path.write_text(design(FIRST))
    base = ["schedule", str(path), "--no-failures", "--epochs", "0"]
    assert main(base + ["--degrade", "nic:0=50%@1min-10min", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["degradations"][0]["jobs"] == ["a"] and data["jobs"][0]["degradation_slowdown"] > 1
    assert main(base + ["--degrade", "nic:99=0.5@0-1h"]) == 2
    assert "18 scale-up domains" in capsys.readouterr().err
    assert main(base + ["--degrade", "nic=0.5@0-1h"]) == 2
    assert "say which nic" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["slurm", "kueue"])
def test_policies_with_a_cycle_of_their_own_slow_the_jobs_an_event_touches(name):
    """Two 32-GPU jobs across leaves (test_contention.py's): a spine at half its rate touches
    both, a NIC of node 2 only the first; each job's contention and degradation come apart."""
    both = workload()
    events = (parse_event("spine=50%@10-200"), parse_event("nic:2=0.3@50-150"))
    data = schedule_json(both, simulate(both, policy(name), failures=False, epochs=0, degradations=events), [])
    assert [e["jobs"] for e in data["degradations"]] == [["a", "b"], ["a"]]
    slow = {j["name"]: (j["network_slowdown"], j["degradation_slowdown"]) for j in data["jobs"]}
    assert slow["a"][1] > slow["b"][1] > 1.0 and slow["b"][0] > 1.0
