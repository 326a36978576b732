"""The pipeline's one-way layering: every module imports only from its own layer or the
layers below it (at module level and inside functions alike), and no modules import each
other in a circle. The layer order is written here once."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top. `gclc` is the package root (its version); grammar/ holds no Python.
# Folders in one tuple share a rank and may not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("",),            # gclc/__init__.py
    ("dsl",),         # text -> AST, diagnostics, units
    ("compiler",),    # AST -> checked Design -> IR
    ("model",),       # IR + job -> estimates
    ("solver",),      # estimates -> Plan
    ("views",),       # Plan / IR -> text, JSON, DOT, HTML
    ("cli", "testing", "lsp"),  # entry points
)
RANK = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}


def modules() -> dict[str, Path]:
    found = {"gclc": ROOT / "__init__.py"}
    for folder in RANK:
        if not folder:
            continue
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(("gclc",) + (parts[:-1] if parts[-1] == "__init__" else parts))
            found[name] = path
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every gclc module `module` imports, wherever the import statement stands."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "gclc"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            elif (node.module or "").split(".")[0] == "gclc":
                base = node.module
            else:
                continue
            for alias in node.names:  # `from . import codes` imports the module gclc.dsl.codes
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return found


def graph() -> nx.DiGraph:
    known = modules()
    g = nx.DiGraph()
    for module, path in known.items():
        g.add_node(module)
        for target in imports(module, path, known):
            g.add_edge(module, target)
    return g


def test_every_layer_folder_exists_and_every_package_folder_has_a_layer():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages <= set(RANK), f"folders without a layer: {sorted(packages - set(RANK))}"
    assert {"dsl", "compiler", "model", "solver", "views", "cli", "testing"} <= packages


def test_no_module_imports_from_a_layer_above_or_beside_it():
    upward = []
    for module, target in graph().edges:
        mine, theirs = layer(module), layer(target)
        if RANK[theirs] > RANK[mine] or (RANK[theirs] == RANK[mine] and theirs != mine):
            upward.append(f"{module} -> {target}")
    assert not upward, "imports against the pipeline's direction:\n" + "\n".join(sorted(upward))


def test_no_import_cycles():
    cycles = list(nx.simple_cycles(graph()))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c + [c[0]]) for c in cycles[:20])


def test_the_walk_sees_imports_inside_functions(tmp_path):
    """The check must not be blind to an import hidden in a function body."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from ..views import render\n", encoding="utf-8")
    assert imports("gclc.compiler.m", module, {"gclc.views.render": module}) == {"gclc.views.render"}


# Rooms by job kind inside a stage (a folder below a layer folder). A room imports the shared
# modules at its stage's top and only the rooms named here: serving and training never import
# each other, and what one room takes from another is written down once.
ROOM_USES: dict[str, set[str]] = {
    "solver/split": {"solver/train"},      # each partition's alternatives are train plans
    "solver/power": {"solver/train"},      # re-plans the train configuration at each clock
    "solver/schedule": {"solver/train", "solver/serve", "solver/rl"},   # a job's plan on the GPUs it is given
    "solver/train": {"solver/schedule"},   # goodput under the failure process
    "solver/sweep": {"solver/train", "solver/serve"},
    # RL: a generation pool (serving's simulator and layouts) and a training pool (training's planner)
    "model/rl": {"model/serve", "model/train"},
    "solver/rl": {"solver/serve", "solver/train"},
    # an operator's serving benchmark replayed through serving's simulator and its engine options
    "solver/calibrate": {"solver/serve"},
    # a train step's collectives held behind an expert all-to-all's pauses (model/train/incast.py)
    "model/train": {"model/network"},
    # a serve replica's TP all-reduce inside or across the scale-up domain (network/placement.py)
    "model/serve": {"model/network"},
}


def room(module: str) -> str | None:
    """`model/train` for gclc.model.train.step; None for a stage's top-level modules."""
    parts = module.split(".")
    if len(parts) > 3 or (len(parts) == 3 and (ROOT / parts[1] / parts[2]).is_dir()):
        return f"{parts[1]}/{parts[2]}"
    return None


def test_rooms_import_only_the_rooms_they_name():
    crossing = []
    for a, b in graph().edges:
        ra, rb = room(a), room(b)
        if not (ra and rb) or ra == rb:
            continue
        same_stage = ra.split("/")[0] == rb.split("/")[0]
        kinds = {ra.split("/")[1], rb.split("/")[1]}
        if (same_stage and rb not in ROOM_USES.get(ra, set())) or kinds == {"train", "serve"}:
            crossing.append(f"{a} -> {b}")
    assert not crossing, "imports between rooms not in ROOM_USES:\n" + "\n".join(sorted(crossing))


def test_every_room_has_a_docstring_that_says_what_it_holds():
    for init in ROOT.glob("*/*/__init__.py"):
        if init.parts[-3] in RANK:
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
            assert doc and len(doc) > 40, f"{init.relative_to(ROOT)} says nothing about what its room holds"
