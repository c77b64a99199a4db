"""The routes this client calls, and the ones of the endpoint it deliberately leaves out. A
route is one entry here and one short method in `client.py` / `aio.py`; `tests/test_openapi.py`
fails when `/api/openapi.json` has a route in neither list, or a route, query parameter, body
field or answer field that differs from these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Type

from . import models


@dataclass(frozen=True)
class Route:
    """One route: method, path pattern (`{id}` a segment), its query parameters, the body
    model(s) it sends, the answer model, and whether it is a control (needs the token)."""

    method: str
    path: str
    query: Tuple[str, ...] = ()
    # The model of the body's options, and the body fields that are the call's own arguments.
    body: Optional[Type] = None
    body_args: Tuple[str, ...] = ()
    answer: Optional[Type] = None


START = Route(
    "POST",
    "/api/workflows/{id}/threads",
    query=("wait_ms",),
    body=models.StartOptions,
    body_args=("input",),
    answer=models.Started,
)
RESULT = Route("GET", "/api/threads/{id}/result", query=("wait_ms",), answer=models.ThreadResult)
THREAD = Route("GET", "/api/threads/{id}", query=("redact",), answer=models.ThreadDetails)
THREADS = Route(
    "GET",
    "/api/threads",
    query=("status", "workflow", "label", "limit", "after", "offset"),
    answer=models.ThreadsPage,
)
EVENTS = Route(
    "GET",
    "/api/threads/{id}/events",
    query=("since", "kind", "limit", "follow", "redact"),
    answer=models.EventsPage,
)
CONTROL = Route(
    "POST",
    "/api/threads/{id}/{control}",
    # The bodies of each control are `CONTROL_BODIES`.
    answer=models.Controlled,
)
DELETE = Route("DELETE", "/api/threads/{id}", query=("force",))
HEALTH = Route("GET", "/api/health", query=("watchdog_ms",))

UPDATE = Route(
    "POST",
    "/api/threads/{id}/updates/{name}",
    query=("wait_ms",),
    # `start` is a `models.UpdateStart`.
    body_args=("args", "id", "start"),
    answer=models.Updated,
)
PUBLISHED = Route("GET", "/api/threads/{id}/published", answer=models.Published)
PUBLISHED_KEY = Route(
    "GET", "/api/threads/{id}/published/{key}", query=("wait_ms",), answer=models.PublishedValue
)
PROMISES = Route("GET", "/api/threads/{id}/promises", answer=models.ThreadPromises)
PROMISE = Route(
    "POST", "/api/promises/{id}", body_args=("value", "error"), answer=models.PromiseCompleted
)
STREAM = Route("GET", "/api/threads/{id}/stream", query=("since", "redact"))
EMIT = Route("POST", "/api/events", body_args=("name", "id", "payload"), answer=models.Emitted)
BATCH = Route(
    "POST",
    "/api/batches",
    body_args=("op", "filter", "reason", "name", "value", "to_version", "build", "unpin", "to",
               "id", "dry_run"),
    answer=models.BatchAnswer,
)
BATCH_SHOW = Route("GET", "/api/batches/{id}", answer=models.BatchAnswer)

#: The filter fields of a batch (`POST /api/batches`' `filter`).
BATCH_FILTER = ("workflow", "status", "labels", "version", "created_from_ms", "created_to_ms",
                "ids")

#: Every route this client calls.
COVERED = (START, RESULT, THREAD, THREADS, EVENTS, CONTROL, DELETE, HEALTH, UPDATE, PUBLISHED,
           PUBLISHED_KEY, PROMISES, PROMISE, STREAM, EMIT, BATCH, BATCH_SHOW)

#: The control names of `POST /api/threads/{id}/{control}` and the body fields of each.
CONTROL_BODIES = {
    "pause": (),
    "resume": (),
    "cancel": ("reason",),
    "input": ("value",),
    "signal": ("name", "value", "dedup_key", "start"),
    "fork": ("at", "checkpoint", "update", "id", "labels", "start"),
    "repin": ("build",),
    "reset": ("to", "key"),
}

#: Routes of the endpoint this client leaves out, and why (operator and web view routes).
NOT_COVERED = {
    ("GET", "/metrics"): "Prometheus text, for a scraper",
    ("GET", "/api/metrics"): "Prometheus text, for a scraper",
    ("GET", "/api/openapi.json"): "the document itself (the tests read it)",
    ("GET", "/api/verify"): "operator tooling (cairn verify)",
    ("GET", "/api/threads/{id}/state"): "operator tooling (cairn state, --session)",
    ("GET", "/api/threads/{id}/checkpoints"): "operator tooling (cairn checkpoints)",
    ("GET", "/api/threads/{id}/bundle"): "operator tooling (cairn bundle)",
    ("GET", "/api/threads/{id}/replay"): "operator tooling (cairn replay)",
    ("GET", "/api/resumable"): "operator tooling (cairn resumable)",
    ("GET", "/api/workflows/{id}/graph"): "operator tooling (cairn graph)",
    ("GET", "/api/trace/{id}"): "operator tooling (cairn trace)",
    ("GET", "/api/trace"): "operator tooling (cairn trace, --chain --states)",
    ("GET", "/api/queues"): "operator tooling (cairn queue list)",
    ("GET", "/api/checkpoints"): "operator tooling (cairn checkpoints)",
    ("GET", "/api/checkpoints/{id}"): "operator tooling (cairn checkpoint show)",
    ("GET", "/api/versions"): "operator tooling (cairn versions)",
    ("POST", "/api/threads/{id}/checkpoints/periodic"): "operator tooling (cairn checkpoint every)",
    ("DELETE", "/api/threads/{id}/checkpoints/periodic"): "operator tooling (cairn checkpoint cancel)",
    ("POST", "/api/threads/{id}/checkpoints/at-node"): "operator tooling (cairn checkpoint at-node)",
}

#: Path prefixes of the web view's routes (pages, pictures and the view's own listings).
WEB_VIEW = ("/ui", "/api/view/", "/api/schedules")
WEB_VIEW_PATHS = (
    "/",
    "/api/threads/{id}/graph.svg",
    "/api/threads/{id}/timeline",
    "/api/trace/{id}/sequence.svg",
    "/api/workflows/{id}/graph.svg",
)


def is_web_view(path: str) -> bool:
    """A route of the web view (left out: it serves pages and pictures to a browser)."""
    return path in WEB_VIEW_PATHS or path.startswith(WEB_VIEW)
