"""Typed errors: every refusal of the endpoint (`{"error", "field"}`, a 4xx or 5xx) is raised
as a subclass of `CairnError` carrying the endpoint's message, the field it names and the HTTP
status; a connection that fails is a `TransportError`."""

from __future__ import annotations

import json
from typing import Dict, Optional, Type


class CairnError(Exception):
    """An error from the endpoint or on the way to it."""

    def __init__(self, message: str, *, status: Optional[int] = None, field: Optional[str] = None):
        super().__init__(message)
        #: What is wrong, as the endpoint said it.
        self.message = message
        #: The HTTP status (None when no answer came).
        self.status = status
        #: The query parameter, path segment or body field the refusal is about, if one.
        self.field = field

    def __str__(self) -> str:
        where = f" [{self.field}]" if self.field else ""
        status = f"{self.status}: " if self.status is not None else ""
        return f"{status}{self.message}{where}"


class TransportError(CairnError):
    """No answer: the endpoint is unreachable, or the connection broke."""


class BadRequest(CairnError):
    """400: a bad query parameter or body field (`field` names it)."""


class Unauthorized(CairnError):
    """401: a control (or, with `--public`, any read) without the right token."""


class Forbidden(CairnError):
    """403: refused (for example a control from another site's `Origin`)."""


class NotFound(CairnError):
    """404: no such thread, workflow, queue or route."""


class Conflict(CairnError):
    """409: the thread's state does not allow it (deleting an unfinished thread)."""


class MisdirectedRequest(CairnError):
    """421: the `Host` is not the endpoint's address (or a name it allows)."""


class TooManyRequests(CairnError):
    """429: a start over the rate of a queue that drops such starts (`docs/queues.md`); the
    answer's `Retry-After` says when a start fits again (`retry_after_s`)."""

    def __init__(self, message: str, *, status: Optional[int] = None, field: Optional[str] = None,
                 retry_after_s: Optional[int] = None):
        super().__init__(message, status=status, field=field)
        #: The answer's `Retry-After`: seconds until a start fits again (None when absent).
        self.retry_after_s = retry_after_s


class ServerError(CairnError):
    """5xx: the endpoint failed."""


class UpdatePending(ServerError):
    """504: an update reached no step boundary of its thread within `wait_ms`. It may still be
    applied: send the same update id again to get its reply."""


class UnexpectedAnswer(CairnError):
    """An answer this client cannot read (not JSON, or missing a field its model needs)."""


_BY_STATUS: Dict[int, Type[CairnError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    421: MisdirectedRequest,
    429: TooManyRequests,
}


def refusal(status: int, body: bytes, retry_after: Optional[str] = None) -> CairnError:
    """The typed error for an answer of HTTP status `status` with body `body` (the endpoint's
    `{"error", "field"}`; another body is kept as the message) and header `Retry-After`
    `retry_after` (seconds; a 429 carries it)."""
    message, field = body.decode("utf-8", "replace").strip(), None
    try:
        parsed = json.loads(message)
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
            message, field = parsed["error"], parsed.get("field")
    except ValueError:
        pass
    if status == 504:
        return UpdatePending(message or "HTTP 504", status=status, field=field)
    if status >= 500:
        return ServerError(message, status=status, field=field)
    if status == 429:
        seconds = retry_after.strip() if retry_after else ""
        return TooManyRequests(message or "HTTP 429", status=status, field=field,
                               retry_after_s=int(seconds) if seconds.isdigit() else None)
    return _BY_STATUS.get(status, CairnError)(message or f"HTTP {status}", status=status, field=field)
