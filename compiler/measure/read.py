"""Which reader a file needs, by its content, and every measurement of the files and
folders `gclc calibrate` is given."""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from ...dsl import codes
from ...dsl.diagnostics import Diagnostic
from ...dsl.source import SourceFile
from . import exports, kernels, nccl, serving, training
from .records import Measurement
from .text import Problems, read_source

FORMATS = ("nccl-tests output, a Megatron-LM, torchtitan or NeMo log, a vLLM/SGLang `bench serve` JSON or "
           "summary, a genai-perf/aiperf export (JSON or CSV), or a kernel CSV (`# gclc kernels v1`)")
MAX_FILES = 10_000   # a folder of measurements, not a file system


def read_file(source: SourceFile) -> tuple[list[Measurement], list[Diagnostic]]:
    """The measurements of one file, and its problems."""
    text = source.text
    if kernels.looks_like(text):
        found, problems = kernels.read(source)
    elif nccl.looks_like(text):
        found, problems = nccl.read(source)
    elif serving.looks_like_json(text):
        found, problems = serving.read_json(source)
    elif exports.looks_like_json(text):
        found, problems = exports.read_json(source)
    elif exports.looks_like_csv(text):
        found, problems = exports.read_csv(source)
    elif serving.looks_like_block(text):
        found, problems = serving.read_block(source)
    elif (framework := training.looks_like(text)) is not None:
        found, problems = training.read(source, framework)
    else:
        problems = Problems(source)
        problems.whole_file("gclc does not recognize this file's measurements", f"it reads {FORMATS}")
        found = []
    return list(found), problems.found


def read_paths(paths: list[str]) -> tuple[list[Measurement], list[Diagnostic], dict[str, SourceFile]]:
    """Every measurement under `paths` (files, or folders read recursively in name order),
    the problems found, and the sources to quote them."""
    measurements, diagnostics, sources = [], [], {}
    for path in _files(paths, diagnostics):
        source = read_source(path, diagnostics)
        if source is None:
            continue
        sources[path] = source
        found, problems = read_file(source)
        measurements += found
        diagnostics += problems
    return measurements, diagnostics, sources


def _files(paths: list[str], diagnostics: list[Diagnostic]) -> list[str]:
    files = []
    for path in paths:
        if Path(path).is_dir():
            inside = _folder(path)
            if inside is None:
                diagnostics.append(attrs.evolve(codes.MEASUREMENT.make(
                    None, what=f"`{path}` holds more than {MAX_FILES:,} files; gclc reads at most {MAX_FILES:,}",
                    notes=["help: name the measurement files or a smaller folder"]), file=path))
                continue
            files += inside
        else:
            files.append(path)
    return list(dict.fromkeys(files))


def _folder(path: str) -> list[str] | None:
    """The measurement files under folder `path` in name order (a folder's notes, README.md or
    SOURCES.md, and hidden files and folders are no measurements; symbolic links to folders are
    not followed), or None once the walk meets more than MAX_FILES entries: it stops there, so
    `gclc calibrate pod.gcl /` costs milliseconds, not a walk of the disk."""
    found, seen = [], 0
    for folder, folders, names in os.walk(path, onerror=None, followlinks=False):
        seen += len(folders) + len(names)
        if seen > MAX_FILES:
            return None
        folders[:] = [f for f in folders if not f.startswith(".")]
        found += [os.path.join(folder, n) for n in names
                  if not n.startswith(".") and not n.lower().endswith(".md") and os.path.isfile(os.path.join(folder, n))]
    return sorted(found)
