"""Hostile input, round 5 (driven by benchmarks/fuzz_hostile.py `--only fields` / `--only formats`):
the surfaces of the last two sessions with values chosen to break them, not random edits.

- `fields`: each newer field (a fabric's `congestion`, `dispatcher`, the RL job's fields, the
  engine's `profile` (release) and `moe_path`, speculative decoding) set on a shipped design to
  a hostile or telling value; `check`, then `plan --json` where it checks. Beside crashes and
  unlocated errors, a case marked `refuse` that plans anyway is recorded "accepted-hostile" and
  one marked `moves` whose plan --json is byte-identical to the unedited design's is recorded
  "accepted-unchanged" (both triaged by hand).
- `formats`: the calibration readers' inputs edited in their own structure (a JSON value's type
  or a key, a CSV column or cell, an nccl-tests row's field, a log's per-iteration number) to
  NaN, infinity, a negative, a huge or an empty value. A mutant that `calibrate` accepts
  without a word (exit 0) whose output differs from the unedited file's took the hostile value
  as a measurement: recorded "accepted-hostile"."""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ("ideal", "vllm_0_2", "vllm_v0", "vllm_0_6", "vllm_v1", "sglang_0_3", "sglang", "trtllm_0_9",
           "trtllm_0_12", "trtllm_pytorch")
MOE_PATHS = ("grouped", "tp_sharded", "per_expert", "ep_with_dp")
BAD_CHOICES = ("PFC", '"pfc"', "1", "true", "pfc pfc", "")


def _cases() -> list[tuple[str, str | None, dict[str, str], str]]:
    """(design, job, fields set, expectation: refuse | moves | any)."""
    roce, ib, moe = "examples/mi300x_roce.gcl", "examples/dgx_h100_superpod.gcl", "tests/data/gb200_moe.gcl"
    chat, ds, rl = "examples/chat_serve_features.gcl", "examples/deepseek_v3_serve.gcl", "examples/rl_grpo_70b.gcl"
    out = [(roce, "llama3_70b_mi300x", {"RoCE_Rails.congestion": "ecn"}, "any"),     # the default
           (moe, "deepseek_v3_pretrain", {"parallelism.ep": "64"}, "any")]
    out += [(roce, "llama3_70b_mi300x", {"RoCE_Rails.congestion": v}, "refuse") for v in BAD_CHOICES]
    out += [(ib, "llama3_405b_pretrain", {"SuperPOD_NDR.congestion": v}, "refuse") for v in ("pfc", "ecn")]
    out += [(moe, "deepseek_v3_pretrain", {"XDR_Campus.congestion": "pfc"}, "refuse")]
    out += [(roce, "llama3_70b_mi300x", {"RoCE_Rails.congestion": "pfc"}, "any")]   # dense: no all-to-all to pause
    out += [(moe, "deepseek_v3_pretrain", {"parallelism.dispatcher": v}, "moves")
            for v in ("allgather", "deepep", "hybridep")]
    out += [(moe, "deepseek_v3_pretrain", {"parallelism.dispatcher": v}, "refuse") for v in ("bogus", "DeepEP", "")]
    out += [(moe, "deepseek_v3_pretrain", {"parallelism.dispatcher": "deepep", "parallelism.ep": "1"}, "any")]
    out += [(roce, "llama3_70b_mi300x", {"parallelism.dispatcher": v}, "refuse") for v in ("deepep", "allgather")]
    spec = "chat.engine.speculative"
    out += [(chat, "chat", {f"{spec}.tokens": v}, "refuse") for v in ("0", "-1", "1.5", "1e400", "nan")]
    out += [(chat, "chat", {f"{spec}.tokens": v}, "moves") for v in ("1", "64", "100000")]
    out += [(chat, "chat", {f"{spec}.acceptance": v}, "refuse") for v in ("150%", "-10%", "nan", "2")]
    out += [(chat, "chat", {f"{spec}.acceptance": v}, "moves") for v in ("0%", "100%", "1e-300")]
    out += [(chat, "chat", {"engine.profile": v}, "moves") for v in ENGINES if v != "vllm_v1"]
    out += [(chat, "chat", {"engine.moe_path": v}, "refuse") for v in MOE_PATHS]   # a dense model
    out += [(ds, "chat", {"engine.profile": v}, "moves") for v in ENGINES if v != "sglang"]
    out += [(ds, "chat", {"engine.moe_path": v}, "any") for v in MOE_PATHS]
    out += [(chat, "chat", {"engine.dispatcher": "deepep"}, "refuse")]   # a dense model
    out += [(ds, "chat", {"engine.dispatcher": "deepep"}, "moves"), (ds, "chat", {"engine.dispatcher": "alltoall"}, "any")]
    out += [(ds, "chat", {"engine.dispatcher": "allgather"}, "any")]   # vLLM V1's default, priced on any engine
    out += [(ds, "chat", {"engine.profile": e, "engine.moe_path": "ep_with_dp"}, "any") for e in ("vllm_0_2", "trtllm_0_9")]
    out += [(ds, "chat", {"engine.speculative.tokens": "1", "engine.speculative.acceptance": "100%"}, "moves")]
    out += [(rl, "grpo_70b", {f"grpo_70b.{k}": v}, "refuse") for k, v in (
        ("samples", "0"), ("prompts", "0"), ("max_response", "0"), ("steps", "0"), ("epochs", "0"), ("minibatches", "0"),
        ("samples", "1e400"), ("staleness", "-1"), ("algorithm", "dpo"), ("placement", "both"),
        ("minibatches", "100000"), ("algorithm", "ppo"), ("critic", "Llama3_70B"))]
    out += [(rl, "grpo_70b", {f"grpo_70b.{k}": v}, "moves") for k, v in (
        ("samples", "1"), ("prompts", "100000000"), ("max_response", "1"), ("epochs", "1000"), ("staleness", "1000000"),
        ("placement", "colocated"), ("placement", "disaggregated"), ("reward", "Llama3_70B"), ("response", "1"),
        ("prompt", "1000000"), ("generate.gpus", "1000000000"), ("train.gpus", "3"), ("generate.parallelism.tp", "3"),
        ("generate.parallelism.tp", "1024"), ("generate.engine.memory", "1%"), ("generate.engine.memory", "100%"),
        ("generate.engine.profile", "trtllm_0_9"), ("generate.engine.profile", "ideal"),
        ("train.parallelism.dispatcher", "deepep"), ("generate.engine.moe_path", "per_expert"))]
    out += [(rl, "grpo_70b", {"grpo_70b.generate.engine.memory": v}, "refuse") for v in ("0%", "150%", "nan")]
    out += [(rl, "grpo_70b", {"grpo_70b.generate.engine.speculative.tokens": "4",
                              "grpo_70b.generate.engine.speculative.acceptance": a}, "moves") for a in ("0%", "100%")]
    return out


