"""The generation phase: the simulator's times for a step's samples, the lower bounds the
search prunes with (never above the simulated times), and the laws that more generation GPUs
never slow the generation phase and deeper staleness never slows its steady rate."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_file, check_text
from gclc.compiler.serve_trace import Request
from gclc.model.rl.job import rl_job
from gclc.model.serve.inference import Engine, ServeConfig
from gclc.solver.rl import generation as gen
from gclc.solver.rl.search import Context, generation_phase
from gclc.testing import load_profile
from gclc.testing.profiles import scaled_examples

load_profile()
SMALL = Path(__file__).resolve().parents[2] / "data" / "rl_small.gcl"
JOB = rl_job(check_file(str(SMALL)).design["grpo"])

requests = st.lists(st.tuples(st.integers(1, 600), st.integers(1, 900)), min_size=1, max_size=40).map(
    lambda pairs: tuple(Request(0.0, p, o) for p, o in pairs))


@settings(max_examples=scaled_examples(25), deadline=None)
@given(requests, st.sampled_from(["h100", "a100"]), st.sampled_from([1, 2, 4, 8]), st.integers(1, 4),
       st.sampled_from([1, 8, 64]), st.sampled_from([0.0, 0.5]), st.integers(1, 8))
def test_the_bounds_never_exceed_the_simulated_times(reqs, part, tp, replicas, batch, share, depth):
    layout = gen.GenLayout(part, ServeConfig(tp, batch), replicas)
    r = gen.build(JOB.policy, JOB.partition(part), layout, Engine(prefix_share=share))
    out = gen.simulate_generation(r, layout, reqs, JOB.memory_of(JOB.partition(part)), depth)
    makespan, stream = gen.bound(r, layout, reqs, gen.kv_capacity(r, JOB.memory_of(JOB.partition(part))), depth)
    assert makespan <= out.makespan * (1 + 1e-9)
    assert stream <= out.stream * (1 + 1e-9) and out.stream <= out.makespan


@settings(max_examples=scaled_examples(25), deadline=None)
@given(requests, st.sampled_from(["h100", "a100"]), st.sampled_from([1, 2, 4]), st.integers(1, 4),
       st.sampled_from([8, 64, 1024]), st.integers(1, 8))
def test_deeper_staleness_never_slows_the_steady_generation(reqs, part, tp, replicas, batch, depth):
    """k steps off-policy lets up to k steps' samples share the engine: one step more never
    costs a step's samples more of its time (the batch only fills further)."""
    layout = gen.GenLayout(part, ServeConfig(tp, batch), replicas)
    r = gen.build(JOB.policy, JOB.partition(part), layout, Engine())
    kv = gen.kv_capacity(r, JOB.memory_of(JOB.partition(part)))
    if kv < max(r.kv.tokens_held(q.prompt, q.output) for q in reqs):
        return
    assert gen.steady(r, layout, reqs, kv, depth + 1) <= gen.steady(r, layout, reqs, kv, depth) * (1 + 1e-9)


def test_the_slowest_sample_holds_the_step():
    """A batch with one long sample takes about as long as that sample alone at a small batch."""
    layout = gen.GenLayout("h100", ServeConfig(2, 64), 2)
    r = gen.build(JOB.policy, JOB.partition("h100"), layout, Engine())
    short = tuple(Request(0.0, 200, 100) for _ in range(31))
    tail = short + (Request(0.0, 200, 3000),)
    limit = JOB.memory_of(JOB.partition("h100"))
    a, b = gen.simulate_generation(r, layout, short, limit), gen.simulate_generation(r, layout, tail, limit)
    assert b.makespan > 10 * a.makespan and b.makespan >= gen.bound(r, layout, tail, b.kv_tokens)[0]
    assert b.stream < b.makespan / 5     # a steadily fed engine does not wait on the tail


def test_more_generation_gpus_never_slow_the_generation_phase():
    ctx = Context(JOB)
    for part in ("h100", "a100"):
        times = [generation_phase(ctx, part, g).makespan for g in (2, 4, 8, 16)]
        assert all(b <= a for a, b in zip(times, times[1:])), (part, times)
        assert times[-1] < times[0]


