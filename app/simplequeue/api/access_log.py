"""The access log: one line per request, after its answer, naming its request id, method, path
(never the query string: it may hold a lease token), route, status and duration. Written by the
front door (simplequeue.api.front), so it sees what the door answers itself (413, 408, 401, 500)
too; observers (metrics) hear of each request."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from starlette.routing import BaseRoute, Match
from starlette.types import Scope

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


def template_of(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The route template the request was served by (or would have been, when it was answered
    before routing: 401, 413, 408)."""
    route = scope.get("route")
    if route is None:
        route = next((r for r in routes if r.matches(scope)[0] is Match.FULL), None)
    template = getattr(route, "path_format", None)
    return template if isinstance(template, str) else UNMATCHED


def log_served(served: Served) -> None:
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
