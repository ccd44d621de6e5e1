"""The HTTP API under test: in-process clients of the app, and the error envelope's check; and
small HTTP servers on loopback for what the service calls out to."""

from __future__ import annotations

import http.server
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from asgi_lifespan import LifespanManager
from simplequeue.main import create_app
from simplequeue.settings import Settings

from tests.engines import FakeClock

Client = httpx.AsyncClient


async def app_client(settings: Settings, clock: FakeClock | None) -> AsyncIterator[Client]:
    app = create_app(settings, clock=clock)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sq") as client:
            yield client


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["error"] == code, body
    assert isinstance(body["detail"], str)
    assert body["detail"]
    return body


@contextmanager
def on_loopback(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` served by a threaded http.server on a free loopback port, until the block ends;
    its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
