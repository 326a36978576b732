"""nccl-tests output (`all_reduce_perf`, `all_gather_perf`, `reduce_scatter_perf`,
`alltoall_perf`, `sendrecv_perf`, ...): one run per `# nThread` header, its GPUs and hosts
from the `# Using devices` block (one `Rank` line per GPU, with `-g` or MPI ranks alike; a
listing shortened with `...`, as published pages do, counts to its highest rank),
and one point per message size from the table the column header names (`size count type
redop root time algbw busbw #wrong` twice, out-of-place then in-place; releases before
2.10 print no `root` and `error` for `#wrong`). Times are microseconds, bandwidths GB/s.
Several runs may follow each other in one file (a sweep of node counts); lines may carry
mpirun's `[1,0]<stdout>:` tags. The NCCL library that ran, where the output names it: nccl-tests
prints it from its 2.17 releases before each run's header (src/util.cu writeDeviceReport: `# nccl-tests
version 2.19.6 nccl-headers=22809 nccl-library=22809`, the library's NCCL_VERSION_CODE as
ncclGetVersion returns it), NCCL itself once the run's communicator is made, after the header
(init.cc showVersion: `NCCL version 2.28.7+cuda13.0` under NCCL_DEBUG=VERSION, the same after
`host:pid:tid [0] NCCL INFO ` under INFO)."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from ...dsl.plain_number import PlainNumberError
from ...dsl.source import SourceFile
from .records import COLLECTIVES, CollectivePoint, CollectiveRun
from .text import Problems, line_span, number

HEADER = re.compile(r"#\s*nThread\s+[0-9]+")
RANK = re.compile(r"Rank\s+([0-9]+)(?:\s+Group\s+[0-9]+)?\s+Pid\s+[0-9]+\s+on\s+(\S+)\s+device\s+([0-9]+)\s+\[[^\]]*\]\s+(.*?)\s*$")
COLUMNS = re.compile(r"#\s*(size|bytes)\s+(count|N)\s+type\b")
TAG = re.compile(r"\[[0-9]+(?:,[0-9]+)?\](?:<std(?:out|err)>)?:?")
TEST = re.compile(r"\b(" + "|".join(COLLECTIVES) + r")_perf\b")
TESTS_VERSION = re.compile(r"^\s*#\s*nccl-tests\s+version\b.*?\bnccl-library=(\S*)")
NCCL_VERSION = re.compile(r"(?:^\s*|\bNCCL INFO\s+)NCCL version\s+(\S+)")
DOTTED = re.compile(r"([0-9]{1,4})\.([0-9]{1,4})(?:\.([0-9]{1,4}))?(?:[-+~][^\s]*)?")
ALIASES = {"bytes": "size", "N": "count", "op": "redop", "error": "#wrong", "res": "#wrong"}
NEEDED = ("size", "count", "type", "time", "algbw", "busbw")


def looks_like(text: str) -> bool:
    return bool(HEADER.search(text) and COLUMNS.search(text))


def read(source: SourceFile) -> tuple[list[CollectiveRun], Problems]:
    problems = Problems(source)
    lines = source.text.split("\n")
    starts = [i for i, line in enumerate(lines, 1) if HEADER.search(line)]
    if not starts:
        problems.whole_file("no nccl-tests run here: no `# nThread ...` header line",
                            "keep the whole output of the test, from its `# nThread` line to `# Avg bus bandwidth`")
        return [], problems
    versions = _versions(lines, starts, problems)
    runs = []
    for first, end in zip(starts, starts[1:] + [len(lines) + 1]):
        run = _run(source, lines, first, end, problems)
        if run is not None:
            runs.append(attrs.evolve(run, nccl=versions.get(first, "")))
    return runs, problems


def version(text: str) -> str | None:
    """An NCCL version as `major.minor.patch` from a dotted one (`2.28.7+cuda13.0`, `2.21.5`) or an
    NCCL_VERSION_CODE (`22807`; nccl.h: X*10000 + Y*100 + Z from 2.9, X*1000 + Y*100 + Z before);
    None where it is neither."""
    dotted = DOTTED.fullmatch(text)
    if dotted:
        return ".".join(str(int(part or 0)) for part in dotted.groups())
    if text.isascii() and text.isdigit() and len(text) <= 6 and int(text) > 0:
        code = int(text)
        major, rest = divmod(code, 10000 if code >= 10000 else 1000)
        return f"{major}.{rest // 100}.{rest % 100}"
    return None


def _versions(lines: list[str], starts: list[int], problems: Problems) -> dict[int, str]:
    """The NCCL version of each run (keyed by its header's line): nccl-tests' line belongs to the
    header after it, NCCL's own to the header before it (the first run's where none is). A line
    whose version cannot be read, or a run named two versions, is an error there."""
    found: dict[int, tuple[str, int]] = {}
    for number_, raw in enumerate(lines, 1):
        text = TAG.sub(lambda m: " " * len(m.group()), raw)   # columns kept where mpirun tagged the line
        match = TESTS_VERSION.search(text) or NCCL_VERSION.search(text)
        if not match:
            continue
        read_ = version(match.group(1))
        if read_ is None:
            problems.at(number_, match.start(1) + 1, max(1, len(match.group(1))),
                        f"cannot read the NCCL version `{match.group(1)}`: expected major.minor.patch "
                        "(2.28.7+cuda13.0) or nccl-tests' version code (22807)",
                        "keep the line as nccl-tests and NCCL printed it")
            continue
        if match.re is TESTS_VERSION:
            first = next((s for s in starts if s > number_), None)
        else:
            first = next((s for s in reversed(starts) if s <= number_), starts[0])
        if first is None:
            continue
        if first in found and found[first][0] != read_:
            problems.at(number_, match.start(1) + 1, len(match.group(1)),
                        f"this run is named two NCCL versions: {found[first][0]} (line {found[first][1]}) "
                        f"and {read_}", "keep one run's output per header, as nccl-tests printed it")
            continue
        found.setdefault(first, (read_, number_))
    return {first: v for first, (v, _) in found.items()}


def _run(source: SourceFile, lines: list[str], first: int, end: int, problems: Problems) -> CollectiveRun | None:
    op = _collective(source, lines, first, end)
    if op is None:
        problems.on_line(first, "cannot tell which collective this nccl-tests run measures",
                    "keep the command line or the `# Collective test starting: all_reduce_perf` line, or name "
                    "the file after the test (all_reduce_perf.txt)")
        return None
    hosts, devices, listed, columns, points = [], [], [], None, []
    for number_, raw in enumerate(lines[first - 1:end - 1], first):
        text = TAG.sub("", raw).strip()
        rank = RANK.search(text)
        if rank:
            hosts.append(rank.group(2))
            devices.append(rank.group(4))
            listed.append((int(rank.group(1)), int(rank.group(3))))
        elif COLUMNS.match(text):
            columns = [ALIASES.get(t, t) for t in text.lstrip("#").split()]
        elif columns and text and text[0].isdigit():
            point = _point(source, number_, raw, columns, problems)
            if point is not None:
                points.append(point)
    if not hosts:
        problems.on_line(first, "no `Rank` lines: cannot tell how many GPUs and hosts ran this test",
                    "keep the `# Using devices` block nccl-tests prints under its header")
        return None
    if not points:
        problems.on_line(first, "this nccl-tests run has no result rows",
                    "keep the table under the `size count type ...` header")
        return None
    counted = _layout(first, listed, hosts, problems)
    if counted is None:
        return None
    return CollectiveRun(op, *counted, tuple(dict.fromkeys(devices)), tuple(points), line_span(source, first))


def _layout(first: int, listed: list[tuple[int, int]], hosts: list[str], problems: Problems) -> tuple[int, int] | None:
    """(ranks, hosts) of the run whose header is on line `first`, or None with the reason located there."""
    numbers = [r for r, _ in listed]
    if len(set(numbers)) < len(numbers):
        twice = next(r for r in numbers if numbers.count(r) > 1)
        problems.on_line(first, f"rank {twice} is listed {numbers.count(twice)} times: each process ran a test of "
                                "its own (nccl-tests built without MPI under mpirun), not one test over all the GPUs",
                         "build nccl-tests with MPI=1 and run it again")
        return None
    counted = _ranks_and_hosts(listed, hosts)
    if counted is None:
        problems.on_line(first, f"the `Rank` lines leave ranks out (the highest is {max(r for r, _ in listed)}, "
                                f"{len(listed)} are listed) and the ranks do not fill whole hosts of the devices listed",
                         "keep the whole `# Using devices` block, one `Rank` line per GPU")
        return None
    return counted


def _ranks_and_hosts(listed: list[tuple[int, int]], hosts: list[str]) -> tuple[int, int] | None:
    """(ranks, hosts) of a run from its `Rank` lines, (rank, device) each. Published outputs
    shorten long listings to their first and last lines with `...` between: nccl-tests numbers
    the ranks from 0 and each host's devices from 0, so the ranks are the highest + 1 and a
    host holds the highest device + 1 of them; None when they do not fill whole hosts."""
    ranks = max(r for r, _ in listed) + 1
    if ranks == len(listed):
        return ranks, len(set(hosts))
    per_host = max(d for _, d in listed) + 1
    return (ranks, ranks // per_host) if ranks % per_host == 0 else None


def _collective(source: SourceFile, lines: list[str], first: int, end: int) -> str | None:
    """The test's name: the nearest mention before the run (its command line, `Collective test
    starting`), else inside it (`concluded`), else the file's name."""
    before = [m.group(1) for line in lines[:first] for m in TEST.finditer(line)]
    inside = [m.group(1) for line in lines[first:end - 1] for m in TEST.finditer(line)]
    named = TEST.search(Path(source.path).name.replace("-", "_")) or re.search(
        r"(" + "|".join(COLLECTIVES) + r")", Path(source.path).name.replace("-", "_"))
    if before:
        return before[-1]
    if inside:
        return inside[0]
    return named.group(1) if named else None


def _point(source: SourceFile, line: int, raw: str, columns: list[str], problems: Problems) -> CollectivePoint | None:
    cells = [(m.group(), m.start()) for m in re.finditer(r"\S+", TAG.sub(lambda m: " " * len(m.group()), raw))]
    if len(cells) != len(columns):
        problems.at(line, cells[0][1] + 1, len(raw.rstrip()) - cells[0][1],
                    f"a result row of {len(cells)} columns under a header of {len(columns)} "
                    f"({' '.join(columns)})", "keep each row whole, as nccl-tests printed it")
        return None
    first = {}  # the first (out-of-place) occurrence of each column; `second` the in-place one
    second = {}
    for name, (cell, start) in zip(columns, cells):
        (second if name in first else first)[name] = (cell, start)
    values = {}
    for name in NEEDED:
        cell, start = first[name]
        if name == "type":
            continue
        try:  # sizes and counts whole, the time above zero (a rate divides by it), nothing negative
            values[name] = number(cell, whole=name in ("size", "count"), positive=name == "time",
                                  what=f"the {name} column")
            if values[name] < 0:
                raise PlainNumberError(f"a negative {name}: {cell}")
        except PlainNumberError as problem:
            problems.at(line, start + 1, len(cell), f"{problem} ({name} column)", "keep the row as nccl-tests printed it")
            return None
    in_place = second.get("time")
    in_time = None
    if in_place is not None and in_place[0] != "N/A":   # nccl-tests prints N/A where it ran none
        try:
            in_time = number(in_place[0], positive=True, what="the in-place time column")
        except PlainNumberError as problem:
            problems.at(line, in_place[1] + 1, len(in_place[0]), f"{problem} (in-place time column)",
                        "keep the row as nccl-tests printed it")
            return None
    return CollectivePoint(values["size"], values["count"], first["type"][0],
                           first.get("redop", ("none", 0))[0], values["time"] * 1e-6, values["algbw"] * 1e9,
                           values["busbw"] * 1e9, in_time * 1e-6 if in_time else None, line_span(source, line))
