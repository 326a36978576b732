"""Hostile-input fuzz of the shipped examples, the docs' designs and the newer surfaces: a
bounded driver, not a test (the tests under tests/cli/test_*fuzz* keep what it finds).

Each shipped example, each docs page's titled design and each calibration design is mutated
line by line (a line deleted or doubled, a number swapped for 0, -1, 1e400, nan, a huge integer
or a wrong unit, a string emptied or made odd, a brace dropped, a field moved into another
block, a choice misspelt) and every command that reads it runs in this process with a per-case
alarm (CPU time: the machine is shared): `check` always, and on a design that still checks, the deeper commands (plan, explain,
render, export --to each target, schedule, a tiny sweep, calibrate). Beside the designs, the
command-line options of the newer surfaces (schedule --degrade, export --set, sweep, probe) with
bad values, the measurement readers on malformed files, and the language server's analysis,
hover and completion on every prefix of a design (a half-typed file). Round 5
(benchmarks/fuzz_surfaces.py): the last sessions' fields set to hostile values one by one
(`--only fields`) and the calibration readers' files edited in their own structure (`--only formats`).

Recorded: a traceback or internal error (exit 70), a case past CASE_SECONDS, an error line
without `file:line:col`, and a moved or foreign field that `check` accepted without a word
(a candidate for "accepted and ignored": triaged by hand), and the newer surfaces' fields set one
at a time on a shipped design (SENSITIVITY) whose plan --json does not move.

    nice -n 19 .venv/bin/python benchmarks/fuzz_hostile.py --budget 600 --seed 1 --json findings.json

The last line states the cases run, CPU and wall time, and the findings by kind."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # benchmarks/: round 5's surfaces
import fuzz_surfaces  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CASE_SECONDS = 10
NUMBERS = ["0", "-1", "1e400", "nan", "1e-400", "99999999999999999999999999999", "1" * 80, "0.0000001",
           "3 GB", "2 h", "1e30", "inf", "-0", "1_000", "1,5", "½", "٣"]
STRINGS = ['""', '"é\u202e"', '"\\x00"', '"' + "a" * 3000 + '"', '"\U0001f600"']
TARGETS = ["megatron", "torchtitan", "slurm", "kubernetes", "trace", "chakra", "vllm", "sglang", "dynamo", "trtllm"]
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
_STRING = re.compile(r'"[^"\n]*"')
_FIELD = re.compile(r"^\s*([a-z_][a-z_0-9.]*)\s*=\s*(.+)$")
_OPENING = re.compile(r"^\s*(?:[a-z_]+\s+)?[A-Za-z_][\w]*(?:\s+extends\s+\w+)?\s*\{\s*$|^\s*[a-z_]+\s*\{\s*$")
ERROR_LINE = re.compile(r"^(?:\S.*?: )?error\[[a-z-]+\]", re.MULTILINE)
LOCATED = re.compile(r"^\S.*?:\d+:\d+: error\[[a-z-]+\]")
# Fields the newer surfaces added, with a value each, to put into every kind of block
FOREIGN = ["dispatcher = deepep", "grad_reduce = bf16", "dropout = 10%", "router = power_of_two",
           "prefix_share = 20%", "preemption = swap", "congestion = pfc", "gpus = 8", "serve_runs = 2",
           "serve_low = 50%", "serve_high = 150%", "autoscale = true", "release = \"0.6\"", "draft_tokens = 3",
           "kv_offload = 64 GB", "samples = 4", "prompts = 64",
           # round 5: the last two sessions' fields
           "congestion = ecn", "moe_path = ep_with_dp", "profile = trtllm_pytorch", "memory = 50%", "staleness = 2",
           "speculative { tokens = 2  acceptance = 60% }", "placement = colocated", "algorithm = ppo",
           "max_response = 64", "minibatches = 2"]


class Timeout(BaseException):  # not an Exception: main()'s internal-error handler must not catch it
    pass


def _alarm(signum, frame):
    raise Timeout


def bases() -> dict[str, str]:
    """name -> text: the examples, the calibration designs, the docs pages' titled designs."""
    found = {p.name: p.read_text() for p in sorted((ROOT / "examples").glob("*.gcl"))}
    found |= {"calibrate/" + p.name: p.read_text() for p in sorted((ROOT / "tests/data/calibrate").glob("*.gcl"))}
    fence = re.compile(r'^ *```gcl title="([^"]+)"\n(.*?)^ *```', re.S | re.M)
    for page in sorted((ROOT / "docs").glob("*.md")):
        for title, body in fence.findall(page.read_text()):
            found[f"docs/{page.stem}/{title}"] = body  # a later block of the same title replaces it
    return found


