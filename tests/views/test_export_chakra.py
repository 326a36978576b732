"""`gclc export --to chakra`: the planned step as per-rank Chakra execution traces, read back by
Chakra's own code: its schema (et_def.proto) compiled by grpcio-tools' protoc into Python
bindings, as Chakra's build does, and its reader (`protolib.openFileRd` / `decodeMessage`) and
`chakra_jsonizer`, all vendored unchanged from mlcommons/chakra 1.0.0 under
tests/data/exports/chakra_1_0_0 (no release on PyPI). No stubs.

What the traces must be: every file decodes with no field the schema lacks and re-encodes
through Chakra's writer (`encodeMessage`) to the same bytes; every dependency points back
within the rank; every send has its receive (peer, tag, bytes); every member of a group runs
the same collectives on it; the compute nodes add up to the plan's compute + recompute per rank;
and a replay of all ranks' dependencies (compute for its duration, communication instant) ends
with no rank stuck and the pipeline bubble the plan's formula counts."""

from __future__ import annotations

import collections
import contextlib
import gzip
import io
import json
import shutil
import sys
from pathlib import Path

import pytest

from gclc.compiler.driver import check_file, check_text
from gclc.views.export import ExportError, export
from gclc.views.export.chakra import schedule
from gclc.views.export.jobs import job_entity, job_plan

ROOT = Path(__file__).resolve().parents[2]
VENDORED = ROOT / "tests" / "data" / "exports" / "chakra_1_0_0" / "chakra"
SMALL = ROOT / "tests" / "data" / "chakra_small.gcl"
CASES = {   # name: (job, settings): every parallel dimension, each schedule and ZeRO stage
    "interleaved": ("mistral", []),
    "one_f_one_b": ("mistral", ["vp=1", "zero=0", "sp=false"]),
    "zero3": ("mistral", ["vp=1", "zero=3", "pp=1", "cp=1", "tp=2"]),
    "moe": ("moe16b", []),
}


@pytest.fixture(scope="module")
def chakra(tmp_path_factory):
    """Chakra's Python package as its pyproject.toml lays it out, with et_def_pb2.py generated."""
    from grpc_tools import protoc

    root = tmp_path_factory.mktemp("chakra")
    shutil.copytree(VENDORED, root / "chakra")
    schema = root / "chakra" / "schema" / "protobuf"
    assert protoc.main(["protoc", f"-I{schema}", f"--python_out={schema}", str(schema / "et_def.proto")]) == 0
    sys.path.insert(0, str(root))
    try:
        from chakra.schema.protobuf import et_def_pb2
        from chakra.src.jsonizer import jsonizer
        from chakra.src.third_party.utils import protolib
    finally:
        sys.path.remove(str(root))
    return et_def_pb2, protolib, jsonizer


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{case: (plan, folder)}: each case's files as `gclc export` writes them."""
    from gclc.cli.export import write_all

    out = {}
    for case, (job, settings) in CASES.items():
        design = check_file(str(SMALL), settings).design
        folder = tmp_path_factory.mktemp(case)
        assert write_all(folder, export("chakra", design, job=job, source=SMALL.name), announce=False) == 0
        out[case] = (job_plan(job_entity(design, job, "train"), timed=False), folder)
    return out


def read(chakra, path: Path):
    """Chakra's reader, as chakra_jsonizer runs it: the metadata, then nodes until the end."""
    et_def, protolib, _ = chakra
    trace = protolib.openFileRd(str(path))
    try:
        metadata = et_def.GlobalMetadata()
        assert protolib.decodeMessage(trace, metadata), f"{path.name}: no GlobalMetadata"
        nodes = []
        while protolib.decodeMessage(trace, node := et_def.Node()):
            nodes.append(node)
    finally:
        trace.close()
    return metadata, nodes


