"""The real TextMate tokenizer (vscode-textmate on vscode-oniguruma, the engine VS Code runs),
installed by `.ci/setup` with `npm ci` in editors/vscode and driven by its test/tokenize.js."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "editors" / "vscode"
GRAMMAR = EXTENSION / "syntaxes" / "gcl.tmLanguage.json"


@pytest.fixture(scope="session")
def textmate():
    """tokenize(unmatched=[paths], tokens=[paths]) -> {"unmatched": {path: [...]}, "tokens": {path: [...]}}."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed: the TextMate grammar is tokenized by vscode-textmate under Node.js")
    modules = EXTENSION / "node_modules"
    assert (modules / "vscode-textmate").is_dir() and (modules / "vscode-oniguruma").is_dir(), \
        "the pinned npm packages are missing: run `bash .ci/setup` (it runs `npm ci` in editors/vscode)"

    def tokenize(unmatched=(), tokens=()) -> dict:
        args = ["node", str(EXTENSION / "test" / "tokenize.js"), str(GRAMMAR),
                "--unmatched", *map(str, unmatched), "--tokens", *map(str, tokens)]
        done = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    return tokenize
