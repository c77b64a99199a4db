"""The synchronous client (`urllib`)."""

from __future__ import annotations

import json
import time
from typing import Any, Dict, Iterable, Iterator, Mapping, Optional, Union

from . import calls, models
from .calls import Call
from .errors import CairnError, TransportError
from .models import (
    BatchAnswer, Emitted, Controlled, Event, EventsPage, ForkOptions, PromiseCompleted, Published, PublishedValue,
    Pruned, SignalStart, Started, StartOptions, StreamItem, ThreadDetails, ThreadResult,
    ThreadPromises, ThreadsPage, Updated, UpdateStart,
)
from .transport import Endpoint

#: How long `follow` keeps reconnecting to an endpoint that does not answer (a restart).
RECONNECT_FOR_S = 30.0
#: The pause between two reconnection attempts.
RECONNECT_PAUSE_S = 0.2


class Client:
    """A client of one endpoint. `url` defaults to `$CAIRN_URL`; the token to `token`, else the
    contents of `token_file` (`<db>.token`), else `$CAIRN_TOKEN`.

    >>> client = Client("http://127.0.0.1:8700", token="...")  # doctest: +SKIP
    >>> client.start("research-agent", {"question": "What is a lease?"}, wait_ms=30000).output
    """

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        token: Optional[str] = None,
        token_file: Optional[str] = None,
        timeout: float = 30.0,
    ):
        self.endpoint = Endpoint.of(url, token, token_file, timeout)

    def _run(self, call: Call) -> Any:
        _, answer = self.endpoint.call(call.method, call.path, call.body, call.holds_ms)
        return call.read(answer)

    def start(self, workflow: str, input: Any, options: Optional[StartOptions] = None, *,
              wait_ms: Optional[int] = None) -> Started:
        """Starts a thread of `workflow` (`options.id` makes it idempotent); with `wait_ms` the
        answer also holds its result if it finishes within that long (30 s at most)."""
        return self._run(calls.start(workflow, input, options, wait_ms))

    def result(self, thread: str, *, wait_ms: Optional[int] = None) -> ThreadResult:
        """The thread's result, waiting up to `wait_ms` (30 s at most) for it to finish."""
        return self._run(calls.result(thread, wait_ms))

    def wait(self, thread: str, timeout_s: float) -> ThreadResult:
        """The thread's result once it finished, long-polling up to `timeout_s` in all (the
        last answer, `finished` False, if it has not)."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = max(0, int((deadline - time.monotonic()) * 1000))
            answer = self.result(thread, wait_ms=left)
            if answer.finished or left == 0:
                return answer

    def thread(self, thread: str, *, redact: bool = False) -> ThreadDetails:
        """Everything `cairn show` reports of a thread."""
        return self._run(calls.thread(thread, redact))

    def threads(self, *, status: Optional[str] = None, workflow: Optional[str] = None,
                labels: Optional[Mapping[str, str]] = None, limit: Optional[int] = None,
                after: Optional[str] = None, offset: Optional[int] = None) -> ThreadsPage:
        """A page of threads (filters all apply); pass the page's `next` as `after`."""
        return self._run(calls.threads(status, workflow, labels, limit, after, offset))

    def all_threads(self, **filters: Any) -> Iterator[models.ThreadRow]:
        """Every thread the filters match, page after page."""
        after = None
        while True:
            page = self.threads(after=after, **filters)
            yield from page.threads
            if page.next is None:
                return
            after = page.next

    def signal(self, thread: str, name: str, value: Any, *, dedup_key: Optional[str] = None,
               start: Optional[SignalStart] = None) -> Controlled:
        """Sends signal `name`; once per `dedup_key`; with `start`, creating the thread first."""
        return self._run(calls.signal(thread, name, value, dedup_key, start))

    def pause(self, thread: str) -> Controlled:
        return self._run(calls.control(thread, "pause"))

    def resume(self, thread: str) -> Controlled:
        return self._run(calls.control(thread, "resume"))

    def cancel(self, thread: str, reason: Optional[str] = None) -> Controlled:
        return self._run(calls.cancel(thread, reason))

    def send_input(self, thread: str, value: Any) -> Controlled:
        return self._run(calls.send_input(thread, value))

    def fork(self, thread: str, options: ForkOptions) -> Controlled:
        return self._run(calls.fork(thread, options))

    def repin(self, thread: str, build: str) -> Controlled:
        """Pins the thread to worker build `build` (its `cairn.build` label): only an engine of
        that build drives it from then on (docs/patching.md). A finished thread is a
        `Conflict`, a bad build id a `BadRequest` naming `build`."""
        return self._run(calls.repin(thread, build))

    def unpin(self, thread: str) -> Controlled:
        """Removes the thread's build pin: any engine takes it."""
        return self._run(calls.repin(thread, None))

    def reset(self, thread: str, to: str, *, key: Optional[str] = None) -> Controlled:
        """Forks the thread at `to` ("start", "checkpoint" or "seq:N") into a new thread and
        cancels it; the answer names the new thread. The same `key` again makes no second fork."""
        return self._run(calls.reset(thread, to, key))

    def delete(self, thread: str, *, force: bool = False) -> Dict[str, Any]:
        return self._run(calls.delete(thread, force))

    def health(self, *, watchdog_ms: Optional[int] = None) -> Dict[str, Any]:
        return self._run(calls.health(watchdog_ms))

    def update(self, thread: str, name: str, args: Any = None, *, id: Optional[str] = None,
               start: Optional[UpdateStart] = None, wait_ms: Optional[int] = None) -> Updated:
        """Applies the workflow's update `name` and returns its reply once durable. The same
        `id` again answers the recorded reply (`duplicate`); `start` creates the thread first
        if it does not exist. `UpdatePending` (504): no step boundary within `wait_ms`."""
        return self._run(calls.update(thread, name, args, id, start, wait_ms))

    def published(self, thread: str) -> Published:
        """Every key the thread published (`ctx.set_event`), with its latest value."""
        return self._run(calls.published(thread))

    def get_event(self, thread: str, key: str, *, wait_ms: Optional[int] = None
                  ) -> PublishedValue:
        """The value the thread published under `key`, waiting up to `wait_ms` (30 s at most)
        for it: `state` set, pending or never_set."""
        return self._run(calls.published_key(thread, key, wait_ms))

    def promises(self, thread: str) -> ThreadPromises:
        """Every promise the thread created (`ctx.promise`): open, or completed with its value
        or error."""
        return self._run(calls.promises(thread))

    def complete_promise(self, promise: str, value: Any = calls._UNSET, *,
                         error: Optional[str] = None) -> PromiseCompleted:
        """Completes the promise `promise` with `value` or `error` (one of them). The same
        completion again answers `duplicate`; another one is a `Conflict`."""
        return self._run(calls.complete_promise(promise, value, error))

    def emit(self, name: str, id: str, payload: Any = None) -> Emitted:
        """Emits the event `name` of id `id`: each workflow subscribed to it starts a thread
        with `payload` as its input, once per id (the same id again answers `created` false)."""
        return self._run(calls.emit(name, id, payload))

    def batch(self, op: str, filter: Optional[Mapping[str, Any]] = None, *,
              dry_run: bool = False, **options: Any) -> BatchAnswer:
        """Applies `op` (cancel, pause, resume, signal, delete, migrate, repin, reset) to every
        thread `filter` matches (`workflow`, `status`, `labels`, `version`, `created_from_ms`,
        `created_to_ms`, `ids`), as a durable job of the engine; `options` are the operation's
        (`reason`, `name`/`value`, `to_version`, `build`/`unpin`, `to`) and the batch's `id`.
        `dry_run` counts the matching threads and applies nothing."""
        return self._run(calls.batch(op, filter, dry_run=dry_run, **options))

    def batch_info(self, batch_id: str) -> BatchAnswer:
        """The batch `batch_id` and its progress."""
        return self._run(calls.batch_info(batch_id))

    def stream(self, thread: str, *, since: int = 0, redact: bool = False,
               reconnect_for_s: float = RECONNECT_FOR_S) -> Iterator[StreamItem]:
        """The thread's live stream (chunk, gap, closed, ended) until `ended`. A broken
        connection is reopened with `Last-Event-ID` = the last durable seq, for up to
        `reconnect_for_s` without an answer: each `closed`/`ended` arrives once."""
        streamer = Streamer(since)
        path = calls.stream_path(thread, since, redact)
        while True:
            try:
                for frame in self.endpoint.frames(path, streamer.last_event_id()):
                    yield from streamer.message(*frame)
                    if streamer.done:
                        return
            except TransportError:
                streamer.lost(reconnect_for_s)
                time.sleep(RECONNECT_PAUSE_S)
            else:
                time.sleep(RECONNECT_PAUSE_S)  # the server closed it before `ended` (a stop)

    def events(self, thread: str, *, since: int = 0, kinds: Optional[Iterable[str]] = None,
               limit: Optional[int] = None) -> EventsPage:
        """A page of the thread's events after the bookmark `since` (a seq)."""
        return self._run(calls.events(thread, since, kinds, limit))

    def follow(self, thread: str, *, since: int = 0, kinds: Optional[Iterable[str]] = None,
               reconnect_for_s: float = RECONNECT_FOR_S) -> Iterator[Union[Event, Pruned]]:
        """Every event after `since`, live over Server-Sent Events, until the thread ends. A
        broken stream (a server restart) is reconnected from the last event's seq, for up to
        `reconnect_for_s` without an answer, so each event is delivered exactly once."""
        follower = Follower(since, kinds)
        while True:
            try:
                for name, data in self.endpoint.stream(follower.path(thread)):
                    yield from follower.message(name, data)
                page = self.events(thread, since=follower.last, kinds=kinds)
                yield from follower.page(page)
                if follower.ended(page):
                    return
            except TransportError:
                follower.lost(reconnect_for_s)
                time.sleep(RECONNECT_PAUSE_S)


