"""The access log: one line per request, after its answer, naming its request id, method, path
(never the query string: it may hold a lease token), route, status and duration. Outermost, so it
sees what the guard answers itself (413, 408, 500) too; observers (metrics) hear of each request."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("simplequeue.access")

UNMATCHED = "<unmatched>"


@dataclass(frozen=True, slots=True)
class Served:
    request_id: str
    method: str
    path: str
    route: str  # the template (/items/{item_id}), never the path: ids would make endless labels
    status: int
    seconds: float


Observer = Callable[[Served], None]


class AccessLog:
    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: Sequence[BaseRoute],
        enabled: bool = True,
        observers: Sequence[Observer] = (),
    ) -> None:
        self.app = app
        self.routes = routes
        self.enabled = enabled
        self.observers = list(observers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not (self.enabled or self.observers):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client sees if the app fails before answering
        request_id = "-"

        async def noting(message: Message) -> None:
            nonlocal status, request_id
            if message["type"] == "http.response.start":
                status = message["status"]
                for name, value in message.get("headers", ()):
                    if name == b"x-request-id":
                        request_id = value.decode("latin-1")
            await send(message)

        try:
            await self.app(scope, receive, noting)
        finally:
            served = Served(
                request_id,
                scope["method"],
                scope["path"],
                self._template(scope),
                status,
                time.perf_counter() - started,
            )
            for observe in self.observers:
                observe(served)
            if self.enabled:
                _log(served)

    def _template(self, scope: Scope) -> str:
        route = scope.get("route")
        if route is None:  # answered before routing (401, 413, 408): find what it would have hit
            route = next((r for r in self.routes if r.matches(scope)[0] is Match.FULL), None)
        template = getattr(route, "path_format", None)
        return template if isinstance(template, str) else UNMATCHED


def _log(served: Served) -> None:
    duration_ms = round(served.seconds * 1000, 2)
    log.info(
        "request %s: %s %s %d in %.2f ms",
        served.request_id,
        served.method,
        served.path,
        served.status,
        duration_ms,
        extra={
            "request_id": served.request_id,
            "method": served.method,
            "path": served.path,
            "route": served.route,
            "status": served.status,
            "duration_ms": duration_ms,
        },
    )
