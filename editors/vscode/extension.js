// Starts `shapelang lsp` over stdio for .shape files (the command is a setting:
// shapelang.server.command, e.g. ["python", "-m", "shapelang", "lsp"] for a venv).
const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const [command, ...args] = vscode.workspace
    .getConfiguration("shapelang")
    .get("server.command", ["shapelang", "lsp"]);
  const server = { command, args, transport: TransportKind.stdio };
  client = new LanguageClient(
    "shapelang",
    "shapelang",
    { run: server, debug: server },
    { documentSelector: [{ scheme: "file", language: "shapelang" }, { scheme: "untitled", language: "shapelang" }] }
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
