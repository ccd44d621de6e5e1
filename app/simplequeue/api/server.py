"""Uvicorn's HTTP protocol with a deadline for a request's headers.

Uvicorn bounds only the idle time between keep-alive requests. A client that connects and sends
nothing, or sends its headers a byte at a time, holds a connection and a file descriptor for as
long as it likes; enough of them exhaust the server (slowloris). Here every request's headers
must be complete within `header_timeout_seconds` of its first byte (or of the connection, for
its first request); past that the client gets a 408 and the connection is closed. The body's
deadline is kept by simplequeue.api.front, which can still answer through the app.
"""

from __future__ import annotations

import asyncio
import json
from functools import cache
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from simplequeue.settings import Settings


@cache
def header_timeout_seconds() -> float:
    # Read once per process: uvicorn builds the protocol itself (in each worker process), from
    # the same environment that `simplequeue serve` was started with.
    return Settings().header_timeout_seconds


def timeout_response(seconds: float) -> bytes:
    body = json.dumps(
        {
            "error": "RequestTimeout",
            "detail": f"the request headers did not arrive within {seconds:g} seconds",
        }
    ).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class HeaderDeadlineProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._header_deadline is None:
            seconds = header_timeout_seconds()
            self._header_deadline = self.loop.call_later(seconds, self._headers_too_slow, seconds)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self, seconds: float) -> None:
        self._header_deadline = None
        if self.transport.is_closing():
            return
        # A 408 only where no earlier (pipelined) response is still being written on this connection.
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(timeout_response(seconds))
        self.transport.close()
