// Tokenize .gcl files with the real TextMate engine VS Code uses (vscode-textmate on
// vscode-oniguruma) and print JSON on stdout. Used by tests/editors/test_textmate.py.
//
//   node test/tokenize.js GRAMMAR [--unmatched] FILE... [--tokens FILE...]
//
// --unmatched (the default) lists, per file, every token holding a non-blank character that
// no rule of the grammar named (its only scope is the grammar's own, source.gcl);
// --tokens lists every token of the files that follow: [line, text, scopes].
"use strict";

const fs = require("fs");
const path = require("path");
const oniguruma = require("vscode-oniguruma");
const textmate = require("vscode-textmate");

async function registry(grammarPath) {
  const wasm = fs.readFileSync(path.join(path.dirname(require.resolve("vscode-oniguruma")), "onig.wasm"));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  return new textmate.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (text) => new oniguruma.OnigString(text),
    }),
    loadGrammar: async () => textmate.parseRawGrammar(fs.readFileSync(grammarPath, "utf8"), grammarPath),
  });
}

function tokens(grammar, text) {
  const found = [];
  let stack = textmate.INITIAL;
  text.split(/\r?\n/).forEach((line, index) => {
    const result = grammar.tokenizeLine(line, stack);
    for (const token of result.tokens) {
      found.push([index + 1, line.slice(token.startIndex, token.endIndex), token.scopes]);
    }
    stack = result.ruleStack;
  });
  return found;
}

async function main() {
  const [grammarPath, ...args] = process.argv.slice(2);
  const grammar = await (await registry(grammarPath)).loadGrammar("source.gcl");
  const out = { unmatched: {}, tokens: {} };
  let mode = "unmatched";
  for (const arg of args) {
    if (arg === "--unmatched" || arg === "--tokens") {
      mode = arg.slice(2);
      continue;
    }
    const all = tokens(grammar, fs.readFileSync(arg, "utf8"));
    out[mode][arg] = mode === "tokens" ? all : all.filter(([, text, scopes]) => text.trim() && scopes.length < 2);
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack ? error.stack : error) + "\n");
  process.exit(1);
});
