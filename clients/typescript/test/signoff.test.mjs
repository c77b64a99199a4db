// The success paths of published events, promises and chunks against the second demo workflow
// `cairn serve` registers, `signoff-demo` (engine/tools/src/demo_signoff.rs): it publishes
// `stage` and the id of a promise, waits for that promise, then streams three chunks from its
// node `write` and ends with `approved <value>: <input> (3 parts streamed)` (or `refused (..)`).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Conflict } from "../dist/index.js";
import { Server } from "./server.mjs";

const WORKFLOW = "signoff-demo";
const PARTS = ["part 1/3", "part 2/3", "part 3/3"];

let server;
before(async () => { server = await Server.start(); });
after(async () => server.close());

/** Starts `thread` and answers the id of the promise it published once parked on it. */
async function parked(client, thread, text) {
  await client.start(WORKFLOW, text, { id: thread });
  const got = await client.getEvent(thread, "promise", 10_000);
  assert.equal(got.state, "set", JSON.stringify(got));
  assert.equal(typeof got.value, "string");
  return got.value;
}

const conflict = (e) => { assert.ok(e instanceof Conflict, `${e}`); assert.equal(e.status, 409); return true; };

test("a promise is completed once and the chunks stream", async () => {
  const client = server.client();
  const promise = await parked(client, "apr-1", "the release notes");
  assert.deepEqual(await client.published("apr-1"),
    { thread: "apr-1", published: { stage: "waiting for approval", promise } });
  assert.deepEqual(await client.promises("apr-1"), { thread: "apr-1", promises: [{ promise, state: "open" }] });
  assert.equal((await client.thread("apr-1")).updates, undefined, "no update declared: the key is left out");

  const items = [];
  const reading = (async () => { for await (const i of client.stream("apr-1")) items.push(i); })();
  await new Promise((ok) => setTimeout(ok, 300)); // connected before the chunks are written
  const done = await client.completePromise(promise, { value: 3 });
  assert.deepEqual([done.promise, done.thread, done.duplicate], [promise, "apr-1", false]);
  const again = await client.completePromise(promise, { value: 3 });
  assert.deepEqual([again.signal, again.duplicate], [done.signal, true]);
  await assert.rejects(client.completePromise(promise, { value: 4 }), conflict);
  await assert.rejects(client.completePromise(promise, { error: "too late" }), conflict);

  const result = await client.result("apr-1", 30_000);
  assert.deepEqual([result.status, result.output], ["completed", "approved 3: the release notes (3 parts streamed)"]);
  await reading;
  const chunks = items.filter((i) => i.kind === "chunk");
  assert.deepEqual(chunks.map((c) => [c.value, c.node, c.index]), PARTS.map((p, n) => [p, "write", n]));
  assert.deepEqual(items.filter((i) => i.kind === "closed").map((i) => i.node), ["ask", "write"]);
  assert.deepEqual(items.at(-1), { kind: "ended", seq: items.at(-1).seq, status: "completed", output: result.output });
  assert.deepEqual((await client.promises("apr-1")).promises,
    [{ promise, state: "completed", value: 3, signal: done.signal }]);
  assert.equal((await client.getEvent("apr-1", "stage")).value, "writing");
});

test("a promise completed with an error refuses", async () => {
  const client = server.client();
  const promise = await parked(client, "apr-2", "the budget");
  const done = await client.completePromise(promise, { error: "not this quarter" });
  assert.equal(done.duplicate, false);
  const result = await client.result("apr-2", 30_000);
  assert.equal(result.output, "refused (not this quarter): the budget (3 parts streamed)");
  assert.deepEqual((await client.promises("apr-2")).promises,
    [{ promise, state: "completed", error: "not this quarter", signal: done.signal }]);
  await assert.rejects(client.completePromise(promise, { value: 1 }), conflict);
});
