// The GCL extension: colours come from syntaxes/gcl.tmLanguage.json (declared in package.json);
// this file starts the gclc language server, `gclc lsp` on stdin/stdout, for every .gcl file.
// Plain CommonJS, no build step: VS Code loads it as it is.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const command = vscode.workspace.getConfiguration("gcl").get("server.command", "gclc");
  const server = { command, args: ["lsp"], transport: TransportKind.stdio };
  client = new LanguageClient("gcl", "GCL language server (gclc lsp)", server, {
    documentSelector: [{ scheme: "file", language: "gcl" }],
  });
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
