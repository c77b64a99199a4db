/**
 * The answers of the endpoint and the bodies it reads. Each type's keys are also listed in a
 * `*_FIELDS` array (a compile-time check keeps the two the same), which `test/openapi.test.mjs`
 * compares with `/api/openapi.json`.
 */

export type Json = unknown;

/** `keys` lists every key of `T` (each entry is a key of `T` as well): a compile error names a
 * key left out. */
function fields<T>() {
  return <const K extends readonly (keyof T)[]>(
    keys: K & ([Exclude<keyof T, K[number]>] extends [never] ? unknown : { missing: Exclude<keyof T, K[number]> }),
  ): K => keys;
}

/** A value sealed at rest with a key the endpoint holds no key for (docs/encryption.md): it
 *  stands in place of the value, and the answer's `sealed` lists the missing keys. */
export interface Sealed {
  encrypted: true;
  codec: string;
  key: string;
}

/** The statuses a thread ends in. */
export const TERMINAL: readonly string[] = ["completed", "failed", "cancelled", "timed_out"];

/** `GET /api/threads/{id}/result`. */
export interface ThreadResult {
  thread: string;
  finished: boolean;
  status: string;
  output?: Json;
  error?: string | null;
  /** The key ids of sealed values this endpoint holds no key for (absent when none): those
   *  values are `{"encrypted": true, "codec", "key"}` (docs/encryption.md). */
  sealed?: string[];
}
export const THREAD_RESULT_FIELDS = fields<ThreadResult>()(["thread", "finished", "status", "output", "error", "sealed"]);

/** `POST /api/workflows/{id}/threads`: the thread started (or found), its result if waited. */
export interface Started {
  thread: string;
  created: boolean;
  link: string;
  finished?: boolean;
  status?: string;
  output?: Json;
  error?: string | null;
  /** The key ids of sealed values this endpoint holds no key for (absent when none): those
   *  values are `{"encrypted": true, "codec", "key"}` (docs/encryption.md). */
  sealed?: string[];
}
export const STARTED_FIELDS = fields<Started>()(["thread", "created", "link", "finished", "status", "output", "error", "sealed"]);

/** `POST /api/threads/{id}/{control}`. */
export interface Controlled {
  thread: string;
  status: string;
  signal?: number;
  duplicate?: boolean;
  created?: boolean;
}

/** One thread of a listing. */
export interface ThreadRow {
  thread: string;
  status: string;
  workflow: { id: string; version: number; fingerprint: string };
  created_at_ms: number;
  updated_at_ms: number;
  first_seq: number;
  labels: Record<string, string>;
  last_seq: number | null;
  last_error: string | null;
  frontier: string[] | null;
  parent: Json;
  progress: Json;
  progress_text: string | null;
  step: number | null;
}
export const THREAD_ROW_FIELDS = fields<ThreadRow>()([
  "thread", "status", "workflow", "created_at_ms", "updated_at_ms", "first_seq", "labels", "last_seq",
  "last_error", "frontier", "parent", "progress", "progress_text", "step",
]);

/** `GET /api/threads`: `next` is the cursor of the next page (null on the last). */
export interface ThreadsPage {
  threads: ThreadRow[];
  limit: number;
  offset: number;
  next?: string | null;
}
export const THREADS_PAGE_FIELDS = fields<ThreadsPage>()(["threads", "limit", "offset", "next"]);

/** `GET /api/threads/{id}`: everything `cairn show` reports. */
export interface ThreadDetails {
  thread: string;
  status: string;
  workflow: { id: string; version: number; fingerprint: string };
  seq: number;
  step: number;
  created_at_ms: number;
  updated_at_ms: number;
  first_seq: number;
  budgets: Record<string, { limit: number | null; used: number }> | Sealed;
  telemetry: Json;
  labels: Record<string, string>;
  frontier: string[];
  locks: Json[];
  undos: Json[] | Sealed;
  node_results: Json;
  output: Json;
  last_seq: number | null;
  last_error: Json;
  lease: Json;
  parent: Json;
  progress: Json;
  progress_text: string | null;
  fork: Json;
  continued_as: string | Sealed | null;
  continued_from: string | Sealed | null;
  state_unknown: string | null;
  status_reason: string | null;
  unwinding: Json;
  waiting: Json;
  /** The update names the thread's workflow declares (the key is left out when there are none). */
  updates?: string[];
  /** The key ids of sealed values this endpoint holds no key for (absent when none): those
   *  values are `{"encrypted": true, "codec", "key"}` (docs/encryption.md). */
  sealed?: string[];
}
export const THREAD_DETAILS_FIELDS = fields<ThreadDetails>()([
  "thread", "status", "workflow", "seq", "step", "created_at_ms", "updated_at_ms", "first_seq", "budgets",
  "telemetry", "labels", "frontier", "locks", "undos", "node_results", "output", "last_seq", "last_error",
  "lease", "parent", "progress", "progress_text", "fork", "continued_as", "continued_from", "state_unknown",
  "status_reason", "unwinding", "waiting", "updates", "sealed",
]);