def mutate(text: str, rng: random.Random) -> tuple[str, str]:
    """One hostile edit of `text` and what it was."""
    lines = text.split("\n")
    kind = rng.choice(["delete", "duplicate", "number", "number", "number", "string", "brace", "move", "foreign",
                       "choice", "truncate"])
    if kind == "number":
        spots = [(i, m) for i, line in enumerate(lines) if not line.lstrip().startswith("#")
                 for m in _NUMBER.finditer(line.split("#")[0])]
        if spots:
            i, m = rng.choice(spots)
            new = rng.choice(NUMBERS)
            lines[i] = lines[i][:m.start()] + new + lines[i][m.end():]
            return "\n".join(lines), f"number line {i + 1}: {m.group()} -> {new}"
    if kind == "string":
        spots = [(i, m) for i, line in enumerate(lines) if "import" not in line for m in _STRING.finditer(line)]
        if spots:
            i, m = rng.choice(spots)
            new = rng.choice(STRINGS)
            lines[i] = lines[i][:m.start()] + new + lines[i][m.end():]
            return "\n".join(lines), f"string line {i + 1}: {m.group()[:20]} -> {new[:20]!r}"
    fields = [i for i, line in enumerate(lines) if _FIELD.match(line) and not line.lstrip().startswith("#")]
    openings = [i for i, line in enumerate(lines) if _OPENING.match(line)]
    if kind == "move" and fields and openings:
        i, j = rng.choice(fields), rng.choice(openings)
        moved = lines.pop(i)
        lines.insert(j + (j < i), moved)
        return "\n".join(lines), f"move line {i + 1} ({moved.strip()[:40]}) under line {j + 1} ({text.split(chr(10))[j].strip()[:30]})"
    if kind == "foreign" and openings:
        j = rng.choice(openings)
        field = rng.choice(FOREIGN)
        lines.insert(j + 1, "  " + field)
        return "\n".join(lines), f"foreign `{field}` under line {j + 1} ({lines[j].strip()[:30]})"
    if kind == "choice" and fields:
        i = rng.choice(fields)
        m = _FIELD.match(lines[i])
        if re.fullmatch(r"[a-z_0-9]+", m.group(2).split("#")[0].strip()):
            new = rng.choice(["bogus", "", "Deepep", "alltoall alltoall", "true", "1"])
            lines[i] = lines[i][:m.start(2)] + new
            return "\n".join(lines), f"choice line {i + 1}: {m.group(2).strip()[:20]} -> {new!r}"
    if kind == "brace":
        spots = [i for i, line in enumerate(lines) if "{" in line or "}" in line]
        if spots:
            i = rng.choice(spots)
            ch = rng.choice("{}")
            lines[i] = lines[i].replace(ch, "", 1)
            return "\n".join(lines), f"brace line {i + 1}: drop {ch}"
    if kind == "truncate":
        at = rng.randrange(len(text))
        return text[:at], f"truncate at {at}"
    i = rng.randrange(len(lines))
    if kind == "duplicate":
        lines.insert(i, lines[i])
        return "\n".join(lines), f"duplicate line {i + 1} ({lines[i].strip()[:40]})"
    gone = lines.pop(i)
    return "\n".join(lines), f"delete line {i + 1} ({gone.strip()[:40]})"


