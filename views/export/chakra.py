"""The planned training step as Chakra execution traces, one per rank, for ASTRA-sim.

Files: `workload.<rank>.et` for every rank (gzipped protobuf, Chakra's et_def.proto: ASTRA-sim's
feeder and Chakra's Python reader both open gzip by its magic number), and `comm_group.json`,
ASTRA-sim's communicator groups ({group id: [ranks]}), which the nodes' `pg_name` names.
Run: `AstraSim_Analytical_Congestion_Aware --workload-configuration=DIR/workload
--comm-group-configuration=DIR/comm_group.json ...`.

One answer with the plan (model/train/step.py `Breakdown`, the numbers `gclc plan` prints):
- the pipeline schedule of the plan, pass by pass: 1F1B (Megatron's warm-up of p - k - 1
  forwards on stage k), or Megatron's interleaved schedule for vp model chunks per GPU; the
  bubble is not written, ASTRA-sim finds it from the dependencies;
- a forward or backward pass is one compute node (COMP_NODE) whose duration is the plan's
  compute of one micro-batch through one chunk, the backward also carrying the recompute;
  ASSUMPTION (as the `trace` export): a forward is a third of the pass. Per rank, the compute
  nodes of the passes add up to the plan's compute + recompute seconds, and one more node is the
  optimizer step (each node's duration ends on whole microseconds of a running clock);
- after each pass, its collectives as COMM_COLL_NODEs on the rank's groups, with the bytes of
  all the pass's collectives of that kind (model/train/layer_cost.py's messages): TP all-reduces
  (reduce-scatter + all-gather with sequence parallelism), the CP ring's key/value all-gather
  (and its gradients' reduce-scatter backward), EP dispatch/combine all-to-alls; ASTRA-sim
  times them on its network;
- pipeline sends and receives (COMM_SEND_NODE / COMM_RECV_NODE) between neighbouring stages
  with matching tags and the activation's bytes;
- after the last backward, gradient synchronization over the data-parallel (x CP) group:
  all-reduce (ZeRO 0), reduce-scatter then the optimizer then the parameters' all-gather (ZeRO
  1-2); ZeRO 3 gathers each chunk's parameters before each pass and reduce-scatters after each
  backward; MoE expert gradients on the expert-data-parallel group (MoE parallel folding).
  The collectives start after the last backward: the overlap with it that the plan counts is
  not expressed (Chakra has no buckets), so ASTRA-sim's step is the no-overlap bound there.

Refused, with the reason: the heterogeneous split (several layouts), hybrid ZeRO sharding,
activation offload (host copies are not in the trace), and more ranks than MAX_RANKS files.
Host waits (launch, input, checkpoint) are host time, not GPU work, and are not in the trace. The
hosts' fixed work between two steps (the node's `step_overhead`, the breakdown's term) is: one
more node, a CPU op of its seconds after the step's last node on every rank, since it is in
every step of the plan and no GPU work hides it.
"""

from __future__ import annotations

import gzip
import json

from ...model.train import context, moe
from ...model.train.layer_cost import activation_message
from ...model.train.memory import dense_params_per_gpu, expert_params_per_gpu
from ...model.train.optimizer import grad_bytes
from .chakra_wire import (ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE,
                          REDUCE_SCATTER, attribute_field, metadata, node, varint)
from .target import ExportError, JobPlan, traced_microbatches

FORWARD_SHARE = 1 / 3
MAX_RANKS = 4096     # ASTRA-sim reads one file per rank: beyond this, export a smaller cluster
PARAM_BYTES = 2      # bf16 parameters gathered after the optimizer (ZeRO 1-3)
US = 1e6
GZIP_LEVEL = 1    # the traces repeat themselves: the fastest level already shrinks them about tenfold
VERSION = "1.0.0"    # GlobalMetadata.version, as Chakra 1.0.0's own generator writes it