@pytest.fixture(scope="module")
def traces(chakra, exported):
    """{case: {rank: [Node]}} read by Chakra's reader, and {case: comm groups}."""
    nodes, groups = {}, {}
    for case, (plan, folder) in exported.items():
        ranks = plan.estimate.config.gpus
        assert sorted(p.name for p in folder.iterdir()) == sorted([f"workload.{r}.et" for r in range(ranks)]
                                                                  + ["comm_group.json"])
        nodes[case] = {r: read(chakra, folder / f"workload.{r}.et")[1] for r in range(ranks)}
        groups[case] = json.loads((folder / "comm_group.json").read_text())
    return nodes, groups


def attrs(node) -> dict:
    return {a.name: getattr(a, a.WhichOneof("value")) for a in node.attr}


def test_every_trace_is_chakras_format(chakra, exported, tmp_path):
    """Decoded with no field the schema lacks; Chakra's writer re-encodes each message to the
    exported bytes; the metadata names the rank; chakra_jsonizer converts a trace."""
    from google.protobuf.unknown_fields import UnknownFieldSet

    et_def, protolib, jsonizer = chakra
    for case, (plan, folder) in exported.items():
        for rank in range(plan.estimate.config.gpus):
            path = folder / f"workload.{rank}.et"
            metadata, nodes = read(chakra, path)
            assert attrs(metadata)["rank"] == rank and metadata.version == "1.0.0"
            again = io.BytesIO()
            for message in [metadata, *nodes]:
                assert len(UnknownFieldSet(message)) == 0, f"{case} rank {rank}: a field et_def.proto lacks"
                protolib.encodeMessage(again, message)
            assert again.getvalue() == gzip.decompress(path.read_bytes()), f"{case} rank {rank}"
    out = tmp_path / "rank0.json"
    argv = ["chakra_jsonizer", "--input_filename", str(exported["moe"][1] / "workload.0.et"), "--output_filename", str(out)]
    with contextlib.ExitStack() as stack:
        stack.enter_context(pytest.MonkeyPatch.context()).setattr(sys, "argv", argv)
        jsonizer.main()
    assert '"name": "fwd c0 mb0"' in out.read_text() and '"COMM_COLL_NODE"' in out.read_text()


def test_chakras_reader_rejects_a_broken_trace(chakra, exported, tmp_path):
    """Negative controls: a trace cut inside its first node's name, and a name that is not
    UTF-8 (proto3 strings must be)."""
    from google.protobuf.message import DecodeError

    whole = gzip.decompress((exported["moe"][1] / "workload.0.et").read_bytes())
    name = whole.index(b"fwd c0 mb0")
    (tmp_path / "cut.et").write_bytes(whole[: name + 3])
    (tmp_path / "latin.et").write_bytes(whole.replace(b"fwd c0 mb0", b"fwd c0 mb\xff", 1))
    for broken, why in (("cut.et", "Wire format was corrupt|Truncated"), ("latin.et", "bad UTF-8")):
        with pytest.raises(DecodeError, match=why):
            read(chakra, tmp_path / broken)


def test_dependencies_and_compute_are_the_plans(traces, exported):
    """Per rank: ids in order and dependencies pointing back; the compute nodes are the
    schedule's passes and add up to the plan's compute + recompute; then the optimizer."""
    nodes, _ = traces
    for case, (plan, _) in exported.items():
        cfg, b = plan.estimate.config, plan.estimate.breakdown
        for rank, trace in nodes[case].items():
            assert [n.id for n in trace] == list(range(len(trace)))
            assert all(d < n.id for n in trace for d in n.data_deps)
            compute = [n for n in trace if n.type == 4]
            stage = rank // cfg.stride("pp") % cfg.pp
            passes = schedule(stage, cfg.pp, cfg.virtual_stages, cfg.microbatches)
            assert [n.name for n in compute[:-1]] == [f"{'fwd' if w == 'F' else 'bwd'} c{c} mb{m}" for w, c, m in passes]
            assert sum(n.duration_micros for n in compute[:-1]) == round((b.compute + b.recompute) * 1e6), case
            assert compute[-1].name == "optimizer step"
            assert abs(compute[-1].duration_micros - b.optimizer * 1e6) <= 1   # ends on the running clock's microsecond