/** One event of a thread's log; `seq` is its bookmark. */
export interface Event {
  seq: number;
  lsn: number;
  at_ms: number;
  kind: string;
  status: string;
  summary: string;
  node: string | null;
  body: Json;
}

/** `GET /api/threads/{id}/events`: events after `since`; `next_since` is the next bookmark. */
export interface EventsPage {
  thread: string;
  events: Event[];
  next_since: number;
  first_seq: number;
  status: string;
  /** The key ids of sealed values this endpoint holds no key for (absent when none): those
   *  values are `{"encrypted": true, "codec", "key"}` (docs/encryption.md). */
  sealed?: string[];
}

/** Said first by a followed stream whose events asked for were pruned. */
export interface Pruned {
  pruned: true;
  thread: string;
  first_seq: number;
  message: string;
}

/** Budgets replacing the workflow's for one thread. */
export interface Budgets {
  max_steps?: number;
  max_tool_calls?: number;
  max_tokens?: number;
  max_cost_micros?: number;
  max_wall_ms?: number;
  warn_fraction?: number;
}
export const BUDGETS_FIELDS = fields<Budgets>()([
  "max_steps", "max_tool_calls", "max_tokens", "max_cost_micros", "max_wall_ms", "warn_fraction",
]);

/** Every option of a start besides its input. */
export interface StartOptions {
  id?: string;
  labels?: Record<string, string>;
  version?: number;
  queue?: string;
  key?: string;
  priority?: number;
  dedup?: string;
  deadline_ms?: number;
  budgets?: Budgets;
  permissions?: string[];
  start_at_ms?: number;
  delay_ms?: number;
}
export const START_OPTIONS_FIELDS = fields<StartOptions>()([
  "id", "labels", "version", "queue", "key", "priority", "dedup", "deadline_ms", "budgets", "permissions",
  "start_at_ms", "delay_ms",
]);

/** Signal-with-start: the thread a signal creates when it does not exist. */
export interface SignalStart {
  workflow: string;
  input: Json;
  version?: number;
  labels?: Record<string, string>;
}
export const SIGNAL_START_FIELDS = fields<SignalStart>()(["workflow", "input", "version", "labels"]);

/** Where a fork starts and what it changes. */
export interface ForkOptions {
  at?: number;
  checkpoint?: number;
  update?: Json;
  id?: string;
  labels?: Record<string, string>;
  start?: boolean;
}
export const FORK_OPTIONS_FIELDS = fields<ForkOptions>()(["at", "checkpoint", "update", "id", "labels", "start"]);

/** `POST /api/threads/{id}/updates/{name}`: the handler's `reply`, the update's `id`, the seq of
 * the `update_applied` event holding it, `duplicate` when the id had been applied before (the
 * recorded reply), and with `start` whether the call `created` the thread. */
export interface Updated {
  thread: string;
  id: string;
  reply: Json;
  seq: number;
  duplicate: boolean;
  created?: boolean;
}
export const UPDATED_FIELDS = fields<Updated>()(["thread", "id", "reply", "seq", "duplicate", "created"]);

/** Update-with-start: the thread an update creates (of the update's thread id) if it does not exist. */
export interface UpdateStart {
  workflow: string;
  input: Json;
  version?: number;
  labels?: Record<string, string>;
}
export const UPDATE_START_FIELDS = fields<UpdateStart>()(["workflow", "input", "version", "labels"]);

/** The body of an update besides its start: `args` (`null` when absent) and its `id`. */
export interface UpdateBody {
  args: Json;
  id?: string;
  start?: UpdateStart;
}
export const UPDATE_BODY_FIELDS = fields<UpdateBody>()(["args", "id", "start"]);

/** `GET /api/threads/{id}/published`: every key the thread published, with its latest value. */
export interface Published {
  thread: string;
  published: Record<string, Json>;
}
export const PUBLISHED_FIELDS = fields<Published>()(["thread", "published"]);

