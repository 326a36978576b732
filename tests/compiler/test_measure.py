"""The measurement readers (compiler/measure/) on real published outputs (tests/data/measurements/,
sources in SOURCES.md), and their located refusals of broken copies."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.measure.read import read_file, read_paths
from gclc.compiler.measure.records import CollectiveRun, KernelRun, ServeRun, TrainRun
from gclc.dsl.source import SourceFile
from gclc.testing import load_profile
from gclc.testing.profiles import scaled_examples

load_profile()
DATA = Path(__file__).resolve().parents[1] / "data" / "measurements"


def read(relative: str, text: str | None = None):
    path = str(DATA / relative)
    source = SourceFile(path, text if text is not None else Path(path).read_text(encoding="utf-8"))
    return read_file(source)


def only(relative: str, kind):
    found, problems = read(relative)
    assert not problems, [p.summary for p in problems]
    assert found and all(isinstance(m, kind) for m in found)
    return found


def where(problems) -> list[tuple[int, int, str]]:
    return [(p.subject.line, p.subject.column, p.summary) for p in problems]


# ---------------------------------------------------------------- nccl-tests

def test_nccl_single_host_with_g8_is_eight_gpus_on_one_host():
    (run,) = only("nccl/bitdeer_h100_1node_all_reduce.txt", CollectiveRun)
    assert (run.op, run.ranks, run.nodes, run.gpus_per_node) == ("all_reduce", 8, 1, 8)
    assert run.devices == ("NVIDIA H100 80GB HBM3",)
    last = run.points[-1]
    assert (last.size, last.count, last.dtype, last.redop) == (2147483648, 536870912, "float", "sum")
    assert last.time == pytest.approx(7983.5e-6) and last.in_time == pytest.approx(7985.2e-6)
    assert last.busbw == pytest.approx(470.73e9)
    # nccl-tests' own definition: algbw = size / time, busbw = algbw x 2 (n - 1) / n for all-reduce
    for p in run.points:
        assert p.algbw == pytest.approx(p.size / p.time, rel=2e-3)
        assert p.busbw == pytest.approx(p.algbw * 2 * 7 / 8, rel=2e-3)


def test_nccl_mpi_ranks_over_two_hosts():
    for name in ("bitdeer_h100_2node_all_reduce.txt", "a3mega_h100_2node_all_reduce.txt"):
        (run,) = only(f"nccl/{name}", CollectiveRun)
        assert (run.ranks, run.nodes, run.gpus_per_node) == (16, 2, 8)
    (run,) = only("nccl/a3mega_h100_2node_all_reduce.txt", CollectiveRun)
    assert len(run.points) == 31 and run.points[0].size == 8 and run.points[-1].size == 8 * 2**30
    assert run.points[0].span.line == 32 and run.points[-1].busbw == pytest.approx(338.82e9)


def test_nccl_runs_one_after_another_in_one_file_are_each_read():
    one = (DATA / "nccl/bitdeer_h100_1node_all_reduce.txt").read_text()
    two = (DATA / "nccl/bitdeer_h100_2node_all_reduce.txt").read_text()
    found, problems = read("nccl/sweep.txt", one + "\n" + two)
    assert not problems
    assert [(r.ranks, r.nodes, len(r.points)) for r in found] == [(8, 1, 4), (16, 2, 6)]


def test_nccl_mpirun_tags_are_read_through():
    text = (DATA / "nccl/bitdeer_h100_1node_all_reduce.txt").read_text()
    tagged = "\n".join(f"[1,0]<stdout>:{line}" if line.strip() else line for line in text.split("\n"))
    (run,), problems = read("nccl/tagged.txt", tagged)
    assert not problems and run.ranks == 8 and run.points[-1].busbw == pytest.approx(470.73e9)


def test_nccl_alltoall_sweep_with_shortened_rank_listings():
    """OCI's GB300 page: all-to-all on 1, 2, 16 and 32 hosts of 4 GPUs, the longer rank listings
    cut to their first and last two lines with `...` between, as published."""
    found = only("nccl/oci_gb300_alltoall.txt", CollectiveRun)
    assert [(r.op, r.ranks, r.nodes, r.gpus_per_node) for r in found] == [
        ("alltoall", 4, 1, 4), ("alltoall", 8, 2, 4), ("alltoall", 64, 16, 4), ("alltoall", 128, 32, 4)]
    assert found[0].devices == ("NVIDIA GB300",)
    last = found[-1].points[-1]
    assert (last.size, last.redop) == (17179869184, "none") and last.time == pytest.approx(357610e-6)
    assert last.algbw == pytest.approx(last.size / last.time, rel=2e-3)
    # all-to-all's bus bandwidth is algbw x (n - 1) / n (nccl-tests doc/PERFORMANCE.md)
    assert last.busbw == pytest.approx(last.algbw * 127 / 128, rel=2e-2)


def test_nccl_listings_that_cannot_be_counted_are_refused_where_they_start():
    text = (DATA / "nccl/oci_gb300_alltoall.txt").read_text().split("\n")
    run = text.index("# Collective test starting: alltoall_perf", 1)        # the 2-host run's lines
    shown = [i for i in range(run, run + 12) if "Rank  6" in text[i]]
    text[shown[0]] = text[shown[0]].replace("device  2", "device  5")     # 8 ranks do not fill hosts of 6 devices
    found, problems = read("nccl/cut.txt", "\n".join(text))
    assert len(found) == 3 and where(problems)[0][0] == run + 2           # located at the run's header
    assert "do not fill whole hosts" in problems[0].summary
    one = (DATA / "nccl/bitdeer_h100_2node_all_reduce.txt").read_text()
    alone = "\n".join(line.replace(line[line.index("Rank"):line.index("Group")], "Rank  0 ") if "Rank" in line and
                      "Group" in line else line for line in one.split("\n"))
    found, problems = read("nccl/alone.txt", alone)
    assert not found and "rank 0 is listed 16 times" in problems[0].summary


def test_nccl_broken_rows_are_located():
    text = (DATA / "nccl/bitdeer_h100_2node_all_reduce.txt").read_text().split("\n")
    text[26] = text[26].replace("2375.3", "23x5.3")          # line 27: a time that is no number
    text[27] = "    1073741824     268435456     float     sum"  # line 28: a row cut short
    found, problems = read("nccl/broken.txt", "\n".join(text))
    assert [(line, col) for line, col, _ in where(problems)] == [(27, text[26].index("23x5.3") + 1), (28, 5)]
    assert "`23x5.3` is not a number" in problems[0].summary and problems[0].summary.endswith("(time column)")
    assert "4 columns under a header of 13" in problems[1].summary
    assert len(found) == 1 and len(found[0].points) == 4   # the other rows are still read


def test_nccl_without_its_test_name_or_devices_is_refused():
    text = (DATA / "nccl/bitdeer_h100_1node_all_reduce.txt").read_text()
    nameless = text.replace("all_reduce_perf", "a_perf_binary")
    found, problems = read("nccl/output.txt", nameless)
    assert not found and where(problems)[0][:2] == (3, 5) and "which collective" in problems[0].summary  # the header
    # named by its file instead, it reads
    found, problems = read("nccl/all_gather_perf.txt", nameless)
    assert not problems and found[0].op == "all_gather"
    deviceless = "\n".join(line for line in text.split("\n") if "Rank" not in line)
    found, problems = read("nccl/output.txt", deviceless)
    assert not found and "no `Rank` lines" in problems[0].summary


def test_nccl_version_nccl_printed_is_each_runs():
    """OCI's GB300 page prints NCCL's own `NCCL version 2.28.7+cuda13.0` inside each run (after its
    `Rank` lines); the runs carry it, and the H100 outputs that print none carry none."""
    assert [r.nccl for r in only("nccl/oci_gb300_alltoall.txt", CollectiveRun)] == ["2.28.7"] * 4
    assert only("nccl/bitdeer_h100_1node_all_reduce.txt", CollectiveRun)[0].nccl == ""


def test_nccl_version_nccl_tests_prints_before_its_header():
    """nccl-tests 2.17 on prints `# nccl-tests version V nccl-headers=H nccl-library=L` before each
    run's header (src/util.cu writeDeviceReport; the codes are NCCL_VERSION_CODE, X*10000 + Y*100 + Z):
    the library's is the NCCL that ran, and each run of a sweep takes the line above its own header.
    NCCL's INFO line (`host:pid:tid [0] NCCL INFO NCCL version ...`) under mpirun's tags reads too."""
    one = (DATA / "nccl/bitdeer_h100_1node_all_reduce.txt").read_text()
    two = (DATA / "nccl/bitdeer_h100_2node_all_reduce.txt").read_text()
    first = "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22503\n"
    second = "# nccl-tests version 2.17.6 (b4d5bee) nccl-headers=22602 nccl-library=22602\n"
    found, problems = read("nccl/sweep.txt", first + one + "\n" + second + two)
    assert not problems and [r.nccl for r in found] == ["2.25.3", "2.26.2"]
    lines = one.split("\n")
    lines.insert(lines.index("    #") + 1, "[1,0]<stdout>:host:1623025:1623025 [0] NCCL INFO NCCL version 2.21.5+cuda12.4")
    (run,), problems = read("nccl/info.txt", "\n".join(lines))
    assert not problems and run.nccl == "2.21.5"
    # releases before 2.9 coded the version X*1000 + Y*100 + Z
    (run,), problems = read("nccl/old.txt", "# nccl-tests version 2.0 nccl-headers=2804 nccl-library=2804\n" + one)
    assert not problems and run.nccl == "2.8.4"


def test_nccl_version_lines_that_cannot_be_read_are_located():
    text = (DATA / "nccl/oci_gb300_alltoall.txt").read_text().split("\n")
    at = text.index("NCCL version 2.28.7+cuda13.0")
    text[at] = "NCCL version 2.x+cuda13.0"
    found, problems = read("nccl/bad_version.txt", "\n".join(text))
    assert where(problems) == [(at + 1, 14, problems[0].summary)] and "`2.x+cuda13.0`" in problems[0].summary
    assert len(found) == 4 and found[0].nccl == "" and found[1].nccl == "2.28.7"   # the run reads; its version unsaid
    one = (DATA / "nccl/bitdeer_h100_1node_all_reduce.txt").read_text()
    bad = "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=2x809"
    found, problems = read("nccl/bad_code.txt", bad + "\n" + one)
    assert where(problems)[0][:2] == (1, bad.index("2x809") + 1) and "`2x809`" in problems[0].summary
    # digits past Python's int conversion limit are no version either, not a traceback
    found, problems = read("nccl/long_code.txt", bad.replace("2x809", "9" * 5000) + "\n" + one)
    assert where(problems)[0][:2] == (1, bad.index("2x809") + 1) and len(found) == 1
    # one run named two versions: an error at the second
    lines = one.split("\n")
    lines.insert(lines.index("    #") + 1, "NCCL version 2.27.3+cuda12.9")
    found, problems = read("nccl/two.txt", "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\n"
                           + "\n".join(lines))
    assert where(problems)[0][:2] == (lines.index("NCCL version 2.27.3+cuda12.9") + 2, 14)
    assert "two NCCL versions: 2.28.9 (line 1) and 2.27.3" in problems[0].summary


# ---------------------------------------------------------------- training logs

def test_megatron_iterations_and_argument_dump():
    (run,) = only("training/megatron_mixtral_16xh100.log", TrainRun)
    assert run.framework == "megatron" and [s.iteration for s in run.steps] == [43, 44, 45, 71, 72, 73]
    assert run.steps[0].seconds == pytest.approx(5.4449) and run.steps[0].tflops == pytest.approx(239.8)
    assert run.setting("hidden_size") == "4096" and run.setting("expert_model_parallel_size") == "8"
    assert run.setting("global_batch_size") == "128" and run.setting("fp8") == "None"
    # the first quarter of the logged steps is warm-up; the median of the rest
    assert run.median("seconds") == pytest.approx((5.4707 + 5.7186) / 2)   # of 45, 71, 72, 73
    assert run.steps[-1].span.line == 25


def test_megatron_without_throughput_field_keeps_the_time():
    (run,) = only("training/megatron_llama2_7b_tp2.log", TrainRun)
    assert [s.seconds for s in run.steps] == pytest.approx([11.0756, 14.6427]) and run.steps[0].tflops is None


def test_torchtitan_metrics_lines():
    (run,) = only("training/torchtitan_moe_gate_fp32.log", TrainRun)
    assert run.framework == "torchtitan" and len(run.steps) == 8
    assert run.steps[0].tokens_per_s == 10050 and run.steps[0].mfu == pytest.approx(0.1399)
    assert run.steps[0].memory == pytest.approx(66.91 * 2**30) and run.steps[0].seconds is None
    (debug,) = only("training/torchtitan_flex_debug.log", TrainRun)
    assert [s.iteration for s in debug.steps] == list(range(3, 11)) and debug.steps[0].memory == 0


def test_nemo_step_timing_and_progress_bar():
    (run,) = only("training/nemo2_bionemo.log", TrainRun)
    assert run.framework == "nemo" and [s.iteration for s in run.steps] == list(range(120, 126))
    assert run.steps[4].seconds == pytest.approx(0.0317) and run.setting("global_batch_size") == "1"
    (bar,) = only("training/nemo1_progress_bar.log", TrainRun)
    assert bar.steps[0].seconds == pytest.approx(41.36) and bar.steps[0].iteration == 794


def test_training_logs_refuse_bad_numbers_where_they_are():
    text = (DATA / "training/megatron_mixtral_16xh100.log").read_text().replace("5533.8", "55z3.8")
    found, problems = read("training/broken.log", text)
    (line, column, summary), = where(problems)
    assert (line, column) == (21, text.split("\n")[20].index("55z3.8") + 1) and "`55z3.8` is not a number" in summary
    assert len(found[0].steps) == 5
    text = (DATA / "training/nemo2_bionemo.log").read_text().replace("0.03163", "-0.03163")
    found, problems = read("training/broken.log", text)
    assert where(problems)[0][:2] == (2, text.split("\n")[1].index("-0.03163") + 1) and "must be positive" in problems[0].summary


# ---------------------------------------------------------------- serving

def test_sglang_jsonl_result():
    (run,) = only("serving/sglang_random_250k.jsonl", ServeRun)
    assert (run.tool, run.rate, run.concurrency, run.requests) == ("sglang", None, 16, 300)
    assert (run.input_tokens, run.output_tokens) == (250000, 1000)
    assert run.latency("tpot", "p50") == pytest.approx(4.830382395428731e-3)
    assert run.latency("e2e", "p99") == pytest.approx(5.812809163999625)


def test_summary_blocks_of_vllm_and_sglang():
    (vllm,) = only("serving/vllm_sharegpt_llama31_8b.txt", ServeRun)
    assert vllm.requests == 1000 and vllm.output_throughput == pytest.approx(6582.87)
    assert vllm.latency("ttft", "p50") == pytest.approx(9.4597) and vllm.latency("itl", "p99") == pytest.approx(0.21435)
    assert vllm.rate is None and vllm.input_tokens == pytest.approx(229.711)
    sweep = only("serving/sglang_lora_rates.txt", ServeRun)
    assert [(r.rate, r.request_throughput) for r in sweep] == [(2.0, 3.80), (4.0, 3.73)]
    assert sweep[1].latency("ttft", "p99") == pytest.approx(15.24917) and sweep[0].latency("e2e", "mean") == pytest.approx(1.97933)


def test_aiperf_json_and_csv_exports_of_one_run_agree():
    (json_run,) = only("serving/aiperf_gpt_oss_20b.json", ServeRun)
    (csv_run,) = only("serving/aiperf_gpt_oss_20b.csv", ServeRun)
    assert json_run.concurrency == 100 and json_run.model == "openai/gpt-oss-20b" and json_run.input_tokens == 550
    assert json_run.request_throughput == pytest.approx(csv_run.request_throughput, rel=1e-3)
    # the JSON states total output tokens and duration; the CSV the throughput itself
    assert json_run.output_throughput == pytest.approx(csv_run.output_throughput, rel=1e-4)
    assert json_run.latency("ttft", "p50") == pytest.approx(csv_run.latency("ttft", "p50"), rel=1e-5)
    assert csv_run.latency("tpot", "p99") == pytest.approx(0.05587)


def test_serving_results_refuse_broken_json_and_missing_fields_where_they_are():
    text = (DATA / "serving/sglang_random_250k.jsonl").read_text()
    broken = text.replace('"completed": 300,', '"completed": 300')
    found, problems = read("serving/broken.jsonl", broken)
    assert not found and where(problems)[0][:2] == (1, broken.index('"total_input_tokens"') + 1)
    assert problems[0].summary == "not JSON: Expecting ',' delimiter"
    found, problems = read("serving/broken.jsonl", text.replace('"output_throughput"', '"throughput_out"'))
    assert not found and "no number `output_throughput`" in problems[0].summary
    block = (DATA / "serving/vllm_sharegpt_llama31_8b.txt").read_text().replace("6582.87", "6,58x.87")
    found, problems = read("serving/broken.txt", block)
    assert not found and where(problems)[0][:2] == (8, 42) and "`6,58x.87` is not a number" in problems[0].summary


# ---------------------------------------------------------------- kernels

def test_kernel_csv_of_published_gemm_rates():
    (run,) = only("kernels/h800_fp8_gemm_tilelang.csv", KernelRun)
    assert run.about("gpu") == "NVIDIA H800 SXM" and len(run.points) == 7
    first = run.points[0]
    assert (first.kind, first.precision, first.m, first.n, first.k) == ("gemm", "fp8", 8192, 8192, 256)
    assert first.rate == pytest.approx(569e12)
    # the published latency, 0.060352 ms, is what the rate implies
    assert first.seconds == pytest.approx(0.060352e-3, rel=2e-3)


def test_kernel_csv_catches_the_published_latency_unit_slip():
    """tilelang's README labels its latencies seconds; entered so, they contradict the rates."""
    text = (DATA / "kernels/h800_fp8_gemm_tilelang.csv").read_text()
    text = text.replace(",,569e12", ",0.060352,569e12")
    found, problems = read("kernels/slip.csv", text)
    (line, column, summary), = where(problems)
    assert (line, column) == (6, text.split("\n")[5].index("569e12") + 1) and "disagrees" in summary
    assert len(found[0].points) == 6


