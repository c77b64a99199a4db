// What no served workflow makes, read through a scripted `fetch`: the demo streams no chunk, so
// `chunk` and `gap` items, an `error` message, the resumption with `Last-Event-ID` after a stream
// that ends before `ended`, and the 504 of an update are checked against SSE and refusal bytes as
// `cairn serve` writes them (engine/tools/src/serve/stream.rs).
import { test } from "node:test";
import assert from "node:assert/strict";
import { CairnClient, CairnError, UpdatePending } from "../dist/index.js";

const sse = (kind, data, id) => `event: ${kind}\ndata: ${JSON.stringify(data)}\n${id ? `id: ${id}\n` : ""}\n: keep-alive\n\n`;
const CLOSED = { kind: "closed", seq: 5, step: 1, node: "draft", update: { Draft: "a" }, error: null };
const CHUNK = { kind: "chunk", index: 0, step: 2, node: "draft", value: "tok" };
const GAP = { kind: "gap", missed: 3 };
const ENDED = { kind: "ended", seq: 9, status: "completed", output: { answer: "a" } };

/** A client whose `fetch` answers `bodies` in turn (status 200, an event stream), recording each
 * request's URL and `Last-Event-ID`. */
function scripted(bodies, asked, status = 200) {
  const fetch = async (url, init) => {
    asked.push([new URL(url).pathname, init.headers["Last-Event-ID"] ?? null]);
    return new Response(bodies[asked.length - 1], { status, headers: { "content-type": "text/event-stream" } });
  };
  return new CairnClient({ url: "http://127.0.0.1:9", token: "t", fetch });
}

test("chunks, gaps and a resume with Last-Event-ID after a stream that ends before `ended`", async () => {
  const asked = [];
  // A server resends nothing at or before the id it got; a close that did come twice must not arrive twice.
  const client = scripted([sse("closed", CLOSED, 5), sse("closed", CLOSED, 5) + sse("chunk", CHUNK) + sse("gap", GAP) + sse("ended", ENDED, 9)], asked);
  const items = [];
  for await (const i of client.stream("t")) items.push(i);
  assert.deepEqual(items, [CLOSED, CHUNK, GAP, ENDED]);
  assert.deepEqual(asked, [["/api/threads/t/stream", null], ["/api/threads/t/stream", "5"]]);
});

test("an error message and a 504 are typed", async () => {
  const client = scripted([sse("error", { error: "boom" })], []);
  await assert.rejects(async () => { for await (const _ of client.stream("t")); }, (e) => e instanceof CairnError && /boom/.test(e.message));
  const pending = scripted([JSON.stringify({ error: "no step boundary", field: null })], [], 504);
  await assert.rejects(pending.update("t", "add_finding", "x", { id: "u" }), (e) => e instanceof UpdatePending && e.status === 504);
});