def test_sends_meet_receives_and_groups_agree(traces, exported):
    """Every send has the receive its peer posts (tag and bytes); every collective names a group
    of comm_group.json holding the rank, and the group's members run the same collectives."""
    nodes, groups = traces
    for case in nodes:
        sends, receives = collections.Counter(), collections.Counter()
        runs = collections.defaultdict(dict)
        for rank, trace in nodes[case].items():
            for n in trace:
                a = attrs(n)
                if n.type in (5, 6):
                    assert a["comm_src" if n.type == 5 else "comm_dst"] == rank
                    (sends if n.type == 5 else receives)[a["comm_src"], a["comm_dst"], a["comm_tag"], a["comm_size"]] += 1
                elif n.type == 7:
                    assert rank in groups[case][a["pg_name"]], f"{case}: rank {rank} outside group {a['pg_name']}"
                    runs[a["pg_name"]].setdefault(rank, []).append((a["comm_type"], a["comm_size"]))
        assert sends == receives and bool(sends) == (exported[case][0].estimate.config.pp > 1), case
        for group, by_rank in runs.items():
            assert sorted(by_rank) == groups[case][group], f"{case}: a member of group {group} runs none"
            assert len({tuple(r) for r in by_rank.values()}) == 1, f"{case}: group {group}'s members disagree"


def replay(trace_by_rank: dict, groups: dict) -> dict[int, float]:
    """When each rank finishes, running its nodes in dependency order: compute for its
    duration, a receive once its send ran, a collective once every member reached it."""
    done = {r: {} for r in trace_by_rank}
    sent, arrived, order = {}, collections.defaultdict(list), collections.defaultdict(int)
    pending = {r: list(t) for r, t in trace_by_rank.items()}
    progress = True
    while progress:
        progress = False
        for rank, queue in pending.items():
            while queue:
                n, a = queue[0], attrs(queue[0])
                if any(d not in done[rank] for d in n.data_deps):
                    break
                start = max([done[rank][d] for d in n.data_deps], default=0.0)
                if n.type == 6:
                    key = (a["comm_src"], rank, a["comm_tag"])
                    if key not in sent:
                        break
                    start = max(start, sent[key])
                elif n.type == 7:
                    slot = (a["pg_name"], order[rank, a["pg_name"]])
                    if rank not in {r for r, _ in arrived[slot]}:
                        arrived[slot].append((rank, start))
                    if len(arrived[slot]) < len(groups[a["pg_name"]]):
                        break
                    start = max(t for _, t in arrived[slot])
                    order[rank, a["pg_name"]] += 1
                end = start + n.duration_micros / 1e6
                if n.type == 5:
                    sent[rank, a["comm_dst"], a["comm_tag"]] = end
                done[rank][n.id] = end
                queue.pop(0)
                progress = True
    assert not any(pending.values()), f"stuck: {[(r, q[0].name) for r, q in pending.items() if q][:4]}"
    return {r: max(times.values()) for r, times in done.items()}


def test_a_replay_runs_every_node_with_the_plans_bubble(traces, exported):
    """No rank waits forever; with communication instant, the step is the compute, the
    optimizer and the bubble the plan's formula counts for that compute: (p - 1) / v of one
    micro-batch's compute (model/train/step.py, Narayanan et al. 2021)."""
    nodes, groups = traces
    for case, (plan, _) in exported.items():
        cfg, b = plan.estimate.config, plan.estimate.breakdown
        end = max(replay(nodes[case], groups[case]).values())
        work = b.compute + b.recompute
        bubble = (cfg.pp - 1) / cfg.virtual_stages * work / cfg.microbatches
        assert end == pytest.approx(work + bubble + b.optimizer, abs=2e-6 * (cfg.microbatches + cfg.pp) * 4), case


