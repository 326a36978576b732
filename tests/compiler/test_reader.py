"""The one bounded reader (issue 30, item 1): every file gclc opens — a design, its imports, a
CSV trace of either kind, a data file another feature names — is a regular file within a size
limit (a total over a design and its imports), with short lines, UTF-8, and is named in
messages as the user named it. Real files, FIFOs and devices: nothing is mocked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gclc.compiler import files
from gclc.compiler.driver import check_file
from gclc.compiler.files import MAX_DESIGN_BYTES, MAX_LINE_CHARS, data_path, read_data, was_read
from gclc.compiler.table import read_table
from gclc.dsl.source import SourceFile

from .test_serve_check import HEAD

SERVE = 'serve s { model = M  on = C\n  trace = "TRACE" }\n'
AT = SourceFile("d.gcl", 'trace = "t.csv"\n').span(0, 15)


def serve_design(folder: Path, trace: str = "t.csv") -> Path:
    design = folder / "d.gcl"
    design.write_text(HEAD + SERVE.replace("TRACE", trace))
    return design


def errors(result) -> list:
    return [d for d in result.diagnostics if d.is_error]


@pytest.mark.parametrize("make", ["fifo", "directory"])
def test_a_trace_that_is_not_a_regular_file_is_refused_at_once(tmp_path, make):
    trace = tmp_path / "t.csv"
    os.mkfifo(trace) if make == "fifo" else trace.mkdir()
    [problem] = errors(check_file(str(serve_design(tmp_path))))   # a FIFO would block the open: it returns
    assert problem.code == "io-error" and problem.subject.path == str(tmp_path / "d.gcl")
    assert ("not a regular file" if make == "fifo" else "directory") in problem.summary


def test_a_device_named_as_data_is_refused_not_read(tmp_path):
    source, [problem] = read_data("zero", Path("/dev/zero"), AT)
    assert source is None and problem.code == "io-error" and "not a regular file" in problem.summary


def test_a_data_file_over_its_limit_is_refused_before_reading(tmp_path):
    big = tmp_path / "big.csv"
    with open(big, "wb") as handle:
        handle.truncate(2**20 + 1)  # sparse: nothing is written to disk
    source, [problem] = read_data("big.csv", big, AT, limit=2**20)
    assert source is None and "1,048,577 bytes" in problem.summary and "at most 1,048,576" in problem.summary


def test_a_long_line_is_located_at_its_line_so_no_cell_is_longer(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt,output\n0,1,1\n1," + "9" * 140_000 + ",1\n")  # the csv module's limit is 131,072
    [problem] = errors(check_file(str(serve_design(tmp_path))))
    assert problem.code == "long-line" and (problem.subject.path, problem.subject.line) == (str(trace), 3)
    assert problem.subject.column == MAX_LINE_CHARS + 1


def test_a_byte_that_is_not_utf8_is_located_in_the_trace(tmp_path):
    (tmp_path / "t.csv").write_bytes(b"arrival_s,prompt,output\n0,1,\xff\n")
    [problem] = errors(check_file(str(serve_design(tmp_path))))
    assert problem.code == "encoding" and (problem.subject.line, problem.subject.column) == (2, 5)


def test_the_trace_is_named_as_the_user_gave_it_never_made_absolute(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "t.csv").write_text("arrival_s,prompt,output\n0,1,x\n")
    serve_design(tmp_path / "sub")
    monkeypatch.chdir(tmp_path)
    [problem] = errors(check_file("sub/d.gcl"))
    assert problem.subject.path == os.path.join("sub", "t.csv") and str(tmp_path) not in str(problem)


@pytest.mark.parametrize("name, why", [("../t.csv", "leaves"), ("/etc/passwd", "absolute"), ("", "not a file")])
def test_a_data_path_outside_the_design_folder_is_refused(tmp_path, name, why):
    assert why in data_path(str(tmp_path / "d.gcl"), name)


def test_a_link_that_leads_out_of_the_folder_is_refused(tmp_path):
    (tmp_path / "out.csv").write_text("arrival_s,prompt,output\n0,1,1\n")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "t.csv").symlink_to(tmp_path / "out.csv")
    [problem] = errors(check_file(str(serve_design(tmp_path / "in"))))
    assert problem.code == "trace-path" and "leaves" in problem.summary


def test_a_design_and_its_imports_share_one_budget(tmp_path):
    """Six imports just under the per-file limit are refused as a whole (issue 30: 750 MB)."""
    part = MAX_DESIGN_BYTES // 4
    names = [f"part{i}.gcl" for i in range(6)]
    for name in names:
        (tmp_path / name).write_text("#" * (part - 1) + "\n")
    (tmp_path / "d.gcl").write_text("".join(f'import "{n}"\n' for n in names))
    problems = errors(check_file(str(tmp_path / "d.gcl")))
    assert {p.code for p in problems} == {"io-error"} and len(problems) == 3  # the 4th, 5th and 6th
    assert all("the design and its imports may hold at most" in p.summary for p in problems)
    assert [p.subject.line for p in problems] == [4, 5, 6]


def test_rows_are_split_one_line_each_with_their_line(tmp_path):
    (tmp_path / "t.csv").write_text('# note\n\na,b\n1,"x, y"\r\n\n2,"open\n3,4\n')
    table, problems = read_table(SourceFile(str(tmp_path / "d.gcl"), "").span(0, 0), "t.csv", "table", 10)
    assert not problems and table.header.cells == ("a", "b")
    assert [(r.line, r.cells) for r in table.rows] == [(4, ("1", "x, y")), (6, ("2", "open")), (7, ("3", "4"))]
    assert table.span(table.rows[0], 1).column == 3


def test_a_table_past_its_row_limit_is_located_at_the_first_extra_row(tmp_path):
    (tmp_path / "t.csv").write_text("a\n" + "1\n" * 5)
    table, [problem] = read_table(SourceFile(str(tmp_path / "d.gcl"), "").span(0, 0), "t.csv", "table", 4)
    assert table is None and problem.subject.line == 6 and "more than 4 rows" in problem.summary


def test_every_file_read_is_remembered_by_identity(tmp_path):
    files.forget_reads()
    (tmp_path / "t.csv").write_text("arrival_s,prompt,output\n0,1,1\n")
    design = serve_design(tmp_path)
    assert not was_read(os.stat(design))
    assert not errors(check_file(str(design)))
    assert was_read(os.stat(design)) and was_read(os.stat(tmp_path / "t.csv"))
    os.link(design, tmp_path / "other.gcl")  # another name of the same file is the same file
    assert was_read(os.stat(tmp_path / "other.gcl"))
    files.forget_reads()
    assert not was_read(os.stat(design))