class Driver:
    def __init__(self, folder: Path, keep: Path, budget: float):
        self.folder, self.keep, self.budget = folder, keep, budget
        self.cases, self.findings, self.seen = 0, [], set()
        self.started = time.process_time()
        self.stopping = False

    def over(self) -> bool:
        return self.stopping or time.process_time() - self.started > self.budget

    def stop(self, signum=None, frame=None) -> None:  # SIGUSR1: finish the case in hand, then report
        self.stopping = True

    def run(self, argv: list[str], what: str, source_text: str | None = None) -> tuple[int, str, str]:
        self.cases += 1
        out, err = io.StringIO(), io.StringIO()
        previous = signal.signal(signal.SIGPROF, _alarm)
        signal.setitimer(signal.ITIMER_PROF, CASE_SECONDS)
        from gclc.cli.main import main
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(argv)
                except SystemExit as exit_:
                    code = exit_.code if isinstance(exit_.code, int) else 2
        except Timeout:
            code = "timeout"
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)
        stdout, stderr = out.getvalue(), err.getvalue()
        if code == "timeout":
            self.record("hang", argv, what, f"past {CASE_SECONDS} s of CPU", source_text)
        elif code == 70 or "Traceback" in stdout + stderr or "internal error" in stderr:
            self.record("crash", argv, what, (stderr or stdout)[-400:], source_text)
        elif code == 1 and "--json" not in argv:
            errors = ERROR_LINE.findall(stderr)
            bad = [line for line in stderr.splitlines() if ERROR_LINE.match(line) and not LOCATED.match(line)]
            if bad:
                self.record("unlocated", argv, what, bad[0][:300], source_text)
            elif not errors and not stderr.startswith("gclc: ") and "error" not in stderr:
                self.record("silent-exit-1", argv, what, (stderr or stdout)[-300:], source_text)
        return code, stdout, stderr

    def record(self, kind, argv, what, detail, text) -> None:
        key = (kind, argv[0], re.sub(r"\d+", "N", detail.splitlines()[-1] if detail.strip() else detail)[:120])
        if key in self.seen:
            return
        self.seen.add(key)
        saved = None
        if text is not None:
            saved = self.keep / f"finding{len(self.findings)}.gcl"
            saved.write_text(text, encoding="utf-8", errors="surrogatepass")
        self.findings.append({"kind": kind, "argv": argv, "what": what, "detail": detail, "saved": str(saved)})
        print(f"[{kind}] gclc {' '.join(map(str, argv))[:160]}\n    {what}\n    {detail.strip()[-300:]}", flush=True)


def _measurement(text: str) -> str:
    data = ROOT / "tests/data/measurements"
    if re.search(r"^\s*serve\s+\w+", text, re.M):
        return str(data / "serving/vllm_sharegpt_llama31_8b.txt")
    return str(data / "nccl/bitdeer_h100_1node_all_reduce.txt")


def deep_commands(path: Path, text: str, rng: random.Random) -> list[list[str]]:
    out = path.parent / "out"
    every = [["plan", str(path)], ["plan", str(path), "--json"], ["explain", str(path)],
             ["render", str(path), "-o", str(out) + ".dot"], ["degrade", str(path), "nic=down"],
             ["calibrate", str(path), _measurement(text), "--json"]]
    every += [["export", str(path), "--to", t, "-o", str(out)] for t in TARGETS]
    if re.search(r"^\s*(train|serve|rl)\s+\w+", text, re.M):
        every.append(["schedule", str(path), "--no-failures", "--epochs", "0", "--json"])
    params = re.findall(r"^\s*param\s+(\w+)\s*=\s*(\d+)\s*$", text, re.M)
    if params:
        name, value = params[0]
        every.append(["sweep", str(path), "--in-process", "--vary", f"{name}={value},{int(value) * 2}", "-o", str(out) + "_sweep"])
    return every


def _clean(folder: Path) -> None:
    for p in folder.glob("out*"):
        shutil.rmtree(p) if p.is_dir() else p.unlink()


def fuzz_designs(driver: Driver, rng: random.Random, share: float) -> None:
    texts = bases()
    slow: dict[tuple[str, str], float] = {}
    reference: dict[str, str] = {}
    stop = driver.budget * share
    for name, text in texts.items():  # the unmutated bases' plans first: their times decide what runs on mutants
        path = driver.folder / "base.gcl"
        path.write_text(text)
        for argv in [["check", str(path)], ["plan", str(path), "--json"]]:
            t0 = time.process_time()
            code, out, _ = driver.run(argv, f"{name} unmutated", text)
            slow[(name, " ".join(argv[:1] + argv[2:3]))] = time.process_time() - t0
            if argv[0] == "plan" and "--json" in argv:
                reference[name] = out
            _clean(driver.folder)
        if driver.over():
            break
    names = list(texts)
    while time.process_time() - driver.started < stop and not driver.over():
        name = rng.choice(names)
        text, what = mutate(texts[name], rng)
        path = driver.folder / "case.gcl"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        code, _, err = driver.run(["check", str(path)], f"{name}: {what}", text)
        if code != 0:
            continue
        if what.startswith(("foreign", "move")) and "warning" not in err:
            _, out, _ = driver.run(["plan", str(path), "--json"], f"{name}: {what}", text)
            if out and out == reference.get(name):
                driver.record("accepted-unchanged", ["check", str(path)], f"{name}: {what}", "checks clean, plan --json identical", text)
        choices = deep_commands(path, text, rng) if slow.get((name, "plan --json"), 0) < 3 else []
        for argv in rng.sample(choices, min(2, len(choices))):
            driver.run(argv, f"{name}: {what}", text)
            _clean(driver.folder)


