"""Events and batches through the client: an emit starts the subscribed workflow's thread once
per event id; a batch counts (dry run), then cancels exactly the threads it names (an id of no
thread skipped, counted so), and its progress reads back; a reset forks one thread once per
key; a repin moves one thread's build pin and an unpin removes it; bad bodies are `BadRequest`s
naming their field, an unknown batch or thread a `NotFound`, a finished thread a `Conflict`."""

from __future__ import annotations

import asyncio
import time

import pytest

from cairn_client import (
    AsyncClient, BadRequest, BatchAnswer, Conflict, Emitted, NotFound, StartOptions,
)

WORKFLOW = "research-agent"
QUESTION = {"question": "What is a lease?"}


def test_an_emit_starts_the_subscriber_once_per_event_id(client):
    first = client.emit("question.asked", "q-1", QUESTION)
    assert isinstance(first, Emitted) and len(first.threads) == 1
    made = first.threads[0]
    assert (made.workflow, made.thread, made.created) == (WORKFLOW, "event:q-1/research-agent", True)
    again = client.emit("question.asked", "q-1", QUESTION)
    assert again.threads[0].created is False, "once per event id"
    # Control: an event nobody subscribes to starts nothing.
    assert client.emit("nobody.listens", "q-1").threads == []
    with pytest.raises(BadRequest) as e:
        client.emit("question.asked", "", QUESTION)
    assert e.value.field == "id"


def test_a_batch_by_ids_counts_then_cancels_exactly_those_threads(client):
    for t in ("b-1", "b-2", "b-3"):
        client.start(WORKFLOW, QUESTION, StartOptions(id=t, delay_ms=600_000))
    named = {"ids": ["b-1", "b-3", "nobody"]}
    dry = client.batch("cancel", named, dry_run=True)
    assert isinstance(dry, BatchAnswer) and (dry.dry_run, dry.total, dry.id) == (True, 2, None)
    made = client.batch("cancel", named, reason="from python", id="py-batch")
    assert (made.id, made.op, made.total) == ("py-batch", "cancel", 2)
    deadline = time.monotonic() + 30
    info = client.batch_info("py-batch")
    while not info.finished and time.monotonic() < deadline:
        time.sleep(0.05)
        info = client.batch_info("py-batch")
    assert (info.finished, info.applied, info.skipped) == (True, 2, 1), info
    assert info.skips == [["nobody", "no such thread"]]
    assert client.thread("b-1").status == "cancelled"
    assert client.thread("b-3").status == "cancelled"
    assert client.thread("b-2").status != "cancelled", "the thread not named is untouched"
    with pytest.raises(BadRequest) as e:
        client.batch("frob")
    assert e.value.field == "op"
    with pytest.raises(NotFound):
        client.batch_info("no-such-batch")
    with pytest.raises(ValueError):
        client.batch("pause", {"colour": "red"})


def test_the_async_client_emits_and_counts_a_batch(server):
    async def run():
        client = AsyncClient(server.url, token=server.token)
        emitted = await client.emit("question.asked", "q-async", QUESTION)
        counted = await client.batch("pause", {"ids": [emitted.threads[0].thread]}, dry_run=True)
        return emitted.threads[0].created, counted.total

    assert asyncio.run(run()) == (True, 1)


def test_a_reset_forks_one_thread_once_per_key_and_cancels_it(client):
    for thread in ("rs-1", "rs-2"):
        client.start(WORKFLOW, QUESTION, StartOptions(id=thread, delay_ms=600_000))
    made = client.reset("rs-1", "start", key="k1")
    assert made.thread == "rs-1.reset.k1"
    assert client.thread("rs-1").status == "cancelled"
    again = client.reset("rs-1", "start", key="k1")
    assert again.thread == "rs-1.reset.k1", "the same key: the same new thread"
    forks = [t.thread for t in client.all_threads() if t.thread.startswith("rs-1.reset.")]
    assert forks == ["rs-1.reset.k1"], "no second fork"
    assert client.thread("rs-2").status != "cancelled", "the other thread is untouched"
    with pytest.raises(BadRequest) as e:
        client.reset("rs-2", "yesterday")
    assert e.value.field == "to"
    with pytest.raises(NotFound) as e:
        client.reset("nobody", "start")
    assert e.value.field == "thread"


def test_a_repin_moves_one_threads_build_pin_and_an_unpin_removes_it(client, server):
    for thread in ("rp-1", "rp-2"):
        client.start(WORKFLOW, QUESTION, StartOptions(id=thread, labels={"team": "docs"},
                                                       delay_ms=600_000))
    before = client.thread("rp-1")
    assert before.labels == {"team": "docs"}, "an engine without a build id pins nothing"
    moved = client.repin("rp-1", "2026.12.2")
    assert (moved.thread, moved.status) == ("rp-1", before.status)
    pinned = client.thread("rp-1")
    assert pinned.labels == {"team": "docs", "cairn.build": "2026.12.2"}
    assert pinned.seq == before.seq + 1, "one event"
    [event] = client.events("rp-1", since=before.seq).events
    assert event.body == {"type": "labels_changed", "set": {"cairn.build": "2026.12.2"}}
    assert client.thread("rp-2").labels == {"team": "docs"}, "the other thread is untouched"

    for bad in ("has space", "x" * 65, ""):
        with pytest.raises(BadRequest) as e:
            client.repin("rp-1", bad)
        assert (e.value.status, e.value.field) == (400, "build"), bad
    assert client.thread("rp-1").seq == pinned.seq, "nothing written by a refusal"
    with pytest.raises(NotFound) as e:
        client.repin("nobody", "2026.12.2")
    assert e.value.field == "thread"

    unpinned = client.unpin("rp-1")
    assert (unpinned.thread, unpinned.status) == ("rp-1", before.status)
    after = client.thread("rp-1")
    assert after.labels == {"team": "docs"} and after.seq == pinned.seq + 1

    async def repin_and_unpin():
        aio = AsyncClient(server.url, token=server.token)
        await aio.repin("rp-2", "2027.1.1")
        labels = (await aio.thread("rp-2")).labels
        await aio.unpin("rp-2")
        return labels, (await aio.thread("rp-2")).labels

    assert asyncio.run(repin_and_unpin()) == ({"team": "docs", "cairn.build": "2027.1.1"},
                                              {"team": "docs"})
    client.cancel("rp-2")
    with pytest.raises(Conflict) as e:
        client.repin("rp-2", "2026.12.2")
    assert (e.value.status, e.value.field) == (409, "thread")
    assert client.thread("rp-2").labels == {"team": "docs"}
