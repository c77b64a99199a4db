"""Typed models of what the endpoint answers and the bodies it reads. The field names are the
JSON keys; `tests/test_openapi.py` checks them against `/api/openapi.json`. A key an answer has
that a model does not know is kept in `extra` (a newer server stays readable)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Type, TypeVar

from .errors import UnexpectedAnswer

T = TypeVar("T")

TERMINAL = frozenset({"completed", "failed", "cancelled", "timed_out"})
"""The statuses a thread ends in."""


def read(cls: Type[T], obj: Any, what: str) -> T:
    """`obj` (a decoded JSON object) as a `cls`; a field the model needs and the answer lacks is
    an `UnexpectedAnswer` naming it."""
    if not isinstance(obj, dict):
        raise UnexpectedAnswer(f"{what} is not a JSON object: {obj!r:.200}")
    known = {f.name: f for f in dataclasses.fields(cls) if f.name != "extra"}
    args: Dict[str, Any] = {}
    for name, f in known.items():
        if name in obj:
            args[name] = obj[name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise UnexpectedAnswer(f"{what} has no field {name!r}")
    extra = {k: v for k, v in obj.items() if k not in known}
    return cls(**args, extra=extra)  # type: ignore[call-arg]


def body(model: Any) -> Dict[str, Any]:
    """A request model as its JSON body: fields left `None` are left out."""
    out: Dict[str, Any] = {}
    for f in dataclasses.fields(model):
        value = getattr(model, f.name)
        if value is None:
            continue
        out[f.name] = body(value) if dataclasses.is_dataclass(value) else value
    return out


# ---- Answers ---------------------------------------------------------------------------------


@dataclass
class ThreadResult:
    """`GET /api/threads/{id}/result`: how a thread stands, its output once completed."""

    thread: str
    finished: bool
    status: str
    output: Any = None
    error: Optional[str] = None
    #: The key ids of sealed values the endpoint holds no key for (empty when none): those
    #: values are `{"encrypted": true, "codec", "key"}` (docs/encryption.md).
    sealed: List[str] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Started:
    """`POST /api/workflows/{id}/threads`: the thread started (`created`) or found, and its
    result when the start waited (`wait_ms`)."""

    thread: str
    created: bool
    link: str
    finished: Optional[bool] = None
    status: Optional[str] = None
    output: Any = None
    error: Optional[str] = None
    #: The key ids of sealed values the endpoint holds no key for (empty when none): those
    #: values are `{"encrypted": true, "codec", "key"}` (docs/encryption.md).
    sealed: List[str] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Controlled:
    """`POST /api/threads/{id}/{control}`: the thread controlled and its status; a signal's
    number, whether it was a duplicate (with `dedup_key`) and whether it created the thread
    (with `start`)."""

    thread: str
    status: str
    signal: Optional[int] = None
    duplicate: Optional[bool] = None
    created: Optional[bool] = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ThreadRow:
    """One thread of a listing."""

    thread: str
    status: str
    workflow: Dict[str, Any]
    created_at_ms: int
    updated_at_ms: int
    first_seq: int
    labels: Dict[str, str] = field(default_factory=dict)
    last_seq: Optional[int] = None
    last_error: Optional[str] = None
    frontier: Optional[List[str]] = None
    parent: Optional[Dict[str, Any]] = None
    progress: Optional[Dict[str, Any]] = None
    progress_text: Optional[str] = None
    step: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ThreadsPage:
    """`GET /api/threads`: a page of threads; `next` is the cursor of the next page (None on
    the last)."""

    threads: List[ThreadRow]
    limit: int
    offset: int
    next: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ThreadDetails:
    """`GET /api/threads/{id}`: everything `cairn show` reports."""

    thread: str
    status: str
    workflow: Dict[str, Any]
    seq: int
    step: int
    created_at_ms: int
    updated_at_ms: int
    first_seq: int
    budgets: Dict[str, Any]
    telemetry: Dict[str, Any]
    labels: Dict[str, str] = field(default_factory=dict)
    frontier: List[str] = field(default_factory=list)
    locks: List[Any] = field(default_factory=list)
    undos: List[Any] = field(default_factory=list)
    node_results: Any = None
    output: Any = None
    last_seq: Optional[int] = None
    last_error: Optional[Dict[str, Any]] = None
    lease: Optional[Dict[str, Any]] = None
    parent: Optional[Dict[str, Any]] = None
    progress: Optional[Dict[str, Any]] = None
    progress_text: Optional[str] = None
    fork: Any = None
    continued_as: Optional[str] = None
    continued_from: Optional[str] = None
    state_unknown: Optional[str] = None
    status_reason: Optional[str] = None
    unwinding: Any = None
    waiting: Any = None
    #: The update names the thread's workflow declares (empty when none; the key is then left
    #: out of the answer).
    updates: List[str] = field(default_factory=list)
    #: The key ids of sealed values the endpoint holds no key for (empty when none): those
    #: values are `{"encrypted": true, "codec", "key"}` (docs/encryption.md).
    sealed: List[str] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Event:
    """One event of a thread's log; `seq` is its bookmark."""

    seq: int
    lsn: int
    at_ms: int
    kind: str
    status: str
    summary: str
    node: Optional[str] = None
    body: Any = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class EventsPage:
    """`GET /api/threads/{id}/events`: events after `since`; `next_since` is the bookmark of
    the next page, `status` the thread's status read before them."""

    thread: str
    events: List[Event]
    next_since: int
    first_seq: int
    status: str
    #: The key ids of sealed values the endpoint holds no key for (empty when none): those
    #: values are `{"encrypted": true, "codec", "key"}` (docs/encryption.md).
    sealed: List[str] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Pruned:
    """Said first by a followed stream whose events asked for were pruned: the first seq
    still stored."""

    thread: str
    first_seq: int
    message: str
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Updated:
    """`POST /api/threads/{id}/updates/{name}`: the handler's `reply`, the update's `id`, the
    seq of the `update_applied` event holding it, `duplicate` when the id had been applied
    before (the recorded reply), and with `start` whether the call `created` the thread."""

    thread: str
    id: str
    reply: Any
    seq: int
    duplicate: bool
    created: Optional[bool] = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Published:
    """`GET /api/threads/{id}/published`: every key the thread published, its latest value."""

    thread: str
    published: Dict[str, Any]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class PublishedValue:
    """`GET /api/threads/{id}/published/{key}`: `state` is `set` (with `value`), `pending` (not
    yet; the thread runs on, `status`) or `never_set` (the thread ended without it, `status`)."""

    thread: str
    key: str
    state: str
    value: Any = None
    status: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def is_set(self) -> bool:
        return self.state == "set"