@settings(max_examples=scaled_examples(25), deadline=None)
@given(requests, st.sampled_from(["h100", "a100"]), st.sampled_from([1, 2, 4]), st.integers(1, 4),
       st.sampled_from([1, 8, 64]), st.sampled_from([0.0, 0.5]))
def test_twice_the_generation_replicas_never_slow_the_phase(reqs, part, tp, replicas, batch, share):
    """The law on any step's samples: with twice the replicas of one layout each replica is dealt a
    subset of what one replica was dealt before (requests go round in turn), so neither the wait
    for the slowest sample nor the fed engine's share of time grows."""
    limit = JOB.memory_of(JOB.partition(part))
    config = ServeConfig(tp, batch)
    r = gen.build(JOB.policy, JOB.partition(part), gen.GenLayout(part, config, replicas), Engine(prefix_share=share))
    few, more = (gen.simulate_generation(r, gen.GenLayout(part, config, n), reqs, limit) for n in (replicas, 2 * replicas))
    assert few.feasible == more.feasible
    if few.feasible:
        assert more.makespan <= few.makespan * (1 + 1e-9) and more.stream <= few.stream * (1 + 1e-9)


def test_the_nemo_rl_engines_run_nccl_without_in_switch_reduction():
    """NeMo-RL v0.4-v0.7 launch vLLM with NCCL_NVLS_ENABLE=0 when a model-parallel group spans
    hosts, and nothing sets NCCL_COLLNET_ENABLE (model/rl/stacks.py [1352] [collnet]): the RL
    pool's engine bars both; a serving engine keeps NCCL's own pick (nothing says it differs)."""
    from gclc.model.rl.stacks import STACKS
    assert all(not s.engine_nvls and not s.engine_collnet for s in STACKS.values())
    engine = Context(JOB).engine
    assert not engine.nccl_nvls and not engine.nccl_collnet
    assert Engine().nccl_nvls and Engine().nccl_collnet


def test_nemo_rl_from_v0_5_reduces_across_nvlink_joined_hosts_with_symmetric_memory():
    """NeMo-RL v0.5-v0.7 pin vLLM 0.11.2-0.20.0, whose TP groups across hosts of one NVLink domain
    reduce with PyTorch's symmetric memory; v0.4's vLLM 0.10.0 has no such path (model/rl/stacks.py
    [symm]). The pool's engine carries its stack's kernel; a serving engine keeps NCCL."""
    from gclc.model.rl.stacks import STACKS
    assert STACKS["nemo_rl"].engine_fallback_all_reduce == "symm_mem"
    assert STACKS["nemo_rl_0_4"].engine_fallback_all_reduce == ""
    assert Context(JOB).engine.fallback_all_reduce == JOB.stack.engine_fallback_all_reduce
    assert Engine().fallback_all_reduce == ""


def test_an_rl_engine_that_is_not_vllm_gets_no_symmetric_memory_fallback():
    """The fallback is vLLM's own path (CudaCommunicator); an SGLang `generate` engine under the same stack
    keeps its kernel inside a host and NCCL across hosts, and so does SGLang 0.3, whose kernel was vLLM's."""
    for name in ("sglang", "sglang_0_3"):
        text = SMALL.read_text().replace("generate { engine { max_batch = 64 } }",
                                         f"generate {{ engine {{ profile = {name}  max_batch = 64 }} }}")
        job = rl_job(check_text(text, str(SMALL)).design["grpo"])
        assert job.stack.engine_fallback_all_reduce == "symm_mem"
        assert Context(job).engine.name == name and Context(job).engine.fallback_all_reduce == ""


