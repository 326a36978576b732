"""The registry of diagnostic codes: every message the compiler can print, in one place.

Like mypy's `errorcodes.py` + `message_registry.py`: raise sites name a code and pass
values; the wording lives here. `gclc check --list-codes` prints this table.
"""

from __future__ import annotations

import difflib
import functools
from typing import Iterable


from .numbers import number
from .source import Span
from .diagnostics import Diagnostic, Label, Severity
from .records import frozen

E, W = Severity.ERROR, Severity.WARNING


@frozen
class Code:
    name: str
    severity: Severity
    template: str
    description: str

    def make(
        self,
        subject: Span | None,
        *,
        label: str = "",
        labels: Iterable[Label] = (),
        notes: Iterable[str] = (),
        json_path: str | None = None,
        **values: object,
    ) -> Diagnostic:
        template = self.template
        for key, value in values.items():  # `count of `gpus`` reads badly: drop the outer quotes
            if isinstance(value, str) and "`" in value:
                template = template.replace(f"`{{{key}}}`", f"{{{key}}}")
        # a number passed as it is (no format spec in the template) reads as the one formatter writes it
        values = {k: number(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and f"{{{k}}}" in template
                  else v for k, v in values.items()}
        return Diagnostic(
            self.severity, self.name, template.format(**values), subject,
            tuple(labels), tuple(n for n in notes if n), label, json_path,
        )


REGISTRY: dict[str, Code] = {}


def _code(name: str, severity: Severity, template: str, description: str) -> Code:
    code = Code(name, severity, template, description)
    REGISTRY[name] = code
    return code


# ---------------------------------------------------------------- reading and syntax
IO_ERROR = _code("io-error", E, "cannot read `{path}`: {reason}", "A file could not be read.")
ENCODING = _code("encoding", E, "the file is not valid UTF-8 (byte {byte} at offset {offset})",
                 "Source files are UTF-8 text.")
LONG_LINE = _code("long-line", E, "this {what} line is {length} characters; a line may have at most {limit}",
                  "A line of a data file (a trace) longer than any row of numbers and names.")
NUL_BYTE = _code("nul-byte", E, "the file contains a NUL byte", "Binary data in a source file.")
SYNTAX = _code("syntax", E, "unexpected {found}", "The text does not follow the grammar.")
BAD_CHARACTER = _code("bad-character", E, "unexpected character {char}",
                      "A character that cannot start any token.")
UNTERMINATED_STRING = _code("unterminated-string", E, "string is never closed",
                            "A `\"` without its closing quote on the same line.")
UNCLOSED = _code("unclosed", E, "`{opener}` is never closed; {first} first",
                 "A block, list or call that the file ends inside.")
TOO_DEEP = _code("too-deep", E, "nesting deeper than {limit} levels",
                 "Blocks or expressions nested beyond what a design needs.")
NUMBER_RANGE = _code("number-range", E, "number `{text}` is out of range",
                     "A number too large (or too small) to compute with.")
VALUE_RANGE = _code("value-range", E, "this value lies outside 1e-{limit}..1e{limit} (in base units)",
                    "An expression whose result is too large or too small to compute with.")
BAD_ESCAPE = _code("bad-escape", E, "unknown escape `{escape}` in string", "Strings allow \\\\ \\\" \\n \\t \\u.")

# ---------------------------------------------------------------- units
UNKNOWN_UNIT = _code("unknown-unit", E, "unknown unit `{unit}`", "A unit the compiler does not know.")
DIMENSION_MISMATCH = _code("dimension-mismatch", E, "cannot {verb} {left} and {right}",
                           "Adding or comparing quantities of different dimensions.")
WRONG_DIMENSION = _code("wrong-dimension", E, "`{field}` must be {expected}, not {got}",
                        "A field's value has the wrong physical dimension.")
DIVISION_BY_ZERO = _code("division-by-zero", E, "division by zero", "An expression divides by zero.")
BAD_MARKER = _code("bad-marker", E, "`{marker}` does not apply here: {why}",
                   "`bidir` marks bandwidths, `sparse` marks FLOPS.")

# ---------------------------------------------------------------- names and structure
UNKNOWN_KIND = _code("unknown-kind", E, "unknown block kind `{kind}`",
                     "Top-level blocks are chip, cpu, nic, dpu, switch, node, supernode, fabric, cluster, model, train, serve, workload.")
DUPLICATE = _code("duplicate", E, "`{name}` is declared twice", "Two declarations or params share a name.")
UNKNOWN_NAME = _code("unknown-name", E, "unknown name `{name}`", "A reference to nothing declared.")
WRONG_REFERENCE = _code("wrong-reference", E, "`{field}` must name {expected}; `{name}` is a {got}",
                        "A reference to a declaration of the wrong kind.")
UNKNOWN_FIELD = _code("unknown-field", E, "`{field}` is not a field of {where}", "A misspelled or misplaced field.")
MISSING_FIELD = _code("missing-field", E, "{where} needs {field}", "A required field is absent.")
DUPLICATE_FIELD = _code("duplicate-field", E, "`{field}` is set twice in {where}", "A field given twice in one block.")
EXTENDS_CYCLE = _code("extends-cycle", E, "`{name}` extends itself: {cycle}", "A cycle of `extends`.")
EXTENDS_KIND = _code("extends-kind", E, "{kind} `{name}` cannot extend {parent_kind} `{parent}`",
                     "A block may only extend a block of the same kind.")
REFERENCE_CYCLE = _code("reference-cycle", E, "the value of `{name}` depends on itself: {cycle}",
                        "Fields or params that refer to each other in a loop.")

# ---------------------------------------------------------------- imports and params
IMPORT_NOT_FOUND = _code("import-not-found", E, "cannot find `{path}` to import", "No such file below the allowed roots.")
IMPORT_ESCAPE = _code("import-escape", E, "import `{path}` leaves the allowed folders",
                      "Imports stay below the importing file's folder or the library roots.")
IMPORT_CYCLE = _code("import-cycle", E, "import cycle: {cycle}", "Files that import each other.")
UNKNOWN_PARAM = _code("unknown-param", E, "`--set {name}`: no param `{name}` in the design", "Overriding a param that does not exist.")
BAD_SETTING = _code("bad-setting", E, "`--set {text}`: {why}", "A malformed `--set name=value`.")
UNKNOWN_AXIS = _code("unknown-axis", E, "sweep `{sweep}` varies `{name}`, which is no param of the design",
                     "A sweep block's field must name a param.")
BAD_AXIS = _code("bad-axis", E, "`--vary {text}`: {why}", "A sweep axis that names no param or gives no values.")
SETTING_TYPE = _code("setting-type", E, "`--set {name}` must be {expected} like the param's value, not {got}",
                     "An override must keep the param's dimension.")

# ---------------------------------------------------------------- values
WRONG_TYPE = _code("wrong-type", E, "`{field}` must be {expected}, not {got}", "A value of the wrong type.")
BAD_CHOICE = _code("bad-choice", E, "`{value}` is not a valid `{field}`", "A keyword outside the allowed set.")
OUT_OF_RANGE = _code("out-of-range", E, "`{field}` must be {bound}; it is {value}", "A value outside its physical range.")
NOT_INTEGER = _code("not-integer", E, "`{field}` must be a whole number; it is {value}", "A count with a fraction.")
ORDER = _code("order", E, "`{low}` ({low_value}) must be below `{high}` ({high_value})",
              "Two fields whose values must be ordered, such as idle < tdp.")
UNKNOWN_CONSTRUCTOR = _code("unknown-constructor", E, "unknown {what} `{name}`", "A topology or constructor the compiler does not know.")
UNKNOWN_ARGUMENT = _code("unknown-argument", E, "`{name}` is not an argument of `{call}`", "A misspelled argument.")
MISSING_ARGUMENT = _code("missing-argument", E, "`{call}` needs `{name}`", "A required constructor argument is absent.")
BAD_CONSTRAINT = _code("bad-constraint", E, "cannot constrain `{target}` here", "A constraint on an unknown quantity.")
LIMIT_DIRECTION = _code("limit-direction", E, "`{target} {op}` bounds it the wrong way: a plan needs {side} on `{target}`",
                        "A job limit whose operator the planner cannot enforce (`memory >= ...`, `ttft >= ...`).")
LIMIT_NEEDS = _code("limit-needs", E, "`{target}` limit without `{needs}`: there is nothing to measure it against",
                    "A job limit the planner could only ignore (a time limit without `tokens`).")
LIMIT_UNSUPPORTED = _code("limit-unsupported", E, "a {kind} plan does not enforce `{target}` limits",
                          "A limit the planner of this kind of job would ignore.")
PIN_MEANINGLESS = _code("pin-meaningless", E, "`{pin}` cannot apply: {why}",
                        "A parallelism pin the job cannot have (experts on a dense model).")
TOO_MANY_GPUS = _code("too-many-gpus", W, "the job asks {asked} GPUs; its target has {available}, {outcome}",
                      "A job larger than the cluster or partitions it runs on (a train job is planned on all of "
                      "them; a serve job, whose `gpus` is the count its plan uses, has no plan).")
TARGET_TWICE = _code("target-twice", E, "`{what}` is already in `on` (as `{earlier}`)",
                     "A partition listed twice would count its GPUs twice.")
SHAPE = _code("shape", E, "{what}", "A model shape that cannot be built (for example heads not dividing hidden).")
PARALLELISM = _code("parallelism", E, "{what}",
                    "Pinned parallelism that cannot run: a schedule against its virtual stages, a batch that "
                    "does not split into the pinned replicas and micro-batches, expert groups that do not fold "
                    "over the data x context ranks.")
NOT_IMPLEMENTED = _code("not-implemented", E, "{what} is not implemented yet",
                        "A field value the language reserves but the planner cannot honour yet (rejected, "
                        "never silently planned as something else).")
UNEVEN_PIPELINE = _code("uneven-pipeline", W, "{what}",
                        "Pinned pipeline stages that do not split the layers evenly: the slowest stage sets the pace.")
HOSTNAMES = _code("hostnames", E, "{what}",
                   "A `hostnames` list that does not name each node once with a valid host name.")
PARAMS_MISMATCH = _code("params-mismatch", W, "stated params {stated} differ from the shape's {computed} by {percent}",
                        "The stated parameter count is more than 3 % off what the shape implies.")
DERIVED_MISMATCH = _code("derived-mismatch", W, "stated `{field}` = {stated} differs from the derived {derived} by {percent}",
                         "A stated peak or HBM figure more than 5 % off what the microarchitecture gives.")
UNSUPPORTED_PRECISION = _code("unsupported-precision", E, "`{chip}` does not run {precision}; it runs {formats}",
                              "A job asks for a number format its chip has no peak for (no silent fallback).")
FORMAT_WITHOUT_PEAK = _code("format-without-peak", E, "`{chip}` lists {format} but has no {family} peak to run it at",
                            "A chip's `formats` names a format whose family has no stated or derived peak.")
BIDIR_HINT = _code("bidir-suspicious", W, "`{field}` = {value} per direction looks like a bidirectional figure",
                   "A per-direction bandwidth that matches a known bidirectional data-sheet figure.")
SERVE_DEMAND = _code("serve-demand", E, "{what}",
                     "A serve job's demand: request lengths, rate, trace and the SLOs that need them.")
RL_JOB = _code("rl-job", E, "{what}",
               "An `rl` job that cannot be planned as written: its algorithm and models, the split of its samples "
               "into mini-batches, or where its generation and training pools run.")

def suggest(name: str, candidates: Iterable[str]) -> str:
    """`did you mean `x`?` from the nearest candidates, or nothing."""
    return _suggest(name, tuple(candidates))


@functools.lru_cache(maxsize=4096)  # difflib is slow, and a broken file repeats its mistakes
def _suggest(name: str, candidates: tuple[str, ...]) -> str:
    candidates = list(candidates)
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in candidates}
        close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
        close = [lowered[c] for c in close]
    return f"help: did you mean `{close[0]}`?" if close else ""


