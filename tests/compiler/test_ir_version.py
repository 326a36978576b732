"""The IR's version moves with its fields: the JSON Schema derived from the IR classes
(compiler/ir_json.py), less its version number, hashes to the value pinned for IR_VERSION
in compiler/ir.py. A class or field added, removed, renamed or retyped without a bump
fails here; so does a bump that forgets the pin."""

from __future__ import annotations

import hashlib
import json

from gclc.compiler import ir
from gclc.compiler.ir_json import SCHEMA_PATH, json_schema


def schema_hash(schema: dict) -> str:
    body = json.loads(json.dumps(schema))
    body["properties"].pop("version")
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def test_the_schema_of_this_version_is_the_pinned_one():
    assert ir.IR_VERSION == max(ir.IR_SCHEMA_SHA256), "pin the new version's schema hash in ir.IR_SCHEMA_SHA256"
    assert schema_hash(json_schema()) == ir.IR_SCHEMA_SHA256[ir.IR_VERSION], (
        "the IR's classes or fields changed: bump IR_VERSION in compiler/ir.py, pin the new hash beside it, and "
        "regenerate compiler/ir.schema.json (python -m gclc.compiler.ir_json)")


def test_every_version_pins_a_different_schema():
    hashes = list(ir.IR_SCHEMA_SHA256.values())
    assert len(set(hashes)) == len(hashes)


def test_the_hash_sees_a_new_field_and_the_file_carries_the_version():
    schema = json_schema()
    changed = json.loads(json.dumps(schema))
    changed["$defs"]["Part"]["properties"]["added"] = {"type": "integer"}
    assert schema_hash(changed) != schema_hash(schema)
    assert json.loads(SCHEMA_PATH.read_text())["properties"]["version"] == {"const": ir.IR_VERSION}
