// Updates, published events, promises and the live stream against the demo workflow `cairn serve`
// registers (`research-agent`): it declares the update `add_finding` (refused when empty; replies
// with the number of findings) and publishes no event, creates no promise and streams no chunk, so
// those routes are checked for their not-set answers and refusals, and the stream for its durable
// items (closed, ended), a resume after a seq and a reconnection across a server restart.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { BadRequest, CairnError, Conflict, NotFound, Unauthorized } from "../dist/index.js";
import { Server } from "./server.mjs";

const WORKFLOW = "research-agent";
const QUESTION = { question: "What is a lease?" };
const LATER_MS = 600_000;
const NEVER_MADE = "~p1.0123456789abcdef.0";

let server;
before(async () => { server = await Server.start(); });
after(async () => server.close());

const refusedWith = (kind, field) => (e) => {
  assert.ok(e instanceof kind, `${e}`);
  if (field) assert.equal(e.field, field);
  return true;
};
const durable = (items) => items.filter((i) => i.kind === "closed" || i.kind === "ended").map((i) => [i.kind, i.seq]);

test("an update answers its reply once per id; refusals are typed and change nothing", async () => {
  const client = server.client();
  const { thread } = await client.start(WORKFLOW, QUESTION, { id: "upd", delay_ms: LATER_MS });
  const first = await client.update(thread, "add_finding", "a source the run missed", { id: "u-1" });
  assert.deepEqual([first.thread, first.id, first.reply, first.duplicate, first.created], [thread, "u-1", 1, false, undefined]);
  const again = await client.update(thread, "add_finding", "same id", { id: "u-1" });
  assert.deepEqual([again.reply, again.seq, again.duplicate], [1, first.seq, true]);
  const before = (await client.events(thread)).next_since;
  await assert.rejects(client.update(thread, "add_finding", "  "), refusedWith(BadRequest, "args"));
  await assert.rejects(client.update(thread, "no_such_update", 1), refusedWith(NotFound, "name"));
  await assert.rejects(client.update(thread, "add_finding", "x", { id: "" }), refusedWith(BadRequest, "id"));
  await assert.rejects(server.client({ token: "wrong" }).update(thread, "add_finding", "x"), refusedWith(Unauthorized));
  assert.equal((await client.events(thread)).next_since, before);
  const found = await client.update(thread, "add_finding", "with start", { start: { workflow: WORKFLOW, input: QUESTION } });
  assert.deepEqual([found.created, found.reply], [false, 2]);
  await client.start(WORKFLOW, QUESTION, { id: "upd-done" }, 30_000);
  await assert.rejects(client.update("upd-done", "add_finding", "too late"), refusedWith(Conflict));
});

test("published events of a thread that publishes none: empty, never_set, pending after the wait", async () => {
  const client = server.client();
  await client.start(WORKFLOW, QUESTION, { id: "pub-done" }, 30_000);
  assert.deepEqual(await client.published("pub-done"), { thread: "pub-done", published: {} });
  const never = await client.getEvent("pub-done", "stage", 5_000);
  assert.deepEqual(never, { thread: "pub-done", key: "stage", state: "never_set", status: "completed" });
  await client.start(WORKFLOW, QUESTION, { id: "pub-later", delay_ms: LATER_MS });
  const began = Date.now();
  const pending = await client.getEvent("pub-later", "stage", 400);
  assert.deepEqual([pending.state, pending.status], ["pending", "created"]);
  assert.ok(Date.now() - began >= 350, "the long poll waited");
  await assert.rejects(client.published("no-such-thread"), refusedWith(NotFound));
  await assert.rejects(client.getEvent("no-such-thread", "stage"), refusedWith(NotFound));
});

test("promise completions are refused for promises never made", async () => {
  const client = server.client();
  const { thread } = await client.start(WORKFLOW, QUESTION, { delay_ms: LATER_MS });
  await assert.rejects(client.completePromise(thread + NEVER_MADE, { value: { by: "ana" } }), refusedWith(NotFound, "promise"));
  await assert.rejects(client.completePromise("not-a-promise-id", { error: "too late" }), refusedWith(NotFound));
  assert.throws(() => client.completePromise(thread + NEVER_MADE, { value: 1, error: "both" }), CairnError);
  await assert.rejects(client.call("POST", `/api/promises/${thread + NEVER_MADE}`, {}), refusedWith(BadRequest, "body"));
  await assert.rejects(server.client({ token: "wrong" }).completePromise(thread + NEVER_MADE, { value: 1 }), refusedWith(Unauthorized));
  assert.deepEqual((await client.events(thread)).events.map((e) => e.kind), ["thread_created"]);
});

test("the stream of a finished thread gives its closes and its end; since resumes after a seq", async () => {
  const client = server.client();
  const done = await client.start(WORKFLOW, QUESTION, { id: "str-done" }, 30_000);
  const items = [];
  for await (const i of client.stream("str-done")) items.push(i);
  const end = items.at(-1);
  assert.deepEqual([end.kind, end.status, end.output], ["ended", "completed", done.output]);
  const closes = items.filter((i) => i.kind === "closed");
  const completed = (await client.events("str-done")).events.filter((e) => e.kind === "node_completed");
  assert.deepEqual(closes.map((c) => [c.seq, c.node]), completed.map((e) => [e.seq, e.body.task.node]));
  const middle = closes[Math.floor(closes.length / 2)].seq;
  const later = [];
  for await (const i of client.stream("str-done", { since: middle })) later.push(i);
  assert.deepEqual(durable(later), durable(items).filter(([, seq]) => seq > middle));
  await assert.rejects(async () => { for await (const _ of client.stream("no-such-thread")); }, refusedWith(NotFound));
});

test("the stream reconnects across a server restart with Last-Event-ID", async () => {
  const resumes = [];
  const counting = (url, init) => {
    resumes.push(init.headers["Last-Event-ID"] ?? null);
    return fetch(url, init);
  };
  const client = server.client({ fetch: counting });
  const { thread } = await client.start(WORKFLOW, QUESTION, { delay_ms: 1_000 });
  resumes.length = 0;
  const items = [];
  let restarted;
  for await (const i of client.stream(thread)) {
    items.push(i);
    if (i.kind === "closed" && !restarted) restarted = server.restart(); // while streaming
  }
  await restarted;
  assert.deepEqual([items.at(-1).kind, items.at(-1).status], ["ended", "completed"]);
  const firstClose = items.find((i) => i.kind === "closed").seq;
  assert.equal(resumes[0], null);
  assert.ok(resumes.length >= 2 && resumes.slice(1).every((r) => Number(r) >= firstClose), `connections: ${resumes}`);
  const stored = (await server.client().events(thread)).events.filter((e) => e.kind === "node_completed");
  assert.deepEqual(items.filter((i) => i.kind === "closed").map((i) => i.seq), stored.map((e) => e.seq));
});

test("a thread names its updates and lists its promises", async () => {
  const client = server.client();
  const { thread } = await client.start(WORKFLOW, QUESTION, { id: "prm-list", delay_ms: LATER_MS });
  assert.deepEqual((await client.thread(thread)).updates, ["add_finding"]);
  assert.deepEqual(await client.promises(thread), { thread, promises: [] });
  const done = await client.start(WORKFLOW, QUESTION, { id: "prm-done" }, 30_000);
  assert.equal(done.status, "completed");
  assert.deepEqual(await client.promises("prm-done"), { thread: "prm-done", promises: [] });
  await assert.rejects(client.promises("no-such-thread"), refusedWith(NotFound));
});