# ---------------------------------------------------------------- the lowered cluster
POWER_BUDGET = _code("power-budget", W, "{name} draws {need} at full load; the budget is {budget}",
                     "The facility power at full load (PUE included) exceeds `power.budget`: plans run under it "
                     "(fewer GPUs, power caps, lower clocks) and say what it costs; only a budget that runs "
                     "nothing is an error, when a job is planned.")
RADIX_TOO_SMALL = _code("radix-too-small", E, "`{fabric}` cannot connect {ports} ports: {tiers} tiers of radix {radix} reach {capacity}",
                        "A fat tree too small for the endpoints cabled to it.")
THIN_SCALEOUT = _code("thin-scaleout", W, "scale-out gives each GPU {out}, 1/{ratio} of its scale-up {up}",
                      "Scale-out bandwidth per GPU far below scale-up bandwidth.")
OVERSUBSCRIBED = _code("oversubscribed", W, "`{fabric}` is oversubscribed {ratio}: GPUs above the leaf get 1/{ratio} of their bandwidth",
                       "A tier whose uplinks carry less than its downlinks.")
SCALE_OUT_GROUP = _code("scale-out-group", W, "{what} cannot fit a scale-up domain of {domain} GPUs",
                        "A pinned TP or EP group wider than the scale-up domain it runs on.")
