"""Each call of the endpoint as data: its route, path, query, body and how its answer reads.
The sync and asyncio clients run the same calls, so a route is one function here and one line
in each client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Mapping, Optional
from urllib.parse import quote, urlencode

from . import models, routes
from .models import ForkOptions, SignalStart, StartOptions, UpdateStart

#: A long poll waits at most this long on the server (the endpoint's `RESULT_WAIT_MS_MAX`).
WAIT_MS_MAX = 30_000
#: An update waits at most this long for its thread's step boundary (the endpoint's bound).
UPDATE_WAIT_MS_MAX = 600_000


@dataclass
class Call:
    """One request: method, path with its query string, JSON body, and the answer's reader."""

    route: routes.Route
    path: str
    body: Optional[Dict[str, Any]]
    read: Callable[[Any], Any]
    # How long the server may hold the request (a long poll), beyond the client's timeout.
    holds_ms: int = 0

    @property
    def method(self) -> str:
        return self.route.method


def _path(route: routes.Route, query: Mapping[str, Any], **segments: str) -> str:
    path = route.path
    for name, value in segments.items():
        path = path.replace("{" + name + "}", quote(value, safe=""))
    given = {k: _text(v) for k, v in query.items() if v is not None}
    unknown = set(given) - set(route.query)
    if unknown:
        raise ValueError(f"{route.path} takes no {sorted(unknown)}")
    return path + ("?" + urlencode(given) if given else "")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _wait(wait_ms: Optional[int]) -> Optional[int]:
    return None if wait_ms is None else max(0, min(int(wait_ms), WAIT_MS_MAX))


def start(
    workflow: str, input: Any, options: Optional[StartOptions] = None, wait_ms: Optional[int] = None
) -> Call:
    body = {"input": input, **models.body(options or StartOptions())}
    path = _path(routes.START, {"wait_ms": _wait(wait_ms)}, id=workflow)
    return Call(routes.START, path, body, lambda a: models.read(models.Started, a, "a start"),
                holds_ms=_wait(wait_ms) or 0)


def result(thread: str, wait_ms: Optional[int] = None) -> Call:
    path = _path(routes.RESULT, {"wait_ms": _wait(wait_ms)}, id=thread)
    return Call(routes.RESULT, path, None,
                lambda a: models.read(models.ThreadResult, a, "a result"),
                holds_ms=_wait(wait_ms) or 0)


def thread(thread: str, redact: bool = False) -> Call:
    path = _path(routes.THREAD, {"redact": redact or None}, id=thread)
    return Call(routes.THREAD, path, None,
                lambda a: models.read(models.ThreadDetails, a, "a thread"))


def threads(
    status: Optional[str] = None,
    workflow: Optional[str] = None,
    labels: Optional[Mapping[str, str]] = None,
    limit: Optional[int] = None,
    after: Optional[str] = None,
    offset: Optional[int] = None,
) -> Call:
    query = {"status": status, "workflow": workflow, "label": labels or None, "limit": limit,
             "after": after, "offset": offset}
    return Call(routes.THREADS, _path(routes.THREADS, query), None, models.threads_page)


def events(
    thread: str,
    since: int = 0,
    kinds: Optional[Iterable[str]] = None,
    limit: Optional[int] = None,
    follow: bool = False,
) -> Call:
    query = {"since": since, "kind": list(kinds) if kinds else None, "limit": limit,
             "follow": follow or None}
    return Call(routes.EVENTS, _path(routes.EVENTS, query, id=thread), None, models.events_page)


def control(thread: str, name: str, body: Optional[Dict[str, Any]] = None) -> Call:
    if name not in routes.CONTROL_BODIES:
        raise ValueError(f"no control {name!r}")
    path = _path(routes.CONTROL, {}, id=thread, control=name)
    return Call(routes.CONTROL, path, body,
                lambda a: models.read(models.Controlled, a, f"the answer of {name}"))


def signal(
    thread: str,
    name: str,
    value: Any,
    dedup_key: Optional[str] = None,
    start: Optional[SignalStart] = None,
) -> Call:
    body: Dict[str, Any] = {"name": name, "value": value}
    if dedup_key is not None:
        body["dedup_key"] = dedup_key
    if start is not None:
        body["start"] = models.body(start)
    return control(thread, "signal", body)


