/**
 * Typed errors: every refusal of the endpoint (`{"error", "field"}`, a 4xx or 5xx) is thrown as
 * a subclass of `CairnError` carrying the endpoint's message, the field it names and the HTTP
 * status; no answer at all is a `TransportError`.
 */

export class CairnError extends Error {
  /** What is wrong, as the endpoint said it. */
  readonly error: string;
  /** The HTTP status (undefined when no answer came). */
  readonly status?: number;
  /** The query parameter, path segment or body field the refusal is about, if one. */
  readonly field?: string | null;

  constructor(error: string, status?: number, field?: string | null) {
    super(`${status !== undefined ? `${status}: ` : ""}${error}${field ? ` [${field}]` : ""}`);
    this.name = new.target.name;
    this.error = error;
    this.status = status;
    this.field = field;
  }
}

/** No answer: the endpoint is unreachable, or the connection broke. */
export class TransportError extends CairnError {}
/** 400: a bad query parameter or body field (`field` names it). */
export class BadRequest extends CairnError {}
/** 401: a control (or, with `--public`, any read) without the right token. */
export class Unauthorized extends CairnError {}
/** 403: refused (a control from another site's `Origin`). */
export class Forbidden extends CairnError {}
/** 404: no such thread, workflow, queue or route. */
export class NotFound extends CairnError {}
/** 409: the thread's state does not allow it. */
export class Conflict extends CairnError {}
/** 421: the `Host` is not the endpoint's address. */
export class MisdirectedRequest extends CairnError {}
/** 429: a start over the rate of a queue that drops such starts; its `Retry-After` says when
 * a start fits again (`retryAfterMs`). */
export class TooManyRequests extends CairnError {
  /** The answer's `Retry-After` in ms: when a start fits again (undefined when absent or, in a
   *  browser across origins, not exposed). */
  readonly retryAfterMs?: number;

  constructor(error: string, status?: number, field?: string | null, retryAfterMs?: number) {
    super(error, status, field);
    this.retryAfterMs = retryAfterMs;
  }
}
/** 5xx: the endpoint failed. */
export class ServerError extends CairnError {}
/** 504: an update reached no step boundary of its thread within `wait_ms`. It may still be
 * applied: send the same update id again to get its reply. */
export class UpdatePending extends ServerError {}
/** An answer this client cannot read. */
export class UnexpectedAnswer extends CairnError {}

const BY_STATUS: Record<number, typeof CairnError> = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  421: MisdirectedRequest,
  429: TooManyRequests,
};

/** The typed error of an answer of HTTP status `status` whose body is `text` and whose
 * `Retry-After` header is `retryAfter` (seconds; a 429 carries it). */
export function refusal(status: number, text: string, retryAfter?: string | null): CairnError {
  let error = text.trim() || `HTTP ${status}`;
  let field: string | null = null;
  try {
    const parsed = JSON.parse(text);
    if (parsed && typeof parsed.error === "string") {
      error = parsed.error;
      field = parsed.field ?? null;
    }
  } catch {
    // Not the endpoint's JSON (a proxy's page): kept as the message.
  }
  if (status === 429) {
    const seconds = retryAfter?.trim() ?? "";
    return new TooManyRequests(error, status, field, /^\d+$/.test(seconds) ? Number(seconds) * 1000 : undefined);
  }
  const kind = status === 504 ? UpdatePending : status >= 500 ? ServerError : (BY_STATUS[status] ?? CairnError);
  return new kind(error, status, field);
}