def test_kernel_csv_refuses_unknown_kinds_and_missing_shapes():
    text = (DATA / "kernels/h100_mamf.csv").read_text()
    found, problems = read("kernels/bad.csv", text + "gemv,bf16,1,2,3,,,,,,,,,,1e12\nattention,bf16,,,,8,32,,128,1,,,,0.01,\n")
    assert not [p for p in problems if p.subject.line == 5]
    assert where(problems) == [(6, 1, "unknown kernel `gemv`"), (7, 24, "a attention row needs `seq`")]
    found, problems = read("kernels/bad.csv", text.replace("kind,precision", "sort,precision"))
    assert not found and "no `kind` column" in problems[0].summary


def test_kernel_csv_collective_rows_carry_the_probes_nccl_version():
    """`gclc probe` writes `# nccl: 2.21.5` (torch.cuda.nccl.version()); its collective rows were timed on
    that NCCL, and a version that is none is refused on its line."""
    text = (DATA / "kernels/h100_mamf.csv").read_text()
    rows = text.replace("# gpu:", "# nccl: 2.21.5\n# gpu:") + "all_reduce,,,,,,,,,,1048576,8,1,0.0001,\n"
    found, problems = read("kernels/probe.csv", rows)
    assert not problems and [r.nccl for r in found if isinstance(r, CollectiveRun)] == ["2.21.5"]
    found, problems = read("kernels/probe.csv", rows.replace("2.21.5", "two"))
    assert where(problems) == [(2, len("# nccl: ") + 1, problems[0].summary)] and "`two`" in problems[0].summary