def test_the_stacks_engine_hands_an_h100_tp8_decode_call_of_256_kib_to_symmetric_memory():
    """Inside one DGX H100, vLLM 0.11.2-0.20.0 (NeMo-RL v0.5 on) runs a TP 8 all-reduce of 256 KiB or more
    on the multimem kernel (model/serve/allreduce.py [vllmsymm]); 0.10.0 (v0.4) stays on custom
    all-reduce. The policy's 4,096-wide hidden state: 16 sequences (128 KiB) stay, 64 (512 KiB) move."""
    from gclc.model.rl.stacks import STACKS
    from gclc.model.serve import allreduce
    part = JOB.partition("h100")
    layout = gen.GenLayout("h100", ServeConfig(8, 64), 1)
    kernels = {name: gen.build(JOB.policy, part, layout, Engine(all_reduce="vllm",
                                                                fallback_all_reduce=s.engine_fallback_all_reduce))
               for name, s in STACKS.items()}
    calls = 2 * JOB.policy.layers
    assert JOB.policy.hidden * 2 * 32 == allreduce.CUSTOM_LIMITS["9.0"][8]
    small = {name: r._token_costs(16)[5] for name, r in kernels.items()}
    assert small["nemo_rl"] == small["nemo_rl_0_4"]
    large = {name: r._token_costs(64)[5] for name, r in kernels.items()}
    # multimem's 11 us, floored by custom all-reduce's one-shot price at the 256 KiB limit (11.07 us: [aic]'s
    # 128 KiB row and 128 KiB more at 7 peer reads a byte, allreduce.beyond), a call vLLM's limit says is no faster
    limit = allreduce.CUSTOM_LIMITS["9.0"][8]
    floor = allreduce.measured("vllm", limit, 8, graphed=True, under=limit)
    symm = allreduce.measured("symm_mem", 64 * JOB.policy.hidden * 2, 8)
    assert large["nemo_rl"] == calls * max(symm, floor) and abs(floor / symm - 1) < 0.01
    # a decode step, captured in a CUDA graph: custom all-reduce's graph-captured price ([aic])
    assert large["nemo_rl_0_4"] == calls * allreduce.measured("vllm", 64 * JOB.policy.hidden * 2, 8, graphed=True) > large["nemo_rl"]


def test_barring_nvls_and_sharp_never_speeds_a_replica_across_hosts():
    """A TP group over two H100 hosts runs its all-reduce through NCCL: without the switches'
    reduction its decode collectives cost no less, and more where the tiers reduce in-switch."""
    part = JOB.partition("h100")
    gpus = part.node.gpus        # two DGX H100 in tests/data/rl_small.gcl
    layout = gen.GenLayout("h100", ServeConfig(2 * gpus, 64), 1)
    free, barred = (gen.build(JOB.policy, part, layout, Engine(nccl_nvls=f, nccl_collnet=f)) for f in (True, False))
    costs = [(barred._token_costs(d)[5], free._token_costs(d)[5]) for d in (1, 16, 64)]
    assert all(b >= f > 0 for b, f in costs)
    assert any(b > f for b, f in costs), "NVLink4 and NDR declare in-switch reduction: barring it costs"


@settings(max_examples=scaled_examples(40), deadline=None)
@given(requests, st.sampled_from(["h100", "a100"]), st.sampled_from([1, 2]), st.integers(1, 3),
       st.sampled_from([8, 64]), st.sampled_from([0.0, 0.5]), st.floats(1.0, 6.0))
def test_the_bounds_hold_where_the_cache_serializes_the_samples(reqs, part, tp, replicas, batch, share, room):
    """A cache of `room` times the longest sample (so a replica holds a few at once, as a 70B
    policy at tp=2 does on an 80 GB GPU): the cache-area bound (`_cache_area`) is still below
    the simulated times."""
    layout = gen.GenLayout(part, ServeConfig(tp, batch), replicas)
    r = gen.build(JOB.policy, JOB.partition(part), layout, Engine(prefix_share=share))
    longest = max(r.kv.tokens_held(q.prompt, q.output) for q in reqs)
    limit = r.memory(0, r.engine.chunk, 0) + room * longest * r.kv.per_token_per_gpu()
    kv = gen.kv_capacity(r, limit)
    if kv < longest:
        return
    out = gen.simulate_generation(r, layout, reqs, limit)
    makespan, stream = gen.bound(r, layout, reqs, kv)
    assert makespan <= out.makespan * (1 + 1e-9)
    assert stream <= out.stream * (1 + 1e-9)


