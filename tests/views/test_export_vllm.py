"""`gclc export --to vllm`, read and checked by vLLM 0.33.0 itself: its `FlexibleArgumentParser`
with `EngineArgs.add_cli_args` reads the exported bash arrays and the `--config` YAML files,
and `create_engine_config` validates them against the model's config (tests/views/vllm_real.py
says how, and names the stubs: a `config.json` of the design's model for the checkpoint, and
vLLM's CPU platform for the GPU). vLLM is imported once per session, in one subprocess that
checks every case (its import alone takes about 30 s)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from gclc.compiler.driver import check_file, check_text
from gclc.model.shape import ModelShape
from gclc.views.export import ExportError, export
from gclc.model.serve.engines import profile
from gclc.model.serve.inference import ServeConfig
from gclc.views.export.jobs import job_entity, job_plan
from gclc.views.export.replica_nodes import vllm_node_flags
from gclc.views.export.vllm import replica_arguments, words as flag_words

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / ".venv" / "engines" / "vllm"
DYNAMO = ROOT / ".venv" / "engines" / "dynamo"   # ai-dynamo 1.6.1 and its runtime (.ci/setup)
SERVE = ROOT / "examples" / "deepseek_v3_serve.gcl"
SETTINGS = ["nodes=4", "demand=2"]   # 32 H100: 16-GPU DeepSeek-V3 replicas
TP_ONLY = ServeConfig(tp=8, batch=64, precision="fp8", ep=1, pp=2, kv_precision="fp8")
# replicas of several attention groups and pipeline stages over two 8-GPU nodes, launched as the
# export writes them: where vLLM puts each group is compared with where the plan costs it
PLACED = {"dp8_pp2": ServeConfig(tp=1, batch=64, precision="fp8", ep=8, pp=2, kv_precision="fp8"),
          "tp2_dp4_pp2": ServeConfig(tp=2, batch=64, precision="fp8", ep=4, pp=2, kv_precision="fp8")}
MTP_ENGINE = profile("vllm_v1").engine(draft=1, acceptance=0.8)   # DeepSeek-V3's MTP head drafting one token
DEEPEP_ENGINE = profile("vllm_v1").engine(dispatcher="deepep")
RL = ROOT / "tests" / "data" / "rl_small.gcl"   # GRPO of an 8B policy on two DGX H100 and two DGX A100

if not (ENGINE / "vllm" / "engine" / "arg_utils.py").exists():
    pytest.skip("vLLM 0.33.0 is installed by .ci/setup into .venv/engines/vllm", allow_module_level=True)


def _design(path: Path):
    result = check_file(str(path), SETTINGS)
    assert result.design is not None, result.diagnostics
    return result.design


@functools.cache
def _plans(directory: str) -> dict[str, tuple]:
    """{case: (design, job)}: the example's aggregated plan, the same design disaggregated, and
    the shared cluster's Llama 3 70B chat (a dense GQA model with pipeline stages)."""
    vllm = SERVE.read_text().replace("profile      = sglang", "profile      = vllm_v1")   # planned for vLLM
    aggregated, disaggregated = Path(directory) / "aggregated.gcl", Path(directory) / "disaggregated.gcl"
    aggregated.write_text(vllm)
    disaggregated.write_text(vllm.replace("kv_precision = fp8", "kv_precision = fp8\n    mode = disaggregated"))
    shared = check_file(str(ROOT / "examples" / "shared_cluster.gcl"), []).design
    return {"aggregated": (_design(aggregated), None), "disaggregated": (_design(disaggregated), None),
            "llama": (shared, None),   # the first serve job, after five train jobs
            "rl_apart": (_rl("rl_apart"), "grpo"), "rl_colocated": (_rl("rl_colocated"), "grpo")}   # rl engines


@functools.cache
def _served(directory: str, case: str):
    """The serve plan of `case` (of `_plans`), planned once."""
    design, job = _plans(directory)[case]
    return job_plan(job_entity(design, job, "serve")).served


@functools.cache
def _rl(case: str):
    """The rl design with its pools apart (generation on the A100s, training on the H100s, as
    planned) or colocated (sharing the H100s)."""
    text = RL.read_text()
    if case == "rl_colocated":
        text = text.replace("  staleness    = 1", "  placement = colocated")
    result = check_text(text, str(RL))
    assert result.design is not None, result.diagnostics
    return result.design


