// The README's start-and-wait snippet runs as written against a real server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Server } from "./server.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

test("the README snippet starts a thread and logs its answer", async () => {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const snippets = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.equal(snippets.length, 1);
  const server = await Server.start();
  const dir = mkdtempSync(join(tmpdir(), "cairn-ts-readme-"));
  const logged = [];
  const log = console.log;
  try {
    // The package name resolves to this package's build, as it would once installed.
    const code = snippets[0].replace('"@cairn-rs/client"', JSON.stringify(pathToFileURL(join(root, "dist/index.js")).href));
    const file = join(dir, "snippet.mjs");
    writeFileSync(file, code);
    process.env.CAIRN_URL = server.url;
    process.env.CAIRN_TOKEN = server.token;
    console.log = (...args) => logged.push(args.join(" "));
    await import(pathToFileURL(file).href);
  } finally {
    console.log = log;
    delete process.env.CAIRN_URL;
    delete process.env.CAIRN_TOKEN;
    rmSync(dir, { recursive: true, force: true });
    await server.close();
  }
  const [thread, status, ...answer] = logged.join("\n").split(" ");
  assert.equal(status, "completed");
  assert.ok(thread && answer.join(" ").length > 0);
});
