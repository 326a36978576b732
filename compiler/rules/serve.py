"""Checks of a `serve` job's demand: lengths or a trace, percentile SLOs that need a
load to be measured under, a readable trace, and precisions the chips run."""

from __future__ import annotations

from typing import Iterator

from ...dsl import codes
from .. import chip as chip_numbers
from ..formats import is_narrow, runs
from ..design import Entity, Partition, Record, Repeat
from ...dsl.diagnostics import Diagnostic, Label
from ..schema import TRT_ENGINES
from ..serve_trace import MAX_ARRIVAL_S, MIN_REQUESTS, read_requests
from ..trace import MAX_SECONDS_TEXT
from ...dsl.numbers import duration, number



def serve_rules(job: Entity) -> Iterator[Diagnostic]:
    trace = job.get("trace")
    if trace is None and ("prompt" not in job.record or "output" not in job.record):
        missing = " and ".join(f"`{f}`" for f in ("prompt", "output") if f not in job.record)
        yield codes.SERVE_DEMAND.make(job.span, what=f"serve job `{job.name}` needs {missing} (tokens per request)",
                                      notes=["help: write `prompt = 2048  output = 512`, a distribution such as "
                                             "`output = exponential(mean = 512)`, or `trace = \"requests.csv\"`"])
    if trace is not None:
        yield from _trace(job, trace)
    yield from _percentiles(job)
    yield from _light_rate(job)
    yield from _precisions(job)
    if "daily_load" in job.record and "rate" not in job.record:
        yield codes.SERVE_DEMAND.make(job.span_of("daily_load"), what="`daily_load` scales `rate`, which the job "
                                      "does not state", notes=["help: state the peak `rate = 40 req/s`; each share "
                                                              "of the day is a share of it"])
    yield from _sizes(job)
    yield from _trtllm_layout(job)
    yield from moe_path_rules(job, "engine.moe_path", job.get("model"))
    yield from draft_rules(job, "engine")
    yield from checkpoint_rules(job)


def checkpoint_rules(job: Entity) -> Iterator[Diagnostic]:
    """A checkpoint's bf16 shares mix a narrow `precision` with bf16: meaningless at bf16 or wider,
    and `dense_wide_share` names the non-expert weights, which on a dense model are all of them."""
    precision = getattr(job.get("precision"), "name", None)
    for key in ("wide_share", "dense_wide_share"):
        if job.get(f"checkpoint.{key}") is None:
            continue
        if precision is None or not is_narrow(precision):
            yield codes.PIN_MEANINGLESS.make(
                job.span_of(f"checkpoint.{key}"), pin=f"checkpoint.{key}",
                why=f"the weights are {precision or 'bf16 (the default)'}, so no share of them is kept wider at bf16",
                labels=[Label(job.span_of("precision"), "the weights' format")] if precision else [],
                notes=["help: state the checkpoint's narrow format, `precision = fp8` (or fp4), or drop the share"])
        elif key == "dense_wide_share" and isinstance(job.get("model"), Entity) and job.get("model").get("experts") is None:
            yield codes.PIN_MEANINGLESS.make(
                job.span_of(f"checkpoint.{key}"), pin=f"checkpoint.{key}",
                why=f"the model `{job.get('model').name}` has no routed experts: every weight is a non-expert one",
                notes=["help: write `checkpoint { wide_share = ... }`, the share of all its weights at bf16"])


# The smallest token budget per iteration of any engine profile (model/serve/engines.py: vLLM V1's
# max_num_batched_tokens on GPUs under 70 GiB; tests/compiler/test_serve_check.py holds them equal):
# a job that states no `chunk` gets at least this budget whatever its engine.
LEAST_TOKEN_BUDGET = 2048


