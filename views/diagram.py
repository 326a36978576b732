"""What the graphviz views share: ids, labels, styles, and numbers in the units an
architect reads on the data sheet (network links in bits per second, `400 Gb/s`;
scale-up links and memory in bytes, `450 GB/s`; counts with the right plural)."""

from __future__ import annotations

import re

from ..dsl.numbers import number, quantity

FONT = "Helvetica"
SCALE_UP = {"color": "#2e7d32", "penwidth": "2.5", "style": "solid", "fontcolor": "#2e7d32"}
SCALE_OUT = {"color": "#1565c0", "penwidth": "1.5", "style": "dashed", "fontcolor": "#1565c0"}
HOST_LINK = {"color": "#9e9e9e", "penwidth": "0.8", "style": "dotted", "arrowhead": "none"}
# Rails and groups: colour-blind-safe hues (Okabe-Ito, then Tol's muted), cycled.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#882255",
           "#44aa99", "#999933", "#aa4499", "#332288")
PASTEL = ("#cfe2f3", "#fde9c9", "#c9eadf", "#f3d6e7", "#d9eefa", "#f7d2bf", "#fbf6c6", "#e8c9d5",
          "#d2ece8", "#ebebd0", "#ecd0e8", "#d3d0e6")
BIT_KINDS = frozenset({"infiniband", "ethernet"})  # quoted per port in Gb/s on every data sheet


def fmt(value: float, unit: str) -> str:
    """`3.35 TB/s`, `1.2 MW`: the one number formatter (dsl/numbers.py), `unit` as in `Metric`."""
    return quantity(value, unit) if unit else number(value)


def speed(bytes_per_s: float, bits: bool) -> str:
    """A link rate in bits (`400 Gb/s`) or bytes (`450 GB/s`) per second, per direction."""
    return quantity(bytes_per_s * 8, "b/s") if bits else quantity(bytes_per_s, "B/s")


def ident(*parts: object) -> str:
    return re.sub(r"\W", "_", "_".join(str(p) for p in parts))


def label(*lines: str) -> str:
    return "\\n".join(line for line in lines if line)


def in_bits(design, fabric_name: str, kind: str) -> bool:
    """Whether `fabric_name`'s speeds read in bits: as its `bandwidth` is written in the
    design (or the library) when that says, else by the kind of network."""
    written = _written_unit(design, fabric_name)
    if written is not None:
        return written
    return kind in BIT_KINDS


def _written_unit(design, fabric_name: str) -> bool | None:
    if design is None:
        return None
    try:
        fabric = design[fabric_name]
    except KeyError:
        return None
    span = fabric.span_of("bandwidth")
    source = next((s for s in design.sources if s.path == span.path), None)
    if source is None:
        return None
    match = re.search(r"\d\s*[kKMGTPE]?i?(b|B)(?:it|yte)?s?/s", source.text[span.start:span.end])
    return None if match is None else match[1] == "b"


def escape(text: str) -> str:
    """Text for a graphviz HTML-like label."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
