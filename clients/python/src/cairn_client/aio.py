"""The asyncio client: the same calls as `Client`, awaited. Requests run on the standard
library's blocking HTTP client in a worker thread (`asyncio.to_thread`), so the event loop never
blocks and the package needs nothing outside the standard library."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Dict, Iterable, Mapping, Optional, Union

from . import calls
from .calls import Call
from .client import RECONNECT_FOR_S, RECONNECT_PAUSE_S, Client, Follower, Streamer
from .errors import TransportError
from .models import (
    BatchAnswer, Emitted,
    Controlled, Event, EventsPage, ForkOptions, PromiseCompleted, Published, PublishedValue,
    Pruned, SignalStart, Started, StartOptions, StreamItem, ThreadDetails, ThreadResult,
    ThreadPromises, ThreadsPage, Updated, UpdateStart,
)

_DONE = object()


class AsyncClient:
    """As `Client`, with every call a coroutine and `follow` an async iterator."""

    def __init__(self, url: Optional[str] = None, *, token: Optional[str] = None,
                 token_file: Optional[str] = None, timeout: float = 30.0):
        self.sync = Client(url, token=token, token_file=token_file, timeout=timeout)

    async def _run(self, call: Call) -> Any:
        return await asyncio.to_thread(self.sync._run, call)

    async def start(self, workflow: str, input: Any, options: Optional[StartOptions] = None, *,
                    wait_ms: Optional[int] = None) -> Started:
        return await self._run(calls.start(workflow, input, options, wait_ms))

    async def result(self, thread: str, *, wait_ms: Optional[int] = None) -> ThreadResult:
        return await self._run(calls.result(thread, wait_ms))

    async def wait(self, thread: str, timeout_s: float) -> ThreadResult:
        return await asyncio.to_thread(self.sync.wait, thread, timeout_s)

    async def thread(self, thread: str, *, redact: bool = False) -> ThreadDetails:
        return await self._run(calls.thread(thread, redact))

    async def threads(self, *, status: Optional[str] = None, workflow: Optional[str] = None,
                      labels: Optional[Mapping[str, str]] = None, limit: Optional[int] = None,
                      after: Optional[str] = None, offset: Optional[int] = None) -> ThreadsPage:
        return await self._run(calls.threads(status, workflow, labels, limit, after, offset))

    async def signal(self, thread: str, name: str, value: Any, *,
                     dedup_key: Optional[str] = None,
                     start: Optional[SignalStart] = None) -> Controlled:
        return await self._run(calls.signal(thread, name, value, dedup_key, start))

    async def pause(self, thread: str) -> Controlled:
        return await self._run(calls.control(thread, "pause"))

    async def resume(self, thread: str) -> Controlled:
        return await self._run(calls.control(thread, "resume"))

    async def cancel(self, thread: str, reason: Optional[str] = None) -> Controlled:
        return await self._run(calls.cancel(thread, reason))

    async def send_input(self, thread: str, value: Any) -> Controlled:
        return await self._run(calls.send_input(thread, value))

    async def fork(self, thread: str, options: ForkOptions) -> Controlled:
        return await self._run(calls.fork(thread, options))

    async def repin(self, thread: str, build: str) -> Controlled:
        return await self._run(calls.repin(thread, build))

    async def unpin(self, thread: str) -> Controlled:
        return await self._run(calls.repin(thread, None))

    async def reset(self, thread: str, to: str, *, key: Optional[str] = None) -> Controlled:
        return await self._run(calls.reset(thread, to, key))

    async def delete(self, thread: str, *, force: bool = False) -> Dict[str, Any]:
        return await self._run(calls.delete(thread, force))

    async def health(self, *, watchdog_ms: Optional[int] = None) -> Dict[str, Any]:
        return await self._run(calls.health(watchdog_ms))

    async def update(self, thread: str, name: str, args: Any = None, *,
                     id: Optional[str] = None, start: Optional[UpdateStart] = None,
                     wait_ms: Optional[int] = None) -> Updated:
        return await self._run(calls.update(thread, name, args, id, start, wait_ms))

    async def published(self, thread: str) -> Published:
        return await self._run(calls.published(thread))

    async def get_event(self, thread: str, key: str, *, wait_ms: Optional[int] = None
                        ) -> PublishedValue:
        return await self._run(calls.published_key(thread, key, wait_ms))

    async def promises(self, thread: str) -> ThreadPromises:
        return await self._run(calls.promises(thread))

    async def complete_promise(self, promise: str, value: Any = calls._UNSET, *,
                               error: Optional[str] = None) -> PromiseCompleted:
        return await self._run(calls.complete_promise(promise, value, error))

    async def emit(self, name: str, id: str, payload: Any = None) -> Emitted:
        return await self._run(calls.emit(name, id, payload))

    async def batch(self, op: str, filter: Optional[Mapping[str, Any]] = None, *,
                    dry_run: bool = False, **options: Any) -> BatchAnswer:
        return await self._run(calls.batch(op, filter, dry_run=dry_run, **options))

    async def batch_info(self, batch_id: str) -> BatchAnswer:
        return await self._run(calls.batch_info(batch_id))

    async def stream(self, thread: str, *, since: int = 0, redact: bool = False,
                     reconnect_for_s: float = RECONNECT_FOR_S) -> AsyncIterator[StreamItem]:
        """As `Client.stream`: the live stream until `ended`, reconnecting with
        `Last-Event-ID`."""
        streamer = Streamer(since)
        path = calls.stream_path(thread, since, redact)
        while True:
            try:
                frames = self.sync.endpoint.frames(path, streamer.last_event_id())
                while (frame := await asyncio.to_thread(next, frames, _DONE)) is not _DONE:
                    for item in streamer.message(*frame):
                        yield item
                    if streamer.done:
                        return
            except TransportError:
                streamer.lost(reconnect_for_s)
            await asyncio.sleep(RECONNECT_PAUSE_S)

    async def events(self, thread: str, *, since: int = 0, kinds: Optional[Iterable[str]] = None,
                     limit: Optional[int] = None) -> EventsPage:
        return await self._run(calls.events(thread, since, kinds, limit))

    async def follow(self, thread: str, *, since: int = 0, kinds: Optional[Iterable[str]] = None,
                     reconnect_for_s: float = RECONNECT_FOR_S
                     ) -> AsyncIterator[Union[Event, Pruned]]:
        """As `Client.follow`: every event after `since` exactly once, across reconnections."""
        follower = Follower(since, kinds)
        while True:
            try:
                stream = self.sync.endpoint.stream(follower.path(thread))
                while (message := await asyncio.to_thread(next, stream, _DONE)) is not _DONE:
                    for item in follower.message(*message):
                        yield item
                page = await self.events(thread, since=follower.last, kinds=kinds)
                for item in follower.page(page):
                    yield item
                if follower.ended(page):
                    return
            except TransportError:
                follower.lost(reconnect_for_s)
                await asyncio.sleep(RECONNECT_PAUSE_S)
