"""Jobs that share a fabric (solver/schedule/contention.py), on a small 3:1 fat tree whose
leaves hold 6 nodes of 4 GPUs, with a real plan's step (model/train/step.py) as the price:

- a job alone is never slowed, and no job is ever faster than alone;
- adding a co-running job never speeds any job, and stopping it gives back what it took;
- a job inside one leaf is never slowed, whatever climbs around it;
- on a non-blocking fabric (1:1) nothing slows, unless it routes by ECMP: then a neighbour's
  flows collide with a job's on the uplinks (the laws above run on both routings);
- end to end: of two 32-GPU jobs placed across leaves, the one whose leaves the other climbs
  through ends later than it does alone, and the schedule says so (JSON, text).
"""

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_text
from gclc.solver.schedule.catalog import policy
from gclc.testing.contention import design
from gclc.solver.schedule.contention import Contention, hashing_of
from gclc.solver.schedule.jobs import build
from gclc.solver.schedule.simulate import simulate
from gclc.solver.schedule.state import Allocation, ClusterState
from gclc.views.schedule import schedule_json, schedule_text

FIRST = "train a { model = M  on = K  batch = 256  gpus = 32  steps = 1000  parallelism { tp = 4 } }"
SECOND = "train b { model = M  on = K  batch = 256  gpus = 32  steps = 1000  parallelism { tp = 4 }  submit = 1 s }"
SCHEMA = json.loads((Path(__file__).parents[3] / "views" / "schedule.schema.json").read_text())


def workload(oversubscription: str = "3:1", units: int = 18, more: str = SECOND, kind: str = "infiniband"):
    checked = check_text(design(f"{FIRST}\n{more}", kind, oversubscription, units), "shared.gcl")
    assert checked.ok, [str(d) for d in checked.diagnostics]
    return build(checked.design)


OVERSUBSCRIBED = workload()
CURVE = OVERSUBSCRIBED.curves[("a", "K", 32)]
PARTITION = OVERSUBSCRIBED.graph.partitions[0]


def contention(state: ClusterState, hashing=None) -> Contention:
    """Every job prices its step with the one real plan's curve (a job's own plan is no part of
    the law); `hashing`: the fabric's switches route by ECMP, (6 down ports, 2 up, flows a port)."""
    curves = {(f"j{i}", "K", 0): CURVE for i in range(8)}
    return Contention(curves, {"K": PARTITION}, state.partitions, {"K": hashing})


