"""Model blocks that several tests plan, written once."""

from __future__ import annotations

LLAMA3_8B = """\
model {name} {{
  arch     = dense
  layers   = 32
  hidden   = 4096
  heads    = 32
  kv_heads = 8
  ffn      = 14336
  vocab    = 128256
  seq      = 8192
  mlp      = swiglu{extra}
}}
"""


def llama3_8b(name: str = "M", extra: str = "") -> str:
    """Llama 3 8B's shape (Llama 3 Herd of Models, arXiv:2407.21783, Table 3) as a GCL model
    block named `name`; `extra`: more lines inside it."""
    return LLAMA3_8B.format(name=name, extra=extra)


def chat_serve(extra: str = "") -> str:
    """The `serve chat` job of tests/data/serve_cost.gcl's cluster (Llama8B on Box, fp8, 1000 prompt and
    200 output tokens) with `extra` lines: an engine block, an objective, SLOs."""
    return f"""
serve chat {{
  model = Llama8B
  on = Box
  precision = fp8
  prompt = 1000
  output = 200
  {extra}
}}
"""
