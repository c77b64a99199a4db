// The library runs in a browser: its build imports nothing but its own modules (no `node:`
// module, no `require`) and names no Node global but the guarded `process.env` lookup of
// `CAIRN_URL` / `CAIRN_TOKEN` (src/client.ts `env`). The compiler sees only the DOM library
// (tsconfig.json: `"types": []`), so a Node API in the source fails the build before this.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const dist = resolve(dirname(fileURLToPath(import.meta.url)), "../dist");

test("the built library imports only its own modules and uses no Node global", () => {
  const files = readdirSync(dist).filter((f) => f.endsWith(".js"));
  assert.ok(files.length >= 5);
  for (const file of files) {
    const code = readFileSync(join(dist, file), "utf8");
    const specs = [...code.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s*"([^"]+)"/gm),
      ...code.matchAll(/^\s*import\s*"([^"]+)"/gm), ...code.matchAll(/\bimport\s*\(\s*"([^"]+)"/g)];
    for (const [, spec] of specs) {
      assert.ok(spec.startsWith("./") && spec.endsWith(".js"), `${file} imports ${spec}`);
    }
    assert.doesNotMatch(code, /\brequire\(|\bBuffer\b|\b__dirname\b/, file);
    const processUses = code.match(/\bprocess\b/g) ?? [];
    assert.ok(file === "client.js" ? processUses.length <= 2 : processUses.length === 0, `${file} uses process`);
  }
});