def draft_rules(job: Entity, engine: str) -> Iterator[Diagnostic]:
    """Speculative decoding verifies a sequence's `tokens` drafts and the token they follow in one
    iteration, inside its token budget (`chunk`): vLLM V1's scheduler caps a running request's
    scheduled tokens, drafts included, at the budget left (vllm/v1/core/sched/scheduler.py
    `schedule`), so drafts beyond it are never verified and a step costs them for nothing."""
    tokens = job.get(f"{engine}.speculative.tokens")
    if tokens is None:
        return
    chunk = job.get(f"{engine}.chunk")
    budget = chunk if chunk is not None else LEAST_TOKEN_BUDGET
    if tokens + 1 <= budget:
        return
    where = "the engine's `chunk`" if chunk is not None else "the smallest token budget of any engine profile"
    yield codes.OUT_OF_RANGE.make(
        job.span_of(f"{engine}.speculative.tokens"), field="speculative.tokens",
        bound=f"at most {budget - 1} (one iteration verifies the drafts and the token they follow within "
              f"{where}, {budget} tokens)", value=str(tokens),
        labels=[Label(job.span_of(f"{engine}.chunk"), "the token budget")] if chunk is not None else [],
        notes=["help: draft a few tokens (MTP and EAGLE heads propose 1-5 per step); a draft's chance of "
               "acceptance falls with its depth, so more drafts mostly cost verification work"])


def moe_path_rules(job: Entity, key: str, model: object) -> Iterator[Diagnostic]:
    """`moe_path` picks the routed experts' kernels and `dispatcher` how their tokens are sent: on a
    dense model the engine would ignore either; DeepEP's normal kernels run without CUDA graphs, so a
    stated graph ceiling beside them could not hold (model/serve/engines.py [deepep])."""
    engine = key.rsplit(".", 1)[0]
    for field, what in (("moe_path", "it picks the kernels of routed experts"),
                        ("dispatcher", "it sends tokens to routed experts")):
        value = job.get(f"{engine}.{field}")
        if value is None or not isinstance(model, Entity) or getattr(model.get("arch"), "name", model.get("arch")) == "moe":
            continue
        yield codes.PIN_MEANINGLESS.make(job.span_of(f"{engine}.{field}"), pin=f"{field} = {getattr(value, 'name', value)}",
                                         why=f"{what}, and the model `{model.name}` has none",
                                         labels=[Label(model.span_of("arch"), "a dense model")] if model.span_of("arch") else [],
                                         notes=[f"help: remove `{field}` (or serve a model with `arch = moe`)"])
    yield from _trtllm_dispatcher(job, engine)
    graphs = job.get(f"{engine}.graph_batch")
    if getattr(job.get(f"{engine}.dispatcher"), "name", None) == "deepep" and graphs:
        yield codes.PIN_MEANINGLESS.make(job.span_of(f"{engine}.graph_batch"), pin=f"graph_batch = {graphs}",
                                         why="DeepEP's normal kernels cannot be captured in a CUDA graph: vLLM and "
                                             "SGLang run every step eagerly with `dispatcher = deepep`",
                                         labels=[Label(job.span_of(f"{engine}.dispatcher"), "the dispatcher")],
                                         notes=["help: remove `graph_batch`, or use `dispatcher = alltoall`"])


def _trtllm_dispatcher(job: Entity, engine: str) -> Iterator[Diagnostic]:
    """A `dispatcher` on TensorRT-LLM's TensorRT engines (compiler/schema.py TRT_ENGINES), which run no
    attention data parallelism and so dispatch no tokens: the model would price an exchange they never run."""
    profile = getattr(job.get(f"{engine}.profile"), "name", None)
    dispatcher = getattr(job.get(f"{engine}.dispatcher"), "name", None)
    if dispatcher is None or profile not in TRT_ENGINES:
        return
    yield codes.PIN_MEANINGLESS.make(job.span_of(f"{engine}.dispatcher"), pin=f"dispatcher = {dispatcher}",
                                     labels=[Label(job.span_of(f"{engine}.profile"), "the engine")],
                                     why=f"TensorRT-LLM's TensorRT engines (`{profile}`) run no attention data "
                                         "parallelism: every GPU holds every token and the MoE plugin's "
                                         "all-reduce sums the experts, so no dispatcher sends tokens",
                                     notes=["help: remove `dispatcher`, or plan with `profile = trtllm_pytorch` "
                                            "(whose attention data parallelism exchanges tokens)"])


