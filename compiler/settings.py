"""`--set name=value`: overrides of `param` values, typed like the param they replace."""

from __future__ import annotations

from ..dsl import ParseError, ast, parse
from ..dsl.source import SourceFile
from ..dsl import codes
from ..dsl.diagnostics import Diagnostic
from .resolve import Program

# `--set` values are located in a source of their own: one line per setting, so a message
# about `--set bogus=1` quotes it and points at the name, as for any file.
SETTINGS_SOURCE = "<--set>"


def settings_source(lines: list[str]) -> SourceFile:
    return SourceFile(SETTINGS_SOURCE, "".join(line.replace("\n", " ").replace("\r", " ") + "\n" for line in lines))


def _line_span(source: SourceFile, index: int, width: int):
    start = sum(len(line) + 1 for line in source.text.split("\n")[:index])
    return source.span(start, start + max(1, width))


def parse_settings(pairs: list[str]) -> tuple[dict[str, str], list[Diagnostic]]:
    """`["racks=256", 'clock="1.5 GHz"']` -> {"racks": "256", "clock": "1.5 GHz"}."""
    settings, problems = {}, []
    source = settings_source(pairs)
    for index, text in enumerate(pairs):
        name, sep, value = text.partition("=")
        name, value = name.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]  # `clock="1.5 GHz"` — shells keep the quotes when written inside a word
        if not sep or not name.isidentifier() or not value:
            problems.append(codes.BAD_SETTING.make(_line_span(source, index, len(text)), text=text,
                                                   why="write it as `name=value`"))
            continue
        settings[name] = value
    return settings, problems


def apply_settings(program: Program, settings: dict[str, str], diagnostics: list[Diagnostic]) -> None:
    """Replace each named param's expression by the parsed override (its type is checked later)."""
    given = settings_source([f"{name}={text}" for name, text in settings.items()])
    for index, (name, text) in enumerate(settings.items()):
        param = program.params.get(name)
        if param is None:
            program.sources[SETTINGS_SOURCE] = given
            diagnostics.append(codes.UNKNOWN_PARAM.make(_line_span(given, index, len(name)), name=name,
                                                        notes=[codes.suggest(name, program.params)]))
            continue
        display = f"<--set {name}>"
        try:
            module = parse(f"param {name} = {text}\n", display)
        except ParseError as error:
            program.sources[display] = SourceFile(display, f"param {name} = {text}\n")
            diagnostics.extend(error.diagnostics)
            continue
        program.sources[display] = SourceFile(display, f"param {name} = {text}\n")
        item = module.items[0] if len(module.items) == 1 else None
        if not isinstance(item, ast.Param):
            program.sources[SETTINGS_SOURCE] = given
            diagnostics.append(codes.BAD_SETTING.make(_line_span(given, index, len(name) + 1 + len(text)),
                                                      text=f"{name}={text}", why="the value is not one expression"))
            continue
        program.params[name] = ast.Param(param.name, item.value, span=param.span)
        program.overridden[name] = param.value
