// The client agrees with the real server's /api/openapi.json: every route of the document is one
// the client calls or lists as left out, and the query parameters, body fields and typed answers'
// fields of the routes it calls are the same on both sides.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  CONTROL_BODIES, NOT_COVERED, PROMISE_BODY, ROUTES, SIGNAL_START, START_BODY, UPDATE_BODY, isWebView,
} from "../dist/index.js";
import { Server } from "./server.mjs";

let doc;
before(async () => {
  const server = await Server.start();
  try {
    doc = await server.client().call("GET", "/api/openapi.json");
  } finally {
    await server.close();
  }
});

const resolve = (s) => (s?.$ref ? resolve(doc.components.schemas[s.$ref.split("/").pop()]) : s ?? {});

/** The property names of an object schema, through $ref, allOf and a nullable oneOf. */
function props(schema) {
  const s = resolve(schema);
  const names = new Set(Object.keys(s.properties ?? {}));
  for (const part of s.allOf ?? []) for (const n of props(part)) names.add(n);
  const objects = (s.oneOf ?? []).filter((p) => resolve(p).type !== "null");
  if (objects.length === 1) for (const n of props(objects[0])) names.add(n);
  return names;
}

const sorted = (xs) => [...xs].sort();
const op = (route) => doc.paths[route.path][route.method.toLowerCase()];

test("every route of the document is called or left out, and none is missing", () => {
  const inDoc = Object.entries(doc.paths).flatMap(([p, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${p}`));
  const mine = new Set([...Object.values(ROUTES).map((r) => `${r.method} ${r.path}`), ...NOT_COVERED]);
  const unknown = inDoc.filter((r) => !mine.has(r) && !isWebView(r.split(" ")[1]));
  assert.deepEqual(unknown, [], "routes of the document this client neither calls nor leaves out");
  const gone = [...mine].filter((r) => !inDoc.includes(r));
  assert.deepEqual(gone, [], "routes of the client the document does not have");
});

test("the query parameters agree", () => {
  for (const route of Object.values(ROUTES)) {
    const inDoc = (op(route).parameters ?? []).filter((p) => p.in === "query").map((p) => p.name);
    assert.deepEqual(sorted(inDoc), sorted(route.query), `${route.method} ${route.path}`);
  }
});

test("the typed answers agree", () => {
  for (const route of Object.values(ROUTES)) {
    if (!route.answer) continue;
    const names = props(op(route).responses["200"].content["application/json"]?.schema);
    // The document gives no fields for the published events' and the promise's answers.
    if (names.size === 0) continue;
    assert.deepEqual(sorted(names), sorted(route.answer), `${route.method} ${route.path}`);
  }
});

test("the start body and the control bodies agree", () => {
  const start = op(ROUTES.start).requestBody.content["application/json"].schema;
  assert.deepEqual(sorted(props(start)), sorted([...START_BODY.args, ...START_BODY.options]));
  assert.deepEqual(sorted(props(start.properties.budgets)), sorted(START_BODY.budgets));
  const control = op(ROUTES.control);
  const names = control.summary.replace(" or ", ", ").split(",").map((c) => c.trim());
  assert.deepEqual(sorted(names), sorted(Object.keys(CONTROL_BODIES)));
  const bodies = control.requestBody.content["application/json"].schema.oneOf;
  const inDoc = bodies.map((b) => sorted(props(b)).join(",")).sort();
  const mine = Object.values(CONTROL_BODIES).filter((b) => b.length).map((b) => sorted(b).join(",")).sort();
  assert.deepEqual(inDoc, mine);
  const signal = bodies.find((b) => b.properties?.dedup_key);
  assert.deepEqual(sorted(props(signal.properties.start)), sorted(SIGNAL_START));
});

test("the update and promise bodies agree, and the stream is an event stream", () => {
  const update = op(ROUTES.update).requestBody.content["application/json"].schema;
  assert.deepEqual(sorted(props(update)), sorted(UPDATE_BODY.fields));
  assert.deepEqual(sorted(props(update.properties.start)), sorted(UPDATE_BODY.start));
  const promise = op(ROUTES.promise).requestBody.content["application/json"].schema;
  assert.deepEqual(sorted(props(promise)), sorted(PROMISE_BODY));
  assert.deepEqual(Object.keys(op(ROUTES.stream).responses["200"].content), ["text/event-stream"]);
});