def _trtllm_layout(job: Entity) -> Iterator[Diagnostic]:
    """Pinned widths TensorRT-LLM cannot run (docs/engines.md): its TensorRT engines have no attention data
    parallelism (no `ep` > 1), and its PyTorch backend's attention DP gives each GPU its own attention group
    (attention TP 1), so `tp` > 1 beside `ep` > 1 is a layout it never runs."""
    profile = getattr(job.get("engine.profile"), "name", None)
    tp, ep = job.get("parallelism.tp") or 1, job.get("parallelism.ep") or 1
    if profile in TRT_ENGINES and ep > 1:
        yield codes.PARALLELISM.make(job.span_of("parallelism.ep"),
                                     what=f"`ep = {ep}` on TensorRT-LLM's TensorRT engines (`{profile}`), which run no "
                                          "attention data parallelism: every GPU holds every token",
                                     labels=[Label(job.span_of("engine.profile"), "the engine")],
                                     notes=["help: remove `ep` (the experts are TP-sharded, or pin `moe_path`), or plan "
                                            "with `profile = trtllm_pytorch` (attention data parallelism)"])
    elif profile == "trtllm_pytorch" and tp > 1 and ep > 1:
        yield codes.PARALLELISM.make(job.span_of("parallelism.tp"),
                                     what=f"`tp = {tp}` beside `ep = {ep}` on TensorRT-LLM's PyTorch backend, whose "
                                          "attention data parallelism gives each GPU its own attention group (TP 1)",
                                     labels=[Label(job.span_of("parallelism.ep"), "the attention groups")],
                                     notes=[f"help: pin `tp = 1` and `ep = {tp * ep}` (attention DP on every GPU), "
                                            "or `ep = 1` (attention TP over the GPUs)"])


def _sizes(job: Entity) -> Iterator[Diagnostic]:
    """Pinned replicas make one aggregated pool, and pinned widths and counts must make up the
    pinned GPUs: replicas x tp x ep x pp GPUs in all (an unpinned width is searched, at least 1)."""
    pins, gpus = job.get("parallelism"), job.get("gpus")
    replicas = pins.get("replicas") if pins is not None else None
    mode = getattr(job.get("engine.mode"), "name", None)
    if replicas and mode == "disaggregated":
        yield codes.PARALLELISM.make(job.span_of("parallelism.replicas"),
                                     what="`replicas` pins an aggregated pool; the engine's mode is disaggregated",
                                     labels=[Label(job.span_of("engine.mode"), "the mode")],
                                     notes=["help: drop `replicas` (the planner sizes both pools), or serve aggregated"])
        return
    widths = {k: pins.get(k) for k in ("tp", "ep", "pp")} if pins is not None else {}
    if not job.get("model") or job.get("model").get("experts") is None:
        widths["ep"] = widths.get("ep") or 1    # a dense model's replicas have one attention group
    size = 1
    for width in widths.values():
        size *= width or 1
    whole = all(widths.get(k) for k in ("tp", "ep", "pp"))
    named = " x ".join(f"{k} = {v}" for k, v in widths.items() if v)
    # a replica's GPUs are a multiple of the pinned widths' product (the others are searched)
    least = (replicas or 1) * size
    if replicas and gpus and (gpus % least or whole and least != gpus):
        yield codes.PARALLELISM.make(
            job.span_of("parallelism.replicas"),
            what=f"{replicas} replicas of {named or 'one GPU'} take " + (f"{least}" if whole else f"a multiple of {least}")
                 + f" GPUs; the job pins `gpus = {gpus}`",
            labels=[Label(job.span_of("gpus"), "the GPUs it uses")],
            notes=["help: make replicas x tp x ep x pp equal to `gpus`, or drop one of the pins"])
    elif gpus and gpus % size:
        yield codes.PARALLELISM.make(
            job.span_of("gpus"), what=f"`gpus = {gpus}` is not a whole number of replicas: each takes "
                                      + ("" if whole else "a multiple of ") + f"{named} = {size} GPUs",
            notes=[f"help: pin a multiple of {size} GPUs, or change the widths"])


