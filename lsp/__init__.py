"""Editor support for GCL: a language server on pygls (`gclc lsp`).

The top layer beside the CLI: it imports from `dsl` and `compiler` only.
"""
