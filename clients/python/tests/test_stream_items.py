"""What no served workflow makes, read from a scripted endpoint: the demo streams no chunk, so
`chunk` and `gap` items, an `error` message, the resumption with `Last-Event-ID` after a stream
that ends before `ended`, and the 504 of an update are checked here against SSE and refusal
bytes as `cairn serve` writes them (engine/tools/src/serve/stream.rs)."""

from __future__ import annotations

import asyncio
import json

import pytest

from cairn_client import AsyncClient, CairnError, Client, UpdatePending
from cairn_client.errors import refusal
from cairn_client.transport import sse_frames


def sse(kind, data, ident=None):
    lines = [f"event: {kind}", f"data: {json.dumps(data)}"] + ([f"id: {ident}"] if ident else [])
    return [(line + "\n").encode() for line in lines] + [b"\n", b": keep-alive\n", b"\n"]


CLOSED = {"kind": "closed", "seq": 5, "step": 1, "node": "draft", "update": {"Draft": "a"},
          "error": None}
CHUNK = {"kind": "chunk", "index": 0, "step": 2, "node": "draft", "value": "tok"}
GAP = {"kind": "gap", "missed": 3}
ENDED = {"kind": "ended", "seq": 9, "status": "completed", "output": {"answer": "a"}}

# First connection: a close, then the server stops (the body ends before `ended`). Second: the
# close again (a server resends what is after the id it got; here it must not arrive twice),
# a chunk, a gap, the end.
SCRIPT = [sse("closed", CLOSED, 5), sse("closed", CLOSED, 5) + sse("chunk", CHUNK)
          + sse("gap", GAP) + sse("ended", ENDED, 9)]


def scripted(client, asked):
    def frames(path, last_event_id=None):
        asked.append((path, last_event_id))
        yield from sse_frames(SCRIPT[len(asked) - 1])
    client.endpoint.frames = frames


def check(items, asked):
    assert [(i.kind, i.seq) for i in items] == [
        ("closed", 5), ("chunk", None), ("gap", None), ("ended", 9)]
    assert (items[1].index, items[1].node, items[1].value) == (0, "draft", "tok")
    assert items[2].missed == 3 and items[3].output == {"answer": "a"}
    assert asked == [("/api/threads/t/stream", None), ("/api/threads/t/stream", 5)]


def test_chunks_gaps_and_a_resume_with_last_event_id():
    client, asked = Client("http://127.0.0.1:9", token="t"), []
    scripted(client, asked)
    check(list(client.stream("t")), asked)


def test_the_async_stream_reads_the_same():
    client, asked = AsyncClient("http://127.0.0.1:9", token="t"), []
    scripted(client.sync, asked)

    async def run():
        return [i async for i in client.stream("t")]
    check(asyncio.run(run()), asked)


def test_an_error_message_and_a_504_are_typed():
    client = Client("http://127.0.0.1:9", token="t")
    client.endpoint.frames = lambda path, last=None: sse_frames(sse("error", {"error": "boom"}))
    with pytest.raises(CairnError, match="boom"):
        list(client.stream("t"))
    pending = refusal(504, b'{"error": "no step boundary", "field": null}')
    assert isinstance(pending, UpdatePending) and pending.status == 504
