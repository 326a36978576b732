"""`gclc export --to sglang`, read and checked by SGLang 0.5.23 itself: `prepare_server_args`
(its argparse, and its own merger for the `--config` YAML), `ServerArgs.resolve_once` and
`check_server_args`, in one subprocess (tests/views/sglang_real.py names the stubs:
torchvision's stand-in, a `config.json` checkpoint, SGLang's CPU device)."""

from __future__ import annotations

import functools

import attrs
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gclc.compiler.driver import check_file
from gclc.views.export import ExportError, export
from gclc.views.export import sglang
from gclc.views.export.jobs import job_entity, job_plan
from gclc.views.export.sglang import pool_arguments
from gclc.views.export.vllm import pools, words as flag_words

from .test_export_vllm import HEAD, bash_array, hf_config, node_words, plan_crossings

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ROOT / ".venv" / "engines"
SERVE = ROOT / "examples" / "deepseek_v3_serve.gcl"
DENSE = ROOT / "tests" / "data" / "serve_cost.gcl"   # Llama 3.1 8B on 2 DGX H100
SETTINGS = ["nodes=4", "demand=4"]   # 32 H100: 16-GPU DeepSeek-V3 replicas (demand 2 plans pp = 2 since issue 28's host power)

if not (ENGINES / "sglang" / "sglang" / "srt" / "server_args.py").exists() or not (ENGINES / "vllm").exists():
    pytest.skip("SGLang 0.5.23 (and vLLM's folder) are installed by .ci/setup into .venv/engines",
                allow_module_level=True)


def _design(path: Path, settings=SETTINGS):
    result = check_file(str(path), settings)
    assert result.design is not None, result.diagnostics
    return result.design


@functools.cache
def _plans(directory: str) -> dict[str, object]:
    """{case: design}: the example's plan (made with SGLang's profile), the same design
    disaggregated (a pool takes pipeline stages, which the profile plans without the overlap
    scheduler, as SGLang runs them), and a dense GQA model (Llama 3.1 8B) planned for SGLang."""
    disaggregated, llama = Path(directory) / "disaggregated.gcl", Path(directory) / "llama.gcl"
    disaggregated.write_text(SERVE.read_text().replace("kv_precision = fp8", "kv_precision = fp8\n    mode = disaggregated"))
    llama.write_text(DENSE.read_text().replace("output = 200", "output = 200\n  engine { profile = sglang }"))
    return {"aggregated": _design(SERVE), "disaggregated": _design(disaggregated), "llama": _design(llama, [])}


@functools.cache
def _served(directory: str, case: str):
    """The serve plan of `case` (of `_plans`), planned once."""
    return job_plan(job_entity(_plans(directory)[case], None)).served


def _deepep(directory: str):
    """(served, side, role): the aggregated plan's pool as it would run with DeepEP's normal kernels
    (`dispatcher = deepep`, which the engine plans without CUDA graphs) on GPUs holding whole experts."""
    served = _served(directory, "aggregated")
    engine = attrs.evolve(served.decode.replica.engine, dispatcher="deepep", moe_path="grouped", graph_batch=0)
    return served, attrs.evolve(served.decode, replica=attrs.evolve(served.decode.replica, engine=engine)), "serving"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("sglang")


