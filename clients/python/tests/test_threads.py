"""Starting, waiting, listing and controlling threads of the demo workflow `cairn serve`
registers (`research-agent`); a start over the rate of a queue that drops is refused with the
time to retry."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from cairn_client import (
    AsyncClient, BadRequest, Budgets, Client, NotFound, StartOptions, TooManyRequests,
    Unauthorized,
)

WORKFLOW = "research-agent"
QUESTION = {"question": "What is a lease?"}
LATER_MS = 600_000  # a delayed start that stays waiting for the whole test


def check_answer(output: dict, question: str) -> None:
    """The demo's output for `question`: a direct answer, or a reviewed draft with both
    searches' findings and an id suffix."""
    assert output["question"] == question
    if output["route"] == "simple":
        assert output["answer"] == "A direct answer."
    else:
        assert output["route"] == "research"
        assert len(output["findings"]) == 2 and output["approved"] is True
        assert output["answer"].startswith(output["draft"] + " [")


def test_a_thread_started_completes_with_the_demo_output(client: Client):
    started = client.start(WORKFLOW, QUESTION, StartOptions(id="asked-1"), wait_ms=30_000)
    assert (started.thread, started.created, started.finished) == ("asked-1", True, True)
    assert started.status == "completed" and started.error is None
    check_answer(started.output, QUESTION["question"])
    assert client.result("asked-1").output == started.output
    again = client.start(WORKFLOW, QUESTION, StartOptions(id="asked-1"))
    assert (again.thread, again.created) == ("asked-1", False)


def test_result_waits_for_a_thread_started_without_waiting(client: Client):
    started = client.start(WORKFLOW, {"question": "Why durable?"})
    result = client.wait(started.thread, 30)
    assert result.finished and result.status == "completed"
    check_answer(result.output, "Why durable?")


def test_every_start_option_reaches_the_thread(client: Client):
    options = StartOptions(
        id="opts-1", labels={"team": "docs"}, version=1, deadline_ms=3_600_000,
        budgets=Budgets(max_steps=50, max_tool_calls=40, max_tokens=10_000,
                        max_cost_micros=1_000_000, max_wall_ms=3_600_000, warn_fraction=0.5),
        permissions=["model", "web_search", "docs_search"], delay_ms=LATER_MS,
    )
    started = client.start(WORKFLOW, QUESTION, options)
    assert started.created and started.finished is None
    shown = client.thread("opts-1")
    assert shown.labels == {"team": "docs"} and shown.workflow["version"] == 1
    created = client.events("opts-1").events[0]
    assert created.kind == "thread_created" and created.body["input"] == QUESTION
    policy = created.body["policy"]
    assert policy["budgets"] == {"max_steps": 50, "max_tool_calls": 40, "max_tokens": 10_000,
                                 "max_cost_micros": 1_000_000, "max_wall_ms": 3_600_000,
                                 "warn_fraction": 0.5}
    assert policy["permissions"] == ["docs_search", "model", "web_search"]
    # From the engine clock as the request read it, a moment before the creation's.
    assert abs(policy["start_at_ms"] - shown.created_at_ms - LATER_MS) < 5_000
    assert abs(policy["deadline_at_ms"] - shown.created_at_ms - 3_600_000) < 5_000
    assert not client.result("opts-1").finished
    client.start(WORKFLOW, QUESTION, StartOptions(id="opts-2", start_at_ms=2**52))
    assert client.events("opts-2").events[0].body["policy"]["start_at_ms"] == 2**52
    assert not client.result("opts-2").finished


def test_a_start_on_a_queue_takes_key_priority_and_dedup(client: Client):
    with pytest.raises(NotFound) as e:
        client.start(WORKFLOW, QUESTION, StartOptions(queue="nosuch", key="k", priority=3,
                                                       dedup="d"))
    assert e.value.field == "queue" and "nosuch" in e.value.message
    with pytest.raises(BadRequest) as e:
        client.start(WORKFLOW, QUESTION, StartOptions(priority=3))
    assert e.value.field == "priority" and "queue" in e.value.message