@dataclass
class PromiseCompleted:
    """`POST /api/promises/{id}`: the promise, its thread, the completion's number in the
    thread's inbox (the first one's for a duplicate) and whether it was a duplicate."""

    promise: str
    thread: str
    signal: int
    duplicate: bool
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


#: The states of a thread's promise (`GET /api/threads/{id}/promises`).
PROMISE_STATES = ("open", "completed")


@dataclass
class PromiseRow:
    """One promise a thread created: `state` `open`, or `completed` with its `value` or
    `error` and the completion's number in the thread's inbox (`signal`)."""

    promise: str
    state: str
    value: Any = None
    error: Optional[str] = None
    signal: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def is_open(self) -> bool:
        return self.state == "open"


@dataclass
class ThreadPromises:
    """`GET /api/threads/{id}/promises`: every promise the thread created, in id order."""

    thread: str
    promises: List[PromiseRow]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


#: The kinds of a thread's live stream (`GET /api/threads/{id}/stream`).
STREAM_KINDS = ("chunk", "gap", "closed", "ended")


@dataclass
class StreamItem:
    """One item of a thread's live stream, by `kind`: `chunk` (index, step, node, value: not
    durable), `gap` (missed: chunks this reader fell behind), `closed` (seq, step, node,
    update, error: a task ended, durable) and `ended` (seq, status, output: the thread ended,
    the last item)."""

    kind: str
    seq: Optional[int] = None
    index: Optional[int] = None
    step: Optional[int] = None
    node: Optional[str] = None
    value: Any = None
    missed: Optional[int] = None
    update: Any = None
    error: Optional[str] = None
    status: Optional[str] = None
    output: Any = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


# ---- Request bodies ------------------------------------------------------------------------