def export(plan: JobPlan, source: str) -> dict[str, bytes | str]:
    _check(plan)
    step = _Step(plan)
    files: dict[str, bytes | str] = {}
    for rank in range(step.cfg.gpus):
        files[f"workload.{rank}.et"] = gzip.compress(step.trace(rank), compresslevel=GZIP_LEVEL, mtime=0)
    groups = [f' "{i}": {json.dumps(list(ranks))}' for ranks, i in step.groups.items()]
    files["comm_group.json"] = "{\n" + ",\n".join(groups) + "\n}\n"   # a group a line
    return files


def _check(plan: JobPlan) -> None:
    if plan.estimate is None or len(plan.shares) != 1:
        raise ExportError("Chakra traces describe one parallel layout's step; the heterogeneous split runs several "
                          "(export each partition's job on its own)")
    cfg = plan.estimate.config
    if cfg.gpus > MAX_RANKS:
        raise ExportError(f"ASTRA-sim reads one trace file per rank, and the plan has {cfg.gpus:,} ranks (at most "
                          f"{MAX_RANKS:,} here): plan a smaller cluster (`--set`) to simulate it")
    traced_microbatches(cfg, "a Chakra trace", ranks=cfg.gpus)
    if cfg.zero and cfg.shards != cfg.dp * cfg.cp:
        raise ExportError(f"the plan shards ZeRO state over {cfg.shards} of its {cfg.dp * cfg.cp} data-parallel ranks "
                          "(hybrid sharding), which the Chakra export does not write: set `shard` to the whole group")
    if cfg.offload > 0:
        raise ExportError("the plan copies activations to host memory (offload), which a Chakra trace of the GPUs "
                          "does not carry: plan without `offload` to export it")
    if cfg.pp > 1 and cfg.behaviour("pipe_p2p") != "batched":
        raise ExportError(f"the plan runs its pipeline on the `{cfg.stack}` stack, whose engine sends each micro-batch "
                          "as blocking transfers with TP gathers (model/train/pipeline.py), and the Chakra export "
                          "writes Megatron's batched exchanges only: plan it on a Megatron stack to export it")
    if cfg.virtual_stages > 1 and cfg.microbatches % cfg.pp:
        raise ExportError(f"Megatron's interleaved schedule runs micro-batches in groups of the {cfg.pp} stages, and "
                          f"the plan has {cfg.microbatches}")


def schedule(stage: int, stages: int, chunks: int, microbatches: int) -> list[tuple[str, int, int]]:
    """The passes stage `stage` runs in order: ("F" | "B", chunk, micro-batch). Megatron's 1F1B
    (warm-up of stages - stage - 1 forwards) or, with chunks > 1, its interleaved schedule
    (megatron/core/pipeline_parallel/schedules.py: warm-up (p - k - 1) x 2 + (v - 1) x p
    virtual micro-batches, each group of p micro-batches through chunk 0, then 1, ...)."""
    total = microbatches * chunks
    if chunks == 1:
        warm = min(stages - stage - 1, total)
    else:
        warm = min((stages - stage - 1) * 2 + (chunks - 1) * stages, total)

    def where(virtual: int, forward: bool) -> tuple[int, int]:
        chunk = virtual % (stages * chunks) // stages
        micro = virtual // (stages * chunks) * stages + virtual % stages
        return (chunk if forward else chunks - 1 - chunk), micro

    out = [("F", *where(i, True)) for i in range(warm)]
    for i in range(total - warm):
        out += [("F", *where(warm + i, True)), ("B", *where(i, False))]
    return out + [("B", *where(i, False)) for i in range(total - warm, total)]