paused_engines = st.builds(
    Engine, prefix_share=st.sampled_from([0.0, 0.5]), preemption=st.sampled_from(["recompute", "swap", "reserve"]),
    mixed=st.booleans(), scheduler_steps=st.sampled_from([1, 4]), chunk=st.sampled_from([256, 8192]),
    draft=st.sampled_from([0, 3]), acceptance=st.sampled_from([0.0, 0.7]))


@settings(max_examples=scaled_examples(40), deadline=None)
@given(requests, st.sampled_from(["h100", "a100"]), st.sampled_from([1, 2]), st.integers(1, 3),
       st.sampled_from([1, 8, 64]), paused_engines, st.floats(1.0, 6.0), st.lists(st.floats(0.0, 1.2), max_size=6))
def test_a_paused_runs_bound_never_exceeds_its_finished_makespan(reqs, part, tp, replicas, batch, engine, room,
                                                                pauses):
    """`GenerationRun.least` at any pause (the clock, and each busy replica's work left: its
    longest sample's iterations, its cache area over the capacity, its decode steps at the
    cheapest cost a step) is no more than the makespan the run ends with, on a cache of `room`
    times the longest sample (where preemption thrashes) and for every engine's schedule."""
    layout = gen.GenLayout(part, ServeConfig(tp, batch), replicas)
    r = gen.build(JOB.policy, JOB.partition(part), layout, engine)
    longest = max(r.kv.tokens_held(q.prompt, q.output) for q in reqs)
    limit = r.memory(0, r.engine.chunk, 0) + room * longest * r.kv.per_token_per_gpu()
    run = gen.begin_generation(r, layout, reqs, limit, kept={})
    if not isinstance(run, gen.GenerationRun):
        return
    whole = gen.simulate_generation(r, layout, reqs, limit)
    bounds = []
    for share in sorted(pauses):
        run.advance(share * whole.makespan)
        bounds.append(run.least()[0])
    assert run.finish() == whole
    assert all(b <= whole.makespan for b in bounds), (bounds, whole.makespan)


def test_a_paused_run_that_thrashes_is_bounded_by_the_work_it_has_left():
    """64 samples through a cache of twice the longest, paused at a tenth of its makespan: the
    clock says a tenth, the work each replica has left says most of it (what lets the search
    drop such a layout early: solver/rl/search.py `_advance`)."""
    reqs = tuple(Request(0.0, 500, 800) for _ in range(64))
    layout = gen.GenLayout("h100", ServeConfig(1, 64), 1)
    r = gen.build(JOB.policy, JOB.partition("h100"), layout, Engine())
    limit = r.memory(0, r.engine.chunk, 0) + 2 * 1300 * r.kv.per_token_per_gpu()
    whole = gen.simulate_generation(r, layout, reqs, limit)
    run = gen.begin_generation(r, layout, reqs, limit)
    run.advance(0.1 * whole.makespan)
    assert run.run.least_e2e() < 0.2 * whole.makespan
    assert 0.6 * whole.makespan <= run.least()[0] <= whole.makespan


def test_a_cache_that_holds_two_samples_bounds_the_generation_by_its_serial_decodes():
    """32 equal samples through a cache of twice the longest: they decode about two at a time.
    The bound says so (it was the lone sample's tail, 7 % of the simulated time; a 70B policy at
    tp=2 was then simulated for 4 s a layout that the bound now rules out)."""
    reqs = tuple(Request(0.0, 500, 800) for _ in range(32))
    layout = gen.GenLayout("h100", ServeConfig(1, 64), 1)
    r = gen.build(JOB.policy, JOB.partition("h100"), layout, Engine())
    longest = max(r.kv.tokens_held(q.prompt, q.output) for q in reqs)
    limit = r.memory(0, r.engine.chunk, 0) + 2 * longest * r.kv.per_token_per_gpu()
    out = gen.simulate_generation(r, layout, reqs, limit)
    makespan, _ = gen.bound(r, layout, reqs, gen.kv_capacity(r, limit))
    assert 0.4 * out.makespan <= makespan <= out.makespan


