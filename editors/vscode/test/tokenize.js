// Tokenizes files with the TextMate grammar, as VS Code does (vscode-textmate with
// the Oniguruma regex engine), and prints per file and line the tokens with their scopes:
//   node test/tokenize.js GRAMMAR FILE... > tokens.json
const fs = require("fs");
const path = require("path");
const vsctm = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

async function main() {
  const [grammarPath, ...files] = process.argv.slice(2);
  const wasm = fs.readFileSync(path.join(path.dirname(require.resolve("vscode-oniguruma")), "onig.wasm"));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (sources) => new oniguruma.OnigScanner(sources),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async () => vsctm.parseRawGrammar(fs.readFileSync(grammarPath, "utf8"), grammarPath),
  });
  const grammar = await registry.loadGrammar("source.shapelang");
  const out = {};
  for (const file of files) {
    let state = vsctm.INITIAL;
    out[file] = fs.readFileSync(file, "utf8").split(/\r?\n/).map((line) => {
      const r = grammar.tokenizeLine(line, state);
      state = r.ruleStack;
      return r.tokens.map((t) => [line.slice(t.startIndex, t.endIndex), t.scopes]);
    });
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((err) => { console.error(err); process.exit(1); });
