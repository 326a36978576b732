"""The API server's checks of a custom resource that no JSON Schema validator runs: every
`x-kubernetes-validations` rule of its CRD schema, evaluated by a real CEL implementation
(PyPI's cel-python, module `celpy`) the way the API server does on create:

- the schema's structural defaults are applied first (`default` of each absent property),
  as the API server defaults before it validates;
- each rule is evaluated at its node with `self` bound to the value there; a rule of an
  absent optional value is not evaluated; each rule of `items` / `additionalProperties`
  once per element;
- transition rules (those reading `oldSelf`) are skipped: on create there is no old object.

STUB, named: the defaulting walk is this module's (the API server's structural defaulting
is Go); the rules themselves and their evaluation are the CRDs' and CEL's."""

from __future__ import annotations

import copy
import functools

import celpy

_ENV = celpy.Environment()


@functools.cache
def _program(rule: str):
    return _ENV.program(_ENV.compile(rule))


def with_defaults(schema: dict, value):
    """`value` with the schema's defaults filled in where properties are absent (a copy)."""
    value = copy.deepcopy(value)
    _default(schema, value)
    return value


def _default(schema: dict, value) -> None:
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                _default(sub, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in value:
                if key not in schema.get("properties", {}):
                    _default(extra, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(schema["items"], item)


def cel_problems(schema: dict, document: dict) -> list[str]:
    """The messages of every rule `document` breaks (empty: the API server admits it)."""
    value = with_defaults(schema, document)
    problems: list[str] = []
    _walk(schema, value, "", problems)
    return problems


def _walk(schema: dict, value, path: str, problems: list[str]) -> None:
    for rule in schema.get("x-kubernetes-validations", ()):
        if "oldSelf" in rule["rule"]:
            continue
        try:
            result = _program(rule["rule"]).evaluate({"self": celpy.json_to_cel(value)})
        except celpy.CELEvalError as problem:   # an error is a rejection too
            result = problem
        if result is not True and not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            problems.append(f"{path or '.'}: {rule.get('message', rule['rule'])}")
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                _walk(sub, value[name], f"{path}.{name}", problems)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                if key not in schema.get("properties", {}):
                    _walk(extra, item, f"{path}.{key}", problems)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{index}]", problems)
