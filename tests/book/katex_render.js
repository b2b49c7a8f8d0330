// Render formulas with the KaTeX bundles JupyterLab ships; print one JSON line per failure.
// Usage: node katex_render.js BUNDLE.js [BUNDLE.js ...] < formulas.json
// formulas.json: [{"tex": "...", "display": true, "where": "..."}, ...]
// Each bundle is a webpack/rspack chunk whose module exports KaTeX as `default`.
"use strict";
const fs = require("fs");
const vm = require("vm");

function loadKatex(file) {
  // A fresh global per file: chunks of one extension share the name of their array.
  const sandbox = { console };
  sandbox.self = sandbox;
  vm.runInNewContext(fs.readFileSync(file, "utf8"), sandbox, { filename: file });
  for (const key of Object.keys(sandbox)) {
    if (!Array.isArray(sandbox[key])) continue;
    for (const [, modules] of sandbox[key]) {
      for (const factory of Object.values(modules)) {
        const source = String(factory);
        if (!source.includes("KaTeX parse error") || !source.includes("renderToString")) continue;
        const exports = {};
        const req = {
          d: (target, getters) => {
            for (const name of Object.keys(getters)) {
              Object.defineProperty(target, name, { enumerable: true, get: getters[name] });
            }
          },
          r: () => {},
        };
        try {
          factory({ exports }, exports, req);
        } catch (error) {
          continue;  // a module that needs other modules: not KaTeX's own
        }
        const katex = exports.default || exports;
        if (katex && typeof katex.renderToString === "function") return katex;
      }
    }
  }
  return null;
}

const formulas = JSON.parse(fs.readFileSync(0, "utf8"));
let failures = 0;
for (const file of process.argv.slice(2)) {
  const katex = loadKatex(file);
  if (katex === null) continue;  // the string "KaTeX parse error" without KaTeX itself
  for (const f of formulas) {
    try {
      katex.renderToString(f.tex, { displayMode: f.display, throwOnError: true });
    } catch (error) {
      failures += 1;
      console.log(JSON.stringify({ katex: katex.version, where: f.where, tex: f.tex,
                                   error: String(error.message || error) }));
    }
  }
  console.error(`KaTeX ${katex.version}: ${formulas.length} formulas`);
}
process.exit(failures ? 1 : 0);