@dataclass
class Budgets:
    """Budgets replacing the workflow's for one thread (each one given; the others unlimited)."""

    max_steps: Optional[int] = None
    max_tool_calls: Optional[int] = None
    max_tokens: Optional[int] = None
    max_cost_micros: Optional[int] = None
    max_wall_ms: Optional[int] = None
    warn_fraction: Optional[float] = None


@dataclass
class StartOptions:
    """Every option of a start besides its input (`POST /api/workflows/{id}/threads`)."""

    id: Optional[str] = None
    labels: Optional[Dict[str, str]] = None
    version: Optional[int] = None
    queue: Optional[str] = None
    key: Optional[str] = None
    priority: Optional[int] = None
    dedup: Optional[str] = None
    deadline_ms: Optional[int] = None
    budgets: Optional[Budgets] = None
    permissions: Optional[List[str]] = None
    start_at_ms: Optional[int] = None
    delay_ms: Optional[int] = None


@dataclass
class SignalStart:
    """Signal-with-start: the thread a signal creates when it does not exist."""

    workflow: str
    input: Any
    version: Optional[int] = None
    labels: Optional[Dict[str, str]] = None


@dataclass
class UpdateStart:
    """Update-with-start: the thread an update creates (of the update's thread id) when it does
    not exist."""

    workflow: str
    input: Any
    version: Optional[int] = None
    labels: Optional[Dict[str, str]] = None


@dataclass
class ForkOptions:
    """Where a fork starts (`at` a seq or a `checkpoint`) and what it changes."""

    at: Optional[int] = None
    checkpoint: Optional[int] = None
    update: Any = None
    id: Optional[str] = None
    labels: Optional[Dict[str, str]] = None
    start: Optional[bool] = None


def thread_row(obj: Any) -> ThreadRow:
    return read(ThreadRow, obj, "a thread row")


def threads_page(obj: Any) -> ThreadsPage:
    page = read(ThreadsPage, obj, "a page of threads")
    page.threads = [thread_row(t) for t in page.threads]
    return page


def promise_row(obj: Any) -> PromiseRow:
    row = read(PromiseRow, obj, "a promise")
    if row.state not in PROMISE_STATES:
        raise UnexpectedAnswer(f"a promise in unknown state {row.state!r}")
    return row


def thread_promises(obj: Any) -> ThreadPromises:
    page = read(ThreadPromises, obj, "a thread's promises")
    if not isinstance(page.promises, list):
        raise UnexpectedAnswer("a thread's promises are not a list")
    page.promises = [promise_row(p) for p in page.promises]
    return page


def event(obj: Any) -> Event:
    return read(Event, obj, "an event")


def events_page(obj: Any) -> EventsPage:
    page = read(EventsPage, obj, "a page of events")
    page.events = [event(e) for e in page.events]
    return page


def stream_item(obj: Any) -> StreamItem:
    item = read(StreamItem, obj, "a stream item")
    if item.kind not in STREAM_KINDS:
        raise UnexpectedAnswer(f"a stream item of unknown kind {item.kind!r}")
    return item


@dataclass
class EventThread:
    """One thread an emit answers with: the subscribed workflow, its thread, whether this emit
    made it (`False`: an emit of the same id did before) and its path on the endpoint."""

    workflow: str
    thread: str
    created: bool
    link: str
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Emitted:
    """`POST /api/events`: one thread per workflow subscribed to the event, by workflow id."""

    threads: List[EventThread]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


def emitted(obj: Any) -> Emitted:
    out = read(Emitted, obj, "an emit's answer")
    if not isinstance(out.threads, list):
        raise UnexpectedAnswer("an emit's threads are not a list")
    out.threads = [read(EventThread, t, "an event's thread") for t in out.threads]
    return out


@dataclass
class BatchAnswer:
    """`POST /api/batches` and `GET /api/batches/{id}`: a batch and its progress (`done` of
    `total`: `applied` or `skipped`, the last `skips` as `[thread, why]`), or for a dry run
    (`dry_run`, no `id`) how many threads the filter matches (`total`)."""

    op: str
    total: int
    done: int
    applied: int
    skipped: int
    skips: List[Any]
    finished: bool
    dry_run: bool
    id: Optional[str] = None
    status: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


def batch_answer(obj: Any) -> BatchAnswer:
    return read(BatchAnswer, obj, "a batch")

