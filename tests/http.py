"""The HTTP API under test: in-process clients of the app, and the error envelope's check."""

from __future__ import annotations

from collections.abc import AsyncIterator
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