# Fields of the newer surfaces set one at a time on a shipped design: a field `check` accepts
# whose plan --json comes out byte-identical is a candidate for "accepted and ignored" (triaged
# by hand: a value equal to the default, or a setting this plan never exercises, is not one).
SENSITIVITY = {
    "examples/chat_serve_features.gcl": ("chat", [
        "router=round_robin", "engine.prefix_share=50%", "engine.preemption=reserve", "engine.frontend=5 ms",
        "engine.kv_block=64", "engine.moe_path=per_expert", "engine.mixed=false", "engine.scheduler_steps=8",
        "engine.graph_batch=8", "engine.overlap=true", "engine.kv_reads=per_query_head", "engine.mode=disaggregated",
        "gpus=8", "daily_load=[50%, 100%]", "parallelism.replicas=2"]),
    "examples/rl_grpo_70b.gcl": ("grpo_70b", [
        "generate.engine.preemption=swap", "generate.engine.frontend=5 ms", "generate.engine.memory=50%",
        "generate.engine.moe_path=per_expert", "generate.engine.graph_batch=8", "train.parallelism.dispatcher=deepep",
        "train.parallelism.ep=2", "train.parallelism.dp=512", "train.parallelism.grad_reduce=fp32",
        "train.parallelism.dropout=true"]),
    "tests/data/gb200_moe.gcl": ("deepseek_v3_pretrain", [
        "parallelism.dispatcher=allgather", "parallelism.dispatcher=deepep", "parallelism.grad_reduce=bf16",
        "parallelism.dropout=true", "parallelism.loss=compiled", "parallelism.ep_overlap=true"]),
}
_TIMING = re.compile(r'"(seconds|elapsed|cpu|wall)[a-z_]*": [0-9.e-]+')


def fuzz_sensitivity(driver: Driver) -> None:
    from gclc.testing.edit import edit_source

    for rel, (job, fields) in SENSITIVITY.items():
        text = (ROOT / rel).read_text()
        base = driver.folder / Path(rel).name
        base.write_text(text)
        _, reference, _ = driver.run(["plan", str(base), "--job", job, "--json"], f"{rel} unmutated", text)
        for field in fields:
            key, value = field.split("=", 1)
            case = base.with_name("case_" + base.name)
            changed, _ = edit_source(text, str(base), {}, {f"{job}.{key}": value})
            case.write_text(changed)
            code, _, err = driver.run(["check", str(case)], f"{rel}: {field}", changed)
            if code != 0:
                continue
            _, out, _ = driver.run(["plan", str(case), "--job", job, "--json"], f"{rel}: {field}", changed)
            if out and _TIMING.sub("", out.replace(str(case), str(base))) == _TIMING.sub("", reference):
                driver.record("accepted-unchanged", ["plan", str(case)], f"{rel}: {field}", "plan --json identical", changed)
            if driver.over():
                return


