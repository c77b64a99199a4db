import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { BadRequest, CairnClient, Conflict, NotFound, TooManyRequests, Unauthorized } from "../dist/index.js";
import { Server } from "./server.mjs";

const WORKFLOW = "research-agent";
const QUESTION = { question: "What is a lease?" };
const LATER_MS = 600_000;

let server;
let client;
before(async () => {
  server = await Server.start();
  client = server.client();
});
after(async () => server.close());

/** The demo's output for `question`: a direct answer, or a reviewed draft with both findings. */
function checkAnswer(output, question) {
  assert.equal(output.question, question);
  if (output.route === "simple") {
    assert.equal(output.answer, "A direct answer.");
  } else {
    assert.equal(output.route, "research");
    assert.equal(output.findings.length, 2);
    assert.ok(output.answer.startsWith(`${output.draft} [`));
  }
}

test("a thread started completes with the demo's output", async () => {
  const started = await client.start(WORKFLOW, QUESTION, { id: "ts-asked-1" }, 30_000);
  assert.deepEqual([started.thread, started.created, started.finished, started.status],
    ["ts-asked-1", true, true, "completed"]);
  checkAnswer(started.output, QUESTION.question);
  assert.deepEqual((await client.result("ts-asked-1")).output, started.output);
  const again = await client.start(WORKFLOW, QUESTION, { id: "ts-asked-1" });
  assert.equal(again.created, false);
  const waited = await client.wait((await client.start(WORKFLOW, { question: "Why?" })).thread, 30_000);
  assert.equal(waited.status, "completed");
  checkAnswer(waited.output, "Why?");
});

test("every start option reaches the thread", async () => {
  const budgets = { max_steps: 50, max_tool_calls: 40, max_tokens: 10_000, max_cost_micros: 1_000_000,
    max_wall_ms: 3_600_000, warn_fraction: 0.5 };
  const started = await client.start(WORKFLOW, QUESTION, { id: "ts-opts", labels: { team: "docs" }, version: 1,
    deadline_ms: 3_600_000, budgets, permissions: ["model"], delay_ms: LATER_MS });
  assert.equal(started.created, true);
  const created = (await client.events("ts-opts")).events[0];
  assert.equal(created.kind, "thread_created");
  assert.deepEqual(created.body.policy.budgets, budgets);
  assert.deepEqual(created.body.policy.permissions, ["model"]);
  assert.deepEqual((await client.thread("ts-opts")).labels, { team: "docs" });
  await client.start(WORKFLOW, QUESTION, { id: "ts-at", start_at_ms: 2 ** 52 });
  assert.equal((await client.events("ts-at")).events[0].body.policy.start_at_ms, 2 ** 52);
  await assert.rejects(client.start(WORKFLOW, QUESTION, { queue: "nosuch", key: "k", priority: 1, dedup: "d" }),
    (e) => e instanceof NotFound && e.field === "queue");
});

test("a start over the rate of a queue that drops is TooManyRequests with the retry time", async () => {
  // A server of its own: the queue is defined on the file, which the serving engine holds, so
  // it is stopped meanwhile (a start makes a new token).
  const own = await Server.start();
  try {
    await own.stop();
    own.cli("queue", "define", "drops", "--rate", "1/60s", "--rate-drops");
    await own.run();
    const client = own.client();
    const first = await client.start(WORKFLOW, QUESTION, { id: "rate-a", queue: "drops" });
    assert.deepEqual([first.thread, first.created], ["rate-a", true]);
    // The window is 60 s and its one start was just taken: a start fits again within it.
    await assert.rejects(client.start(WORKFLOW, QUESTION, { id: "rate-b", queue: "drops" }),
      (e) => e instanceof TooManyRequests && e.status === 429 && e.error.includes("over its rate")
        && Number.isInteger(e.retryAfterMs) && e.retryAfterMs >= 1_000 && e.retryAfterMs <= 60_000);
    await assert.rejects(client.thread("rate-b"), (e) => e instanceof NotFound, "the refused start wrote nothing");
    const every = [];
    for await (const t of client.allThreads()) every.push(t.thread);
    assert.deepEqual(every, ["rate-a"]);
  } finally {
    await own.close();
  }
});

