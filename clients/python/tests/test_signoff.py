"""The success paths of published events, promises and chunks, against the second demo workflow
`cairn serve` registers, `signoff-demo` (engine/tools/src/demo_signoff.rs): it publishes
`stage` and the id of a promise, waits for that promise, then streams three chunks from its
node `write` and ends with `approved <value>: <input> (3 parts streamed)` (or `refused
(<error>): ...`)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from cairn_client import AsyncClient, Client, Conflict, PromiseRow, StartOptions, StreamItem

WORKFLOW = "signoff-demo"
PARTS = ["part 1/3", "part 2/3", "part 3/3"]


def parked(client: Client, thread: str, text: str) -> str:
    """Starts `thread` and returns the id of the promise it published once parked on it."""
    client.start(WORKFLOW, text, StartOptions(id=thread))
    got = client.get_event(thread, "promise", wait_ms=10_000)
    assert got.state == "set" and isinstance(got.value, str), got
    return got.value


def streamed(client: Client, thread: str):
    """Reads the thread's stream from the start in a thread of its own; join it for the items."""
    items: list = []
    reader = threading.Thread(target=lambda: items.extend(client.stream(thread)), daemon=True)
    reader.start()
    time.sleep(0.3)  # connected before the chunks are written (a later reader gets the kept ones)
    return reader, items


def test_a_promise_is_completed_once_and_the_chunks_stream(client: Client):
    promise = parked(client, "apr-1", "the release notes")
    assert client.published("apr-1").published == {"stage": "waiting for approval",
                                                   "promise": promise}
    assert client.get_event("apr-1", "stage").value == "waiting for approval"
    assert client.promises("apr-1").promises == [PromiseRow(promise=promise, state="open")]
    details = client.thread("apr-1")
    assert details.updates == [] and "updates" not in details.extra  # none declared: left out

    reader, items = streamed(client, "apr-1")
    done = client.complete_promise(promise, 3)
    assert (done.promise, done.thread, done.duplicate) == (promise, "apr-1", False)
    again = client.complete_promise(promise, 3)
    assert (again.signal, again.duplicate) == (done.signal, True)
    with pytest.raises(Conflict) as other:
        client.complete_promise(promise, 4)
    assert other.value.status == 409 and other.value.field == "promise"
    with pytest.raises(Conflict):
        client.complete_promise(promise, error="too late")

    result = client.result("apr-1", wait_ms=30_000)
    assert (result.status, result.output) == ("completed",
                                              "approved 3: the release notes (3 parts streamed)")
    reader.join(30)
    assert not reader.is_alive()
    chunks = [i for i in items if i.kind == "chunk"]
    assert [(c.value, c.node, c.index) for c in chunks] == [(p, "write", n)
                                                            for n, p in enumerate(PARTS)]
    assert [(i.kind, i.node) for i in items if i.kind == "closed"] == [("closed", "ask"),
                                                                       ("closed", "write")]
    assert items[-1] == StreamItem(kind="ended", seq=items[-1].seq, status="completed",
                                   output=result.output)
    assert client.promises("apr-1").promises == [
        PromiseRow(promise=promise, state="completed", value=3, signal=done.signal)]
    assert client.get_event("apr-1", "stage").value == "writing"
    signals = [e for e in client.events("apr-1").events if e.kind == "input_received"]
    assert len(signals) == 1, "the promise woke the thread once"


def test_a_promise_completed_with_an_error_refuses(client: Client, server):
    promise = parked(client, "apr-2", "the budget")
    async_client = AsyncClient(server.url, token=server.token)
    listed = asyncio.run(async_client.promises("apr-2"))
    assert [p.state for p in listed.promises] == ["open"]
    done = asyncio.run(async_client.complete_promise(promise, error="not this quarter"))
    assert done.duplicate is False
    result = client.result("apr-2", wait_ms=30_000)
    assert result.output == "refused (not this quarter): the budget (3 parts streamed)"
    row = client.promises("apr-2").promises[0]
    assert (row.state, row.error, row.value, row.signal) == ("completed", "not this quarter",
                                                            None, done.signal)
    with pytest.raises(Conflict):
        client.complete_promise(promise, 1)