@pytest.fixture(scope="module")
def verdicts(root):
    """Every case through SGLang in one process: {case name: (argv, verdict)}."""
    cases = {}
    for plan, design in _plans(str(root)).items():
        (root / plan / "checkpoint").mkdir(parents=True)
        model = job_entity(design, None, "serve").get("model")
        (root / plan / "checkpoint" / "config.json").write_text(json.dumps(hf_config(model)))
        stub = ["--model-path", str(root / plan / "checkpoint"), "--skip-tokenizer-init", "--device", "cpu"]
        files = export("sglang", design, source=f"{plan}.gcl")
        for name, text in files.items():
            (root / plan / name).write_text(text)
        for role in [n.removeprefix("sglang-").removesuffix(".yaml") for n in files if n.endswith(".yaml")]:
            words = bash_array(root / plan / "sglang.args", f"SGLANG_{role.upper()}_ARGS")
            cases[f"{plan}/{role}/args"] = words + stub
            if plan != "aggregated":   # the YAML of one pool per design: SGLang's import and resolution are slow
                continue
            cases[f"{plan}/{role}/yaml"] = ["--config", str(root / plan / f"sglang-{role}.yaml")] + stub
    good = cases["aggregated/serving/args"]
    chunk = good.index("--chunked-prefill-size") + 1
    # not a whole number of 64-token pages, nor once SGLang divides it over 16 attention DP ranks (513)
    cases["negative/chunk"] = good[:chunk] + ["8208"] + good[chunk + 1:]
    cases["negative/unknown"] = good + ["--num-scheduler-steps", "4"]      # vLLM's V0 flag, not SGLang's
    backend = good.index("--moe-a2a-backend") + 1    # vLLM's name for the gather, not one of SGLang's backends
    cases["negative/allgather"] = good[:backend] + ["allgather"] + good[backend + 1:]
    cases["deepep/serving/args"] = flag_words(pool_arguments(*_deepep(str(root)))) + good[-5:]
    # a replica over two nodes: the second node's launch (SGLang's resolution is slow: one node)
    node = node_words(root / "aggregated" / "sglang.args", "sglang", "serving", 1)
    cases["aggregated/serving/node1"] = good + node
    cases["aggregated/serving/node0"] = good + node_words(root / "aggregated" / "sglang.args", "sglang", "serving", 0)
    staged = bash_array(root / "disaggregated" / "sglang.args", "SGLANG_PREFILL_ARGS")   # pipeline stages over 2 nodes
    for rank in (0, 1):
        cases[f"disaggregated/prefill/node{rank}"] = staged + node_words(
            root / "disaggregated" / "sglang.args", "sglang", "prefill", rank) + cases["disaggregated/prefill/args"][-5:]
    at = node.index("--nnodes") + 1     # three nodes cannot hold equal shares of tp x pp = 16
    cases["negative/nnodes3"] = good + node[:at] + ["3"] + node[at + 1:]
    tools = {k: "sglang" for k in cases}
    if (ENGINES / "dynamo").exists():   # `--to dynamo` of the SGLang-planned designs: Dynamo's SGLang worker
        for plan in ("aggregated", "disaggregated"):
            (root / plan / "dynamo.args").write_text(export("dynamo", _plans(str(root))[plan],
                                                            source=f"{plan}.gcl")["dynamo.args"])
            stub = ["--model-path", str(root / plan / "checkpoint"), "--skip-tokenizer-init", "--device", "cpu"]
            for role in ["serving"] if plan == "aggregated" else ["prefill", "decode"]:
                cases[f"dynamo/{plan}/{role}"] = bash_array(root / plan / "dynamo.args", f"DYNAMO_{role.upper()}_ARGS") + stub
                tools[f"dynamo/{plan}/{role}"] = "dynamo.sglang"
        # SGLang accepts it; Dynamo's integration refuses it (it normalizes request priority itself)
        cases["negative/dynamo_priority"] = cases["dynamo/aggregated/serving"] + ["--schedule-low-priority-values-first"]
        cases["dynamo/aggregated/serving/node1"] = cases["dynamo/aggregated/serving"] + node_words(
            root / "aggregated" / "dynamo.args", "dynamo", "serving", 1)
        tools["dynamo/aggregated/serving/node1"] = "dynamo.sglang"
        tools["negative/dynamo_priority"] = "dynamo.sglang"
    request = root / "request.json"
    request.write_text(json.dumps([{"name": k, "argv": v, "tool": tools[k]} for k, v in cases.items()]))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ENGINES / e) for e in ("dynamo", "sglang", "vllm")),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "SGLANG_LOG_LEVEL": "error", "DYN_LOG": "error"}
    run = subprocess.run([sys.executable, str(Path(__file__).with_name("sglang_real.py")), str(request)],
                         capture_output=True, text=True, env=env, timeout=300, cwd=root)
    lines = [json.loads(line.removeprefix("VERDICT ")) for line in run.stdout.splitlines() if line.startswith("VERDICT ")]
    assert len(lines) == len(cases), run.stderr[-3000:]
    return {v["name"]: (cases[v["name"]], v) for v in lines}


def _flag(words: list[str], flag: str, default=None) -> str:
    return words[words.index(flag) + 1] if flag in words else default