class _Step:
    """The plan's numbers and groups, and one rank's trace from them."""

    def __init__(self, plan: JobPlan):
        e = plan.estimate
        self.plan, self.cfg, self.b, self.shape = plan, e.config, e.breakdown, plan.shape
        cfg, shape = self.cfg, self.shape
        self.chunks, self.m = cfg.virtual_stages, cfg.microbatches
        passes = self.m * self.chunks
        self.forward_s = self.b.compute / passes * FORWARD_SHARE
        self.backward_s = (self.b.compute * (1 - FORWARD_SHARE) + self.b.recompute) / passes
        self.groups: dict[tuple[int, ...], int] = {}
        self.templates: dict[int, tuple] = {}   # stage -> (its nodes with keys, the keys)
        self.framed: dict[tuple, list] = {}     # (stage, filled lengths) -> the stream to fill
        self.messages = self._messages(cfg, shape)
        self.pp_bytes = round(activation_message(shape, cfg) / (1 if cfg.sp else cfg.tp))

    def _messages(self, cfg, shape) -> dict[str, list[tuple[str, int, int]]]:
        """Per pass direction: (communicator, comm type, bytes) of one chunk's collectives."""
        layers = shape.layers / (cfg.pp * self.chunks)
        moe_layers = shape.moe_layers / (cfg.pp * self.chunks)
        act = activation_message(shape, cfg) * (cfg.tp if cfg.sp else 1)
        out: dict[str, list] = {"F": [], "B": []}
        if cfg.tp > 1:
            count = {"F": 2 * layers, "B": (4 if cfg.recompute == "full" else 2) * layers}
            for way in "FB":
                kinds = ((ALL_GATHER, 0.5), (REDUCE_SCATTER, 0.5)) if cfg.sp else ((ALL_REDUCE, 1.0),)
                out[way] += [("tp", kind, round(act * count[way] * share)) for kind, share in kinds]
        if cfg.cp > 1:
            kv = context.kv_chunk_bytes(shape, cfg) * cfg.cp * layers
            out["F"].append(("cp", ALL_GATHER, round(kv)))
            out["B"] += [("cp", ALL_GATHER, round(kv)), ("cp", REDUCE_SCATTER, round(kv))]
        if cfg.ep > 1 and moe_layers:
            exchange = moe.dispatch_bytes(shape, cfg, 2) * 2 * moe_layers   # dispatch + combine
            out["F"].append(("ep", ALL_TO_ALL, round(exchange)))
            out["B"].append(("ep", ALL_TO_ALL, round(exchange)))
        return out

    # ranks and groups ------------------------------------------------------------------
    def coords(self, rank: int) -> dict[str, int]:
        return {d: rank // self.cfg.stride(d) % getattr(self.cfg, d) for d in self.cfg.order}

    def along(self, rank: int, dims: tuple[str, ...]) -> tuple[int, ...]:
        """The ranks that differ from `rank` only along `dims`."""
        ranks = [rank]
        for d in dims:
            stride, here = self.cfg.stride(d), self.coords(rank)[d]
            ranks = [r + (i - here) * stride for r in ranks for i in range(getattr(self.cfg, d))]
        return tuple(sorted(ranks))

    def group(self, ranks: tuple[int, ...]) -> str:
        return str(self.groups.setdefault(ranks, len(self.groups) + 1))

    def sample_groups(self, stage: int) -> dict[str, tuple[int, ...]]:
        """The groups of the first rank of `stage` (every rank's groups have the same sizes)."""
        return self._members(stage * self.cfg.stride("pp"))

    def communicators(self, rank: int) -> dict[str, str]:
        """Communicator -> ASTRA-sim group id, for the communicators of more than one rank."""
        return {name: self.group(ranks) for name, ranks in self._members(rank).items() if len(ranks) > 1}

    def _members(self, rank: int) -> dict[str, tuple[int, ...]]:
        """TP, CP, the dense gradients' DP x CP, and (MoE parallel folding) EP as consecutive
        ranks of the stage and expert DP across them."""
        out = {"tp": self.along(rank, ("tp",)), "cp": self.along(rank, ("cp",)), "dp": self.along(rank, ("dp", "cp"))}
        if self.cfg.ep > 1:
            stage = self.along(rank, ("tp", "cp", "dp"))
            at = stage.index(rank)
            out["ep"] = stage[at - at % self.cfg.ep: at - at % self.cfg.ep + self.cfg.ep]
            out["edp"] = stage[at % self.cfg.ep::self.cfg.ep]
        return out

    def neighbour(self, stage: int, chunk: int, forward: bool, receiving: bool) -> tuple[int, int] | None:
        """How many ranks away the rank is that a pass receives from (or sends to), and that
        rank's chunk; None at the pipeline's ends: forward from stage k - 1 (stage p - 1 of the previous chunk for stage
        0), backward the other way."""
        p, step = self.cfg.pp, (-1 if receiving == forward else 1)
        there, there_chunk = stage + step, chunk
        if there < 0 or there >= p:
            there, there_chunk = there % p, chunk + step
        if p == 1 or not 0 <= there_chunk < self.chunks:
            return None
        return (there - stage) * self.cfg.stride("pp"), there_chunk

    # one rank's nodes --------------------------------------------------------------------
    def trace(self, rank: int) -> bytes:
        """The rank's stage's nodes, with the rank's groups and neighbours filled in."""
        stage = self.coords(rank)["pp"]
        if stage not in self.templates:
            nodes = _Stage(self, stage).nodes()
            self.templates[stage] = nodes, sorted({key for _, keys in nodes for key in keys})
        nodes, keys = self.templates[stage]
        groups = self.communicators(rank)
        filled: dict[tuple, bytes] = {}
        for kind, value in keys:
            if kind == "pg_name":
                filled[kind, value] = attribute_field("pg_name", groups[value])
            else:   # comm_src / comm_dst: this rank or a neighbour `value` ranks away
                filled[kind, value] = attribute_field(kind, rank + value)
        widths = (stage, *(len(filled[key]) for key in keys))
        if widths not in self.framed:
            self.framed[widths] = _framed(nodes, dict(zip(keys, widths[1:])))
        head = metadata(VERSION, (("generator", "gclc export --to chakra"), ("job", self.plan.name),
                                       ("rank", rank)))
        return b"".join([varint(len(head)), head,
                         *[filled[p] if type(p) is tuple else p for p in self.framed[widths]]])


def _framed(nodes: list[tuple[bytes, tuple]], widths: dict[tuple, int]) -> list:
    """The stage's stream as bytes and the keys to fill in, for ranks whose filled attributes
    have these lengths (each node's length prefix is then known): runs of bytes joined."""
    parts: list = []
    for static, keys in nodes:
        if keys:
            parts += [varint(len(static) + sum(widths[k] for k in keys)) + static, *keys]
        else:
            parts.append(static)   # framed already
    merged: list = []
    for part in parts:
        if merged and type(part) is bytes and type(merged[-1]) is bytes:
            merged[-1] += part
        else:
            merged.append(part)
    return merged


class _Stage:
    """One pipeline stage's nodes in order, the same for every rank of the stage but for the
    rank's groups and neighbours, left as keys: ("pg_name", communicator), ("comm_src" |
    "comm_dst", ranks away). Each node depends on the one before it on the GPU's stream."""

    def __init__(self, step: _Step, stage: int):
        self.step, self.stage = step, stage
        self.sizes = {name: len(ranks) for name, ranks in step.sample_groups(stage).items()}
        self.out: list[tuple[bytes, tuple]] = []
        self.last: int | None = None     # the node the GPU's next work waits for
        self.clock = 0.0                 # compute seconds so far: durations end on whole microseconds

    def add(self, name: str, kind: int, deps: tuple = (), seconds: float = 0.0, attrs=(), keys=()) -> int:
        ident = len(self.out)
        duration = round((self.clock + seconds) * US) - round(self.clock * US) if kind == COMP_NODE else 0
        self.clock += seconds if kind == COMP_NODE else 0.0
        static = node(ident, name, kind, tuple(d for d in deps if d is not None), duration, attrs)
        self.out.append((static, tuple(keys)) if keys else (varint(len(static)) + static, ()))
        return ident

    def on_stream(self, name: str, kind: int, extra: tuple = (), seconds: float = 0.0, attrs=(), keys=()) -> None:
        self.last = self.add(name, kind, (self.last, *extra), seconds, attrs, keys)

    def collective(self, name: str, communicator: str, kind: int, size: int) -> None:
        if self.sizes.get(communicator, 1) > 1 and size > 0:
            self.on_stream(name, COMM_COLL_NODE, attrs=(("is_cpu_op", False), ("comm_type", kind),
                                                             ("comm_size", size)), keys=(("pg_name", communicator),))

    def nodes(self) -> list[tuple[bytes, tuple]]:
        s = self.step
        cfg = s.cfg
        for way, chunk, micro in schedule(self.stage, cfg.pp, s.chunks, s.m):
            self.one_pass(way, chunk, micro)
        grads = dense_params_per_gpu(s.shape, cfg) * grad_bytes(cfg)
        experts = expert_params_per_gpu(s.shape, cfg) * grad_bytes(cfg)
        if cfg.zero == 0:
            self.collective("DP all-reduce gradients", "dp", ALL_REDUCE, round(grads))
            self.collective("expert DP all-reduce gradients", "edp", ALL_REDUCE, round(experts))
        elif cfg.zero < 3:
            self.collective("DP reduce-scatter gradients", "dp", REDUCE_SCATTER, round(grads))
            self.collective("expert DP reduce-scatter gradients", "edp", REDUCE_SCATTER, round(experts))
        self.on_stream("optimizer step", COMP_NODE, seconds=s.b.optimizer)
        if 0 < cfg.zero < 3:
            ratio = PARAM_BYTES / grad_bytes(cfg)
            self.collective("DP all-gather parameters", "dp", ALL_GATHER, round(grads * ratio))
            self.collective("expert DP all-gather parameters", "edp", ALL_GATHER, round(experts * ratio))
        if s.b.step_overhead > 0:
            self.on_stream("host work between steps", COMP_NODE, seconds=s.b.step_overhead, attrs=(("is_cpu_op", True),))
        return self.out

    def one_pass(self, way: str, chunk: int, micro: int) -> None:
        s, forward = self.step, way == "F"
        label = f"{'fwd' if forward else 'bwd'} c{chunk} mb{micro}"
        source = s.neighbour(self.stage, chunk, forward, receiving=True)
        received = None
        if source is not None:   # the tag names the sending pass: (micro-batch, its chunk, direction)
            received = self.add(f"recv {label}", COMM_RECV_NODE, attrs=(
                ("is_cpu_op", False), ("comm_size", s.pp_bytes), ("comm_tag", _tag(s, micro, source[1], forward))),
                keys=(("comm_src", source[0]), ("comm_dst", 0)))
        if s.cfg.zero >= 3:
            params = dense_params_per_gpu(s.shape, s.cfg) * PARAM_BYTES / s.chunks
            self.collective(f"ZeRO-3 AG {label}", "dp", ALL_GATHER, round(params))
        seconds = s.forward_s if forward else s.backward_s
        self.on_stream(label, COMP_NODE, (received,), seconds, attrs=(("is_cpu_op", False),))
        for communicator, kind, nbytes in s.messages[way]:
            self.collective(f"{communicator.upper()} {label}", communicator, kind, nbytes)
        if s.cfg.zero >= 3 and not forward:
            grads = dense_params_per_gpu(s.shape, s.cfg) * grad_bytes(s.cfg) / s.chunks
            self.collective(f"ZeRO-3 RS {label}", "dp", REDUCE_SCATTER, round(grads))
        target = s.neighbour(self.stage, chunk, forward, receiving=False)
        if target is not None:
            self.add(f"send {label}", COMM_SEND_NODE, (self.last,), attrs=(
                ("is_cpu_op", False), ("comm_size", s.pp_bytes), ("comm_tag", _tag(s, micro, chunk, forward))),
                keys=(("comm_src", 0), ("comm_dst", target[0])))


def _tag(step: _Step, micro: int, chunk: int, forward: bool) -> int:
    return (micro * step.chunks + chunk) * 2 + (0 if forward else 1)