def cancel(thread: str, reason: Optional[str] = None) -> Call:
    return control(thread, "cancel", {"reason": reason} if reason is not None else {})


def send_input(thread: str, value: Any) -> Call:
    return control(thread, "input", {"value": value})


def fork(thread: str, options: ForkOptions) -> Call:
    return control(thread, "fork", models.body(options))


def repin(thread: str, build: Optional[str]) -> Call:
    # The field is required: `null` unpins.
    return control(thread, "repin", {"build": build})


def reset(thread: str, to: str, key: Optional[str] = None) -> Call:
    body: Dict[str, Any] = {"to": to}
    if key is not None:
        body["key"] = key
    return control(thread, "reset", body)


def delete(thread: str, force: bool = False) -> Call:
    path = _path(routes.DELETE, {"force": "true" if force else None}, id=thread)
    return Call(routes.DELETE, path, None, lambda a: a)


def health(watchdog_ms: Optional[int] = None) -> Call:
    return Call(routes.HEALTH, _path(routes.HEALTH, {"watchdog_ms": watchdog_ms}), None, lambda a: a)




def update(
    thread: str,
    name: str,
    args: Any = None,
    id: Optional[str] = None,
    start: Optional[UpdateStart] = None,
    wait_ms: Optional[int] = None,
) -> Call:
    body: Dict[str, Any] = {"args": args}
    if id is not None:
        body["id"] = id
    if start is not None:
        body["start"] = models.body(start)
    wait = None if wait_ms is None else max(0, min(int(wait_ms), UPDATE_WAIT_MS_MAX))
    path = _path(routes.UPDATE, {"wait_ms": wait}, id=thread, name=name)
    # Without `wait_ms` the endpoint waits 30 s for a step boundary.
    return Call(routes.UPDATE, path, body, lambda a: models.read(models.Updated, a, "an update"),
                holds_ms=WAIT_MS_MAX if wait is None else wait)


def published(thread: str) -> Call:
    return Call(routes.PUBLISHED, _path(routes.PUBLISHED, {}, id=thread), None,
                lambda a: models.read(models.Published, a, "the published events"))


def published_key(thread: str, key: str, wait_ms: Optional[int] = None) -> Call:
    path = _path(routes.PUBLISHED_KEY, {"wait_ms": _wait(wait_ms)}, id=thread, key=key)
    return Call(routes.PUBLISHED_KEY, path, None,
                lambda a: models.read(models.PublishedValue, a, "a published event"),
                holds_ms=_wait(wait_ms) or 0)


def promises(thread: str) -> Call:
    return Call(routes.PROMISES, _path(routes.PROMISES, {}, id=thread), None,
                models.thread_promises)


_UNSET = object()


def complete_promise(promise: str, value: Any = _UNSET, error: Optional[str] = None) -> Call:
    if (value is _UNSET) == (error is None):
        raise ValueError("complete a promise with a value or an error, not both")
    body = {"error": error} if error is not None else {"value": value}
    path = _path(routes.PROMISE, {}, id=promise)
    return Call(routes.PROMISE, path, body,
                lambda a: models.read(models.PromiseCompleted, a, "a promise's completion"))


def emit(name: str, id: str, payload: Any = None) -> Call:
    body = {"name": name, "id": id, "payload": payload}
    return Call(routes.EMIT, _path(routes.EMIT, {}), body, models.emitted)


def batch(op: str, filter: Optional[Mapping[str, Any]] = None, *, dry_run: bool = False,
          **options: Any) -> Call:
    unknown = set(filter or {}) - set(routes.BATCH_FILTER)
    if unknown:
        raise ValueError(f"a batch filter takes no {sorted(unknown)}")
    unknown = set(options) - set(routes.BATCH.body_args)
    if unknown:
        raise ValueError(f"a batch takes no {sorted(unknown)}")
    body = {"op": op, "filter": dict(filter or {}), "dry_run": dry_run}
    body.update({k: v for k, v in options.items() if v is not None})
    return Call(routes.BATCH, _path(routes.BATCH, {}), body, models.batch_answer)


def batch_info(batch_id: str) -> Call:
    return Call(routes.BATCH_SHOW, _path(routes.BATCH_SHOW, {}, id=batch_id), None,
                models.batch_answer)


def stream_path(thread: str, since: int = 0, redact: bool = False) -> str:
    return _path(routes.STREAM, {"since": since or None, "redact": redact or None}, id=thread)
