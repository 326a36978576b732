"""Regenerate megatron_arguments.json: Megatron-LM's command-line arguments, read from its source.

Megatron-LM builds its parser in megatron/training/arguments.py (`add_megatron_arguments`)
from `add_argument` calls and, through `ArgumentGroupFactory` (argument_utils.py), from the
fields of its config dataclasses (TransformerConfig, TrainingConfig, ...). Both need torch
to import, so this script reads the same definitions statically (Python's `ast`), following
the factory's rules: `--field-name`; bool fields store_true when they default to False,
else store_false as `--no-field-name` / `--disable-field-name`; Optional[X] is X; list[X]
takes nargs="+"; Literal and Enum fields take their choices; an `argparse_meta` in the
field's metadata overrides what is inferred.

    python tests/data/exports/megatron_extract.py /path/to/Megatron-LM [COMMIT] > tests/data/exports/megatron_arguments.json
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ARGUMENTS = "megatron/training/arguments.py"
COMMIT = ""  # set when reading an export without git metadata


def main(root: Path) -> dict:
    tree = ast.parse((root / ARGUMENTS).read_text())
    classes = _classes(root)
    arguments = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        name = _callee(call)
        if name == "add_argument":
            argument = _literal_argument(call)
            if argument:
                arguments.append(argument)
        elif name == "ArgumentGroupFactory" and call.args and isinstance(call.args[0], ast.Name):
            exclude = _literal(next((k.value for k in call.keywords if k.arg == "exclude"), None)) or []
            arguments += _factory_arguments(call.args[0].id, set(exclude), classes)
    commit = COMMIT or subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"source": f"NVIDIA/Megatron-LM {ARGUMENTS} and the dataclasses its ArgumentGroupFactory reads",
            "commit": commit, "arguments": arguments}


def _callee(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _literal(node):
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def _type_name(node) -> str:
    if isinstance(node, ast.Name) and node.id in ("int", "float", "str"):
        return node.id
    return "any"  # a converter function: any string reaches it


def _literal_argument(call: ast.Call) -> dict | None:
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not flags or not flags[0].startswith("-"):
        return None
    kw = {k.arg: k.value for k in call.keywords}
    action = kw.get("action")
    if isinstance(action, ast.Attribute):
        action = "boolean_optional" if action.attr == "BooleanOptionalAction" else "any"
    else:
        action = _literal(action) or "store"
    choices = _literal(kw.get("choices"))
    return {"flags": flags, "dest": _literal(kw.get("dest")), "action": action, "default": _literal(kw.get("default")),
            "type": _type_name(kw["type"]) if "type" in kw else None, "nargs": _literal(kw.get("nargs")),
            "choices": [c for c in choices] if isinstance(choices, (list, tuple)) else None}


def _classes(root: Path) -> dict[str, ast.ClassDef]:
    out: dict[str, ast.ClassDef] = {}
    for path in sorted((root / "megatron").rglob("*.py")):
        try:
            tree = ast.parse(path.read_text())
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, node)
    return out


def _fields(name: str, classes: dict[str, ast.ClassDef]) -> list[ast.AnnAssign]:
    """Dataclass fields, the first base class's first (dataclasses order fields that way)."""
    node = classes.get(name)
    if node is None:
        return []
    inherited = _fields(node.bases[0].id, classes) if node.bases and isinstance(node.bases[0], ast.Name) else []
    own = [s for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    names = {f.target.id for f in own}
    return [f for f in inherited if f.target.id not in names] + own


def _factory_arguments(name: str, exclude: set[str], classes: dict[str, ast.ClassDef]) -> list[dict]:
    out = []
    for field in _fields(name, classes):
        field_name = field.target.id
        default, meta, init = _default(field.value)
        if field_name in exclude or not init or field_name.startswith("_"):
            continue
        argument = {"flags": ["--" + field_name.replace("_", "-")], "dest": field_name, "action": "store",
                    "default": default if isinstance(default, (int, float, str, bool, type(None))) else None,
                    "type": "str", "nargs": None, "choices": None}
        inferred = _infer(field.annotation, classes)
        if inferred is None and not meta:
            continue  # the factory would fail here; Megatron excludes such fields
        argument.update(inferred or {})
        if argument.get("type") == "bool":
            argument.pop("type")
            argument["type"] = None
            argument["action"] = "store_true" if default is False else "store_false"
            if argument["action"] == "store_false":
                argument["flags"] = ["--no-" + field_name.replace("_", "-"), "--disable-" + field_name.replace("_", "-")]
        for key, value in meta.items():
            if key == "arg_names":
                argument["flags"] = list(value)
            elif key in ("type", "nargs", "choices", "action", "dest", "default"):
                argument[key] = value
        out.append(argument)
    return out


def _default(value) -> tuple[object, dict, bool]:
    """(default, argparse_meta, init) of a field's right-hand side."""
    if isinstance(value, ast.Call) and _callee(value) == "field":
        kw = {k.arg: k.value for k in value.keywords}
        meta: dict = {}
        metadata = kw.get("metadata")
        if isinstance(metadata, ast.Dict):
            for key, item in zip(metadata.keys, metadata.values):
                if _literal(key) == "argparse_meta" and isinstance(item, ast.Dict):
                    for k, v in zip(item.keys, item.values):
                        k = _literal(k)
                        meta[k] = _type_name(v) if k == "type" else _literal(v)
        return _literal(kw.get("default")), meta, _literal(kw.get("init")) is not False
    return _literal(value), {}, True


def _infer(node, classes) -> dict | None:
    """The factory's `_extract_type`, on the annotation's syntax."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        node = ast.parse(node.value, mode="eval").body
    if isinstance(node, ast.Name):
        if node.id in ("int", "float", "str", "bool"):
            return {"type": node.id}
        members = _enum_members(classes.get(node.id))
        return {"type": "str", "choices": members} if members else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
        if isinstance(node.right, ast.Constant) and node.right.value is None:
            return _infer(node.left, classes)
        return None
    if isinstance(node, ast.Subscript):
        head = node.value.id if isinstance(node.value, ast.Name) else getattr(node.value, "attr", None)
        inner = node.slice
        if head == "Optional":
            return _infer(inner, classes)
        if head == "Union" and isinstance(inner, ast.Tuple) and len(inner.elts) == 2 and \
                isinstance(inner.elts[1], ast.Constant) and inner.elts[1].value is None:
            return _infer(inner.elts[0], classes)
        if head in ("list", "List"):
            item = _infer(inner, classes)
            return None if item is None else {**item, "nargs": "+"}
        if head == "Literal":
            values = [e.value for e in (inner.elts if isinstance(inner, ast.Tuple) else [inner])]
            return {"type": type(values[0]).__name__, "choices": values}
    return None


def _enum_members(node: ast.ClassDef | None) -> list[str] | None:
    if node is None or not any(getattr(b, "attr", getattr(b, "id", "")).endswith("Enum") for b in node.bases):
        return None
    return [t.id for s in node.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)]


if __name__ == "__main__":
    COMMIT = sys.argv[2] if len(sys.argv) > 2 else ""
    json.dump(main(Path(sys.argv[1])), sys.stdout, indent=1)
    sys.stdout.write("\n")
