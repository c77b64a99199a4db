"""HTTP over the standard library (`urllib`): a JSON request and its answer, and the lines of
a Server-Sent Events stream. Every failure is a typed `CairnError`."""

from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, Iterator, Optional, Tuple

from .errors import CairnError, TransportError, UnexpectedAnswer, refusal

#: The environment variables read when no argument is given.
URL_ENV, TOKEN_ENV = "CAIRN_URL", "CAIRN_TOKEN"


@dataclass
class Endpoint:
    """Where the endpoint is and the token its controls need."""

    base: str
    token: Optional[str]
    timeout: float

    @classmethod
    def of(
        cls,
        url: Optional[str],
        token: Optional[str],
        token_file: Optional[str],
        timeout: float,
    ) -> "Endpoint":
        base = url or os.environ.get(URL_ENV)
        if not base:
            raise CairnError(f"no endpoint address: pass url= or set {URL_ENV}")
        if token is None and token_file is not None:
            with open(token_file, encoding="utf-8") as f:
                token = f.read().strip()
        if token is None:
            token = os.environ.get(TOKEN_ENV)
        return cls(base.rstrip("/"), token, timeout)

    def _request(self, method: str, path: str, body: Optional[Dict[str, Any]], accept: str):
        headers = {"Accept": accept}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        elif method == "POST":
            data = b""
        return urllib.request.Request(self.base + path, data=data, headers=headers, method=method)

    def call(self, method: str, path: str, body: Optional[Dict[str, Any]], holds_ms: int = 0) -> Tuple[int, Any]:
        """The status and decoded JSON answer of one request (a refusal raised typed)."""
        request = self._request(method, path, body, "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout + holds_ms / 1000) as answer:
                status, raw = answer.status, answer.read()
        except urllib.error.HTTPError as e:
            raise refusal(e.code, e.read(), e.headers.get("Retry-After")) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            raise TransportError(f"{method} {self.base}{path}: {e}") from None
        try:
            return status, json.loads(raw) if raw else None
        except ValueError as e:
            raise UnexpectedAnswer(f"{method} {path} answered no JSON: {e}", status=status) from None

    def stream(self, path: str) -> Iterator[Tuple[str, str]]:
        """The `(event, data)` messages of a Server-Sent Events answer, until it ends."""
        for kind, data, _ in self.frames(path):
            yield kind, data

    def frames(self, path: str, last_event_id: Optional[int] = None
               ) -> Iterator[Tuple[str, str, Optional[str]]]:
        """The `(event, data, id)` messages of a Server-Sent Events answer, until it ends;
        `last_event_id` is sent as `Last-Event-ID` (where a reconnection resumes)."""
        request = self._request("GET", path, None, "text/event-stream")
        if last_event_id is not None:
            request.add_header("Last-Event-ID", str(last_event_id))
        try:
            answer = urllib.request.urlopen(request, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            raise refusal(e.code, e.read(), e.headers.get("Retry-After")) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            raise TransportError(f"GET {self.base}{path}: {e}") from None
        with answer:
            try:
                yield from sse_frames(answer)
            except (OSError, socket.timeout, http.client.HTTPException) as e:
                raise TransportError(f"the event stream broke: {e}") from None


def sse_messages(lines) -> Iterator[Tuple[str, str]]:
    """The `(event, data)` messages of an SSE byte stream (as `sse_frames`, without the id)."""
    for kind, data, _ in sse_frames(lines):
        yield kind, data


def sse_frames(lines) -> Iterator[Tuple[str, str, Optional[str]]]:
    """The messages of an SSE byte stream read line by line (`event:`, `data:` and `id:`
    fields; a blank line ends a message; comments are skipped)."""
    kind, data, ident = "message", [], None
    for raw in lines:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield kind, "\n".join(data), ident
            kind, data, ident = "message", [], None
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                kind = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                ident = value