test("pause, resume, cancel and delete", async () => {
  const { thread } = await client.start(WORKFLOW, QUESTION, { delay_ms: LATER_MS });
  assert.equal((await client.pause(thread)).status, "paused");
  assert.notEqual((await client.resume(thread)).status, "paused");
  assert.equal((await client.cancel(thread, "not needed")).status, "cancelled");
  assert.equal((await client.result(thread)).status, "cancelled");
  assert.equal((await client.delete(thread)).thread, thread);
  await assert.rejects(client.result(thread), (e) => e instanceof NotFound && e.status === 404);
});

test("threads are listed with filters and pages", async () => {
  for (let n = 0; n < 5; n++) {
    await client.start(WORKFLOW, QUESTION, { id: `ts-list-${n}`, labels: { batch: n % 2 ? "b2" : "b1" },
      delay_ms: LATER_MS });
  }
  const first = await client.threads({ labels: { batch: "b1" }, limit: 2 });
  assert.deepEqual(first.threads.map((t) => t.thread), ["ts-list-0", "ts-list-2"]);
  const rest = await client.threads({ labels: { batch: "b1" }, limit: 2, after: first.next });
  assert.deepEqual(rest.threads.map((t) => t.thread), ["ts-list-4"]);
  assert.equal(rest.next, null);
  const every = [];
  for await (const t of client.allThreads({ labels: { batch: "b2" }, limit: 1 })) every.push(t.thread);
  assert.deepEqual(every, ["ts-list-1", "ts-list-3"]);
  const created = await client.threads({ status: "created", workflow: WORKFLOW, offset: 1, limit: 1 });
  assert.equal(created.threads.length, 1);
  await assert.rejects(client.threads({ status: "sideways" }), (e) => e instanceof BadRequest && e.field === "status");
});

test("a bad token is Unauthorized and a bad body names its field", async () => {
  await assert.rejects(server.client({ token: "wrong" }).start(WORKFLOW, QUESTION),
    (e) => e instanceof Unauthorized && e.status === 401 && e.error.length > 0);
  await assert.rejects(client.start(WORKFLOW, QUESTION, { budgets: { warn_fraction: 2 } }),
    (e) => e instanceof BadRequest && e.field === "budgets" && e.error.includes("warn_fraction"));
  await assert.rejects(client.call("POST", `/api/workflows/${WORKFLOW}/threads`, { inptu: {} }),
    (e) => e instanceof BadRequest && ["inptu", "input"].includes(e.field));
  await assert.rejects(client.start("no-such-workflow", QUESTION), (e) => e instanceof NotFound && e.field === "workflow");
});

test("the address and token come from the environment", async () => {
  process.env.CAIRN_URL = server.url;
  process.env.CAIRN_TOKEN = server.token;
  try {
    assert.equal((await new CairnClient().start(WORKFLOW, QUESTION, {}, 30_000)).status, "completed");
  } finally {
    delete process.env.CAIRN_URL;
    delete process.env.CAIRN_TOKEN;
  }
});

test("a signal reaches a waiting thread once per dedup key, and with start creates it", async () => {
  const { thread } = await client.start(WORKFLOW, QUESTION, { id: "ts-waits", delay_ms: LATER_MS });
  const first = await client.signal(thread, "approval", { by: "ann" }, { dedupKey: "pay-7" });
  assert.deepEqual([first.signal, first.duplicate], [1, false]);
  const again = await client.signal(thread, "approval", { by: "ann" }, { dedupKey: "pay-7" });
  assert.deepEqual([again.signal, again.duplicate], [1, true]);
  // The key is kept in the inbox as a marker signal (`cairn.dedup`, docs/signals.md), number 2.
  assert.equal((await client.signal(thread, "approval", { by: "bob" })).signal, 3);
  const made = await client.signal("ts-by-signal", "hello", 1,
    { start: { workflow: WORKFLOW, input: QUESTION, labels: { via: "signal" } } });
  assert.deepEqual([made.created, made.signal], [true, 1]);
  assert.equal((await client.wait("ts-by-signal", 30_000)).status, "completed");
  await assert.rejects(client.signal("ts-by-signal", "hello", 2), (e) => e instanceof Conflict && e.status === 409);
});
