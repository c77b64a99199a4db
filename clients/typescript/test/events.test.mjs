import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Server } from "./server.mjs";

const WORKFLOW = "research-agent";
const QUESTION = { question: "What is a lease?" };

let server;
before(async () => { server = await Server.start(); });
after(async () => server.close());

test("events since a bookmark page the log", async () => {
  const client = server.client();
  const { thread } = await client.start(WORKFLOW, QUESTION, {}, 30_000);
  const every = await client.events(thread);
  const seqs = every.events.map((e) => e.seq);
  assert.deepEqual(seqs, seqs.map((_, i) => i + 1));
  assert.equal(every.status, "completed");
  const later = await client.events(thread, { since: 3, limit: 2 });
  assert.deepEqual(later.events.map((e) => e.seq), [4, 5]);
  assert.equal(later.next_since, 5);
  const followed = [];
  for await (const e of client.follow(thread, { since: every.next_since - 2 })) followed.push(e.seq);
  assert.deepEqual(followed, [every.next_since - 1, every.next_since]);
});

test("following delivers every event once across a server restart", async () => {
  const client = server.client();
  // Starts 4 s from now: created before the restart, run after it.
  const { thread } = await client.start(WORKFLOW, QUESTION, { delay_ms: 4_000 });
  const seen = [];
  let restarted;
  for await (const e of client.follow(thread)) {
    seen.push(e);
    if (!restarted) restarted = server.restart(); // after the first event, while following
  }
  await restarted;
  const stored = await client.events(thread);
  assert.equal(stored.status, "completed");
  assert.ok(seen.length > 1);
  assert.deepEqual(seen.map((e) => e.seq), stored.events.map((e) => e.seq), "an event lost or doubled");
  assert.deepEqual(seen.map((e) => e.kind), stored.events.map((e) => e.kind));
});