/** `GET /api/threads/{id}/published/{key}`: `set` (with `value`), `pending` (not yet; the thread
 * runs on) or `never_set` (the thread ended without it), with the thread's `status`. */
export interface PublishedValue {
  thread: string;
  key: string;
  state: "set" | "pending" | "never_set";
  value?: Json;
  status?: string;
}
export const PUBLISHED_VALUE_FIELDS = fields<PublishedValue>()(["thread", "key", "state", "value", "status"]);

/** `POST /api/promises/{id}`: the completion's number in the thread's inbox (the first one's for
 * a duplicate) and whether it was a duplicate. */
export interface PromiseCompleted {
  promise: string;
  thread: string;
  signal: number;
  duplicate: boolean;
}
export const PROMISE_COMPLETED_FIELDS = fields<PromiseCompleted>()(["promise", "thread", "signal", "duplicate"]);

/** One promise a thread created: `open`, or `completed` with its `value` or `error` and the
 * completion's number in the thread's inbox (`signal`). */
export interface PromiseRow {
  promise: string;
  state: "open" | "completed";
  value?: Json;
  error?: string;
  signal?: number;
}
export const PROMISE_ROW_FIELDS = fields<PromiseRow>()(["promise", "state", "value", "error", "signal"]);

/** `GET /api/threads/{id}/promises`: every promise the thread created, in id order. */
export interface ThreadPromises {
  thread: string;
  promises: PromiseRow[];
}
export const THREAD_PROMISES_FIELDS = fields<ThreadPromises>()(["thread", "promises"]);

/** The body of `POST /api/promises/{id}`: a value or an error, not both. */
export type PromiseOutcome = { value: Json } | { error: string };
export const PROMISE_BODY_FIELDS = ["value", "error"] as const;

/** One item of a thread's live stream (`GET /api/threads/{id}/stream`), by `kind`. */
export type StreamItem =
  /** A value a task wrote (memory only: not durable). */
  | { kind: "chunk"; index: number; step: number; node: string; value: Json }
  /** Chunks this reader missed (it fell behind the engine's buffer). */
  | { kind: "gap"; missed: number }
  /** A task ended (durable: its seq is the SSE id), with its update or why it failed. */
  | { kind: "closed"; seq: number; step: number; node: string; update: Json | null; error: string | null }
  /** The thread ended: the last item. */
  | { kind: "ended"; seq: number; status: string; output: Json | null };
export const STREAM_KINDS: readonly StreamItem["kind"][] = ["chunk", "gap", "closed", "ended"];

/** One thread an emit answers with: the subscribed workflow, its thread, whether this emit made
 * it (`false`: an emit of the same id did before) and its path on the endpoint. */
export interface EventThread {
  workflow: string;
  thread: string;
  created: boolean;
  link: string;
}

/** `POST /api/events`: one thread per workflow subscribed to the event, by workflow id. */
export interface Emitted {
  threads: EventThread[];
}
export const EMITTED_FIELDS = fields<Emitted>()(["threads"]);

/** A batch's operation. */
export type BatchOp = "cancel" | "pause" | "resume" | "signal" | "delete" | "migrate" | "repin" | "reset";

/** Which threads a batch applies to: every part given must match. */
export interface BatchFilter {
  workflow?: string;
  status?: string;
  labels?: Record<string, string>;
  version?: number;
  created_from_ms?: number;
  created_to_ms?: number;
  /** These threads only (an id of no thread is skipped, counted so). */
  ids?: string[];
}

/** A batch operation's own fields, and the batch's `id` (an idempotent call). */
export interface BatchOptions {
  reason?: string;
  name?: string;
  value?: Json;
  to_version?: number;
  build?: string;
  unpin?: boolean;
  to?: string;
  id?: string;
}

/** `POST /api/batches` and `GET /api/batches/{id}`: a batch and its progress, or for a dry run
 * (`dry_run`, no `id`) how many threads the filter matches (`total`). */
export interface BatchAnswer {
  id?: string | null;
  status?: string | null;
  op: string;
  total: number;
  done: number;
  applied: number;
  skipped: number;
  skips: [string, string][];
  finished: boolean;
  dry_run: boolean;
}
export const BATCH_ANSWER_FIELDS = fields<BatchAnswer>()(
  ["id", "status", "op", "total", "done", "applied", "skipped", "skips", "finished", "dry_run"],
);