def fuzz_fields(driver, rng: random.Random) -> None:
    from gclc.testing.edit import edit_source

    references: dict[tuple[str, str | None], str] = {}
    timing = re.compile(r'"(seconds|elapsed|cpu|wall)[a-z_]*": [0-9.e-]+')
    for rel, job, fields, expect in _cases():
        text = (ROOT / rel).read_text()
        base = driver.folder / Path(rel).name
        base.write_text(text)
        job_args = ["--job", job] if job else []
        if (rel, job) not in references:
            _, references[rel, job], _ = driver.run(["plan", str(base), *job_args, "--json"], f"{rel} unmutated", text)
        what = f"{rel}: " + ", ".join(f"{k} = {v}" for k, v in fields.items())
        try:
            qualified = {(k if k.split(".")[0][:1].isupper() or k.startswith(f"{job}.") else f"{job}.{k}"): v
                         for k, v in fields.items()}
            changed, _ = edit_source(text, str(base), {}, qualified)
        except Exception as problem:  # noqa: BLE001 - an edit the editor cannot make is a harness gap, not a finding
            print(f"  (skipped {what}: {problem})")
            continue
        case = base.with_name("case_" + base.name)
        case.write_text(changed)
        code, _, err = driver.run(["check", str(case)], what, changed)
        if code != 0:
            print(f"  {expect:6} check {code}: {what}: {_first_error(err)}", flush=True)
            continue
        code, out, err = driver.run(["plan", str(case), *job_args, "--json"], what, changed)
        print(f"  {expect:6} plan  {code}: {what}" + (f": {_first_error(err)}" if code else ""), flush=True)
        same = out and timing.sub("", out.replace(str(case), str(base))) == timing.sub("", references[rel, job])
        if expect == "refuse" and code == 0:
            driver.record("accepted-hostile", ["plan", str(case)], what, "checks clean and plans", changed)
        elif expect == "moves" and same:
            driver.record("accepted-unchanged", ["plan", str(case)], what, "plan --json identical", changed)
        if driver.over():
            return


def _first_error(err: str) -> str:
    return next((line.strip() for line in err.splitlines() if "error" in line), err.strip()[:160])[:200]


HOSTILE = ("nan", "NaN", "-nan", "inf", "Infinity", "-1", "1e400", "", "N/A", "0", "1" * 40)


def _json_mutant(text: str, rng: random.Random) -> tuple[str, str] | None:
    """A value of one JSON object (one per line or the whole file) made hostile, or a key dropped."""
    lines = text.split("\n")
    whole = [text] if text.lstrip().startswith("{") and "\n{" not in text.strip() else None
    objects = whole or [line for line in lines if line.strip().startswith("{")]
    if not objects:
        return None
    chosen = rng.choice(objects)
    try:
        value = json.loads(chosen)
    except ValueError:
        return None
    if not isinstance(value, dict) or not value:
        return None
    leaves = [k for k, v in value.items() if isinstance(v, (int, float, str, bool)) or v is None]
    if not leaves:
        return None
    key = rng.choice(leaves)
    kind = rng.choice(["value", "value", "value", "type", "drop"])
    if kind == "drop":
        del value[key]
        new = json.dumps(value)
        note = f"drop `{key}`"
    else:
        token = "@@HOSTILE@@"
        value[key] = token
        literal = rng.choice(["NaN", "Infinity", "-Infinity", "-1", "1e400", "0", "null", "true", '"12"', "[]", "{}",
                              '"' + "9" * 400 + '"', "1" * 400]) if kind == "value" else rng.choice(
            ['"x"', "[1, 2]", '{"a": 1}', "false"])
        new = json.dumps(value).replace(f'"{token}"', literal)
        note = f"`{key}` -> {literal[:20]}"
    mutated = new if whole else text.replace(chosen, new, 1)
    return mutated, note