def hf_config(model) -> dict:
    """The stub checkpoint: a Hugging Face config.json of the design's model (DeepSeek-V3's
    layout for an MLA mixture of experts, Llama's otherwise); the routing groups are left at
    transformers' DeepseekV3Config defaults (the design does not state them)."""
    s = ModelShape.from_entity(model)
    common = {"hidden_size": s.hidden, "intermediate_size": s.ffn, "num_hidden_layers": s.layers,
              "num_attention_heads": s.heads, "vocab_size": s.vocab,
              "max_position_embeddings": int(model.get("seq")), "torch_dtype": "bfloat16"}
    if not s.is_mla:
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_key_value_heads": s.kv_heads,
                "head_dim": s.head_dim, **common}
    return {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", **common,
            "num_key_value_heads": s.heads, "moe_intermediate_size": s.expert_ffn, "n_routed_experts": s.routed,
            "n_shared_experts": s.shared, "num_experts_per_tok": s.top_k, "first_k_dense_replace": s.dense_layers,
            "kv_lora_rank": s.kv_rank, "q_lora_rank": s.q_rank or None, "qk_rope_head_dim": s.rope_dim,
            "qk_nope_head_dim": s.head_dim, "v_head_dim": s.head_dim, "num_nextn_predict_layers": s.mtp}


def bash_array(args_file: Path, name: str) -> list[str]:
    """The words bash gives the launch line from the exported array."""
    out = subprocess.run(["bash", "-c", f'source "$0"; printf "%s\\0" "${{{name}[@]}}"', str(args_file)],
                         check=True, capture_output=True, text=True).stdout
    return out.split("\0")[:-1]


HEAD = "10.0.0.1"


def node_words(args_file: Path, prefix: str, role: str, rank: int) -> list[str] | None:
    """One node's flags from the exported node function (None where the pool has none: its
    replicas fit in a node)."""
    function, array = f"{prefix}_{role}_node_args", f"{prefix.upper()}_{role.upper()}_NODE_ARGS"
    out = subprocess.run(["bash", "-c", f'source "$0"; declare -F {function} >/dev/null || exit 3; {function} {rank} '
                                        f'{HEAD}; printf "%s\\0" "${{{array}[@]}}"', str(args_file)],
                         capture_output=True, text=True)
    if out.returncode == 3:
        return None
    assert out.returncode == 0, out.stderr
    return out.stdout.split("\0")[:-1]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("vllm")


