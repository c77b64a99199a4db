import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { BadRequest, NotFound } from "../dist/index.js";
import { Server } from "./server.mjs";

const WORKFLOW = "research-agent";
const QUESTION = { question: "What is a lease?" };

let server;
before(async () => { server = await Server.start(); });
after(async () => server.close());

test("an emit starts the subscriber once per event id", async () => {
  const client = server.client();
  const first = await client.emit("question.asked", "q-1", QUESTION);
  assert.equal(first.threads.length, 1);
  assert.deepEqual(
    [first.threads[0].workflow, first.threads[0].thread, first.threads[0].created],
    [WORKFLOW, "event:q-1/research-agent", true],
  );
  const again = await client.emit("question.asked", "q-1", QUESTION);
  assert.equal(again.threads[0].created, false, "once per event id");
  // Control: an event nobody subscribes to starts nothing.
  assert.deepEqual((await client.emit("nobody.listens", "q-1")).threads, []);
  await assert.rejects(client.emit("question.asked", "", QUESTION), (e) => e instanceof BadRequest && e.field === "id");
});

test("a batch by ids counts, then cancels exactly those threads", async () => {
  const client = server.client();
  for (const id of ["b-1", "b-2", "b-3"]) await client.start(WORKFLOW, QUESTION, { id, delay_ms: 600_000 });
  const named = { ids: ["b-1", "b-3", "nobody"] };
  const dry = await client.batch("cancel", named, {}, true);
  assert.deepEqual([dry.dry_run, dry.total, dry.id ?? null], [true, 2, null]);
  const made = await client.batch("cancel", named, { reason: "from typescript", id: "ts-batch" });
  assert.deepEqual([made.id, made.op, made.total], ["ts-batch", "cancel", 2]);
  let info = await client.batchInfo("ts-batch");
  for (let i = 0; i < 600 && !info.finished; i++) {
    await new Promise((r) => setTimeout(r, 50));
    info = await client.batchInfo("ts-batch");
  }
  assert.deepEqual([info.finished, info.applied, info.skipped], [true, 2, 1]);
  assert.deepEqual(info.skips, [["nobody", "no such thread"]]);
  assert.equal((await client.thread("b-1")).status, "cancelled");
  assert.equal((await client.thread("b-3")).status, "cancelled");
  assert.notEqual((await client.thread("b-2")).status, "cancelled", "the thread not named is untouched");
  await assert.rejects(client.batch("frob"), (e) => e instanceof BadRequest && e.field === "op");
  await assert.rejects(client.batchInfo("no-such-batch"), (e) => e instanceof NotFound);
});
