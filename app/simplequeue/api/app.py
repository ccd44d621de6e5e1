"""The FastAPI application around a QueueService: routes, the error envelope, the request guard."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI

from simplequeue.api.errors import install_error_handlers
from simplequeue.api.guard import RequestGuard
from simplequeue.api.routes import router

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def build_api(
    *, title: str, version: str, lifespan: Lifespan, max_body_bytes: int, body_timeout_seconds: float
) -> FastAPI:
    """The lifespan must set `app.state.service` to the QueueService that the routes call."""
    app = FastAPI(
        title=title,
        version=version,
        summary="A queue over HTTP, backed by SQLite, PostgreSQL or SQL Server.",
        lifespan=lifespan,
    )
    app.include_router(router)
    install_error_handlers(app, router.routes)
    app.add_middleware(RequestGuard, max_body_bytes=max_body_bytes, body_timeout_seconds=body_timeout_seconds)
    return app


__all__ = ["Lifespan", "build_api"]
