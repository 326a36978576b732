"""Job limits mean what they say: every `subject to` / `slo` bound, `gpus` and `on` of a train
or serve job is one the planner enforces as written, or a located error here.

The planner reads limits by target; a bound it would read the wrong way round (`memory >=`,
`ttft >=`), one it has nothing to measure against (`time` without `tokens`), GPUs the target
does not have, or a partition counted twice would otherwise be dropped or bent silently.
"""

from __future__ import annotations

from typing import Iterator

from ..dsl import codes
from ..dsl.diagnostics import Diagnostic
from .design import Bound, Design, Entity, Partition
from .lower import lower_cluster
from .rules.rl import rl_generate_pool, rl_train_pool

# The direction in which each limit can bind a plan: a ceiling (`<=`, `<`) or a floor (`>=`, `>`).
CEILINGS = frozenset({"memory", "power", "time", "energy", "gpus", "ttft", "tpot", "e2e"})
FLOORS = frozenset({"mfu"})
UPPER, LOWER = ("<=", "<"), (">=", ">")
NEEDS_TOKENS = ("time", "energy")  # a training time or energy is tokens / throughput
# what solver/serve/plan.py checks a serving plan against (latencies also as percentiles: `ttft.p99`)
SERVE_ENFORCED = frozenset({"memory", "power", "gpus", "ttft", "tpot", "e2e"})
RL_ENFORCED = frozenset({"memory", "power", "gpus"})   # what solver/rl/plan.py checks an rl plan against


def job_limit_problems(design: Design) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for job in design.local():
        if job.kind in ("train", "serve", "rl"):
            found += _bounds(job)
            found += _targets(job)
            pools = (job,) if job.kind != "rl" else (rl_generate_pool(job), rl_train_pool(job))   # an rl job's pins
            found += [d for pool in pools if pool is not None for d in dense_experts(pool)]
    return found


def _bounds(job: Entity) -> Iterator[Diagnostic]:
    for block in ("subject to", "slo"):
        for item in getattr(job.get(block), "items", ()):
            bound = item.value
            if not isinstance(bound, Bound):
                continue
            target = bound.target.split(".")[0]
            if job.kind == "rl" and target not in RL_ENFORCED:
                yield codes.LIMIT_UNSUPPORTED.make(item.span, target=bound.target, kind="rl", notes=[
                    "help: an rl plan is bounded by `memory`, `power` and `gpus` in `subject to`"])
                continue
            if job.kind == "serve" and target not in SERVE_ENFORCED:
                yield codes.LIMIT_UNSUPPORTED.make(item.span, target=bound.target, kind="serve", notes=[
                    "help: a serve plan is bounded by `memory`, `power` and `gpus` in `subject to` and `ttft`, "
                    "`tpot`, `e2e` (or their percentiles, `ttft.p99`) in `slo`"])
                continue
            wanted = UPPER if target in CEILINGS else LOWER if target in FLOORS else None
            if wanted is not None and bound.op not in wanted:
                side = "a ceiling" if wanted is UPPER else "a floor"
                yield codes.LIMIT_DIRECTION.make(item.span, target=bound.target, op=bound.op, side=side, notes=[
                    f"help: write `{bound.target} {wanted[0]} ...`; the planner only enforces {side} on `{bound.target}`"])
            if (bound.target == "gpus" and bound.op == "<" and isinstance(bound.value, int)
                    and not isinstance(bound.value, bool) and bound.value <= 1):
                yield codes.OUT_OF_RANGE.make(item.span, field="gpus <", bound="> 1 (`gpus < 1` allows no GPU)",
                                              value=bound.value, notes=["help: write `gpus <= 1` for one GPU"])
            if job.kind == "train" and bound.target in NEEDS_TOKENS and job.get("tokens") is None:
                yield codes.LIMIT_NEEDS.make(item.span, target=bound.target, needs="tokens", notes=[
                    f"help: add `tokens = ...` to `{job.name}`: the {bound.target} of a run is its tokens over its throughput"])


def _targets(job: Entity) -> Iterator[Diagnostic]:
    target = job.get("on")
    targets = target if isinstance(target, tuple) else (target,)
    seen: dict[tuple[str, str | None], str] = {}
    available = 0
    graphs: dict[int, object] = {}   # each cluster lowered once, however many of its partitions are named
    for one in targets:
        if isinstance(one, Partition):
            keys = [(one.cluster.name, one.name)]
            graph = graphs.get(id(one.cluster)) or graphs.setdefault(id(one.cluster), lower_cluster(one.cluster))
            gpus = 0 if one.empty else graph.partition(one.name).gpus   # swept to 0 units
            shown = f"{one.cluster.name}.{one.name}"
        elif isinstance(one, Entity) and one.kind == "cluster":
            graph = lower_cluster(one)
            keys = [(one.name, p.name) for p in graph.partitions]
            gpus, shown = graph.gpus, one.name
        else:
            return  # the checker has reported what `on` should be
        twice = [seen[k] for k in keys if k in seen]
        if twice:
            yield codes.TARGET_TWICE.make(job.span_of("on"), what=shown, earlier=twice[0], notes=[
                "help: list each partition once; a job's GPUs are counted from the list"])
            continue
        seen.update({k: shown for k in keys})
        available += gpus
    asked = job.get("gpus")
    if isinstance(asked, int) and not isinstance(asked, bool) and available and asked > available:
        # a serve plan uses exactly its `gpus` (solver/serve/space.py): it is no plan, not a smaller one
        outcome = (f"so it is planned on {available:,}" if job.kind != "serve" else
                   "and a serve job's `gpus` is the count its plan uses, exactly: no plan can")
        yield codes.TOO_MANY_GPUS.make(job.span_of("gpus"), asked=asked, available=available, outcome=outcome, notes=[
            f"help: ask for at most {available:,} GPUs, or run `{job.name}` on a larger cluster"])


def dense_experts(job: Entity) -> Iterator[Diagnostic]:
    """Pins that name a parallelism the job cannot have (the planner would plan without them)."""
    parallelism = job.get("parallelism")
    pins = {item.name: item for item in getattr(parallelism, "items", ())}
    model = job.get("model")
    arch = getattr(getattr(model, "get", lambda _: None)("arch"), "name", None)
    ep = pins.get("ep")
    if ep is not None and arch == "dense" and ep.value != 1:
        yield codes.PIN_MEANINGLESS.make(ep.span, pin=f"ep = {ep.value}", why=f"`{model.name}` is dense: it has no experts",
                                         notes=["help: remove `ep`, or set `arch = moe` with `experts`"])