def test_sglang_accepts_every_pool_as_the_plan_states_it(verdicts):
    """SGLang's resolved arguments of each pool, from the array and from the YAML alike, hold
    what the array states; disaggregated pools take their role and NIXL."""
    pools = [n for n in verdicts if not n.startswith(("negative/", "dynamo/")) and "node" not in n]
    assert {n.rsplit("/", 1)[0] for n in pools} == {"aggregated/serving", "disaggregated/prefill",
                                                     "disaggregated/decode", "llama/serving", "deepep/serving"}
    for name in pools:
        argv, verdict = verdicts[name]
        assert "error" not in verdict, f"{name}: {verdict.get('error')}"
        got, args = verdict["args"], verdicts[name.rsplit("/", 1)[0] + "/args"][0]
        flag = functools.partial(_flag, args)
        for key, f in (("tp_size", "--tp-size"), ("pp_size", "--pp-size"), ("max_running_requests", "--max-running-requests"),
                       ("chunked_prefill_size", "--chunked-prefill-size"), ("page_size", "--page-size"),
                       ("context_length", "--context-length")):
            assert got[key] == int(flag(f)), (name, key)
        assert (got["attn_dp_size"], got["ep_size"]) == (int(flag("--attn-dp-size", 1)), int(flag("--ep-size", 1))), name
        assert got["mem_fraction_static"] == pytest.approx(float(flag("--mem-fraction-static")))
        assert (got["kv_cache_dtype"], got["quantization"]) == (flag("--kv-cache-dtype"), flag("--quantization"))
        assert got["disable_radix_cache"] and not got["enable_mixed_chunk"]
        assert got["disable_overlap_schedule"] == ("--disable-overlap-schedule" in args)
        role = name.split("/")[1]
        assert got["disaggregation_mode"] == (role if role in ("prefill", "decode") else "null")
        if role != "serving":
            assert got["disaggregation_transfer_backend"] == "nixl"
    # the plan overlaps the host's work on single-stage pools and not on staged ones, as SGLang runs them
    disaggregated = [n for n in pools if n.startswith("disaggregated/")]
    staged = [n for n in disaggregated if verdicts[n][1]["args"]["pp_size"] > 1]
    assert staged and all(verdicts[n][1]["args"]["disable_overlap_schedule"] == (n in staged) for n in disaggregated)
    assert verdicts["aggregated/serving/args"][1]["args"]["kv_cache_dtype"] == "fp8_e4m3"


def test_the_exported_replica_is_the_plans(verdicts, root):
    """What SGLang made of the array is the planned replica: TP = tp x ep with ep attention
    groups, experts TP-sharded within each (the sglang profile's MoE path), the batch."""
    best = _served(str(root), "aggregated").decode.replica.config
    got = verdicts["aggregated/serving/args"][1]["args"]
    assert (got["tp_size"], got["attn_dp_size"], got["ep_size"], got["pp_size"]) == (best.tp * best.ep, best.ep,
                                                                                     best.ep, best.pp)
    assert (got["max_running_requests"], got["chunked_prefill_size"], got["page_size"]) == (best.batch, 8192, 64)
    assert got["mem_fraction_static"] == pytest.approx(0.9)   # `memory <= 90%`
    assert not got["disable_overlap_schedule"]   # the sglang profile overlaps the host's work


def test_sglang_dispatches_with_deepeps_normal_kernels_where_the_plan_does(verdicts, root):
    """`dispatcher = deepep` reaches SGLang's resolved arguments as its DeepEP backend in normal mode (one
    send per GPU holding a token's experts, as the plan prices it) over the replica's expert-parallel GPUs;
    the plan's own launch keeps SGLang's default (no DeepEP)."""
    argv, verdict = verdicts["deepep/serving/args"]
    assert "error" not in verdict, verdict.get("error")
    got, c = verdict["args"], _deepep(str(root))[1].replica.config
    assert (got["moe_a2a_backend"], got["deepep_mode"]) == ("deepep", "normal")
    assert got["ep_size"] == got["tp_size"] == c.tp * c.ep
    assert verdicts["aggregated/serving/args"][1]["args"]["moe_a2a_backend"] != "deepep"


def test_sglang_gathers_every_groups_tokens_where_the_plan_does(verdicts, root):
    """The sglang profile's `dispatcher = allgather` (model/serve/engines.py [sgldpa]) reaches SGLang as its
    default backend under data-parallel attention: --moe-a2a-backend none with several attention groups,
    whose gather over the TP group and reduce-scatter back the plan priced on the stage's tp x ep GPUs; the
    DeepEP pool is the control (another backend, another price)."""
    served = _served(str(root), "aggregated")
    r = served.decode.replica
    assert (r.engine.dispatcher, r.engine.gather_stage) == ("allgather", True) and r.config.ep > 1
    argv, verdict = verdicts["aggregated/serving/args"]
    got = verdict["args"]
    # the flag itself, not SGLang's resolved default: the export must write it
    assert argv[argv.index("--moe-a2a-backend") + 1] == "none"
    assert (got["moe_a2a_backend"], got["attn_dp_size"], got["tp_size"]) == ("none", r.config.ep, r.config.tp * r.config.ep)
    assert verdicts["deepep/serving/args"][1]["args"]["moe_a2a_backend"] == "deepep"
    deepep = _deepep(str(root))[1].replica
    assert deepep._expert_exchange(4096.0) != pytest.approx(r._expert_exchange(4096.0), rel=1e-3)


