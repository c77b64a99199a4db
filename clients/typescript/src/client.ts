/** The client: every call over `fetch` (Node 20, browsers; no Node-only API). */

import { CairnError, TransportError, UnexpectedAnswer, refusal } from "./errors.js";
import type {
  BatchAnswer, BatchFilter, BatchOp, BatchOptions, Emitted, Json, Controlled, Event, EventsPage, ForkOptions, PromiseCompleted, PromiseOutcome, Published, PublishedValue, Pruned,
  SignalStart, Started, StartOptions, StreamItem, ThreadDetails, ThreadPromises, ThreadResult, ThreadsPage, Updated,
  UpdateStart,
} from "./models.js";
import { STREAM_KINDS, TERMINAL } from "./models.js";
import { type Control, ROUTES, type Route } from "./routes.js";
import { messages } from "./sse.js";

/** A long poll waits at most this long on the server (the endpoint's `RESULT_WAIT_MS_MAX`). */
export const WAIT_MS_MAX = 30_000;
/** An update waits at most this long for its thread's step boundary (the endpoint's bound). */
export const UPDATE_WAIT_MS_MAX = 600_000;
/** How long `follow` keeps reconnecting to an endpoint that does not answer (a restart). */
export const RECONNECT_FOR_MS = 30_000;
const RECONNECT_PAUSE_MS = 200;

export interface ClientOptions {
  /** The endpoint's address (`http://127.0.0.1:PORT`); `CAIRN_URL` in the environment if absent. */
  url?: string;
  /** The token of `<db>.token`; `CAIRN_TOKEN` in the environment if absent. */
  token?: string;
  /** Per request, beyond a long poll's wait (ms). */
  timeoutMs?: number;
  /** A `fetch` to use instead of the global one. */
  fetch?: typeof fetch;
}

type Query = Record<string, string | number | boolean | undefined | null>;

