"""A thread sealed at rest (docs/encryption.md): written by a server given the key ring
(`CAIRN_KEYS`), then read through a server without it, each sealed value is the placeholder
`{"encrypted": true, "codec", "key"}` and the answer's `sealed` names the missing key, while what
is in the clear (status, labels, workflow, each event's kind) reads as usual; with the key again
the values read in the clear."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from cairn_client import AsyncClient, StartOptions
from conftest import Server

WORKFLOW = "research-agent"
QUESTION = {"question": "What is a lease?"}
KEYS = "k1=" + "a1" * 32
PLACEHOLDER = {"encrypted": True, "codec": "aes256gcm", "key": "k1"}


def test_a_sealed_thread_read_without_the_key_shows_placeholders():
    with tempfile.TemporaryDirectory(prefix="cairn-py-") as tmp:
        server = Server(Path(tmp) / "sealed.db", keys=KEYS)
        try:
            client = server.client()
            started = client.start(WORKFLOW, QUESTION,
                                   StartOptions(id="sealed-1", labels={"team": "docs"}),
                                   wait_ms=30_000)
            assert (started.status, started.sealed) == ("completed", [])
            assert started.output["question"] == QUESTION["question"]
            assert client.thread("sealed-1").sealed == []

            server.keys = None
            server.restart()
            shown = client.thread("sealed-1")
            assert shown.sealed == ["k1"]
            assert shown.output == PLACEHOLDER and shown.telemetry == PLACEHOLDER
            assert shown.node_results == PLACEHOLDER and shown.budgets == PLACEHOLDER
            assert (shown.status, shown.labels, shown.workflow["id"]) == (
                "completed", {"team": "docs"}, WORKFLOW)
            assert shown.state_unknown and "k1" in shown.state_unknown
            result = client.result("sealed-1")
            assert (result.status, result.output, result.sealed) == ("completed", PLACEHOLDER,
                                                                     ["k1"])
            page = client.events("sealed-1", limit=2)
            assert page.sealed == ["k1"]
            assert [(e.kind, e.body) for e in page.events] == [("thread_created", PLACEHOLDER),
                                                               ("status_changed", PLACEHOLDER)]
            aio = AsyncClient(server.url, token=server.token)
            assert asyncio.run(aio.result("sealed-1")).output == PLACEHOLDER

            server.keys = KEYS
            server.restart()
            again = client.result("sealed-1")
            assert (again.output, again.sealed) == (started.output, [])
        finally:
            server.stop()
