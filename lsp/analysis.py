"""One open document, analysed: the compiler's diagnostics, and the loaded program with a
checker that answers questions about it (a field's value, where a name is declared).

The editor asks about text that is being typed, so nothing here may raise: a document
that does not parse still has its diagnostics, and the last one that did parse keeps
answering hover and definition questions until the text parses again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


from ..compiler.check import Checker
from ..dsl.diagnostics import Diagnostic
from ..compiler.driver import check_file
from ..compiler.files import forget_reads
from ..compiler.resolve import STD_ROOT, FieldEntry, BlockEntry, Program, load
from ..dsl import ast
from ..dsl.source import SourceFile
from ..dsl.records import define


@define
class Analysis:
    """What the compiler knows about one version of a document."""

    path: str
    text: str
    diagnostics: tuple[Diagnostic, ...]
    sources: dict[str, SourceFile]
    program: Program
    module: ast.Module | None  # the document's own module; None when it does not parse
    _checker: Checker | None = None

    @property
    def checker(self) -> Checker:
        """Built on first use: hover needs values, diagnostics do not."""
        if self._checker is None:
            self._checker = Checker(self.program)
        return self._checker

    def value(self, declaration: str, path: str) -> Any:
        """The checked value of `declaration.path` (`hbm.capacity`), or None."""
        if declaration not in self.program.declarations:
            return None
        entity = self.checker.entity(declaration)
        return entity.get(path) if entity is not None else None

    def entry(self, declaration: str, path: tuple[str, ...]) -> FieldEntry | BlockEntry | None:
        """The entry of the effective body (own or inherited) that sets `path`."""
        node: Any = BlockEntry(None, None, self.program.bodies.get(declaration, {}), None)  # type: ignore[arg-type]
        for part in path:
            node = node.body.get(part) if isinstance(node, BlockEntry) else None
        return node

    def owner(self, path: str, offset: int) -> ast.Declaration | None:
        """The declaration of any loaded file whose text contains `offset` of `path`."""
        for decl in self.program.declarations.values():
            if decl.span.path == path and decl.span.start <= offset < decl.span.end:
                return decl
        return None

    def comment_on(self, path: str, line: int) -> str:
        """The `# ...` comment at the end of `line` of `path`, without the `#`."""
        for module in self.program.modules:
            if module.path == path:
                for comment in module.comments:
                    if comment.span.line == line:
                        return comment.text.lstrip("#").strip()
        return ""


def analyse(path: str, text: str) -> Analysis:
    forget_reads()  # each analysis is a run of its own: an earlier one's traces are not quoted
    result = check_file(path, text=text)
    program = load(path, text)
    module = next((m for m in program.modules if m.path == path), None)
    return Analysis(path, text, result.diagnostics, result.sources, program, module)


def real_path(display: str) -> Path:
    """The file behind a span's path: `std/nvidia.gcl` lives in the installed library."""
    if display.startswith("std/"):
        return STD_ROOT / display.removeprefix("std/")
    return Path(display)
