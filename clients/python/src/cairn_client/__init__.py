"""A client for the HTTP endpoint of a Cairn engine (`cairn serve`).

>>> from cairn_client import Client                                   # doctest: +SKIP
>>> client = Client("http://127.0.0.1:8700", token_file="cairn-demo.db.token")
>>> client.start("research-agent", {"question": "What is a lease?"}, wait_ms=30000).output
"""

from .aio import AsyncClient
from .client import Client
from .errors import (
    BadRequest, CairnError, Conflict, Forbidden, MisdirectedRequest, NotFound, ServerError,
    TooManyRequests, TransportError, Unauthorized, UnexpectedAnswer, UpdatePending,
)
from .models import (
    BatchAnswer, Emitted, EventThread, Budgets, Controlled, Event, EventsPage, ForkOptions, PromiseCompleted, Published,
    PromiseRow, PublishedValue, Pruned, SignalStart, Started, StartOptions, StreamItem, ThreadDetails,
    ThreadPromises, ThreadResult, ThreadRow, ThreadsPage, Updated, UpdateStart,
)

__all__ = [
    "AsyncClient", "Client", "BadRequest", "CairnError", "Conflict", "Forbidden",
    "MisdirectedRequest", "NotFound", "ServerError", "TransportError", "Unauthorized",
    "UnexpectedAnswer", "Budgets", "Controlled", "Event", "EventsPage", "ForkOptions", "Pruned",
    "SignalStart", "Started", "StartOptions", "ThreadDetails", "ThreadResult", "ThreadRow",
    "ThreadsPage", "UpdatePending", "PromiseCompleted", "Published", "PublishedValue",
    "StreamItem", "Updated", "UpdateStart", "PromiseRow", "ThreadPromises", "TooManyRequests",
    "BatchAnswer", "Emitted", "EventThread",
]