OPTIONS = {
    "schedule": [["--degrade", v] for v in ["spine=50%@1h-6h", "spine=nan@1h-2h", "spine=1e400@1h-2h", "spine=-1@1h-2h",
                                            "spine=50%@6h-1h", "spine=50%@1h-1h", "spine=50%@-1h-2h", "spine=50%@1e400h-1e401h",
                                            "nic:99999999=down@0h-1h", "nic:-1=down@0h-1h", "gpu:0=down@0 h-1 h", "=@-",
                                            "spine=50%", "spine@1h-2h", "link:0=150%@1h-2h", "bogus/spine=down@1h-2h",
                                            "spine=down@1h-2", "spine=0@0s-1s", "spine=50 %@1 d-2 d", "spine=½@1h-2h",
                                            "spine=down@1h-99999999999999999999h", "gpu:0=down@0h-1ms", "link:a=down@1h-2h"]]
                + [["--epochs", v] for v in ["-1", "101", "nan", "1e400"]] + [["--seed", v] for v in ["-1", "2**64", "1e400", "x"]]
                + [["--set", v] for v in ["n=nan", "=1", "n", "n=1e400", "a.b=1"]] + [["--cluster", v] for v in ["", "Nope", "\x1b"]],
    "export": [["--to", t, "--set", v] for t in ("megatron", "vllm", "slurm") for v in ["n=nan", "x=1", "=", "n=1e400"]]
              + [["--to", t, "--job", "nope"] for t in TARGETS] + [["--to", t, "--cluster", "nope"] for t in TARGETS]
              + [["--to", "vllm", "--job", ""], ["--to", "chakra", "-o", "/dev/null"], ["--to", "trace", "-o", "/"]],
    "sweep": [["--in-process", *a] for a in [["--vary", "n=1..0"], ["--vary", "n=1..1e9"], ["--vary", "n=nan,1"],
                                             ["--vary", "n=1..10*1"], ["--vary", "n=1..10+0"], ["--vary", "n=1..10*0.5"],
                                             ["--vary", "n="], ["--vary", "=1,2"], ["--vary", "n=1", "--vary", "n=2"],
                                             ["--sensitivity", "--delta", "nan"], ["--sensitivity", "--delta", "-1"],
                                             ["--sensitivity", "--delta", "1e400"], ["--sensitivity", "--delta", "0"],
                                             ["--vary", "n=1,2", "--pareto", "bogus,tco"], ["--vary", "n=1,2", "--pareto", "tco"],
                                             ["--vary", "n=1,2", "--pareto", ","], ["--vary", "n=1,2", "--objective", "goodput"],
                                             ["--vary", "n=1,2", "--chunk", "0"], ["--vary", "n=1,2", "--workers", "-1"],
                                             ["--vary", "nope=1,2"], ["--vary", "n=1..3+1e-300"]]]
             + [["--workers", "0", "--vary", "n=1,2"], ["--scheduler", "tcp://256.0.0.1:1", "--vary", "n=1,2"]],
    "plan": [["--set", v] for v in ["n=nan", "n=-1", "n=1e400", "n=" + "9" * 5000, "n=1 GB", "n=\"x\"", "n=[1,2]"]]
            + [["--job", "nope"], ["--objective", "x"]],
}


def fuzz_options(driver: Driver) -> None:
    folder = driver.folder
    shared = folder / "shared.gcl"
    shared.write_text((ROOT / "examples/shared_cluster.gcl").read_text())
    small = folder / "small.gcl"
    small.write_text("param n = 2\n" + (ROOT / "examples/a100_cluster.gcl").read_text().replace("gpus = 64", "gpus = 8 * n"))
    serve = folder / "serve.gcl"
    serve.write_text((ROOT / "examples/chat_serve_features.gcl").read_text())
    for command, cases in OPTIONS.items():
        for extra in cases:
            files = [shared] if command == "schedule" else [small, serve] if command in ("export", "plan") else [small]
            for f in files:
                argv = [command, str(f), *extra] + (["--no-failures", "--epochs", "0"] if command == "schedule" and "--epochs" not in extra else [])
                if command == "sweep" and "-o" not in extra:
                    argv += ["-o", str(folder / "out_sweep")]
                if command == "export" and "-o" not in extra:
                    argv += ["-o", str(folder / "out")]
                driver.run(argv, f"option {command} {extra}")
                _clean(folder)
                if driver.over():
                    return
    for extra in (["--quick", "-o", str(folder / "p.csv"), "--sizes", "x"], ["--quick", "--no-collectives", "-o", "/"],
                  ["--quick", "--no-collectives", "-o", str(folder / "d" / "p.csv")]):
        driver.run(["probe", *extra], f"probe {extra}")