class Follower:
    """Where a followed stream stands: the last seq delivered (the bookmark a reconnection
    starts from), and when reconnecting gives up."""

    def __init__(self, since: int, kinds: Optional[Iterable[str]]):
        self.last = since
        self.kinds = list(kinds) if kinds else None
        self.deadline: Optional[float] = None

    def path(self, thread: str) -> str:
        return calls.events(thread, self.last, self.kinds, None, follow=True).path

    def message(self, name: str, data: str) -> Iterator[Union[Event, Pruned]]:
        self.deadline = None
        if name == "event":
            event = models.event(json.loads(data))
            if event.seq > self.last:
                self.last = event.seq
                yield event
        elif name == "pruned":
            pruned = models.read(Pruned, json.loads(data), "a pruned notice")
            self.last = max(self.last, pruned.first_seq - 1)
            yield pruned
        elif name == "error":
            answer = json.loads(data)
            raise CairnError(answer.get("error", data), field=answer.get("field"))

    def page(self, page: EventsPage) -> Iterator[Event]:
        self.deadline = None
        for event in page.events:
            if event.seq > self.last:
                self.last = event.seq
                yield event
        self.last = max(self.last, page.next_since)

    def ended(self, page: EventsPage) -> bool:
        """The thread ended and nothing after the bookmark is left."""
        return page.status in models.TERMINAL and not page.events

    def lost(self, reconnect_for_s: float) -> None:
        """The endpoint did not answer: raise once that has lasted `reconnect_for_s`."""
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + reconnect_for_s
        elif now > self.deadline:
            raise TransportError(f"no answer from the endpoint for {reconnect_for_s} s")


class Streamer(Follower):
    """Where a thread's stream stands: the last durable seq read (`closed`/`ended`, sent back
    as `Last-Event-ID`), whether `ended` came, and when reconnecting gives up."""

    def __init__(self, since: int):
        super().__init__(since, None)
        self.done = False

    def last_event_id(self) -> Optional[int]:
        return self.last or None

    def message(self, name: str, data: str, ident: Optional[str] = None  # type: ignore[override]
                ) -> Iterator[StreamItem]:
        self.deadline = None
        if name == "error":
            answer = json.loads(data)
            raise CairnError(answer.get("error", data), field=answer.get("field"))
        item = models.stream_item(json.loads(data))
        if item.seq is not None:
            if item.seq <= self.last and item.kind != "ended":
                return  # a close read before a reconnection
            self.last = max(self.last, item.seq)
        self.done = item.kind == "ended"
        yield item
