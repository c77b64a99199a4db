"""Signals to a waiting thread, and a thread's events: a page since a bookmark, and followed
over Server-Sent Events across a restart of the server."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from cairn_client import AsyncClient, BadRequest, Conflict, Event, SignalStart, StartOptions

WORKFLOW = "research-agent"
QUESTION = {"question": "What is a lease?"}


def test_a_signal_reaches_a_waiting_thread_once_per_dedup_key(client):
    # A delayed start waits (for its start time) in the store; its inbox takes signals.
    thread = client.start(WORKFLOW, QUESTION, StartOptions(id="waits", delay_ms=600_000)).thread
    first = client.signal(thread, "approval", {"by": "ann"}, dedup_key="pay-7")
    assert (first.thread, first.signal, first.duplicate) == ("waits", 1, False)
    again = client.signal(thread, "approval", {"by": "ann"}, dedup_key="pay-7")
    assert (again.signal, again.duplicate) == (1, True)
    other = client.signal(thread, "approval", {"by": "bob"})
    # The key is kept in the inbox as a marker signal (`cairn.dedup`, docs/signals.md), number 2.
    assert other.signal == 3 and other.duplicate is None
    assert client.result(thread).finished is False


def test_a_signal_with_start_creates_the_thread_then_signals_it(client):
    start = SignalStart(workflow=WORKFLOW, input=QUESTION, version=1, labels={"via": "signal"})
    sent = client.signal("made-by-signal", "hello", 1, start=start)
    assert (sent.created, sent.signal) == (True, 1)
    assert client.wait("made-by-signal", 30).status == "completed"
    assert client.thread("made-by-signal").labels == {"via": "signal"}
    with pytest.raises(Conflict) as e:  # the thread ended: its inbox is closed
        client.signal("made-by-signal", "hello", 2)
    assert e.value.status == 409 and "receives no more signals" in e.value.message
    with pytest.raises(BadRequest) as e:
        client.endpoint.call("POST", "/api/threads/made-by-signal/signal", {"value": 1})
    assert e.value.field == "name"


def test_events_since_a_bookmark_page_the_log(client):
    thread = client.start(WORKFLOW, QUESTION, wait_ms=30_000).thread
    every = client.events(thread)
    seqs = [e.seq for e in every.events]
    assert seqs == list(range(1, len(seqs) + 1)) and every.status == "completed"
    assert every.next_since == seqs[-1] and every.first_seq == 1
    later = client.events(thread, since=3, limit=2)
    assert [e.seq for e in later.events] == [4, 5] and later.next_since == 5
    kinds = {e.kind for e in every.events}
    only = client.events(thread, kinds=[every.events[0].kind])
    assert {e.kind for e in only.events} == {every.events[0].kind} and len(kinds) > 1


def collect(client, thread, out, done, since=0):
    try:
        for item in client.follow(thread, since=since, reconnect_for_s=30):
            out.append(item)
    finally:
        done.set()


def test_following_delivers_every_event_once_across_a_server_restart(server):
    client = server.client()
    # Starts 4 s from now: created before the restart, run after it.
    thread = client.start(WORKFLOW, QUESTION, StartOptions(delay_ms=4_000)).thread
    seen, done = [], threading.Event()
    follower = threading.Thread(target=collect, args=(client, thread, seen, done), daemon=True)
    follower.start()
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    before = len(seen)
    assert before >= 1, "no event before the restart"
    server.restart()
    assert done.wait(60), "the follower did not see the thread end"
    follower.join(5)
    events = [e for e in seen if isinstance(e, Event)]
    seqs = [e.seq for e in events]
    stored = client.events(thread)
    assert stored.status == "completed" and len(events) > before
    assert seqs == [e.seq for e in stored.events], "an event lost or doubled"
    assert [e.kind for e in events] == [e.kind for e in stored.events]


def test_following_from_a_bookmark_starts_after_it(client):
    thread = client.start(WORKFLOW, QUESTION, wait_ms=30_000).thread
    last = client.events(thread).next_since
    items = list(client.follow(thread, since=last - 2))
    assert [e.seq for e in items] == [last - 1, last]


def test_the_async_follower_delivers_the_same_events(server):
    async def run():
        client = AsyncClient(server.url, token=server.token)
        thread = (await client.start(WORKFLOW, QUESTION, StartOptions(delay_ms=500))).thread
        seen = [e.seq async for e in client.follow(thread)]
        stored = await client.events(thread)
        assert stored.status == "completed"
        assert seen == [e.seq for e in stored.events]

    asyncio.run(run())
