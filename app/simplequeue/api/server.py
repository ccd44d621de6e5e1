"""Uvicorn's HTTP protocol with a deadline for a request's headers; uvicorn's server, which says
where the service's pages are once it listens.

Uvicorn bounds only the idle time between keep-alive requests. A client that connects and sends
nothing, or sends its headers a byte at a time, holds a connection and a file descriptor for as
long as it likes; enough of them exhaust the server (slowloris). Here every request's headers
must be complete within `header_timeout_seconds` of its first byte (or of the connection, for
its first request); past that the client gets a 408 and the connection is closed. The body's
deadline is kept by simplequeue.api.front, which can still answer through the app.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
import sys
from functools import cache
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE
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


log = logging.getLogger("simplequeue")


def where_the_pages_are(host: str, port: int, public_url: str | None = None) -> str:
    """The start-up line naming the dashboard's and the docs' URLs, for the address and port served
    (or SIMPLEQUEUE_PUBLIC_URL, the address callers reach the service at, when set)."""
    if public_url:
        base, elsewhere = public_url.rstrip("/"), ""
    else:
        local = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host)
        shown = local or host
        base = f"http://[{shown}]:{port}" if _is_ipv6(shown) else f"http://{shown}:{port}"
        everywhere = f" (bound to {host or '0.0.0.0'}, every address here: from elsewhere, use this host's)"
        elsewhere = everywhere if local else ""
    return f"the dashboard: {base}/ui/; the API's docs: {base}/docs and {base}/redoc{elsewhere}"


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False


class PagesServer(uvicorn.Server):
    """uvicorn's server, which once it listens (its port known, if the system chose it) logs
    where the dashboard and the docs are."""

    def __init__(self, config: uvicorn.Config, public_url: str | None) -> None:
        super().__init__(config)
        self.public_url = public_url

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.servers:
            [port, *_] = [s.getsockname()[1] for server in self.servers for s in server.sockets]
            log.info(where_the_pages_are(self.config.host, port, self.public_url))


def serve_one(config: uvicorn.Config, public_url: str | None) -> None:
    """Serve in this process, as uvicorn.run does for one worker (a start that failed exits 3),
    with the server that says where the pages are."""
    server = PagesServer(config, public_url)
    server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)
