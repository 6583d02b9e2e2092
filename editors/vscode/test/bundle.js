// Loads the bundled extension in node with a stand-in for the `vscode` module, activates it,
// and prints the command it would start the language server with.
const Module = require("module");
const path = require("path");
// any name the client reads at load time (classes it extends, enums) is a bare class
const vscode = new Proxy(
  { workspace: { getConfiguration: () => ({ get: (_k, d) => d }) } },
  { get: (target, key) => (key in target ? target[key] : class {}) }
);
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  return request === "vscode" ? "vscode" : resolve.call(this, request, ...rest);
};
require.cache.vscode = { id: "vscode", filename: "vscode", loaded: true, exports: vscode };
const ext = require(path.resolve(process.argv[2]));
if (typeof ext.activate !== "function" || typeof ext.deactivate !== "function") {
  console.error("the bundle exports no activate/deactivate");
  process.exit(1);
}
console.log(JSON.stringify({ activate: typeof ext.activate, deactivate: typeof ext.deactivate }));
