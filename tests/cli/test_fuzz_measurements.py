"""CLI fuzz of the readers main gained with calibration (issue 30, item 8): every measurement
format `gclc calibrate` reads (the kernel CSV `gclc probe` writes, nccl-tests output,
Megatron-LM / torchtitan / NeMo logs, vLLM / SGLang `bench serve` JSON and summaries,
genai-perf / aiperf JSON and CSV) is read through the one bounded reader (compiler/files.py)
and its numbers through the one plain-number parser (dsl/plain_number.py, by way of
compiler/measure/text.py). Each case is a published measurement (tests/data/measurements,
sources in its SOURCES.md) with hostile edits: a number replaced by a hostile cell, a line
inserted, the file cut short, a byte that is not UTF-8. The contract is the round-3 fuzz's
(tests/cli/test_fuzz_readers.py `run_case`): exit 0/1/2/3/130 only, no traceback, located
errors, no input modified, no temporary file, the same bytes twice."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import example, given, strategies as st

from gclc.cli.main import main

from .test_fuzz_readers import CELLS, FUZZ, run_case, run_once

DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLES = {
    "kernels.csv": "kernels/h100_mamf.csv",
    "all_reduce_perf.txt": "nccl/bitdeer_h100_1node_all_reduce.txt",
    "megatron.log": "training/megatron_llama2_7b_tp2.log",
    "torchtitan.log": "training/torchtitan_flex_debug.log",
    "nemo.log": "training/nemo1_progress_bar.log",
    "sglang.jsonl": "serving/sglang_random_250k.jsonl",
    "vllm.txt": "serving/vllm_sharegpt_llama31_8b.txt",
    "aiperf.json": "serving/aiperf_gpt_oss_20b.json",
    "aiperf.csv": "serving/aiperf_gpt_oss_20b.csv",
}
NUMBER = re.compile(r"(?<![\w.])[0-9][0-9.,eE+-]*")
# what a measurement's number may become, beyond the trace cells: JSON's own spellings
HOSTILE = st.one_of(CELLS, st.sampled_from(["Infinity", "-Infinity", "NaN", "true", "null", "[]", "{}",
                                            "[" * 200, "1e400", "4" * 5000, "0", "-0.0", "1,2345"]))


@st.composite
def edits(draw, text: str) -> str:
    """`text` with one to three hostile edits."""
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["number", "number", "number", "line", "cut"]))
        numbers = list(NUMBER.finditer(text))
        if kind == "number" and numbers:
            found = numbers[draw(st.integers(0, len(numbers) - 1))]
            text = text[:found.start()] + draw(HOSTILE) + text[found.end():]
        elif kind == "line":
            lines = text.split("\n")
            lines.insert(draw(st.integers(0, len(lines))), draw(st.lists(HOSTILE, max_size=4).map(",".join)))
            text = "\n".join(lines)
        else:
            text = text[:draw(st.integers(0, len(text)))]
    return text


@pytest.fixture
def lab(tmp_path):
    """The calibration example's design (tests/data/calibrate/h100_pod.gcl) in a folder."""
    shutil.copy(DATA / "calibrate" / "h100_pod.gcl", tmp_path / "pod.gcl")
    return tmp_path


@st.composite
def measurement_cases(draw):
    name = draw(st.sampled_from(sorted(SAMPLES)))
    text = draw(edits((DATA / "measurements" / SAMPLES[name]).read_text()))
    bad_byte = draw(st.booleans()) and draw(st.integers(0, 20)) == 0
    argv = draw(st.sampled_from([[], ["--json"], ["-o", "cal.gcl"]]))
    return name, text, bad_byte, argv


@FUZZ
@given(measurement_cases())
@example(("kernels.csv", (DATA / "measurements/kernels/h100_mamf.csv").read_text().replace("6144", "1" + "0" * 400),
          False, []))                                               # a 401-digit GEMM dimension: was exit 70