# ---------------------------------------------------------------- the folder, and anything else

def test_a_folder_of_every_format_reads_whole():
    found, problems, sources = read_paths([str(DATA)])
    assert not problems
    kinds = {type(m).__name__ for m in found}
    assert kinds == {"CollectiveRun", "TrainRun", "ServeRun", "KernelRun"} and len(sources) == 17
    frameworks = {m.framework for m in found if isinstance(m, TrainRun)}
    assert frameworks == {"megatron", "torchtitan", "nemo"}


def test_an_unknown_file_is_located_not_guessed(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("throughput was good\n")
    found, problems, _ = read_paths([str(path)])
    assert not found and where(problems) == [(1, 1, "gclc does not recognize this file's measurements")]
    found, problems, _ = read_paths([str(tmp_path / "missing.log")])
    assert not found and problems[0].code == "io-error"


SAMPLES = sorted(p for p in DATA.rglob("*") if p.is_file() and p.suffix != ".md")


@settings(max_examples=scaled_examples(60), deadline=None)
@given(st.sampled_from(SAMPLES), st.data())
def test_no_edit_of_a_real_file_makes_a_reader_raise(path, data):
    """Any cut, insertion or replacement in a real file gives records or located errors."""
    text = path.read_text(encoding="utf-8")
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 40)))
    insert = data.draw(st.text(alphabet=st.sampled_from(list("0123456789.,-e |:#{}\"\nabc")), max_size=12))
    found, problems = read(path.relative_to(DATA).as_posix(), text[:start] + insert + text[end:])
    for problem in problems:
        assert problem.subject is not None and problem.subject.line >= 1 and problem.summary
    for m in found:
        values = [getattr(m, f) for f in ("ranks", "request_throughput") if hasattr(m, f)]
        assert all(math.isfinite(v) and v > 0 for v in values)