PROTOCOL_MISMATCH = _code("protocol-mismatch", W, "{what}",
                          "A fabric's switch, or every NIC and DPU of a node on it, speaks another protocol.")
RAILS_MISMATCH = _code("rails-mismatch", W, "`{fabric}` has {rails} rails but `{node}` has {nics} NIC ports",
                       "Rails should match the scale-out ports per node (each NIC's `ports`), one rail each.")
SWITCH_CAPACITY = _code("switch-capacity", W,
                        "`{switch}` has {radix} ports x {speed} = {line} per direction, above its capacity {capacity}",
                        "A switch whose ports at line rate exceed its switching capacity (blocking, or a per-direction "
                        "capacity marked `bidir`).")
FABRIC_CAPACITY = _code("fabric-capacity", E,
                        "`{fabric}` drives {radix} ports x {bandwidth} = {need} per direction through each `{switch}`, "
                        "which switches {capacity}",
                        "A fat tree whose radix at the fabric's bandwidth exceeds its switch's capacity.")
IN_NETWORK_REDUCTION = _code("in-network-reduction", E, "{what}",
                             "A fabric that reduces in its switches (SHARP, NVLS) on a switch that cannot, or with no "
                             "switch (a torus or full mesh).")
ROUTING_FLOWS = _code("routing-flows", E, "{what}",
                      "`flows` (flows per port that ECMP hashes) on a fabric whose routing does not hash them.")