def _csv_mutant(text: str, rng: random.Random) -> tuple[str, str] | None:
    lines = text.split("\n")
    rows = [i for i, line in enumerate(lines) if "," in line and not line.startswith("#")]
    if not rows:
        return None
    i = rng.choice(rows)
    cells = lines[i].split(",")
    kind = rng.choice(["cell", "cell", "cell", "drop-column", "swap-columns", "short-row", "header-twice"])
    if kind == "cell":
        j = rng.randrange(len(cells))
        new = rng.choice(HOSTILE)
        cells[j] = new
        lines[i] = ",".join(cells)
        return "\n".join(lines), f"csv line {i + 1} cell {j + 1} -> {new[:12]!r}"
    if kind == "drop-column":
        j = rng.randrange(len(cells))
        return "\n".join(",".join(c for n, c in enumerate(line.split(",")) if n != j) if "," in line else line
                         for line in lines), f"csv column {j + 1} dropped"
    if kind == "swap-columns" and len(cells) > 1:
        a, b = rng.sample(range(len(cells)), 2)
        cells[a], cells[b] = cells[b], cells[a]
        lines[i] = ",".join(cells)
        return "\n".join(lines), f"csv line {i + 1} columns {a + 1} and {b + 1} swapped"
    if kind == "short-row":
        lines[i] = ",".join(cells[: max(1, len(cells) // 2)])
        return "\n".join(lines), f"csv line {i + 1} cut to half its cells"
    lines.insert(i + 1, lines[rows[0]])
    return "\n".join(lines), f"csv header repeated after line {i + 1}"


_ROW_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])")


def _text_mutant(text: str, rng: random.Random) -> tuple[str, str] | None:
    """A number of a data row (nccl-tests) or of a log's per-iteration line made hostile."""
    lines = text.split("\n")
    rows = [i for i, line in enumerate(lines) if _ROW_NUMBER.search(line)
            and (re.search(r"iteration|elapsed|tps|tflops|throughput|tokens|step", line, re.I)
                 or re.match(r"^\s+\d+\s+\d+\s+\w+", line))]
    if not rows:
        return None
    i = rng.choice(rows)
    spots = list(_ROW_NUMBER.finditer(lines[i]))
    m = rng.choice(spots)
    new = rng.choice(HOSTILE)
    lines[i] = lines[i][:m.start()] + new + lines[i][m.end():]
    return "\n".join(lines), f"line {i + 1}: {m.group()} -> {new[:12]!r}"


def mutant(path: Path, text: str, rng: random.Random) -> tuple[str, str] | None:
    if path.suffix in (".json", ".jsonl"):
        return _json_mutant(text, rng)
    if path.suffix == ".csv":
        return _csv_mutant(text, rng)
    return _text_mutant(text, rng)


def fuzz_formats(driver, rng: random.Random, share: float) -> None:
    data = ROOT / "tests/data/measurements"
    designs = {"serving": "llama8b_serve.gcl", "training": "mixtral_16xh100.gcl", "nccl": "h100_pod.gcl",
               "kernels": "h100_pod.gcl"}
    folder = driver.folder / "formats"
    folder.mkdir(exist_ok=True)
    for name in set(designs.values()):
        shutil.copy(ROOT / "tests/data/calibrate" / name, folder / name)
    files = sorted(p for p in data.rglob("*") if p.is_file() and p.name != "SOURCES.md")
    references: dict[Path, str] = {}
    stop = driver.started + driver.budget * share
    while time.process_time() < stop and not driver.over():
        source = rng.choice(files)
        design = folder / designs.get(source.parent.name, "h100_pod.gcl")
        text = source.read_text(encoding="utf-8", errors="replace")
        target = folder / source.name
        if source not in references:
            target.write_text(text)
            _, references[source], _ = driver.run(["calibrate", str(design), str(target)], f"format {source.name} unmutated")
        made = mutant(source, text, rng)
        if made is None:
            continue
        mutated, what = made
        target.write_text(mutated, encoding="utf-8", errors="surrogatepass")
        code, out, err = driver.run(["calibrate", str(design), str(target)], f"format {source.name}: {what}")
        hostile = any(h and h in what for h in ("nan", "NaN", "inf", "Infinity", "-1", "1e400", "N/A", "'1111"))
        if code == 0 and hostile and not err.strip() and out != references[source]:
            driver.record("accepted-hostile", ["calibrate", str(design), source.name], f"format {source.name}: {what}",
                          "calibrated without a word, on different numbers", mutated)
