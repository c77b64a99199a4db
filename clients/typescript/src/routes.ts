/**
 * The routes this client calls, and the endpoint's routes it deliberately leaves out. A route is
 * one entry here and one short method in `client.ts`; `test/openapi.test.mjs` fails when
 * `/api/openapi.json` has a route in neither list, or a query parameter or field differs.
 */

import {
  BATCH_ANSWER_FIELDS, EMITTED_FIELDS, PROMISE_BODY_FIELDS, PROMISE_COMPLETED_FIELDS, PUBLISHED_FIELDS, PUBLISHED_VALUE_FIELDS, UPDATE_BODY_FIELDS,
  UPDATE_START_FIELDS, UPDATED_FIELDS,
  BUDGETS_FIELDS, FORK_OPTIONS_FIELDS, SIGNAL_START_FIELDS, START_OPTIONS_FIELDS, STARTED_FIELDS,
  THREAD_DETAILS_FIELDS, THREAD_PROMISES_FIELDS, THREAD_RESULT_FIELDS, THREADS_PAGE_FIELDS,
} from "./models.js";

/** One route: method, path pattern, its query parameters, and the answer's fields (if typed). */
export interface Route {
  method: "GET" | "POST" | "DELETE";
  path: string;
  query: readonly string[];
  answer?: readonly string[];
}

export const ROUTES = {
  start: { method: "POST", path: "/api/workflows/{id}/threads", query: ["wait_ms"], answer: STARTED_FIELDS },
  result: { method: "GET", path: "/api/threads/{id}/result", query: ["wait_ms"], answer: THREAD_RESULT_FIELDS },
  thread: { method: "GET", path: "/api/threads/{id}", query: ["redact"], answer: THREAD_DETAILS_FIELDS },
  threads: {
    method: "GET", path: "/api/threads", query: ["status", "workflow", "label", "limit", "after", "offset"],
    answer: THREADS_PAGE_FIELDS,
  },
  events: { method: "GET", path: "/api/threads/{id}/events", query: ["since", "kind", "limit", "follow", "redact"] },
  control: { method: "POST", path: "/api/threads/{id}/{control}", query: [] },
  delete: { method: "DELETE", path: "/api/threads/{id}", query: ["force"] },
  health: { method: "GET", path: "/api/health", query: ["watchdog_ms"] },
  update: { method: "POST", path: "/api/threads/{id}/updates/{name}", query: ["wait_ms"], answer: UPDATED_FIELDS },
  published: { method: "GET", path: "/api/threads/{id}/published", query: [], answer: PUBLISHED_FIELDS },
  publishedKey: {
    method: "GET", path: "/api/threads/{id}/published/{key}", query: ["wait_ms"], answer: PUBLISHED_VALUE_FIELDS,
  },
  promises: { method: "GET", path: "/api/threads/{id}/promises", query: [], answer: THREAD_PROMISES_FIELDS },
  promise: { method: "POST", path: "/api/promises/{id}", query: [], answer: PROMISE_COMPLETED_FIELDS },
  stream: { method: "GET", path: "/api/threads/{id}/stream", query: ["since", "redact"] },
  emit: { method: "POST", path: "/api/events", query: [], answer: EMITTED_FIELDS },
  batch: { method: "POST", path: "/api/batches", query: [], answer: BATCH_ANSWER_FIELDS },
  batchInfo: { method: "GET", path: "/api/batches/{id}", query: [], answer: BATCH_ANSWER_FIELDS },
} as const satisfies Record<string, Route>;

/** The body fields of a start: its input and every start option. */
export const START_BODY = { args: ["input"], options: START_OPTIONS_FIELDS, budgets: BUDGETS_FIELDS } as const;

/** The body fields of an update (`start` is an `UpdateStart`) and of a promise's completion. */
export const UPDATE_BODY = { fields: UPDATE_BODY_FIELDS, start: UPDATE_START_FIELDS } as const;
export const PROMISE_BODY = PROMISE_BODY_FIELDS;

/** The controls of `POST /api/threads/{id}/{control}` and each one's body fields. */
export const CONTROL_BODIES = {
  pause: [],
  resume: [],
  cancel: ["reason"],
  input: ["value"],
  signal: ["name", "value", "dedup_key", "start"],
  fork: FORK_OPTIONS_FIELDS,
  repin: ["build"],
  reset: ["to", "key"],
} as const;
export type Control = keyof typeof CONTROL_BODIES;
export const SIGNAL_START = SIGNAL_START_FIELDS;

/** Routes of the endpoint this client leaves out: operator tooling and scrapers. */
export const NOT_COVERED: readonly string[] = [
  "GET /metrics", "GET /api/metrics", "GET /api/openapi.json", "GET /api/verify", "GET /api/threads/{id}/state",
  "GET /api/threads/{id}/checkpoints", "GET /api/threads/{id}/bundle", "GET /api/threads/{id}/replay",
  "GET /api/resumable", "GET /api/workflows/{id}/graph", "GET /api/trace/{id}", "GET /api/trace", "GET /api/queues",
  "GET /api/checkpoints", "GET /api/checkpoints/{id}",
  // Operator tooling: `cairn versions`, `cairn checkpoint every|cancel|at-node`.
  "GET /api/versions", "POST /api/threads/{id}/checkpoints/periodic",
  "DELETE /api/threads/{id}/checkpoints/periodic", "POST /api/threads/{id}/checkpoints/at-node",
];

/** The web view's routes (pages and pictures for a browser), left out. */
export function isWebView(path: string): boolean {
  const paths = ["/", "/api/threads/{id}/graph.svg", "/api/threads/{id}/timeline", "/api/trace/{id}/sequence.svg",
    "/api/workflows/{id}/graph.svg"];
  return paths.includes(path) || ["/ui", "/api/view/", "/api/schedules"].some((p) => path.startsWith(p));
}
