import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { BadRequest, Conflict, NotFound } from "../dist/index.js";
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

test("a reset forks one thread once per key and cancels it", async () => {
  const client = server.client();
  for (const id of ["rs-1", "rs-2"]) await client.start(WORKFLOW, QUESTION, { id, delay_ms: 600_000 });
  const made = await client.reset("rs-1", "start", "k1");
  assert.equal(made.thread, "rs-1.reset.k1");
  assert.equal((await client.thread("rs-1")).status, "cancelled");
  const again = await client.reset("rs-1", "start", "k1");
  assert.equal(again.thread, "rs-1.reset.k1", "the same key: the same new thread");
  const forks = [];
  for await (const t of client.allThreads()) if (t.thread.startsWith("rs-1.reset.")) forks.push(t.thread);
  assert.deepEqual(forks, ["rs-1.reset.k1"], "no second fork");
  assert.notEqual((await client.thread("rs-2")).status, "cancelled", "the other thread is untouched");
  await assert.rejects(client.reset("rs-2", "yesterday"), (e) => e instanceof BadRequest && e.field === "to");
  await assert.rejects(client.reset("nobody", "start"), (e) => e instanceof NotFound && e.field === "thread");
});

test("a repin moves one thread's build pin and an unpin removes it", async () => {
  const client = server.client();
  for (const id of ["rp-1", "rp-2"]) await client.start(WORKFLOW, QUESTION, { id, labels: { team: "docs" }, delay_ms: 600_000 });
  const before = await client.thread("rp-1");
  assert.deepEqual(before.labels, { team: "docs" }, "an engine without a build id pins nothing");
  const moved = await client.repin("rp-1", "2026.12.2");
  assert.deepEqual([moved.thread, moved.status], ["rp-1", before.status]);
  const pinned = await client.thread("rp-1");
  assert.deepEqual(pinned.labels, { team: "docs", "cairn.build": "2026.12.2" });
  assert.equal(pinned.seq, before.seq + 1, "one event");
  const changed = (await client.events("rp-1", { since: before.seq })).events;
  assert.deepEqual(changed.map((e) => e.body), [{ type: "labels_changed", set: { "cairn.build": "2026.12.2" } }]);
  assert.deepEqual((await client.thread("rp-2")).labels, { team: "docs" }, "the other thread is untouched");

  for (const bad of ["has space", "x".repeat(65), ""]) {
    await assert.rejects(client.repin("rp-1", bad), (e) => e instanceof BadRequest && e.status === 400 && e.field === "build");
  }
  assert.equal((await client.thread("rp-1")).seq, pinned.seq, "nothing written by a refusal");
  await assert.rejects(client.repin("nobody", "2026.12.2"), (e) => e instanceof NotFound && e.field === "thread");

  const unpinned = await client.unpin("rp-1");
  assert.deepEqual([unpinned.thread, unpinned.status], ["rp-1", before.status]);
  const after = await client.thread("rp-1");
  assert.deepEqual([after.labels, after.seq], [{ team: "docs" }, pinned.seq + 1]);

  await client.cancel("rp-2");
  await assert.rejects(client.repin("rp-2", "2026.12.2"), (e) => e instanceof Conflict && e.status === 409 && e.field === "thread");
  assert.deepEqual((await client.thread("rp-2")).labels, { team: "docs" });
});