long_prompts = st.lists(st.tuples(st.integers(1, 20000), st.integers(1, 60)), min_size=1, max_size=12).map(
    lambda pairs: tuple(Request(0.0, p, o) for p, o in pairs))


@settings(max_examples=scaled_examples(25), deadline=None)
@given(long_prompts, st.sampled_from(["h100", "a100"]), st.sampled_from([1, 2]), st.integers(1, 3),
       st.sampled_from([0.0, 0.5]))
def test_the_bounds_hold_where_prompts_dominate(reqs, part, tp, replicas, share):
    """Long prompts and short answers: the prefill bound (`_prefill_work`: the fresh prompt
    tokens at the cheapest prompt-only per-token cost) stays below the simulated times."""
    layout = gen.GenLayout(part, ServeConfig(tp, 64), replicas)
    r = gen.build(JOB.policy, JOB.partition(part), layout, Engine(prefix_share=share))
    limit = JOB.memory_of(JOB.partition(part))
    kv = gen.kv_capacity(r, limit)
    if kv < max(r.kv.tokens_held(q.prompt, q.output) for q in reqs):
        return
    out = gen.simulate_generation(r, layout, reqs, limit)
    makespan, stream = gen.bound(r, layout, reqs, kv)
    assert makespan <= out.makespan * (1 + 1e-9) and stream <= out.stream * (1 + 1e-9)
    busiest = max(gen._prefill_work(r, gen.ShareTerms.of(r, s, 64).fresh) for s in gen.shares(reqs, replicas) if s)
    assert busiest <= makespan


@settings(max_examples=scaled_examples(20), deadline=None)
@given(requests, st.sampled_from(["h100", "a100"]), st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8]),
       st.sampled_from(["bf16", "fp8"]), st.integers(1, 4), st.sampled_from([1, 8, 64, 1024]),
       st.sampled_from([0.3, 0.6, 1.0]), st.sampled_from([0.0, 0.5]))
def test_cache_areas_kept_by_their_key_give_the_bounds_found_afresh(reqs, part, tp0, tp, precision, replicas, batch,
                                                                     memory, share):
    """The search keeps each share's cache area by `areas_key` (not the tp, the precision nor
    the batch) and reads it for every layout and memory bound of that key, and the shares' sums
    (`ShareTerms`) by that key and the batch: the bounds are the very ones computed afresh,
    whichever layout asked first."""
    first = gen.GenLayout(part, ServeConfig(tp0, 64, precision=precision), replicas)
    layout = gen.GenLayout(part, ServeConfig(tp, batch), replicas)
    r0 = gen.build(JOB.policy, JOB.partition(part), first, Engine(prefix_share=share))
    r = gen.build(JOB.policy, JOB.partition(part), layout, Engine(prefix_share=share))
    assert gen.areas_key(r0, replicas) == gen.areas_key(r, replicas)
    kept = gen.cache_areas(r0, reqs, replicas)
    kv = gen.kv_capacity(r, memory * JOB.memory_of(JOB.partition(part)))
    assert kept == [gen._cache_area(r, s) for s in gen.shares(reqs, replicas)]
    assert gen.bound(r, layout, reqs, kv, 1, kept) == gen.bound(r, layout, reqs, kv, 1)
    sums: dict = {}
    other = gen.GenLayout(part, ServeConfig(tp0, batch), replicas)      # another tp, the same batch
    r0 = gen.build(JOB.policy, JOB.partition(part), other, Engine(prefix_share=share))
    gen.bound(r0, other, reqs, gen.kv_capacity(r0, JOB.memory_of(JOB.partition(part))), 1, kept, sums)
    assert len(sums) == 1       # the next layout of that key and batch reads these
    assert gen.bound(r, layout, reqs, kv, 1, kept, sums) == gen.bound(r, layout, reqs, kv, 1)