def _trace(job: Entity, trace: str) -> Iterator[Diagnostic]:
    for field in ("rate", "prompt", "output"):
        if field in job.record:
            yield codes.SERVE_DEMAND.make(job.span_of(field), what=f"`{field}` and `trace` both state the demand",
                                          labels=[Label(job.span_of("trace"), "the trace")],
                                          notes=["help: the trace gives arrivals and lengths; drop one of them"])
            return
    yield from read_requests(job.span_of("trace"), trace)[1]


def _light_rate(job: Entity) -> Iterator[Diagnostic]:
    """A rate so light that the simulated requests would arrive over more than ten years: the
    simulator's clock (absolute seconds in floats) could no longer tell a decode step."""
    rate, requests = job.get("rate"), job.get("requests")
    if rate is None or "trace" in job.record or not float(rate) > 0:
        return
    n = requests if isinstance(requests, int) and not isinstance(requests, bool) else MIN_REQUESTS
    span = (n - 1) / float(rate)
    if span > MAX_ARRIVAL_S:
        yield codes.OUT_OF_RANGE.make(
            job.span_of("rate"), field="rate", value=f"{number(float(rate))} req/s",
            bound=f"at least {number((n - 1) / MAX_ARRIVAL_S)} req/s for {n:,} simulated requests",
            notes=[f"they would arrive over {duration(span)}, past the {MAX_SECONDS_TEXT} a simulation times "
                   "to the microsecond",
                   "help: a demand this light loads no replica: drop `rate` (and its percentile SLOs) to plan "
                   "the unloaded latency, or simulate fewer `requests`"])


def _percentiles(job: Entity) -> Iterator[Diagnostic]:
    if "rate" in job.record or "trace" in job.record:
        return
    slo = job.get("slo")
    for item in getattr(slo, "items", ()):
        target = item.value.target
        if "." in target and not target.endswith(".mean") or target.startswith("e2e"):
            yield codes.SERVE_DEMAND.make(item.span, what=f"`{target}` is measured under a load: the job states none",
                                          notes=["help: state the demand, `rate = 40 req/s`, or a `trace`; "
                                                 "without one, bound the unloaded latency: `ttft <= 2 s`"])


def _precisions(job: Entity) -> Iterator[Diagnostic]:
    """The KV cache's format must be one the chips run (the weights' is checked for every job)."""
    chip = chip_of(job)
    name = getattr(job.get("engine.kv_precision"), "name", None)
    if chip is None or name is None or not is_narrow(name):
        return
    formats = chip_numbers.formats(chip)
    if formats and not runs(formats, name):
        yield codes.UNSUPPORTED_PRECISION.make(
            job.span_of("engine.kv_precision"), chip=chip.name, precision=name, formats=", ".join(formats),
            labels=[Label(chip.span_of("formats") or chip.span_of("peak"), "its formats")],
            notes=[chip_numbers.format_help(chip, name, formats, "engine.kv_precision")])


def chip_of(job: Entity) -> Entity | None:
    """The accelerator of the job's (first) target, or None when it cannot be told."""
    target = job.get("on")
    if isinstance(target, tuple):
        target = target[0] if target else None
    if isinstance(target, Partition):
        part = (target.cluster.get("partition") or Record()).get(target.name)
        units = part.get("units") if isinstance(part, Record) else None
    else:
        units = target.get("units") if isinstance(target, Entity) else None
    unit = units.part if isinstance(units, Repeat) else None
    if unit is not None and unit.kind == "supernode":
        nodes = unit.get("nodes")
        unit = nodes.part if isinstance(nodes, Repeat) else None
    gpus = unit.get("gpus") if unit is not None else None
    return gpus.part if isinstance(gpus, Repeat) else None
