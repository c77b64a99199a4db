// A thread sealed at rest (docs/encryption.md): written by a server given the key ring
// (CAIRN_KEYS), then read through a server without it, each sealed value is the `Sealed`
// placeholder `{"encrypted": true, "codec", "key"}` and the answer's `sealed` names the missing
// key, while what is in the clear (status, labels, workflow, each event's kind) reads as usual;
// with the key again the values read in the clear.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Server } from "./server.mjs";

const WORKFLOW = "research-agent";
const QUESTION = { question: "What is a lease?" };
const KEYS = `k1=${"a1".repeat(32)}`;
const PLACEHOLDER = { encrypted: true, codec: "aes256gcm", key: "k1" };

let server;
before(async () => { server = await Server.start({ keys: KEYS }); });
after(async () => server.close());

test("a sealed thread read without the key shows placeholders", async () => {
  const client = server.client();
  const started = await client.start(WORKFLOW, QUESTION, { id: "sealed-1", labels: { team: "docs" } }, 30_000);
  assert.deepEqual([started.status, started.sealed], ["completed", undefined]);
  assert.equal(started.output.question, QUESTION.question);
  assert.equal((await client.thread("sealed-1")).sealed, undefined);

  server.keys = undefined;
  await server.restart();
  const shown = await client.thread("sealed-1");
  assert.deepEqual(shown.sealed, ["k1"]);
  for (const field of ["output", "telemetry", "node_results", "budgets"]) {
    assert.deepEqual(shown[field], PLACEHOLDER, field);
  }
  assert.deepEqual([shown.status, shown.labels, shown.workflow.id], ["completed", { team: "docs" }, WORKFLOW]);
  assert.ok(shown.state_unknown?.includes("k1"), shown.state_unknown);
  const result = await client.result("sealed-1");
  assert.deepEqual([result.status, result.output, result.sealed], ["completed", PLACEHOLDER, ["k1"]]);
  const page = await client.events("sealed-1", { limit: 2 });
  assert.deepEqual(page.sealed, ["k1"]);
  assert.deepEqual(page.events.map((e) => [e.kind, e.body]),
    [["thread_created", PLACEHOLDER], ["status_changed", PLACEHOLDER]]);

  server.keys = KEYS;
  await server.restart();
  const again = await client.result("sealed-1");
  assert.deepEqual([again.output, again.sealed], [started.output, undefined]);
});
