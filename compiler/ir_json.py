"""The IR as versioned JSON: stable key order, byte-identical across runs, and back.

The schema lives beside this module (`ir.schema.json`) and is checked by the tests.
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

import attrs

from ..dsl.source import Span
from . import ir

SCHEMA_PATH = Path(__file__).resolve().parent / "ir.schema.json"


def to_data(value: Any) -> Any:
    """attrs values -> plain JSON data; spans become {"path", "line", ...}."""
    if isinstance(value, Span):
        return {"path": value.path, "line": value.line, "column": value.column,
                "end_line": value.end_line, "end_column": value.end_column}
    if attrs.has(type(value)):
        return {f.name: to_data(getattr(value, f.name)) for f in attrs.fields(type(value))}
    if isinstance(value, tuple):
        return [to_data(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def value_count(data: Any) -> int:
    """JSON values in a document: the IR's size, independent of how large its counts are."""
    if isinstance(data, dict):
        return sum(value_count(v) for v in data.values())
    if isinstance(data, list):
        return sum(value_count(v) for v in data)
    return 1


def graph_json(graph: ir.ClusterGraph) -> str:
    document = {"format": "gclc-ir", "version": ir.IR_VERSION, "cluster": to_data(graph)}
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def from_json(text: str) -> ir.ClusterGraph:
    document = json.loads(text)
    if document.get("format") != "gclc-ir" or document.get("version") != ir.IR_VERSION:
        raise ValueError(f"not a gclc IR document of version {ir.IR_VERSION}")
    return from_data(ir.ClusterGraph, document["cluster"])


def from_data(kind: Any, data: Any) -> Any:
    """Plain data -> a value of type `kind` (attrs classes, tuples, floats, ...)."""
    if kind is Span:
        return Span(data["path"], data["line"], data["column"], data["end_line"], data["end_column"])
    if attrs.has(kind):
        hints = typing.get_type_hints(kind)
        return kind(**{f.name: from_data(hints[f.name], data[f.name]) for f in attrs.fields(kind)})
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if data is None:
            return None
        return from_data(next(a for a in args if a is not type(None)), data)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_data(args[0], item) for item in data)
        return tuple(from_data(a, item) for a, item in zip(args, data))
    if kind is float:
        return float(data)
    return data


# ----------------------------------------------------------------- JSON Schema


def json_schema() -> dict:
    """The JSON Schema of `graph_json` documents, derived from the IR classes."""
    definitions: dict[str, dict] = {}
    root = _schema_of(ir.ClusterGraph, definitions)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "gclc IR", "type": "object",
        "required": ["format", "version", "cluster"], "additionalProperties": False,
        "properties": {"format": {"const": "gclc-ir"}, "version": {"const": ir.IR_VERSION}, "cluster": root},
        "$defs": definitions,
    }


def _schema_of(kind: Any, definitions: dict[str, dict]) -> dict:
    if kind is Span:
        kind_name = "Span"
        if kind_name not in definitions:
            fields = ("path", "line", "column", "end_line", "end_column")
            definitions[kind_name] = {"type": "object", "required": list(fields), "additionalProperties": False,
                                      "properties": {f: {"type": "string" if f == "path" else "integer"} for f in fields}}
        return {"$ref": f"#/$defs/{kind_name}"}
    if attrs.has(kind):
        if kind.__name__ not in definitions:
            definitions[kind.__name__] = {}  # reserve the name first: definitions may recurse
            hints = typing.get_type_hints(kind)
            names = [f.name for f in attrs.fields(kind)]
            definitions[kind.__name__] = {
                "type": "object", "required": names, "additionalProperties": False,
                "properties": {n: _schema_of(hints[n], definitions) for n in names}}
        return {"$ref": f"#/$defs/{kind.__name__}"}
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema_of(a, definitions) for a in args]}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _schema_of(args[0], definitions)}
        return {"type": "array", "prefixItems": [_schema_of(a, definitions) for a in args],
                "minItems": len(args), "maxItems": len(args)}
    return {float: {"type": "number"}, int: {"type": "integer"}, str: {"type": "string"},
            bool: {"type": "boolean"}, type(None): {"type": "null"}}[kind]


if __name__ == "__main__":  # regenerate the schema file: python -m gclc.compiler.ir_json
    SCHEMA_PATH.write_text(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
