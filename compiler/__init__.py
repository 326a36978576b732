"""AST -> checked `Design` -> IR: imports and names, field types, the checking rules
(`rules/`), lowering to the hierarchical graph and its topology, derived metrics, IR JSON,
the readers of files a design names (traces, host lists), and what a design costs (`cost/`)."""