def test_what_chakra_export_cannot_write_is_refused(monkeypatch):
    """The heterogeneous split, hybrid ZeRO sharding, activation offload, a pipeline engine
    other than Megatron's, and more ranks than the export writes files for."""
    from gclc.views.export import chakra

    hetero = check_file(str(ROOT / "examples" / "hetero_h100_a100.gcl"), []).design
    with pytest.raises(ExportError, match="heterogeneous split runs several"):
        export("chakra", hetero)
    variants = ROOT / "tests" / "data" / "dense_variants.gcl"   # ZeRO-3 over 8 of 32 ranks, 50 % offload
    with pytest.raises(ExportError, match="hybrid sharding"):
        export("chakra", check_file(str(variants), []).design)
    with pytest.raises(ExportError, match="copies activations to host memory"):
        export("chakra", check_file(str(variants), ["shard=32"]).design)
    deepspeed = check_text(SMALL.read_text().replace("software  = megatron_core", "software  = deepspeed_2022"),
                           str(SMALL), {"cp": "1", "vp": "1", "sp": "false", "recompute": "full"})
    assert deepspeed.design is not None, deepspeed.diagnostics
    with pytest.raises(ExportError, match="blocking transfers with TP gathers"):   # not the sends the plan counts
        export("chakra", deepspeed.design, job="mistral")
    monkeypatch.setattr(chakra, "MAX_RANKS", 8)
    with pytest.raises(ExportError, match="one trace file per rank, and the plan has 16 ranks"):
        export("chakra", check_file(str(SMALL), []).design, job="mistral")


def test_the_cli_writes_binary_traces_into_a_folder_only(tmp_path, capsys):
    from gclc.cli.main import main

    assert main(["export", str(SMALL), "--to", "chakra", "--job", "mistral"]) == 2
    assert "name a directory with -o DIR" in capsys.readouterr().err
    assert main(["export", str(SMALL), "--to", "chakra", "--job", "mistral", "-o", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"wrote {tmp_path / 'workload.0.et'}" and len(lines) == 17   # 16 ranks and the groups


def test_the_nodes_fixed_time_per_step_is_in_every_ranks_trace(chakra, tmp_path):
    """A node with 500 ms of host work between steps (`step_overhead`): the plan's step carries it,
    and so does every rank's trace, one CPU node of its seconds after the step's last node; a
    replay (communication instant) is the compute, the optimizer, the bubble and those 500 ms."""
    from gclc.cli.export import write_all

    text = SMALL.read_text().replace("units    = nodes x DGX_H100", "units    = nodes x SlowHost")
    design_path = tmp_path / "slow.gcl"
    design_path.write_text(text + "\nnode SlowHost extends DGX_H100 { step_overhead = 500 ms }\n")
    design = check_file(str(design_path), []).design
    plan = job_plan(job_entity(design, "mistral", "train"), timed=False)
    cfg, b = plan.estimate.config, plan.estimate.breakdown
    assert b.step_overhead == 0.5
    folder = tmp_path / "traces"
    assert write_all(folder, export("chakra", design, job="mistral", source="slow.gcl"), announce=False) == 0
    ranks = {r: read(chakra, folder / f"workload.{r}.et")[1] for r in range(cfg.gpus)}
    for trace in ranks.values():
        last = trace[-1]
        assert (last.name, last.type, attrs(last)["is_cpu_op"]) == ("host work between steps", 4, True)
        assert abs(last.duration_micros - 0.5e6) <= 1
        assert max(last.data_deps) == last.id - 1   # after the step's last node on the rank's stream
    groups = json.loads((folder / "comm_group.json").read_text())
    end = max(replay(ranks, groups).values())
    work = b.compute + b.recompute
    bubble = (cfg.pp - 1) / cfg.virtual_stages * work / cfg.microbatches
    assert end == pytest.approx(work + bubble + b.optimizer + 0.5, abs=2e-6 * (cfg.microbatches + cfg.pp) * 4)
