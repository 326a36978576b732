"""The TextMate grammar (editors/vscode/syntaxes/gcl.tmLanguage.json) under the real
tokenizer: every shipped .gcl file tokenizes with each non-blank character in a named scope,
a character no rule names is reported (the check can fail), and words that only look like
keywords stay names."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted([*ROOT.glob("examples/*.gcl"), *ROOT.glob("dsl/std/*.gcl"), *ROOT.glob("tests/data/**/*.gcl"),
                  *ROOT.glob("benchmarks/**/*.gcl")])


def _scopes(tokens: list, line: int, text: str) -> list[str]:
    """The scopes of the token `text` on `line` (the grammar's own scope dropped)."""
    found = [scopes[1:] for at, token, scopes in tokens if at == line and token == text]
    assert found, f"no token {text!r} on line {line}: {[t for t in tokens if t[0] == line]}"
    return found[0]


def test_every_shipped_design_tokenizes_without_an_unmatched_token(textmate):
    assert len(SHIPPED) > 200 and any("dsl/std" in p.as_posix() for p in SHIPPED)
    unmatched = textmate(unmatched=SHIPPED)["unmatched"]
    assert len(unmatched) == len(SHIPPED)
    bad = {Path(path).relative_to(ROOT).as_posix(): found[:5] for path, found in unmatched.items() if found}
    assert not bad, f"tokens no rule names (line, text, scopes): {bad}"


def test_a_character_no_rule_names_is_reported(textmate, tmp_path):
    broken = tmp_path / "broken.gcl"
    broken.write_text('chip A {\n  tdp = 700 W @ $x\n}\n')
    found = textmate(unmatched=[broken])["unmatched"][str(broken)]
    assert [line for line, _, _ in found] == [2] and "".join(text for _, text, _ in found).split() == ["@", "$"], found


def test_words_that_only_look_like_keywords_stay_names(textmate, tmp_path):
    probe = tmp_path / "probe.gcl"
    probe.write_text("chipset A {\n"            # 1: not the kind `chip`
                     "  model = M\n"            # 2: a kind's word as a field
                     "  x = 3\n"                # 3: a field named x, not multiplicity
                     "  units = nodes x DGX\n"  # 4: multiplicity, for contrast
                     "  seq = 8192  vocab = 1\n"  # 5: `vocab` starts a member, not a unit
                     "  importance = true\n"    # 6: not `import`
                     "}\n")
    tokens = textmate(tokens=[probe])["tokens"][str(probe)]
    assert _scopes(tokens, 1, "chipset") == ["variable.other.gcl"]
    assert _scopes(tokens, 2, "model") == ["variable.other.property.gcl"]
    assert _scopes(tokens, 3, "x") == ["variable.other.property.gcl"]
    assert _scopes(tokens, 4, "x") == ["keyword.operator.multiplicity.gcl"]
    assert _scopes(tokens, 5, "vocab") == ["variable.other.property.gcl"]
    assert _scopes(tokens, 6, "importance") == ["variable.other.property.gcl"]


def test_the_extension_declares_the_grammar_and_the_server():
    extension = ROOT / "editors" / "vscode"
    package = json.loads((extension / "package.json").read_text())
    grammar = package["contributes"]["grammars"][0]
    assert (extension / grammar["path"]).is_file() and grammar["scopeName"] == "source.gcl"
    assert json.loads((extension / grammar["path"]).read_text())["scopeName"] == "source.gcl"
    assert package["contributes"]["languages"][0]["extensions"] == [".gcl"]
    assert (extension / package["contributes"]["languages"][0]["configuration"]).is_file()
    main = (extension / package["main"]).read_text()
    assert 'args: ["lsp"]' in main and "vscode-languageclient/node" in main
    lock = json.loads((extension / "package-lock.json").read_text())["packages"]
    for name in ("vscode-textmate", "vscode-oniguruma", "vscode-languageclient"):
        pinned = {**package["dependencies"], **package["devDependencies"]}[name]
        assert lock[f"node_modules/{name}"]["version"] == pinned, f"{name} is not pinned to what the lock holds"