@st.composite
def allocations(draw):
    """Up to 6 jobs holding random GPUs of the 18 nodes (each node's 4 GPUs to a job or free)."""
    state = ClusterState.of(OVERSUBSCRIBED.graph)
    part = state.partitions["K"]
    jobs = draw(st.integers(2, 6))
    owner = draw(st.lists(st.integers(-1, jobs - 1), min_size=part.domains * 4, max_size=part.domains * 4))
    out = []
    for j in range(jobs):
        held = {}
        for slot, o in enumerate(owner):
            if o == j:
                held[slot // 4] = held.get(slot // 4, 0) + 1
        if held:
            domains = tuple(sorted(held))
            out.append(Allocation("K", domains, tuple(held[d] for d in domains), part.level_of(domains)))
    hashing = draw(st.sampled_from([None, (6, 2, 1), (6, 2, 4)]))
    return state, out, hashing


def run_all(state, allocs, hashing=None) -> Contention:
    c = contention(state, hashing)
    for i, alloc in enumerate(allocs):
        c.started(f"j{i}", alloc, 0)
    return c


@given(allocations())
def test_a_neighbour_never_speeds_a_job_and_gives_back_what_it_took(case):
    state, allocs, hashing = case
    before = run_all(state, allocs[:-1], hashing)
    earlier = {n: before.slowdown.get(n, 1.0) for n in (f"j{i}" for i in range(len(allocs) - 1))}
    before.started(f"j{len(allocs) - 1}", allocs[-1], 0)
    for name, value in earlier.items():
        assert before.slowdown.get(name, 1.0) >= value * (1 - 1e-12), name
        assert value >= 1.0
    before.stopped(f"j{len(allocs) - 1}")
    assert {n: before.slowdown.get(n, 1.0) for n in earlier} == earlier


@given(allocations())
def test_a_job_alone_or_inside_one_leaf_is_never_slowed(case):
    state, allocs, hashing = case
    together = run_all(state, allocs, hashing)
    part = state.partitions["K"]
    for i, alloc in enumerate(allocs):
        alone = run_all(state, [alloc], hashing).slowdown.get("j0", 1.0)
        assert alone == 1.0
        if alloc.level <= 1:   # one node or one leaf: it climbs through no uplink
            assert part.group_domains[1] > 1 and together.slowdown.get(f"j{i}", 1.0) == 1.0


@pytest.mark.parametrize("kind", ["infiniband", "ethernet"])
def test_a_non_blocking_fabric_slows_nothing_unless_it_hashes(kind):
    """Two jobs each on half of every leaf of a 1:1 fabric: all their GPUs climb. Adaptive
    routing pools the uplinks, and each GPU gets its port whoever climbs beside it; ECMP (the
    default on Ethernet) hashes the neighbour's flows onto the same uplinks, and both slow."""
    flat = workload("1:1", kind=kind)
    state = ClusterState.of(flat.graph)
    part = state.partitions["K"]
    c = Contention({(f"j{i}", "K", 0): flat.curves[("a", "K", 32)] for i in range(2)},
                   {"K": flat.graph.partitions[0]}, state.partitions, {"K": hashing_of(flat.cluster, "K")})
    half = part.group_domains[1] // 2
    for i in range(2):
        domains = tuple(d for d in range(part.domains) if (d % part.group_domains[1] < half) == (i == 0))
        c.started(f"j{i}", Allocation("K", domains, (4,) * len(domains), part.level_of(domains)), 0)
    assert len(c.held) == 2
    if kind == "infiniband":
        assert all(v == 1.0 for v in c.slowdown.values())
    else:
        assert all(v > 1.01 for v in c.slowdown.values()) and len(c.slowdown) == 2


def test_the_schedule_charges_the_job_whose_leaves_a_neighbour_climbs_through():
    """fifo places a on nodes 0-7 (a whole leaf and 2 nodes of the next) and b on nodes 8-15
    (4 nodes of the second leaf, 4 of the third): in the second leaf a's 8 GPUs climb beside
    b's 16, so b gets 24 / 24 of the uplinks' per-GPU rate instead of 24 / 16 alone; a's whole
    first leaf already paces it at the full-leaf rate, so b costs it nothing."""
    fifo = policy("fifo")
    outcome = simulate(OVERSUBSCRIBED, fifo, failures=False)
    data = schedule_json(OVERSUBSCRIBED, outcome, [])
    jsonschema.validate(data, SCHEMA)
    jobs = {j["name"]: j for j in data["jobs"]}
    assert [s["domain_gpus"][0][0] for s in jobs["b"]["segments"]] == [8]
    assert jobs["a"]["network_slowdown"] == 1.0 and jobs["b"]["network_slowdown"] > 1.01
    assert jobs["b"]["goodput_share"] < 1.0 / jobs["b"]["network_slowdown"] + 1e-9
    alone = simulate(workload(more=""), fifo, failures=False)
    a_alone = next(r for r in alone.runs if r.job.name == "a")
    b_shared = next(r for r in outcome.runs if r.job.name == "b")
    assert b_shared.end - b_shared.job.submit > (a_alone.end - a_alone.job.submit) * 1.01
    assert "slowed by neighbours on shared uplinks: b +" in schedule_text(data)


MOE_JOB = "train a { model = E  on = K  batch = 256  gpus = 32  steps = 1000  parallelism { tp = 1  ep = 32 } }"


def lossless(fabric: str):
    """An MoE job whose 32-GPU expert all-to-all climbs the spine of a 3:1 RoCE fabric beside
    a dense job: `fabric` says how it meets congestion and routes."""
    checked = check_text(design(f"{MOE_JOB}\n{SECOND}", "ethernet", fabric=fabric), "pfc.gcl")
    assert checked.ok, [str(d) for d in checked.diagnostics]
    return build(checked.design)


PFC, ECN, ADAPTIVE = lossless("congestion = pfc"), lossless(""), lossless("congestion = pfc  routing = adaptive")


def test_pfc_pauses_behind_a_neighbours_all_to_all_slow_a_job_sharing_its_spine():
    """fifo places the MoE job a and the dense job b across leaves they share. Under ECN b pays
    the uplinks a's GPUs climb; under PFC alone, while a's all-to-all runs its incast's flows
    collide on the hashed spine and their pauses hold b's flows to the slowest of them: b slows
    more, a (whose own pause its plan already prices) no more. Adaptive routing keeps a's flows
    at their fair share: PFC then takes nothing beyond ECN. The schedule reports it."""
    fifo = policy("fifo")
    slowed = {}
    for name, work in (("pfc", PFC), ("ecn", ECN), ("adaptive", ADAPTIVE)):
        data = schedule_json(work, simulate(work, fifo, failures=False), [])
        jsonschema.validate(data, SCHEMA)
        slowed[name] = {j["name"]: j["network_slowdown"] for j in data["jobs"]}
    incast = PFC.curves[("a", "K", 32)].alltoall()
    assert incast.fabric == "Out" and incast.senders == 28 and 0 < incast.duty <= 1
    assert ECN.curves[("a", "K", 32)].alltoall() is None and PFC.curves[("b", "K", 32)].alltoall() is None
    assert slowed["pfc"]["b"] > slowed["ecn"]["b"] * 1.05 and slowed["ecn"]["b"] >= 1.0
    assert slowed["pfc"]["a"] == slowed["ecn"]["a"]
    assert slowed["adaptive"]["b"] <= slowed["ecn"]["b"] * (1 + 1e-9)
    data = schedule_json(PFC, simulate(PFC, fifo, failures=False), [])
    assert {j["name"]: j["pfc_paused_by"] for j in data["jobs"]} == {"a": [], "b": ["a"]}
    assert "held by PFC pauses behind a neighbour's expert all-to-all: b (behind a)" in schedule_text(data)
    assert not any(j["pfc_paused_by"] for j in schedule_json(ECN, simulate(ECN, fifo, failures=False), [])["jobs"])


def test_under_pfc_a_job_alone_is_never_slowed_and_a_neighbour_never_speeds_it():
    """The laws of the pool on the lossless fabric, jobs alternating MoE (an incast) and dense:
    alone, 1; with neighbours, no faster than under ECN on the same allocation; stopping the
    last neighbour gives back what it took."""
    state = ClusterState.of(PFC.graph)
    part = state.partitions["K"]
    leaf = part.group_domains[1]
    allocs = [Allocation("K", domains, (4,) * len(domains), part.level_of(domains))
              for domains in (tuple(range(0, 8)), tuple(range(leaf - 2, leaf + 6)), tuple(range(2 * leaf - 3, 2 * leaf + 5)))]

    def run(work, jobs):
        curves = {f"j{i}": work.curves[("a" if i % 2 == 0 else "b", "K", 32)] for i in range(len(jobs))}
        c = Contention({(n, "K", 0): curve for n, curve in curves.items()}, {"K": work.graph.partitions[0]},
                       ClusterState.of(work.graph).partitions, {"K": hashing_of(work.cluster, "K")})
        for i, alloc in enumerate(jobs):
            c.started(f"j{i}", alloc, 0)
        return c

    for i, alloc in enumerate(allocs):
        assert run(PFC, [alloc]).slowdown.get("j0", 1.0) == 1.0
    together, under_ecn = run(PFC, allocs), run(ECN, allocs)
    assert any(together.slowdown.get(n, 1.0) > under_ecn.slowdown.get(n, 1.0) * 1.01 for n in ("j1", "j2"))
    for name in ("j0", "j1", "j2"):
        assert together.slowdown.get(name, 1.0) >= under_ecn.slowdown.get(name, 1.0) * (1 - 1e-12)
    fewer = run(PFC, allocs[:-1])
    together.stopped("j2")
    assert {n: together.slowdown.get(n, 1.0) for n in ("j0", "j1")} == {n: fewer.slowdown.get(n, 1.0) for n in ("j0", "j1")}