def test_a_start_over_a_rate_that_drops_is_too_many_requests_with_the_retry_time(server):
    # A queue is defined on the file, which the serving engine holds: stop it meanwhile (a
    # start makes a new token).
    server.stop()
    server.cli("queue", "define", "drops", "--rate", "1/60s", "--rate-drops",
               stdout=subprocess.DEVNULL)
    server.start()
    client = server.client()
    first = client.start(WORKFLOW, QUESTION, StartOptions(id="rate-a", queue="drops"))
    assert (first.thread, first.created) == ("rate-a", True)
    with pytest.raises(TooManyRequests) as e:
        client.start(WORKFLOW, QUESTION, StartOptions(id="rate-b", queue="drops"))
    assert e.value.status == 429 and "over its rate" in e.value.message
    # The window is 60 s and its one start was just taken: a start fits again within it.
    assert isinstance(e.value.retry_after_s, int) and 1 <= e.value.retry_after_s <= 60
    with pytest.raises(NotFound):
        client.thread("rate-b")  # the refused start wrote nothing

    async def over_the_rate():
        aio = AsyncClient(server.url, token=server.token)
        with pytest.raises(TooManyRequests) as e:
            await aio.start(WORKFLOW, QUESTION, StartOptions(id="rate-c", queue="drops"))
        return e.value.retry_after_s

    assert 1 <= asyncio.run(over_the_rate()) <= 60
    assert [t.thread for t in client.all_threads()] == ["rate-a"]


def test_pause_resume_and_cancel(client: Client):
    thread = client.start(WORKFLOW, QUESTION, StartOptions(delay_ms=LATER_MS)).thread
    assert client.pause(thread).status == "paused"
    assert client.resume(thread).status != "paused"
    assert client.cancel(thread, "no longer needed").status == "cancelled"
    result = client.result(thread)
    assert result.finished and result.status == "cancelled"
    assert client.delete(thread)["thread"] == thread
    with pytest.raises(NotFound) as e:
        client.result(thread)
    assert e.value.status == 404


def test_threads_are_listed_with_filters_and_pages(client: Client):
    for n in range(5):
        labels = {"batch": "b1" if n % 2 == 0 else "b2"}
        client.start(WORKFLOW, QUESTION, StartOptions(id=f"list-{n}", labels=labels,
                                                       delay_ms=LATER_MS))
    client.start(WORKFLOW, QUESTION, StartOptions(id="list-done"), wait_ms=30_000)
    first = client.threads(labels={"batch": "b1"}, limit=2)
    assert [t.thread for t in first.threads] == ["list-0", "list-2"] and first.next == "list-2"
    rest = client.threads(labels={"batch": "b1"}, limit=2, after=first.next)
    assert [t.thread for t in rest.threads] == ["list-4"] and rest.next is None
    every = [t.thread for t in client.all_threads(workflow=WORKFLOW, limit=2)]
    assert every == ["list-0", "list-1", "list-2", "list-3", "list-4", "list-done"]
    done = client.threads(status="completed")
    assert [t.thread for t in done.threads] == ["list-done"]
    assert [t.thread for t in client.threads(offset=4, limit=1).threads] == ["list-4"]
    with pytest.raises(BadRequest) as e:
        client.threads(status="sideways")
    assert e.value.field == "status"


def test_a_bad_token_is_unauthorized_and_a_bad_body_names_its_field(server, client: Client):
    with pytest.raises(Unauthorized) as e:
        server.client(token="not-the-token").start(WORKFLOW, QUESTION)
    assert e.value.status == 401 and e.value.message
    with pytest.raises(BadRequest) as e:
        client.start(WORKFLOW, QUESTION, StartOptions(budgets=Budgets(warn_fraction=2.0)))
    assert e.value.field == "budgets" and "warn_fraction" in e.value.message
    with pytest.raises(BadRequest) as e:
        client.endpoint.call("POST", f"/api/workflows/{WORKFLOW}/threads", {"inptu": {}})
    assert e.value.field in ("inptu", "input")
    with pytest.raises(NotFound) as e:
        client.start("no-such-workflow", QUESTION)
    assert e.value.field == "workflow"
    assert client.threads().threads == []  # nothing was started by the refusals


def test_the_token_and_address_come_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("CAIRN_URL", server.url)
    monkeypatch.setenv("CAIRN_TOKEN", server.token)
    assert Client().start(WORKFLOW, QUESTION, wait_ms=30_000).status == "completed"
    monkeypatch.delenv("CAIRN_TOKEN")
    token_file = str(server.db) + ".token"
    assert Client(token_file=token_file).start(WORKFLOW, QUESTION).created


def test_the_async_client_starts_waits_and_signals(server):
    async def run():
        client = AsyncClient(server.url, token=server.token)
        started = await client.start(WORKFLOW, QUESTION, wait_ms=30_000)
        check_answer(started.output, QUESTION["question"])
        waiting = await client.start(WORKFLOW, QUESTION, StartOptions(delay_ms=LATER_MS))
        sent = await client.signal(waiting.thread, "nudge", {"n": 1})
        assert sent.signal == 1
        page = await client.threads(status="completed")
        assert [t.thread for t in page.threads] == [started.thread]
        with pytest.raises(Unauthorized):
            await AsyncClient(server.url, token="wrong").cancel(waiting.thread)
        assert (await client.cancel(waiting.thread)).status == "cancelled"

    asyncio.run(run())