@example(("sglang.jsonl", '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}", False, []))  # was a RecursionError
@example(("all_reduce_perf.txt", (DATA / "measurements/nccl/bitdeer_h100_1node_all_reduce.txt").read_text()
          .replace("1119.8  239.71  419.49", "0  0  0"), False, []))  # a zero time: was a ZeroDivisionError
def test_measurement_files(lab, capsys, case):
    name, text, bad_byte, argv = case
    data = text.encode("utf-8", "surrogatepass")
    (lab / name).write_bytes(data[:len(data) // 2] + b"\xff" + data[len(data) // 2:] if bad_byte else data)
    run_case(lab, ["calibrate", "pod.gcl", name, *argv], capsys, "cal.gcl" if "-o" in argv else None)


# A number each reader uses, as the published file prints it (its first occurrence is edited)
READ = {"kernels.csv": "792.1e12", "all_reduce_perf.txt": "1119.8", "megatron.log": "11075.6",
        "torchtitan.log": "30,768", "nemo.log": "41.36", "sglang.jsonl": "91.82476212800248",
        "vllm.txt": "32.42", "aiperf.json": "13.16084556379392", "aiperf.csv": "6550.36"}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_hostile_number_in_every_format_is_located(lab, capsys, name):
    """A number each format's reader uses, made 1e400, then 6², then 1_000: exit 1 with the
    error at that number's line (never exit 70, never accepted)."""
    text = (DATA / "measurements" / SAMPLES[name]).read_text()
    at = text.index(READ[name])
    line = text.count("\n", 0, at) + 1
    for bad in ("1e400", "6²", "1_000"):
        (lab / name).write_text(text[:at] + bad + text[at + len(READ[name]):])
        code, _, err, _ = run_once(lab, ["calibrate", "pod.gcl", name], capsys)
        assert code == 1 and f"{name}:{line}:" in err and "error[measurement]" in err, (bad, err[-2000:])


@pytest.mark.parametrize("target", ["all_reduce_perf.txt", "pod.gcl", "link.txt", "fifo"])
def test_calibrate_never_writes_onto_what_it_read(lab, capsys, target):
    """`-o` naming the measurement, the design, a symlink to the measurement, or a FIFO:
    refused, and nothing read is changed."""
    shutil.copy(DATA / "measurements" / SAMPLES["all_reduce_perf.txt"], lab / "all_reduce_perf.txt")
    (lab / "link.txt").symlink_to("all_reduce_perf.txt")
    os.mkfifo(lab / "fifo")
    code = run_once(lab, ["calibrate", "pod.gcl", "all_reduce_perf.txt", "-o", target], capsys)[0]
    assert code in (1, 2)


def test_a_fifo_or_a_device_is_no_measurement(lab, capsys):
    """A FIFO nobody writes would block a reader that opens it: refused at once, located on the file."""
    os.mkfifo(lab / "fifo.txt")
    code, _, err, _ = run_once(lab, ["calibrate", "pod.gcl", "fifo.txt"], capsys)
    assert code == 1 and "fifo.txt: error[" in err
    code, _, err, _ = run_once(lab, ["calibrate", "pod.gcl", "/dev/zero"], capsys)
    assert code == 1 and "/dev/zero: error[" in err


def test_measurement_numbers_use_the_one_parser():
    """The readers' numbers are the plain-number parser's: ASCII digits, GCL's range, whole
    where a count is asked; tools' thousands separators in groups of three only."""
    from gclc.compiler.measure.text import number
    from gclc.dsl.plain_number import PlainNumberError

    assert number("1,234.5") == 1234.5 and number("12") == 12.0 and number("1e3", whole=True) == 1000
    for bad in ("1_000", "١٢", "1,23", "inf", "nan", "1e400", "1e-320", "9" * 50, "6²", ""):
        with pytest.raises(PlainNumberError):
            number(bad)
    with pytest.raises(PlainNumberError):
        number("2.5", whole=True)
    with pytest.raises(PlainNumberError):
        number("0", positive=True)


def test_a_folder_walk_stops_at_the_file_limit(lab, capsys, monkeypatch):
    """A folder of measurements is walked only until the limit (10,000 entries; 50 here): a
    larger tree, `/` say, is refused at once rather than walked whole; hidden folders
    (`.git`) and notes (`.md`) are skipped."""
    from gclc.compiler.measure import read

    monkeypatch.setattr(read, "MAX_FILES", 50)
    runs = lab / "runs"
    (runs / ".git").mkdir(parents=True)
    (runs / ".git" / "config").write_text("not a measurement")
    (runs / "NOTES.md").write_text("# where these came from")
    shutil.copy(DATA / "measurements" / SAMPLES["all_reduce_perf.txt"], runs / "all_reduce_perf.txt")
    assert run_once(lab, ["calibrate", "pod.gcl", "runs"], capsys)[0] == 0
    for i in range(60):
        (runs / "deep" / str(i)).mkdir(parents=True)
    code, _, err, _ = run_once(lab, ["calibrate", "pod.gcl", "runs"], capsys)
    assert code == 1 and "runs: error[measurement]: `runs` holds more than 50 files" in err