def _reader_mutants(text: str, rng: random.Random, count: int) -> list[tuple[str, str]]:
    lines = text.split("\n")
    out = []
    for _ in range(count):
        kind = rng.choice(["number", "number", "delete", "duplicate", "truncate", "garbage"])
        ls = list(lines)
        spots = [(i, m) for i, line in enumerate(ls) for m in re.finditer(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?", line)]
        if kind == "number" and spots:
            i, m = rng.choice(spots)
            new = rng.choice(["0", "-1", "1e400", "nan", "inf", "1" * 60, "", "x", "0.0", "-0", "١", "1,000,0"])
            ls[i] = ls[i][:m.start()] + new + ls[i][m.end():]
            what = f"line {i + 1}: {m.group()} -> {new}"
        elif kind == "truncate":
            at = rng.randrange(max(1, len(text)))
            out.append((text[:at], f"truncate at {at}"))
            continue
        elif kind == "garbage":
            i = rng.randrange(len(ls))
            ls.insert(i, rng.choice(["\x00\x01", "{", "[" * 100, '{"a": }', "\ud800", "Rank 0 Group", "# nThread 1"]))
            what = f"garbage at line {i + 1}"
        else:
            i = rng.randrange(len(ls))
            if kind == "delete":
                ls.pop(i)
            else:
                ls.insert(i, ls[i])
            what = f"{kind} line {i + 1}"
        out.append(("\n".join(ls), what))
    return out


def fuzz_readers(driver: Driver, rng: random.Random, share: float) -> None:
    data = ROOT / "tests/data/measurements"
    designs = {"serving": ROOT / "tests/data/calibrate/llama8b_serve.gcl",
               "training": ROOT / "tests/data/calibrate/mixtral_16xh100.gcl"}
    folder = driver.folder / "readers"
    folder.mkdir(exist_ok=True)
    for name in ("llama8b_serve.gcl", "mixtral_16xh100.gcl", "h100_pod.gcl"):
        shutil.copy(ROOT / "tests/data/calibrate" / name, folder / name)
    files = sorted(p for p in data.rglob("*") if p.is_file() and p.name != "SOURCES.md")
    stop = driver.started + driver.budget * share
    while time.process_time() < stop and not driver.over():
        source = rng.choice(files)
        design = folder / designs.get(source.parent.name, designs["training"]).name
        text = source.read_text(encoding="utf-8", errors="replace")
        for mutant, what in _reader_mutants(text, rng, 1):
            target = folder / source.name
            target.write_text(mutant, encoding="utf-8", errors="surrogatepass")
            driver.run(["calibrate", str(design), str(target)], f"reader {source.name}: {what}")


def fuzz_lsp(driver: Driver, rng: random.Random, share: float) -> None:
    """The language server's analysis, hover and completion on half-typed files."""
    from gclc.lsp.analysis import analyse
    from gclc.lsp.complete import complete
    from gclc.lsp.definition import definition
    from gclc.lsp.hover import hover_text

    texts = list(bases().items())
    stop = driver.started + driver.budget * share
    path = str(driver.folder / "lsp.gcl")
    while time.process_time() < stop and not driver.over():
        name, text = rng.choice(texts)
        at = rng.randrange(len(text))
        half = text[:at]
        driver.cases += 1
        previous = signal.signal(signal.SIGPROF, _alarm)
        signal.setitimer(signal.ITIMER_PROF, CASE_SECONDS)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                analysis = analyse(path, half)
                for offset in {max(0, at - 1), at, rng.randrange(at + 1)}:
                    complete(analysis, half, offset)
                    hover_text(analysis, offset)
                    definition(analysis, offset)
        except Timeout:
            driver.record("hang", ["lsp"], f"{name} cut at {at}", "past the alarm", half)
        except Exception:  # noqa: BLE001 - the finding is the exception itself
            import traceback
            driver.record("crash", ["lsp"], f"{name} cut at {at}", traceback.format_exc()[-600:], half)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=600, help="CPU seconds in all (default 600)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="write the findings here")
    parser.add_argument("--only", choices=["designs", "options", "readers", "lsp", "sensitivity", "fields", "formats"],
                        action="append")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gclc-fuzz-") as tmp:
        folder = Path(tmp)
        keep = Path(tempfile.mkdtemp(prefix="gclc-fuzz-findings-"))
        driver = Driver(folder, keep, args.budget)
        signal.signal(signal.SIGUSR1, driver.stop)
        only = set(args.only or ["designs", "options", "readers", "lsp", "sensitivity", "fields", "formats"])
        if "fields" in only:
            fuzz_surfaces.fuzz_fields(driver, rng)
        if "formats" in only:
            fuzz_surfaces.fuzz_formats(driver, rng, 0.2 if only != {"formats"} else 1)
        if "options" in only:
            fuzz_options(driver)
        if "sensitivity" in only:
            fuzz_sensitivity(driver)
        if "readers" in only:
            fuzz_readers(driver, rng, 0.35 if only != {"readers"} else 1)
        if "lsp" in only:
            fuzz_lsp(driver, rng, 0.45 if only != {"lsp"} else 1)
        if "designs" in only:
            fuzz_designs(driver, rng, 1)
    if args.json:
        Path(args.json).write_text(json.dumps(driver.findings, indent=1, default=str))
    kinds = {}
    for finding in driver.findings:
        kinds[finding["kind"]] = kinds.get(finding["kind"], 0) + 1
    cpu = time.process_time() - driver.started
    print(f"fuzz_hostile: {driver.cases} cases, {cpu:.0f} s CPU / {time.perf_counter() - wall:.0f} s wall, "
          f"{len(driver.findings)} distinct findings {kinds or ''} (inputs kept in {keep})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