def test_sglang_rejects_the_negative_controls(verdicts):
    assert "chunked_prefill_size must be divisible by page_size" in verdicts["negative/chunk"][1]["error"]
    assert "SystemExit" in verdicts["negative/unknown"][1]["error"]
    assert "SystemExit" in verdicts["negative/allgather"][1]["error"]
    assert "tp_size must be divisible by number of nodes" in verdicts["negative/nnodes3"][1]["error"]


def test_a_replica_over_two_nodes_launches_on_the_second_as_sglang_reads_it(verdicts):
    """The 16-GPU replica on 8-GPU nodes: SGLang (and Dynamo's SGLang worker) read the second
    node's flags as the replica's node count, that node's rank and the head's rendezvous address,
    and otherwise the pool's own arguments."""
    for name in ("aggregated/serving/node1", "dynamo/aggregated/serving/node1"):
        verdict = verdicts.get(name, (None, {"args": None}))[1]
        if verdict["args"] is None and name.startswith("dynamo/"):
            continue    # Dynamo not installed
        assert "error" not in verdict, f"{name}: {verdict.get('error')}"
        got = dict(verdict["args"])
        got.pop("component", None)
        assert (got.pop("nnodes"), got.pop("node_rank"), got.pop("dist_init_addr")) == (2, 1, f"{HEAD}:5000"), name
        assert got.pop("ranks")["pp"] == [0]    # one stage, its TP group over both nodes
        alone = dict(verdicts["aggregated/serving/args"][1]["args"])
        assert (alone.pop("nnodes"), alone.pop("node_rank"), alone.pop("dist_init_addr"), alone.pop("ranks")) == \
            (1, 0, None, None)
        assert got == alone, name
    assert got["tp_size"] * got["pp_size"] == 16


