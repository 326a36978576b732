"""Chakra's execution-trace records in protobuf's wire format, written by hand.

The schema is Chakra's `et_def.proto` (package ChakraProtoMsg, mlcommons/chakra 1.0.0): a file
is a `GlobalMetadata` then `Node`s, each prefixed by its length as a varint (Chakra's
`protolib.encodeMessage`; ASTRA-sim's feeder reads the same stream, plain or gzipped). Only the
fields the export sets are here, with their field numbers from the schema; proto3 encodes
repeated integers packed. Writing a few fields by hand keeps protobuf out of gclc's run-time
dependencies; tests/views/test_export_chakra.py reads every file back with Chakra's own
reader and bindings generated from the schema, and checks that re-encoding gives the same bytes.
"""

from __future__ import annotations

# Node.type (enum NodeType)
COMP_NODE, COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE = 4, 5, 6, 7
# the `comm_type` attribute (enum CollectiveCommType)
ALL_REDUCE, ALL_GATHER, ALL_TO_ALL, REDUCE_SCATTER = 0, 2, 6, 7

_VARINT, _BYTES = 0, 2
# AttributeProto's value fields, by the Python type they carry (and what ASTRA-sim's feeder reads
# each attribute as: comm_src/dst/tag int32, comm_type/comm_size int64, is_cpu_op bool, pg_name string)
_INT32, _INT64, _BOOL, _STRING = 7, 9, 27, 29


def varint(value: int) -> bytes:
    if 0 <= value < _SMALL:
        return _VARINTS[value]
    if value < 0:
        value += 1 << 64   # protobuf's two's complement for negative int32/int64
    out = bytearray()
    while value > 0x7F:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL = 1 << 14   # lengths and ids: most varints written are below it
_VARINTS = [bytes([v]) if v < 0x80 else bytes([0x80 | (v & 0x7F), v >> 7]) for v in range(_SMALL)]


def _key(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _key(field, _BYTES) + varint(len(payload)) + payload


def _number(field: int, value: int) -> bytes:
    """A scalar field; proto3 leaves a zero (the default) unwritten."""
    return _key(field, _VARINT) + varint(int(value)) if value else b""


def attribute(name: str, value: object) -> bytes:
    """One AttributeProto: `name` = 1, the value in the oneof field its type maps to."""
    body = _length_delimited(1, name.encode())
    if isinstance(value, bool):
        body += _key(_BOOL, _VARINT) + varint(int(value))
    elif isinstance(value, str):
        body += _length_delimited(_STRING, value.encode())
    elif name in ("comm_src", "comm_dst", "comm_tag"):
        body += _key(_INT32, _VARINT) + varint(value)
    else:
        body += _key(_INT64, _VARINT) + varint(value)
    return body


def attribute_field(name: str, value: object) -> bytes:
    """One attribute as a Node's `attr` field (10), to append to a node's bytes."""
    return _length_delimited(10, attribute(name, value))


def node(ident: int, name: str, kind: int, deps: tuple[int, ...] = (), duration_us: int = 0,
         attrs: tuple[tuple[str, object], ...] = ()) -> bytes:
    """A Node: id 1, name 2, type 3, data_deps 5 (packed), duration_micros 7, attr 10."""
    body = _number(1, ident) + _length_delimited(2, name.encode()) + _number(3, kind)
    if deps:
        body += _length_delimited(5, b"".join(varint(d) for d in deps))
    body += _number(7, duration_us)
    for key, value in attrs:
        body += _length_delimited(10, attribute(key, value))
    return body


def metadata(version: str, attrs: tuple[tuple[str, object], ...] = ()) -> bytes:
    """GlobalMetadata: version 1, attr 2."""
    return _length_delimited(1, version.encode()) + b"".join(_length_delimited(2, attribute(k, v)) for k, v in attrs)


def stream(messages: list[bytes]) -> bytes:
    """Messages each prefixed by its length (protolib.encodeMessage's framing)."""
    return b"".join(varint(len(m)) + m for m in messages)