/** An environment variable where there is an environment (Node, Deno, Bun); none in a browser. */
function env(name: string): string | undefined {
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return proc?.env?.[name];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class CairnClient {
  readonly url: string;
  readonly token?: string;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;

  constructor(options: ClientOptions = {}) {
    const url = options.url ?? env("CAIRN_URL");
    if (!url) throw new CairnError("no endpoint address: pass url or set CAIRN_URL");
    this.url = url.replace(/\/+$/, "");
    this.token = options.token ?? env("CAIRN_TOKEN");
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** The path of `route` with its segments and query. */
  private path(route: Route, segments: Record<string, string>, query: Query = {}): string {
    let path: string = route.path;
    for (const [name, value] of Object.entries(segments)) path = path.replace(`{${name}}`, encodeURIComponent(value));
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) {
      if (value === undefined || value === null) continue;
      if (!route.query.includes(name)) throw new CairnError(`${route.path} takes no ${name}`);
      params.set(name, typeof value === "boolean" ? (value ? "1" : "0") : String(value));
    }
    const text = params.toString();
    return text ? `${path}?${text}` : path;
  }

  private async send(method: string, path: string, body?: unknown, holdsMs = 0, accept = "application/json",
    extra: Record<string, string> = {}) {
    const headers: Record<string, string> = { Accept: accept, ...extra };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let answer: Response;
    try {
      answer = await this.fetch(this.url + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: accept === "application/json" ? AbortSignal.timeout(this.timeoutMs + holdsMs) : undefined,
      });
    } catch (e) {
      throw new TransportError(`${method} ${this.url}${path}: ${(e as Error).message}`);
    }
    if (!answer.ok) {
      throw refusal(answer.status, await answer.text().catch(() => ""), answer.headers.get("Retry-After"));
    }
    return answer;
  }

  /** One JSON request and its decoded answer (a refusal thrown typed). */
  async call<T>(method: string, path: string, body?: unknown, holdsMs = 0): Promise<T> {
    const answer = await this.send(method, path, body, holdsMs);
    const text = await answer.text().catch((e: Error) => {
      throw new TransportError(`${method} ${path}: ${e.message}`);
    });
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new UnexpectedAnswer(`${method} ${path} answered no JSON`, answer.status);
    }
  }

  /** Starts a thread of `workflow` (`options.id` makes it idempotent); with `waitMs` the answer
   * also holds its result if it finishes within that long (30 s at most). */
  start(workflow: string, input: unknown, options: StartOptions = {}, waitMs?: number): Promise<Started> {
    const wait = waitMs === undefined ? undefined : Math.min(Math.max(0, waitMs), WAIT_MS_MAX);
    const path = this.path(ROUTES.start, { id: workflow }, { wait_ms: wait });
    return this.call("POST", path, { input, ...options }, wait ?? 0);
  }

  /** The thread's result, waiting up to `waitMs` (30 s at most) for it to finish. */
  result(thread: string, waitMs?: number): Promise<ThreadResult> {
    const wait = waitMs === undefined ? undefined : Math.min(Math.max(0, waitMs), WAIT_MS_MAX);
    return this.call("GET", this.path(ROUTES.result, { id: thread }, { wait_ms: wait }), undefined, wait ?? 0);
  }

  /** The thread's result once it finished, long-polling up to `timeoutMs` in all. */
  async wait(thread: string, timeoutMs: number): Promise<ThreadResult> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const left = Math.max(0, deadline - Date.now());
      const answer = await this.result(thread, left);
      if (answer.finished || left === 0) return answer;
    }
  }

  /** Everything `cairn show` reports of a thread. */
  thread(thread: string, redact = false): Promise<ThreadDetails> {
    return this.call("GET", this.path(ROUTES.thread, { id: thread }, { redact: redact || undefined }));
  }

  /** A page of threads (filters all apply); pass the page's `next` as `after`. */
  threads(filter: { status?: string; workflow?: string; labels?: Record<string, string>; limit?: number;
    after?: string; offset?: number } = {}): Promise<ThreadsPage> {
    const { labels, ...rest } = filter;
    const label = labels ? Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(",") : undefined;
    return this.call("GET", this.path(ROUTES.threads, {}, { ...rest, label }));
  }

  /** Every thread the filter matches, page after page. */
  async *allThreads(filter: Parameters<CairnClient["threads"]>[0] = {}) {
    let after: string | undefined;
    for (;;) {
      const page = await this.threads({ ...filter, after });
      yield* page.threads;
      if (!page.next) return;
      after = page.next;
    }
  }

  /** Runs control `name` on the thread. */
  control(thread: string, name: Control, body?: unknown): Promise<Controlled> {
    return this.call("POST", this.path(ROUTES.control, { id: thread, control: name }), body);
  }

  /** Sends signal `name`; once per `dedupKey`; with `start`, creating the thread first. */
  signal(thread: string, name: string, value: unknown, opts: { dedupKey?: string; start?: SignalStart } = {}) {
    return this.control(thread, "signal", { name, value, dedup_key: opts.dedupKey, start: opts.start });
  }

  pause(thread: string) { return this.control(thread, "pause"); }
  resume(thread: string) { return this.control(thread, "resume"); }
  cancel(thread: string, reason?: string) { return this.control(thread, "cancel", { reason }); }
  sendInput(thread: string, value: unknown) { return this.control(thread, "input", { value }); }
  fork(thread: string, options: ForkOptions) { return this.control(thread, "fork", options); }
  /** Pins the thread to worker build `build` (its `cairn.build` label): only an engine of that
   *  build drives it from then on (docs/patching.md). A finished thread is a `Conflict`, a bad
   *  build id a `BadRequest` naming `build`. */
  repin(thread: string, build: string) { return this.control(thread, "repin", { build }); }
  /** Removes the thread's build pin: any engine takes it. */
  unpin(thread: string) { return this.control(thread, "repin", { build: null }); }
  /** Forks the thread at `to` ("start", "checkpoint" or "seq:N") into a new thread and cancels
   *  it; the answer names the new thread. The same `key` again makes no second fork. */
  reset(thread: string, to: string, key?: string) { return this.control(thread, "reset", { to, key }); }

  delete(thread: string, force = false): Promise<Record<string, unknown>> {
    return this.call("DELETE", this.path(ROUTES.delete, { id: thread }, { force: force ? "true" : undefined }));
  }

  health(watchdogMs?: number): Promise<Record<string, unknown>> {
    return this.call("GET", this.path(ROUTES.health, {}, { watchdog_ms: watchdogMs }));
  }

  /** Applies the workflow's update `name` and returns its reply once durable. The same `id`
   * again answers the recorded reply (`duplicate`); `start` creates the thread first if it does
   * not exist. `UpdatePending` (504): no step boundary within `waitMs`. */
  update(thread: string, name: string, args: unknown = null,
    opts: { id?: string; start?: UpdateStart; waitMs?: number } = {}): Promise<Updated> {
    const wait = opts.waitMs === undefined ? undefined : Math.min(Math.max(0, opts.waitMs), UPDATE_WAIT_MS_MAX);
    const path = this.path(ROUTES.update, { id: thread, name }, { wait_ms: wait });
    // Without `wait_ms` the endpoint waits 30 s for a step boundary.
    return this.call("POST", path, { args, id: opts.id, start: opts.start }, wait ?? WAIT_MS_MAX);
  }

  /** Every key the thread published (`ctx.set_event`), with its latest value. */
  published(thread: string): Promise<Published> {
    return this.call("GET", this.path(ROUTES.published, { id: thread }));
  }

  /** The value the thread published under `key`, waiting up to `waitMs` (30 s at most) for it. */
  getEvent(thread: string, key: string, waitMs?: number): Promise<PublishedValue> {
    const wait = waitMs === undefined ? undefined : Math.min(Math.max(0, waitMs), WAIT_MS_MAX);
    return this.call("GET", this.path(ROUTES.publishedKey, { id: thread, key }, { wait_ms: wait }), undefined, wait ?? 0);
  }

  /** Every promise the thread created (`ctx.promise`): open, or completed with its value or error. */
  promises(thread: string): Promise<ThreadPromises> {
    return this.call("GET", this.path(ROUTES.promises, { id: thread }));
  }

  /** Completes the promise `promise` with `{ value }` or `{ error }`. The same completion again
   * answers `duplicate`; another one is a `Conflict`. */
  completePromise(promise: string, outcome: PromiseOutcome): Promise<PromiseCompleted> {
    if (("value" in outcome) === ("error" in outcome)) {
      throw new CairnError("complete a promise with a value or an error, not both");
    }
    return this.call("POST", this.path(ROUTES.promise, { id: promise }), outcome);
  }

  /** Emits the event `name` of id `id`: each workflow subscribed to it starts a thread with
   * `payload` as its input, once per id (the same id again answers `created` false). */
  emit(name: string, id: string, payload: Json = null): Promise<Emitted> {
    return this.call("POST", this.path(ROUTES.emit, {}), { name, id, payload });
  }

  /** Applies `op` to every thread `filter` matches, as a durable job of the engine (`options`:
   * the operation's fields and the batch's `id`); `dryRun` counts the matching threads and
   * applies nothing. */
  batch(op: BatchOp, filter: BatchFilter = {}, options: BatchOptions = {}, dryRun = false): Promise<BatchAnswer> {
    return this.call("POST", this.path(ROUTES.batch, {}), { op, filter, ...options, dry_run: dryRun });
  }

  /** The batch `id` and its progress (`done` of `total`). */
  batchInfo(id: string): Promise<BatchAnswer> {
    return this.call("GET", this.path(ROUTES.batchInfo, { id }));
  }

  /** The thread's live stream (chunk, gap, closed, ended) until `ended`. A broken connection is
   * reopened with `Last-Event-ID` = the last durable seq, for up to `reconnectForMs` without an
   * answer: each `closed` and `ended` arrives once. */
  async *stream(thread: string, opts: { since?: number; redact?: boolean; reconnectForMs?: number } = {}):
    AsyncGenerator<StreamItem> {
    let last = opts.since ?? 0;
    let deadline: number | undefined;
    const path = this.path(ROUTES.stream, { id: thread }, { since: last || undefined, redact: opts.redact || undefined });
    for (;;) {
      try {
        const resume: Record<string, string> = last ? { "Last-Event-ID": String(last) } : {};
        const answer = await this.send("GET", path, undefined, 0, "text/event-stream", resume);
        if (!answer.body) throw new UnexpectedAnswer("the stream has no body");
        for await (const item of streamItems(answer.body)) {
          deadline = undefined;
          if ("seq" in item) {
            if (item.seq <= last && item.kind !== "ended") continue; // read before a reconnection
            last = Math.max(last, item.seq);
          }
          yield item;
          if (item.kind === "ended") return;
        }
      } catch (e) {
        if (!(e instanceof TransportError)) throw e;
        const now = Date.now();
        deadline ??= now + (opts.reconnectForMs ?? RECONNECT_FOR_MS);
        if (now > deadline) throw e;
      }
      await sleep(RECONNECT_PAUSE_MS); // a broken connection, or one the server closed (a stop)
    }
  }

  /** A page of the thread's events after the bookmark `since` (a seq). */
  events(thread: string, opts: { since?: number; kinds?: string[]; limit?: number } = {}): Promise<EventsPage> {
    const query = { since: opts.since ?? 0, kind: opts.kinds?.join(","), limit: opts.limit };
    return this.call("GET", this.path(ROUTES.events, { id: thread }, query));
  }

  /** Every event after `since`, live over Server-Sent Events, until the thread ends. A broken
   * stream (a server restart) is reconnected from the last event's seq, for up to
   * `reconnectForMs` without an answer, so each event is delivered exactly once. */
  async *follow(thread: string, opts: { since?: number; kinds?: string[]; reconnectForMs?: number } = {}):
    AsyncGenerator<Event | Pruned> {
    let last = opts.since ?? 0;
    let deadline: number | undefined;
    const kind = opts.kinds?.join(",");
    for (;;) {
      try {
        const path = this.path(ROUTES.events, { id: thread }, { since: last, kind, follow: true });
        const answer = await this.send("GET", path, undefined, 0, "text/event-stream");
        if (!answer.body) throw new UnexpectedAnswer("the event stream has no body");
        try {
          for await (const m of messages(answer.body)) {
            deadline = undefined;
            const data = JSON.parse(m.data);
            if (m.event === "event" && data.seq > last) {
              last = data.seq;
              yield data as Event;
            } else if (m.event === "pruned") {
              last = Math.max(last, data.first_seq - 1);
              yield { pruned: true, ...data } as Pruned;
            } else if (m.event === "error") {
              throw new CairnError(data.error, undefined, data.field);
            }
          }
        } catch (e) {
          if (e instanceof CairnError) throw e;
          throw new TransportError(`the event stream broke: ${(e as Error).message}`);
        }
        const page = await this.events(thread, { since: last, kinds: opts.kinds });
        for (const e of page.events) {
          if (e.seq > last) {
            last = e.seq;
            yield e;
          }
        }
        last = Math.max(last, page.next_since);
        if (TERMINAL.includes(page.status) && page.events.length === 0) return;
      } catch (e) {
        if (!(e instanceof TransportError)) throw e;
        const now = Date.now();
        deadline ??= now + (opts.reconnectForMs ?? RECONNECT_FOR_MS);
        if (now > deadline) throw e;
        await sleep(RECONNECT_PAUSE_MS);
      }
    }
  }
}

/** The items of a stream's body; an `error` message thrown as a `CairnError`, a broken body as a
 * `TransportError`. */
async function* streamItems(body: ReadableStream<Uint8Array>): AsyncGenerator<StreamItem> {
  try {
    for await (const m of messages(body)) {
      const data = JSON.parse(m.data);
      if (m.event === "error") throw new CairnError(data.error, undefined, data.field);
      if (!STREAM_KINDS.includes(data.kind)) throw new UnexpectedAnswer(`a stream item of unknown kind ${m.data}`);
      yield data as StreamItem;
    }
  } catch (e) {
    if (e instanceof CairnError) throw e;
    throw new TransportError(`the stream broke: ${(e as Error).message}`);
  }
}
