"""The standard library as `gclc std` shows it: each file with its parts and their sources,
one part with its text, and both as JSON."""

from __future__ import annotations

import shutil

from ..dsl.library import StdFile, StdPart, find_part, part_text, std_files


def part_json(part: StdPart, text: bool = False) -> dict:
    """A part as `gclc std --json` prints it (with its GCL text when `text`)."""
    out = {"kind": part.kind, "name": part.name, "import": part.library, "path": part.span.path,
           "line": part.span.line, "source": part.source, "extends": part.parent}
    return {**out, "text": part_text(part)} if text else out


def list_text(kind: str | None = None, width: int | None = None) -> str:
    """Each std file with its parts: kind, name, and the start of the part's source."""
    width = width or max(80, shutil.get_terminal_size((100, 24)).columns)
    return "\n\n".join(filter(None, (file_text(file, kind, width) for file in std_files())))


def file_text(file: StdFile, kind: str | None, width: int) -> str:
    """One std file's heading and its parts (of `kind`), each line cut at `width`."""
    parts = [p for p in file.parts if kind is None or p.kind == kind]
    if not parts:
        return ""
    name_width = max(len(p.name) for p in parts)
    lines = [f'{file.library}  (import "{file.library}") — {file.summary}']
    for part in parts:
        line = f"  {part.kind:<9} {part.name:<{name_width}}  {part.source or _inherits(part)}"
        lines.append(line if len(line) <= width else line[: width - 1] + "…")
    return "\n".join(lines)


def _inherits(part: StdPart) -> str:
    return f"(as {part.parent})" if part.parent else ""


def show_text(part: StdPart, paint=None) -> str:
    """One part's heading, source, parent and GCL text (`paint` colours the text)."""
    head = f'{part.kind} {part.name} — {part.span.path}:{part.span.line}  (import "{part.library}")'
    lines = [head]
    if part.source:
        lines.append(f"source: {part.source}")
    parent = find_part(part.parent) if part.parent else None
    if parent is not None:
        lines.append(f"extends {parent.name} ({parent.span.path}:{parent.span.line}); "
                     f"`gclc std show {parent.name}` for the fields it inherits")
    text = part_text(part)
    return "\n".join(lines) + "\n\n" + (paint(text) if paint else text)


def no_kind(kind: str, kinds: list[str]) -> str:
    """`gclc std list --kind KIND` for a kind the library has no parts of."""
    return f"gclc std list: no parts of kind `{kind}`; the library has {', '.join(kinds)}"


def no_part(name: str, near: str | None) -> str:
    """`gclc std show NAME` for a part the library lacks, with the nearest name when one is close."""
    hint = f"; did you mean `{near}`?" if near else "; `gclc std list` lists them"
    return f"gclc std: the standard library has no part `{name}`{hint}"