@pytest.fixture(scope="module")
def verdicts(root):
    """Every case through vLLM in one process: {case name: (argv, verdict)}."""
    cases = {}
    for plan, (design, job) in _plans(str(root)).items():
        (root / plan / "checkpoint").mkdir(parents=True)
        (root / plan / "checkpoint" / "config.json").write_text(json.dumps(hf_config(job_entity(design, job, "serve").get("model"))))
        stub = ["--model", str(root / plan / "checkpoint"), "--load-format", "dummy", "--skip-tokenizer-init"]
        files = export("vllm", design, job=job, source=f"{plan}.gcl")
        for name, text in files.items():
            (root / plan / name).write_text(text)
        for role in [n.removeprefix("vllm-").removesuffix(".yaml") for n in files if n.endswith(".yaml")]:
            words = bash_array(root / plan / "vllm.args", f"VLLM_{role.upper()}_ARGS")
            cases[f"{plan}/{role}/args"] = words + stub
            cases[f"{plan}/{role}/yaml"] = ["--config", str(root / plan / f"vllm-{role}.yaml")] + stub
            for rank in (0, 1):    # a replica over several nodes: its head and a headless node
                node = node_words(root / plan / "vllm.args", "vllm", role, rank)
                if node is not None:
                    cases[f"{plan}/{role}/node{rank}"] = words + node + stub
                    if rank:           # and the YAML with a headless node's flags
                        cases[f"{plan}/{role}/yaml_node{rank}"] = cases[f"{plan}/{role}/yaml"] + node
    cases["negative/sleep"] = cases["rl_colocated/generate/args"]   # the CPU platform cannot sleep: no stub
    good = cases["aggregated/serving/args"]
    tp = good.index("--tensor-parallel-size") + 1
    cases["negative/tp3"] = good[:tp] + ["3"] + good[tp + 1:]   # 128 heads do not split 3 ways
    cases["negative/unknown"] = good + ["--num-scheduler-steps", "4"]   # gone with vLLM's V0 engine
    # the launch the vllm_v1 profile used to be costed for and the export never wrote: no EP flag
    cases["negative/no_ep"] = [w for w in good if w != "--enable-expert-parallel"]
    head = cases["aggregated/serving/node0"]   # three nodes cannot hold equal shares of 16 GPUs
    cases["negative/nnodes3"] = head[:head.index("--nnodes") + 1] + ["3"] + head[head.index("--nnodes") + 2:]
    # a replica of one attention group (TP 8 x PP 2), as the export writes it: experts TP-sharded
    cases["tp_only/serving/args"] = flag_words(replica_arguments("DeepSeekV3", TP_ONLY, profile("vllm_v1").engine(),
                                                            4096, 0.9, "serving", experts=True)) + good[-5:]
    for ceiling in (64, 0):   # a stated CUDA-graph ceiling: --max-cudagraph-capture-size, or --enforce-eager
        cases[f"graphs/{ceiling}/serving/args"] = flag_words(replica_arguments(
            "DeepSeekV3", TP_ONLY, profile("vllm_v1").engine(graph_batch=ceiling), 4096, 0.9, "serving",
            experts=True)) + good[-5:]
    # MTP with one draft token (decode steps of 2 tokens a sequence), as the export writes it, and without
    # the ceiling it writes: vLLM's default then follows max_num_seqs (64 here: 64 x 2 x 2 = 256 tokens)
    mtp = flag_words(replica_arguments("DeepSeekV3", TP_ONLY, MTP_ENGINE, 4096, 0.9, "serving", experts=True))
    cases["graphs/mtp/serving/args"] = mtp + good[-5:]
    at = mtp.index("--max-cudagraph-capture-size")
    cases["graphs/mtp_vllm_default/serving/args"] = mtp[:at] + mtp[at + 2:] + good[-5:]
    # DeepEP's normal kernels (`dispatcher = deepep`) on eight attention groups holding whole experts
    cases["deepep/serving/args"] = flag_words(replica_arguments("DeepSeekV3", PLACED["dp8_pp2"], DEEPEP_ENGINE, 4096,
                                                                0.9, "serving", experts=True)) + good[-5:]
    for name, config in PLACED.items():   # each node of the replica, as its node function launches it
        placed = flag_words(replica_arguments("DeepSeekV3", config, profile("vllm_v1").engine(), 4096, 0.9,
                                              "serving", experts=True))
        for rank in (0, 1):
            cases[f"placed/{name}/node{rank}"] = (placed + vllm_node_flags(2, str(rank), HEAD)
                                                  + ["--headless"] * (rank > 0) + good[-5:])
    tools = {k: "vllm.serve" if "node" in k.rsplit("/", 1)[-1] else "vllm" for k in cases}   # dynamo's: below
    if DYNAMO.exists():
        tools.update(_dynamo_cases(root, cases))
    request = root / "request.json"
    stubbed = {k for k in cases if k.startswith("rl_colocated/")}   # tests/views/vllm_real.py names the stub
    request.write_text(json.dumps([{"name": k, "argv": v, "stubs": ["sleep_mode"] if k in stubbed else [],
                                    "tool": tools[k]} for k, v in cases.items()]))
    env = {**os.environ, "PYTHONPATH": f"{DYNAMO}{os.pathsep}{ENGINE}", "VLLM_TARGET_DEVICE": "cpu",
           "VLLM_LOGGING_LEVEL": "ERROR", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DYN_LOG": "error"}
    run = subprocess.run([sys.executable, str(Path(__file__).with_name("vllm_real.py")), str(request)],
                         capture_output=True, text=True, env=env, timeout=300, cwd=root)
    lines = [json.loads(l.removeprefix("VERDICT ")) for l in run.stdout.splitlines() if l.startswith("VERDICT ")]
    assert len(lines) == len(cases), run.stderr[-3000:]
    return {v["name"]: (cases[v["name"]], v) for v in lines}


def _dynamo_cases(root: Path, cases: dict) -> dict[str, str]:
    """`gclc export --to dynamo` of the vLLM-planned designs, as Dynamo's frontend and vLLM worker
    read them (added to `cases`): {case: tool}. Negative controls: a prefill worker without the
    KV connector (Dynamo's own rule) and the plan's router name where Dynamo wants its own."""
    tools = {}
    for plan in ("aggregated", "disaggregated"):
        design, job = _plans(str(root))[plan]
        (root / plan / "dynamo.args").write_text(export("dynamo", design, job=job, source=f"{plan}.gcl")["dynamo.args"])
        stub = ["--model", str(root / plan / "checkpoint"), "--load-format", "dummy", "--skip-tokenizer-init"]
        roles = ["serving"] if plan == "aggregated" else ["prefill", "decode"]
        for role in ["frontend", *roles]:
            words = bash_array(root / plan / "dynamo.args", f"DYNAMO_{role.upper()}_ARGS")
            cases[f"dynamo/{plan}/{role}"] = words + ([] if role == "frontend" else stub)
            tools[f"dynamo/{plan}/{role}"] = "dynamo.frontend" if role == "frontend" else "dynamo.vllm"
    cases["dynamo/aggregated/serving/node1"] = cases["dynamo/aggregated/serving"] + node_words(
        root / "aggregated" / "dynamo.args", "dynamo", "serving", 1)     # Dynamo's --headless, vLLM's node flags
    tools["dynamo/aggregated/serving/node1"] = "dynamo.vllm"
    prefill = cases["dynamo/disaggregated/prefill"]
    at = prefill.index("--kv-transfer-config")
    cases["negative/dynamo_no_connector"] = prefill[:at] + prefill[at + 2:]
    cases["negative/dynamo_router"] = ["--router-mode", "least_requests"]
    tools.update({"negative/dynamo_no_connector": "dynamo.vllm", "negative/dynamo_router": "dynamo.frontend"})
    return tools


def _flag(words: list[str], flag: str, default=None) -> str:
    return words[words.index(flag) + 1] if flag in words else default


def test_vllm_accepts_every_pool_as_the_plan_states_it(verdicts):
    """vLLM's engine config of each pool, from the bash array and from the YAML alike, holds
    what the array states: TP, DP x EP, PP, sequences, batched tokens, page, cache dtype, share
    of HBM, chunked prefill on, prefix caching off, and NIXL between disaggregated pools."""
    pools = [n for n in verdicts if not n.startswith(("negative/", "rl_", "tp_only/", "dynamo/", "placed/", "graphs/", "deepep/"))
             and "node" not in n]
    assert {n.rsplit("/", 1)[0] for n in pools} == {"aggregated/serving", "disaggregated/prefill",
                                                     "disaggregated/decode", "llama/prefill", "llama/decode"}
    for name in pools:
        verdict = verdicts[name][1]
        assert "error" not in verdict, f"{name}: {verdict.get('error')}"
        got, args = verdict["config"], verdicts[name.rsplit("/", 1)[0] + "/args"][0]
        flag = functools.partial(_flag, args)
        assert (got["tp"], got["pp"], got["dp"]) == (int(flag("--tensor-parallel-size")),
                                                     int(flag("--pipeline-parallel-size")),
                                                     int(flag("--data-parallel-size", 1)))
        assert got["expert_parallel"] == ("--enable-expert-parallel" in args)
        assert got["chunked_prefill"] and not got["prefix_caching"]
        for key, f in (("max_num_seqs", "--max-num-seqs"), ("max_num_batched_tokens", "--max-num-batched-tokens"),
                       ("block_size", "--block-size"), ("max_model_len", "--max-model-len")):
            assert got[key] == int(flag(f)), key
        assert got["gpu_memory_utilization"] == pytest.approx(float(flag("--gpu-memory-utilization")))
        assert got["cache_dtype"] == "fp8" and got["quantization"] == "fp8"   # both designs serve fp8
        disaggregated = name.split("/")[1] in ("prefill", "decode")
        assert (got["kv_connector"], got["kv_role"]) == (("NixlConnector", "kv_both") if disaggregated else (None, None))


def test_the_exported_replica_is_the_plans(verdicts, tmp_path):
    """What vLLM made of the array is the planned replica and the design's engine block."""
    planned = tmp_path / "aggregated.gcl"
    planned.write_text(SERVE.read_text().replace("profile      = sglang", "profile      = vllm_v1"))
    best = job_plan(job_entity(_design(planned), None)).served.decode.replica.config
    got = verdicts["aggregated/serving/args"][1]["config"]
    assert (got["tp"], got["dp"], got["pp"]) == (best.tp, best.ep, best.pp)
    # vLLM's limit is per DP rank (vllm/config/scheduler.py): together the ranks hold the planned batch
    assert got["max_num_seqs"] == -(-best.batch // best.ep) and got["dp"] * got["max_num_seqs"] >= best.batch
    assert (got["max_num_batched_tokens"], got["block_size"], got["max_model_len"]) == (8192, 64, 4096)
    assert got["gpu_memory_utilization"] == pytest.approx(0.9)   # `memory <= 90%`


def test_vllm_lays_out_the_experts_as_the_plan_costs_them(verdicts, root):
    """One answer for MoE: the expert TP and EP sizes vLLM's own FusedMoEParallelConfig.make
    gives each exported MoE pool (from its engine config) are those the plan's cost model used
    (model/serve/moe.py `expert_layout` of the replica's engine): whole experts over TP x DP
    where the replica has several attention groups, TP-sharded over its TP GPUs otherwise. The
    same launch without --enable-expert-parallel lays them out otherwise, so the comparison
    would catch the export and the profile drifting apart again."""
    from gclc.model.serve.moe import expert_layout
    from gclc.views.export.vllm import pools

    checked = 0
    for case in ("aggregated", "disaggregated"):
        for role, side in pools(_served(str(root), case)):
            c, engine = side.replica.config, side.replica.engine
            for form in ("args", "yaml"):
                got = verdicts[f"{case}/{role}/{form}"][1]["config"]["experts"]
                assert (got["tp"], got["ep"]) == expert_layout(engine.moe_path, c.tp, c.ep), (case, role, form)
                checked += 1
            if case == "aggregated":
                assert c.ep > 1 and engine.moe_path == "ep_with_dp"   # the case the flag is for
                drifted = verdicts["negative/no_ep"][1]["config"]["experts"]
                assert (drifted["tp"], drifted["ep"]) == (c.tp * c.ep, 1) != expert_layout(engine.moe_path, c.tp, c.ep)
    assert checked >= 6
    one_group = verdicts["tp_only/serving/args"]
    assert "--enable-expert-parallel" not in one_group[0] and "error" not in one_group[1], one_group[1].get("error")
    got = one_group[1]["config"]["experts"]
    assert (got["tp"], got["ep"]) == expert_layout(profile("vllm_v1").engine().moe_path, TP_ONLY.tp, TP_ONLY.ep) == (8, 1)


def test_vllm_rejects_the_negative_controls(verdicts):
    assert "must be divisible by tensor parallel size (3)" in verdicts["negative/tp3"][1]["error"]
    assert "SystemExit" in verdicts["negative/unknown"][1]["error"]
    assert "Sleep mode is not supported on current platform" in verdicts["negative/sleep"][1]["error"]
    assert "`--nnodes 3` must evenly divide the total world size (16)" in verdicts["negative/nnodes3"][1]["error"]


def test_a_replica_over_several_nodes_launches_on_each_as_vllm_lays_it_out(verdicts, root):
    """Each pool whose replica has more GPUs than a node has a node function, and only those;
    what `vllm serve` makes of the pool's flags with each node's (the head, rank 0, and a
    headless node, rank 1; from the array and the YAML alike): the replica's node count, the
    node's rank and the head's address, one node's GPUs on each node (its data-parallel ranks
    x TP x PP), the nodes' ranks following one another, and otherwise the engine of the pool's
    own flags."""
    from gclc.views.export.vllm import pools

    spanning = 0
    for case in ("aggregated", "disaggregated"):
        served = _served(str(root), case)
        node_gpus = served.partition.node.gpus
        for role, side in pools(served):
            gpus = side.replica.config.gpus
            has_nodes = f"{case}/{role}/node1" in verdicts
            assert has_nodes == (gpus > node_gpus), (case, role)
            if not has_nodes:
                continue
            spanning += 1
            alone = verdicts[f"{case}/{role}/args"][1]["config"]
            for name in (f"{case}/{role}/node0", f"{case}/{role}/node1", f"{case}/{role}/yaml_node1"):
                rank = int(name[-1])
                verdict = verdicts[name][1]
                assert "error" not in verdict, f"{name}: {verdict.get('error')}"
                got = verdict["config"]
                n = got["nodes"]
                assert (n["nnodes"], n["node_rank"], n["master_addr"]) == (gpus // node_gpus, rank, HEAD)
                assert got["headless"] == (rank > 0)
                assert n["dp_local"] * n["world"] == node_gpus and n["dp_local"] * n["nnodes"] == got["dp"]
                assert n["dp_rank"] == rank * n["dp_local"]
                assert {k: v for k, v in got.items() if k not in ("nodes", "headless")} == \
                    {k: v for k, v in alone.items() if k != "nodes"}
    assert spanning == 3
    for role in ("prefill", "decode"):    # the shared cluster's nodes hold 8 GPUs each
        alone = verdicts[f"llama/{role}/args"][1]["config"]
        assert alone["tp"] * alone["pp"] * alone["dp"] <= 8 and f"llama/{role}/node1" not in verdicts


def plan_crossings(r, node_gpus: int) -> dict[str, bool]:
    """Which of replica `r`'s groups the plan costs across a node boundary (on a tier whose
    domains exceed a node): the TP all-reduce, the expert all-to-all (the attention groups of a
    stage), the sends between stages. The plan's stated placement (views/serve.py, the JSON's
    `placement`) must say the same of each dimension."""
    from gclc.views.serve import replica_placement

    beyond = lambda tiers: any(t.group_gpus > node_gpus for t in tiers)   # noqa: E731
    costed = {"tp": beyond(s.tier for s in r.tp_stages), "ep": beyond(s.tier for s in r.ep_stages),
              "pp": beyond(r.pp_hops)}
    stated, named = replica_placement(r), {t.name: t for t in r.partition.tiers}
    assert {d: beyond(named[n] for n in stated[d]["tiers"]) for d in costed} == costed, stated
    return costed


def vllm_crossings(verdicts, prefix: str) -> dict[str, bool]:
    """Which groups vLLM's own process groups (`initialize_model_parallel`) put on two nodes,
    each rank on the node its ParallelConfig starts it on (tests/views/vllm_real.py)."""
    configs = [verdicts[f"{prefix}/node{rank}"][1] for rank in (0, 1)]
    assert all("error" not in c for c in configs), configs
    node_of = {rank: c["config"]["nodes"]["node_rank"] for c in configs for rank in c["config"]["nodes"]["ranks"]}
    groups = configs[0]["config"]["groups"]
    assert configs[0]["config"]["nodes"]["nnodes"] == 2 and groups == configs[1]["config"]["groups"]
    assert sorted(node_of) == sorted(r for g in groups["tp"] for r in g)   # every rank on exactly one node
    return {dim: any(len({node_of[r] for r in g}) > 1 for g in groups[dim]) for dim in ("tp", "ep", "pp")}


def test_vllm_places_each_group_where_the_plan_costs_it(verdicts, root):
    """One answer for a replica over several nodes: the groups vLLM itself forms (its
    `initialize_model_parallel` over the engine config) and the nodes its config starts each rank
    on cross the node boundary exactly where the plan's costs and stated placement say, for the
    exported pools and for replicas of attention groups x pipeline stages (vLLM keeps a DP rank's
    stages on one node and spreads the DP ranks, so the expert all-to-all crosses and the
    pipeline does not); the plan's ranks are vLLM's groups. The control: the same replica laid out
    in SGLang's order (stages across nodes) is another answer, which the comparison rejects."""
    from gclc.model.serve import ranks
    from gclc.model.serve.inference import replica
    from gclc.views.export.vllm import pools

    served = _served(str(root), "aggregated")
    base, node_gpus = served.decode.replica, served.partition.node.gpus
    replicas = {f"placed/{n}": replica(base.shape, c, base.partition, base.engine) for n, c in PLACED.items()}
    for case in ("aggregated", "disaggregated"):
        replicas |= {f"{case}/{role}": side.replica for role, side in pools(_served(str(root), case))}
    for prefix, r in replicas.items():
        assert vllm_crossings(verdicts, prefix) == plan_crossings(r, node_gpus), prefix
        c, order, groups = r.config, r.engine.rank_order, verdicts[f"{prefix}/node0"][1]["config"]["groups"]
        planned_pp = {frozenset(ranks.rank(c, order, t, e, s) for s in range(c.pp)) for t in range(c.tp) for e in range(c.ep)}
        planned_ep = {frozenset(ranks.stage_ranks(c, order, s)) for s in range(c.pp)}
        assert (planned_pp, planned_ep) == ({frozenset(g) for g in groups["pp"]}, {frozenset(g) for g in groups["ep"]})
    pipelined = replicas["placed/dp8_pp2"]
    assert plan_crossings(pipelined, node_gpus) == {"tp": False, "ep": True, "pp": False}
    as_sglang = replica(base.shape, pipelined.config, base.partition, attrs.evolve(base.engine, rank_order=ranks.DEFAULT_ORDER))
    assert plan_crossings(as_sglang, node_gpus) == {"tp": False, "ep": False, "pp": True} != \
        vllm_crossings(verdicts, "placed/dp8_pp2")


@pytest.mark.parametrize("case", ["rl_apart", "rl_colocated"])
def test_an_rl_plans_generation_pool_is_the_engine_vllm_runs(verdicts, case):
    """The rl plan's generation pool through vLLM, from the array and the YAML alike: the
    plan's layout and replica batch, the engine's chunk and page, bf16, the longest sample
    (prompt 256 + max_response 1024), prefix caching on (a prompt's samples share its cache), the
    HBM share the plan gave the engine, and sleep mode exactly where the pools share GPUs."""
    from gclc.solver.rl.plan import plan_rl
    from gclc.solver.rl.search import Context

    design = _rl(case)
    plan = plan_rl(design["grpo"], top=0)
    layout = plan.best.generation.layout
    limit = Context(plan.job).gen_limit(layout, plan.best.placement, plan.best.train)
    hbm = plan.job.partition(layout.partition).node.accelerator.hbm_capacity
    for form in ("args", "yaml"):
        verdict = verdicts[f"{case}/generate/{form}"][1]
        assert "error" not in verdict, verdict.get("error")
        got = verdict["config"]
        c = layout.config
        assert (got["tp"], got["pp"], got["dp"], got["max_num_seqs"]) == (c.tp, c.pp, c.ep, -(-c.batch // c.ep))
        assert (got["max_num_batched_tokens"], got["max_model_len"]) == (8192, 1280)
        assert got["prefix_caching"] and got["cache_dtype"] == "auto" and got["quantization"] is None
        assert got["gpu_memory_utilization"] == pytest.approx(limit / hbm, abs=1e-4)
        assert got["sleep_mode"] == (plan.best.placement == "colocated") == (case == "rl_colocated")
        assert got["kv_connector"] is None


def test_vllm_takes_a_stated_graph_ceiling(verdicts):
    """`graph_batch = 64` and `= 0` reach vLLM's own parser and engine config as the capture
    ceiling and eager mode (views/export/vllm.py `graph_arguments`)."""
    for ceiling in (64, 0):
        argv, verdict = verdicts[f"graphs/{ceiling}/serving/args"]
        assert "error" not in verdict, verdict.get("error")
        assert (("--max-cudagraph-capture-size" in argv) if ceiling else ("--enforce-eager" in argv))


def test_vllm_counts_the_graph_ceiling_in_tokens_as_the_plan_does(verdicts):
    """With MTP (one draft token) a decode step of B sequences is 2 B tokens to vLLM's capture sizes:
    the plan graphs exactly the decode steps whose tokens vLLM's largest capture size covers, the
    export writing the plan's ceiling; vLLM's default without it follows max_num_seqs, not the plan."""
    argv, verdict = verdicts["graphs/mtp/serving/args"]
    assert "error" not in verdict, verdict.get("error")
    sizes = verdict["config"]["graph_sizes"]
    assert max(sizes) == MTP_ENGINE.graph_tokens == 512
    for batch in (1, 64, 200, 256, 257, 300, 512):
        assert MTP_ENGINE.graphed(batch, batch * 2) == (batch * 2 <= max(sizes))
    default = verdicts["graphs/mtp_vllm_default/serving/args"][1]
    assert "error" not in default, default.get("error")
    assert max(default["config"]["graph_sizes"]) == min(64 * 2 * 2, 512) != MTP_ENGINE.graph_tokens


def test_vllm_dispatches_with_deepep_where_the_plan_does(verdicts):
    """`dispatcher = deepep` reaches vLLM's engine config as its DeepEP high-throughput backend over the
    expert-parallel GPUs, run eagerly (vLLM turns CUDA graphs off with it; the plan graphs nothing); the
    plan's launches without it keep vLLM's default backend."""
    argv, verdict = verdicts["deepep/serving/args"]
    assert "error" not in verdict, verdict.get("error")
    got = verdict["config"]
    assert got["all2all_backend"] == "deepep_high_throughput" and got["expert_parallel"]
    assert "--enforce-eager" in argv and got["graph_sizes"] == []
    assert verdicts["aggregated/serving/args"][1]["config"]["all2all_backend"] != "deepep_high_throughput"


def test_vllm_gathers_tokens_for_the_experts_as_the_plan_prices_it(verdicts):
    """The vllm_v1 profile prices vLLM's default backend, allgather_reducescatter (model/serve/engines.py
    [vllmagrs]: `dispatcher = allgather`), and the export writes it where vLLM runs expert parallelism:
    vLLM's engine config resolves the backend the plan priced, for every placed replica."""
    assert profile("vllm_v1").engine().dispatcher == "allgather"
    for name in PLACED:
        argv, verdict = verdicts[f"placed/{name}/node0"]
        assert "error" not in verdict, verdict.get("error")
        assert verdict["config"]["expert_parallel"]
        assert argv[argv.index("--all2all-backend") + 1] == "allgather_reducescatter"
        assert verdict["config"]["all2all_backend"] == "allgather_reducescatter"


def test_what_vllm_cannot_run_is_refused(tmp_path):
    """A chip vLLM has no platform for, a multi-step scheduler, a train job, and a plan made for
    another engine: refused, with the reason."""
    dsa = check_file(str(ROOT / "examples" / "custom_dsa.gcl"), ["cubes=4"]).design
    with pytest.raises(ExportError, match="vLLM serves on NVIDIA and AMD GPUs"):
        export("vllm", dsa, job="chat_405b")
    train = check_file(str(ROOT / "examples" / "a100_cluster.gcl"), []).design
    with pytest.raises(ExportError, match="describe a serve job, and `gpt3_175b` is a train job"):
        export("vllm", train, job="gpt3_175b")
    with pytest.raises(ExportError, match="describe a serve job, and the design has no `serve` job"):
        export("vllm", train)
    steps = tmp_path / "steps.gcl"
    steps.write_text(SERVE.read_text().replace("profile      = sglang", "profile      = vllm_v1")
                     .replace("chunk        = 8192", "chunk        = 8192\n    scheduler_steps = 4"))
    with pytest.raises(ExportError, match="no --num-scheduler-steps"):
        export("vllm", _design(steps))
    # experts TP-sharded inside each of several attention groups: no vLLM launch lays them out so
    from gclc.views.export.vllm import check

    from gclc.compiler.lower import lower_cluster

    chip = lower_cluster(_design(steps)["H100_Serving"]).partitions[0].node.accelerator
    sharded = attrs.evolve(profile("vllm_v1").engine(), moe_path="tp_sharded")
    with pytest.raises(ExportError, match="shards each expert over TP 1 within each of 8 attention groups"):
        check(ServeConfig(tp=1, batch=64, precision="fp8", ep=8), sharded, chip, False, experts=True)
    check(ServeConfig(tp=8, batch=64, precision="fp8", ep=1), sharded, chip, False, experts=True)   # one group: vLLM's TP
    with pytest.raises(ExportError, match="loops over experts one by one"):
        check(TP_ONLY, attrs.evolve(sharded, moe_path="per_expert"), chip, False, experts=True)
    # every top_k copy sent in an all-to-all: no vLLM 0.33 backend does (its default gathers every token)
    copies = profile("vllm_v1").engine(dispatcher="alltoall")
    with pytest.raises(ExportError, match="no backend that does"):
        check(ServeConfig(tp=1, batch=64, precision="fp8", ep=8), copies, chip, False, experts=True)
    check(TP_ONLY, copies, chip, False, experts=True)   # TP-sharded experts: no exchange to launch
    # one answer: a plan simulated with SGLang's scheduler is not exported as vLLM's flags
    with pytest.raises(ExportError, match="made for the `sglang` engine"):
        export("vllm", _design(SERVE))


def test_dynamo_runs_each_pool_as_the_vllm_export_states_it(verdicts):
    """`--to dynamo` of a vLLM plan through Dynamo's own parsers (ai-dynamo 1.6.1): the frontend
    takes the plan's router as its --router-mode; each worker's role is the pool's (Dynamo's
    `prefill` component for the prefill pool, `backend` otherwise), and the engine config vLLM
    builds from what Dynamo hands it is the vLLM export's of the same pool; a prefill worker
    without the KV connector and gclc's own router name are refused by Dynamo."""
    if not DYNAMO.exists():
        pytest.skip("ai-dynamo 1.6.1 is installed by .ci/setup into .venv/engines/dynamo")
    for plan, roles in (("aggregated", {"serving": "agg"}), ("disaggregated", {"prefill": "prefill", "decode": "decode"})):
        front = verdicts[f"dynamo/{plan}/frontend"][1]
        assert front.get("config") == {"http_port": 8000, "router_mode": "least-loaded"}, front   # least_requests
        for role, mode in roles.items():
            verdict = verdicts[f"dynamo/{plan}/{role}"][1]
            assert "error" not in verdict, f"{plan}/{role}: {verdict.get('error')}"
            got = verdict["config"]
            assert (got["mode"], got["component"]) == (mode, "prefill" if role == "prefill" else "backend")
            assert got["engine"] == verdicts[f"{plan}/{role}/args"][1]["config"], (plan, role)
    headless = verdicts["dynamo/aggregated/serving/node1"][1]   # the replica's second node: workers only
    assert "error" not in headless, headless.get("error")
    assert headless["config"]["headless"]
    node = headless["config"]["engine"]["nodes"]
    assert (node["nnodes"], node["node_rank"], node["master_addr"]) == (2, 1, HEAD)
    assert {k: v for k, v in headless["config"]["engine"].items() if k != "nodes"} == \
        {k: v for k, v in verdicts["dynamo/aggregated/serving"][1]["config"]["engine"].items() if k != "nodes"}
    assert "must explicitly provide --kv-transfer-config" in verdicts["negative/dynamo_no_connector"][1]["error"]
    assert "SystemExit" in verdicts["negative/dynamo_router"][1]["error"]