SWITCH_REDUCTION = _code("switch-reduction", E, "{what}",
                         "A switch's `reduction` rate on a switch that does not reduce, or a node's `switches` "
                         "with no `scaleup` fabric for them to switch.")
CONGESTION_KIND = _code("congestion-kind", E, "{what}",
                        "`congestion` (ECN or PFC) on a fabric that is not Ethernet: PFC and ECN are RoCE's.")


# ---------------------------------------------------------------- shared clusters and traces
TRACE_PATH = _code("trace-path", E, "the trace `{path}` {why}",
                   "A `trace` (a workload's or a serve job's) must be a CSV file in the design's folder or below it.")
TRACE_ROW = _code("trace-row", E, "{what}", "A trace row (CSV or inline `job`) that cannot be replayed.")
JOB_TOO_LARGE = _code("job-too-large", E, "`{job}` needs {gpus} GPUs; the largest partition it may use has {most}",
                      "A job (or trace row) larger than any partition it may run on.")
NO_FEASIBLE_SIZE = _code("no-feasible-size", E, "{what}",
                          "A job to schedule whose GPU range holds no size the planner finds a feasible plan for.")
NO_SIZE = _code("no-size", E, "{what}", "A job to schedule needs an amount of work: `tokens`, `steps` or `duration`.")
TENANT = _code("tenant", E, "{what}",
               "A tenant of a shared cluster that cannot be built: a quota or limit of a partition its cluster lacks, "
               "or a job on a cluster with tenants that names none.")
SCHEDULER_SETTING = _code("scheduler-setting", E, "{what}",
                          "A `scheduler` block named for no policy, or holding a setting of another policy.")


# ---------------------------------------------------------------- measurements (gclc calibrate)
MEASUREMENT = _code("measurement", E, "{what}",
                    "A measurement file gclc cannot read: nccl-tests output, a Megatron-LM, torchtitan or NeMo "
                    "training log, a vLLM/SGLang `bench serve` result, a genai-perf/aiperf export or a kernel CSV "
                    "(docs/calibration.md lists the formats).")
MEASUREMENT_UNUSED = _code("measurement-unused", W, "{what}",
                           "A measurement gclc read but cannot relate to the design (a collective it does not model, "
                           "a log without the configuration it ran).")
