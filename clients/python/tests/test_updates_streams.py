"""Updates, published events, promises and the live stream, against the demo workflow
`cairn serve` registers (`research-agent`). It declares the update `add_finding` (refused when
empty; replies with the number of findings); it publishes no event, creates no promise and
streams no chunk, so those routes are checked for their not-set answers and refusals, and the
stream for its durable items (`closed`, `ended`), a resume after a seq and a reconnection
across a server restart."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from cairn_client import (
    AsyncClient, BadRequest, Client, Conflict, NotFound, StartOptions, Unauthorized, UpdateStart,
)

WORKFLOW = "research-agent"
QUESTION = {"question": "What is a lease?"}
LATER_MS = 600_000


def test_an_update_answers_its_reply_once_per_id(client: Client):
    thread = client.start(WORKFLOW, QUESTION, StartOptions(id="upd", delay_ms=LATER_MS)).thread
    first = client.update(thread, "add_finding", "a source the run missed", id="u-1")
    assert (first.thread, first.id, first.reply, first.duplicate) == (thread, "u-1", 1, False)
    assert first.created is None and first.seq > 0
    again = client.update(thread, "add_finding", "another text, same id", id="u-1")
    assert (again.reply, again.seq, again.duplicate) == (1, first.seq, True)
    second = client.update(thread, "add_finding", "a second one")
    assert second.reply == 2 and second.id not in ("", "u-1") and second.seq > first.seq
    kinds = [e.kind for e in client.events(thread).events]
    assert kinds.count("state_updated") == 2  # the update_applied events


def test_update_refusals_are_typed_and_change_nothing(client: Client, server):
    thread = client.start(WORKFLOW, QUESTION, StartOptions(id="upd-no", delay_ms=LATER_MS)).thread
    before = client.events(thread).next_since
    with pytest.raises(BadRequest) as refused:
        client.update(thread, "add_finding", "   ")
    assert refused.value.field == "args" and "a finding needs text" in refused.value.message
    with pytest.raises(BadRequest) as codec:
        client.update(thread, "add_finding", {"not": "a string"})
    assert codec.value.field == "args"
    with pytest.raises(NotFound) as unknown:
        client.update(thread, "no_such_update", 1)
    assert unknown.value.field == "name" and "add_finding" in unknown.value.message
    with pytest.raises(BadRequest) as bad_id:
        client.update(thread, "add_finding", "x", id="")
    assert bad_id.value.field == "id"
    with pytest.raises(NotFound):
        client.update("no-such-thread", "add_finding", "x")
    with pytest.raises(Unauthorized):
        server.client(token="wrong").update(thread, "add_finding", "x")
    assert client.events(thread).next_since == before
    done = client.start(WORKFLOW, QUESTION, StartOptions(id="upd-done"), wait_ms=30_000)
    assert done.status == "completed"
    with pytest.raises(Conflict):
        client.update("upd-done", "add_finding", "too late")


def test_update_with_start_creates_the_thread_once(client: Client):
    client.start(WORKFLOW, QUESTION, StartOptions(id="uws-old", delay_ms=LATER_MS))
    start = UpdateStart(workflow=WORKFLOW, input=QUESTION, labels={"team": "docs"})
    found = client.update("uws-old", "add_finding", "x", id="w-1", start=start)
    assert (found.created, found.reply, found.duplicate) == (False, 1, False)
    with pytest.raises(NotFound) as unknown:
        client.update("uws-new", "add_finding", "x",
                      start=UpdateStart(workflow="no-such-workflow", input=QUESTION))
    assert unknown.value.field == "start"
    with pytest.raises(NotFound):
        client.thread("uws-new")


def test_published_events_of_a_thread_that_publishes_none(client: Client):
    done = client.start(WORKFLOW, QUESTION, StartOptions(id="pub-done"), wait_ms=30_000)
    assert done.status == "completed"
    everything = client.published("pub-done")
    assert (everything.thread, everything.published) == ("pub-done", {})
    never = client.get_event("pub-done", "stage", wait_ms=5_000)
    assert (never.thread, never.key, never.state, never.status) == (
        "pub-done", "stage", "never_set", "completed")
    assert not never.is_set and never.value is None
    client.start(WORKFLOW, QUESTION, StartOptions(id="pub-later", delay_ms=LATER_MS))
    began = time.monotonic()
    pending = client.get_event("pub-later", "stage", wait_ms=400)
    assert pending.state == "pending" and pending.status == "created"
    assert time.monotonic() - began >= 0.35  # the long poll waited
    with pytest.raises(NotFound):
        client.published("no-such-thread")
    with pytest.raises(NotFound):
        client.get_event("no-such-thread", "stage")


def test_promise_completions_are_refused_for_promises_never_made(client: Client, server):
    client.start(WORKFLOW, QUESTION, StartOptions(id="prom", delay_ms=LATER_MS))
    with pytest.raises(NotFound) as never_made:
        client.complete_promise("prom~p1.0123456789abcdef.0", {"by": "ana"})
    assert never_made.value.field == "promise"
    with pytest.raises(NotFound):
        client.complete_promise("not-a-promise-id", error="too late")
    with pytest.raises(ValueError):
        client.complete_promise("prom~p1.0123456789abcdef.0", {"by": "ana"}, error="both")
    with pytest.raises(BadRequest) as neither:
        client.endpoint.call("POST", "/api/promises/prom~p1.0123456789abcdef.0", {})
    assert neither.value.field == "body"
    with pytest.raises(Unauthorized):
        server.client(token="wrong").complete_promise("prom~p1.0123456789abcdef.0", 1)
    assert [e.kind for e in client.events("prom").events] == ["thread_created"]


def durable(items):
    return [(i.kind, i.seq) for i in items if i.kind in ("closed", "ended")]


def test_the_stream_of_a_finished_thread_gives_its_closes_and_end(client: Client):
    done = client.start(WORKFLOW, QUESTION, StartOptions(id="str-done"), wait_ms=30_000)
    items = list(client.stream("str-done"))
    assert items[-1].kind == "ended" and items[-1].status == "completed"
    assert items[-1].output == done.output
    closes = [i for i in items if i.kind == "closed"]
    completed = [e for e in client.events("str-done").events if e.kind == "node_completed"]
    assert [(c.seq, c.node) for c in closes] == [(e.seq, e.body["task"]["node"]) for e in completed]
    assert all(c.error is None for c in closes) and "Route" in closes[0].update
    middle = closes[len(closes) // 2].seq
    after = list(client.stream("str-done", since=middle))
    assert durable(after) == [d for d in durable(items) if d[1] > middle]
    frames = list(client.endpoint.frames("/api/threads/str-done/stream", last_event_id=middle))
    assert [f[2] for f in frames] == [str(d[1]) for d in durable(after)]
    with pytest.raises(NotFound):
        list(client.stream("no-such-thread"))
    with pytest.raises(BadRequest) as bad:
        list(client.endpoint.frames("/api/threads/str-done/stream?since=x"))
    assert bad.value.field == "since"


def test_the_stream_reconnects_across_a_restart_with_last_event_id(server, client: Client):
    thread = client.start(WORKFLOW, QUESTION, StartOptions(delay_ms=1_000)).thread
    got, failed, connections = [], [], []
    first_close = threading.Event()
    reader_client = server.client()
    frames = reader_client.endpoint.frames

    def counted(path, last_event_id=None):
        connections.append(last_event_id)
        return frames(path, last_event_id)

    reader_client.endpoint.frames = counted

    def read():
        try:
            for item in reader_client.stream(thread):
                got.append(item)
                if item.kind == "closed":
                    first_close.set()
        except Exception as e:  # reported below
            failed.append(e)
        first_close.set()

    reader = threading.Thread(target=read)
    reader.start()
    assert first_close.wait(30)
    server.restart()  # same address, while streaming: the reader resumes after its last seq
    reader.join(60)
    assert not reader.is_alive() and not failed, failed
    assert got[-1].kind == "ended" and got[-1].status == "completed"
    first = next(i.seq for i in got if i.kind == "closed")
    assert connections[0] is None and len(connections) >= 2, connections
    assert all(c is not None and c >= first for c in connections[1:]), connections
    stored = [e.seq for e in client.events(thread).events if e.kind == "node_completed"]
    assert [s for k, s in durable(got) if k == "closed"] == stored


def test_the_async_client_updates_reads_and_streams(server):
    async def run():
        client = AsyncClient(server.url, token=server.token)
        thread = (await client.start(WORKFLOW, QUESTION, StartOptions(delay_ms=LATER_MS))).thread
        updated = await client.update(thread, "add_finding", "async", id="a-1")
        assert (updated.reply, updated.duplicate) == (1, False)
        assert (await client.published(thread)).published == {}
        assert (await client.get_event(thread, "stage", wait_ms=0)).state == "pending"
        with pytest.raises(NotFound):
            await client.complete_promise(f"{thread}~p1.0123456789abcdef.0", value=1)
        done = await client.start(WORKFLOW, QUESTION, StartOptions(id="a-done"), wait_ms=30_000)
        items = [i async for i in client.stream("a-done")]
        assert items[-1].kind == "ended" and items[-1].output == done.output
    asyncio.run(run())


def test_a_thread_names_its_updates_and_lists_its_promises(client: Client, server):
    thread = client.start(WORKFLOW, QUESTION, StartOptions(id="prm-list", delay_ms=LATER_MS))
    details = client.thread(thread.thread)
    assert details.updates == ["add_finding"] and "updates" not in details.extra
    listed = client.promises(thread.thread)
    assert (listed.thread, listed.promises, listed.extra) == (thread.thread, [], {})
    done = client.start(WORKFLOW, QUESTION, StartOptions(id="prm-done"), wait_ms=30_000)
    assert done.status == "completed" and client.promises("prm-done").promises == []
    with pytest.raises(NotFound) as unknown:
        client.promises("no-such-thread")
    assert unknown.value.status == 404
    async_client = AsyncClient(server.url, token=server.token)
    assert asyncio.run(async_client.promises("prm-done")).promises == []
    assert asyncio.run(async_client.thread("prm-list")).updates == ["add_finding"]
