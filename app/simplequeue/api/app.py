"""The FastAPI application around a QueueService: routes, the error envelope, the request guard."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI

from simplequeue.api.errors import install_error_handlers
from simplequeue.api.guard import RequestGuard
from simplequeue.api.routes import router

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]

TAGS = [
    {"name": "items", "description": "Push, pop, complete, fail and look at items."},
    {"name": "queues", "description": "Queues: their settings and counts, dead items, history."},
    {"name": "health", "description": "Liveness and readiness."},
]


def declare_no_auth(app: FastAPI) -> None:
    """The spec says at its root that no operation needs credentials (`security: []`): the service
    has no authentication; whoever can reach it can use it."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        spec = generate()
        spec.setdefault("security", [])
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


def build_api(
    *, title: str, version: str, lifespan: Lifespan, max_body_bytes: int, body_timeout_seconds: float
) -> FastAPI:
    """The lifespan must set `app.state.service` to the QueueService that the routes call."""
    app = FastAPI(
        title=title,
        version=version,
        summary="A queue over HTTP, backed by SQLite, PostgreSQL or SQL Server.",
        lifespan=lifespan,
        license_info={"name": "MIT", "identifier": "MIT"},
        servers=[{"url": "http://127.0.0.1:8000", "description": "simplequeue serve's default"}],
        openapi_tags=TAGS,
    )
    app.include_router(router)
    declare_no_auth(app)
    install_error_handlers(app, router.routes)
    app.add_middleware(RequestGuard, max_body_bytes=max_body_bytes, body_timeout_seconds=body_timeout_seconds)
    return app


__all__ = ["Lifespan", "build_api"]