def sglang_crossings(verdicts, prefix: str) -> dict[str, bool]:
    """Which groups SGLang's launcher (`_calculate_rank_ranges`: the pipeline stages and TP ranks
    each node runs, tests/views/sglang_real.py) puts on two nodes: a TP rank's stages (the
    pipeline sends), a stage's TP ranks (the expert all-to-all, attention DP inside the TP group),
    an attention group's TP ranks (its all-reduce)."""
    nodes = [verdicts[f"{prefix}/node{rank}"][1] for rank in (0, 1)]
    assert all("error" not in v for v in nodes), nodes
    args = nodes[0]["args"]
    node_of = {(s, k): v["args"]["node_rank"] for v in nodes for s in v["args"]["ranks"]["pp"] for k in v["args"]["ranks"]["tp"]}
    stages, size, attn_tp = range(args["pp_size"]), range(args["tp_size"]), args["tp_size"] // args["attn_dp_size"]
    assert sorted(node_of) == [(s, k) for s in stages for k in size]   # every rank on exactly one node
    spread = lambda keys: len({node_of[key] for key in keys}) > 1   # noqa: E731
    return {"tp": any(spread([(s, k) for k in size if k // attn_tp == g]) for s in stages for g in range(args["attn_dp_size"])),
            "ep": any(spread([(s, k) for k in size]) for s in stages), "pp": any(spread([(s, k) for s in stages]) for k in size)}


def test_sglang_places_each_group_where_the_plan_costs_it(verdicts, root):
    """One answer for a replica over several nodes: the stages and TP ranks SGLang's own launcher
    assigns each node cross the node boundary exactly where the plan (made with the `sglang`
    profile) costs and states it: a replica of one stage spreads its expert all-to-all over both
    nodes; one of two stages puts a stage on each node, so only the pipeline sends cross. The
    control: the two-stage replica laid out in vLLM's order (stages on one node, attention groups
    spread) is another answer, which the comparison rejects."""
    from gclc.model.serve import engines
    from gclc.model.serve.inference import replica

    single = _served(str(root), "aggregated")
    staged = dict(pools(_served(str(root), "disaggregated")))["prefill"].replica
    node_gpus = single.partition.node.gpus
    cases = {"aggregated/serving": single.decode.replica, "disaggregated/prefill": staged}
    for prefix, r in cases.items():
        assert sglang_crossings(verdicts, prefix) == plan_crossings(r, node_gpus), prefix
    assert plan_crossings(staged, node_gpus) == {"tp": False, "ep": False, "pp": True} and staged.config.pp == 2
    order = engines.profile("vllm_v1").engine().rank_order
    as_vllm = replica(staged.shape, staged.config, staged.partition, attrs.evolve(staged.engine, rank_order=order))
    assert plan_crossings(as_vllm, node_gpus) != sglang_crossings(verdicts, "disaggregated/prefill")


def test_what_sglang_cannot_run_is_refused(root):
    """A plan made for another engine, a pipeline planned with the host's work overlapped
    (SGLang turns the overlap off under PP), a train job: refused, with the reason."""
    dsa = check_file(str(ROOT / "examples" / "custom_dsa.gcl"), ["cubes=4"]).design
    with pytest.raises(ExportError, match="made for the `vllm_v1` engine"):
        export("sglang", dsa, job="chat_405b")
    served = _served(str(root), "disaggregated")
    staged = [side for _, side in pools(served) if side.replica.config.pp > 1]
    assert staged, "the disaggregated plan has no pipeline stages any more: pick another case"
    overlapped = attrs.evolve(staged[0].replica, engine=attrs.evolve(staged[0].replica.engine, overlap_pp=True))
    with pytest.raises(ExportError, match="turns off under pipeline parallelism"):
        sglang.pool_arguments(served, attrs.evolve(staged[0], replica=overlapped), "prefill")
    train = check_file(str(ROOT / "examples" / "a100_cluster.gcl"), []).design
    with pytest.raises(ExportError, match="describe a serve job, and `gpt3_175b` is a train job"):
        export("sglang", train, job="gpt3_175b")
    # every routed copy sent in an all-to-all, over several attention groups or whole experts in one: no
    # SGLang backend sends so (its default gathers, DeepEP dedupes); TP-sharded experts in one group move nothing
    aggregated = _served(str(root), "aggregated")
    side = aggregated.decode
    assert side.replica.config.ep > 1, "the aggregated plan has one attention group now: pick another case"
    c = side.replica.config
    one = attrs.evolve(c, tp=c.tp * c.ep, ep=1)   # the replica's GPUs as one attention group
    for path, config in (("tp_sharded", c), ("grouped", one)):
        sending = attrs.evolve(side.replica, config=config,
                               engine=attrs.evolve(side.replica.engine, dispatcher="alltoall", moe_path=path))
        with pytest.raises(ExportError, match="SGLang 0.5.23 has no backend that does"):
            sglang.pool_arguments(aggregated, attrs.evolve(side, replica=sending), "serving")
    # DeepEP between GPUs of TP-sharded experts: refused, pointing at what SGLang runs (not at the all-to-all)
    sharded = attrs.evolve(side.replica, config=attrs.evolve(c, tp=2, ep=c.ep // 2),
                           engine=attrs.evolve(side.replica.engine, dispatcher="deepep", graph_batch=0))
    with pytest.raises(ExportError, match=r"TP-sharded .* `dispatcher = allgather`"):
        sglang.pool_arguments(aggregated, attrs.evolve(side, replica=sharded), "serving")
    one_group = attrs.evolve(side.replica, config=one, engine=attrs.evolve(side.replica.engine, dispatcher="alltoall"))
    assert ("--moe-a2a-backend", "none") not in sglang.pool_arguments(aggregated, attrs.evolve(side, replica=one_group),
                                                                      "serving")


def test_dynamo_runs_each_pool_as_the_sglang_export_states_it(verdicts):
    """`--to dynamo` of an SGLang plan through Dynamo's SGLang worker (ai-dynamo 1.6.1's own
    parse_args, then SGLang's resolution and checks of the ServerArgs it made): each pool's
    resolved arguments are the SGLang export's of the same pool, and its Dynamo component is the
    pool's role (`prefill` for the prefill pool, `backend` otherwise)."""
    if not (ENGINES / "dynamo").exists():
        pytest.skip("ai-dynamo 1.6.1 is installed by .ci/setup into .venv/engines/dynamo")
    for name in ("aggregated/serving", "disaggregated/prefill", "disaggregated/decode"):
        verdict = verdicts[f"dynamo/{name}"][1]
        assert "error" not in verdict, f"{name}: {verdict.get('error')}"
        got = dict(verdict["args"])
        assert got.pop("component") == ("prefill" if name.endswith("prefill") else "backend")
        assert got == verdicts[f"{name}/args"][1]["args"], name
    assert "not supported in Dynamo's SGLang integration" in verdicts["negative/dynamo_priority"][1]["error"]
