"""The FastAPI application around a QueueService: routes, the error envelope, the front door."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp

from simplequeue.api import aws
from simplequeue.api.access_log import Observer
from simplequeue.api.auth import Keyring
from simplequeue.api.aws import aws_routes, scheduler_routes
from simplequeue.api.errors import install_error_handlers
from simplequeue.api.front import DoorRules, FrontDoor
from simplequeue.api.hot import HotRoutes
from simplequeue.api.page_headers import WithPageHeaders
from simplequeue.api.routes import router
from simplequeue.api.spec_pages import mount_spec_pages

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]
UI = Path(__file__).parent / "ui"

TAGS = [
    {"name": "items", "description": "Push, pop, complete, fail and look at items."},
    {"name": "queues", "description": "Queues: their settings and counts, dead items, history."},
    {"name": "health", "description": "Liveness and readiness."},
]


def declare_security(app: FastAPI) -> None:
    """The spec's root says: a Bearer API key, or nothing when the service runs without keys
    (`{}`). Health checks say they need nothing. At the root rather than per operation, so a
    generated client may call with or without a key."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = generate()
        spec.setdefault("components", {}).setdefault("securitySchemes", {})["apiKey"] = {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key from SIMPLEQUEUE_API_KEYS, as `Authorization: Bearer <key>`. "
            "Required on every operation but the health checks when the service has keys; its role "
            "(producer, consumer, admin) and queue patterns decide what it may do (else 403).",
        }
        spec["security"] = [{"apiKey": []}, {}]
        for path in ("/healthz", "/readyz"):
            for operation in spec["paths"].get(path, {}).values():
                operation["security"] = []
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


async def to_the_dashboard(request: Request) -> RedirectResponse:
    return RedirectResponse(f"{request.scope.get('root_path', '')}/ui/")


class QueueApi(FastAPI):
    """FastAPI, with the front door (simplequeue.api.front) as the one layer every request meets
    first: it serves the hot routes itself, and hands the rest to FastAPI's own stack."""

    door: DoorRules
    serve_hot: bool = True
    """Whether the front door serves the routes declared `@hot` (simplequeue.api.hot) itself, the
    API's own and any that whoever builds the app adds; FastAPI serves them when not."""

    def build_middleware_stack(self) -> ASGIApp:
        # Built on the first request (or the lifespan), when every route and handler is in place:
        # the API's routes (FastAPI keeps an included router whole) and those added to the app.
        routes = [*router.routes, *(r for r in self.router.routes if isinstance(r, APIRoute))]
        return FrontDoor(
            super().build_middleware_stack(),
            self.door,
            hot=HotRoutes(routes if self.serve_hot else ()),
            routes=router.routes,
            exception_handlers=self.exception_handlers,
        )


def build_api(
    *,
    title: str,
    version: str,
    lifespan: Lifespan,
    max_body_bytes: int,
    body_timeout_seconds: float,
    keyring: Keyring | None = None,
    access_log: bool = True,
    observers: Sequence[Observer] = (),
) -> QueueApi:
    """The lifespan must set `app.state.service` to the QueueService that the routes call. Without
    a keyring (or with an empty one) every caller may do everything."""
    app = QueueApi(
        title=title,
        version=version,
        summary="A queue over HTTP, backed by SQLite, PostgreSQL or SQL Server.",
        lifespan=lifespan,
        license_info={"name": "MIT", "identifier": "MIT"},
        servers=[{"url": "http://127.0.0.1:8000", "description": "simplequeue serve's default"}],
        openapi_tags=TAGS,
        # Served by simplequeue.api.spec_pages from files of the package, not FastAPI's from a CDN.
        docs_url=None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )
    app.include_router(router)
    mount_spec_pages(app)
    # The dashboard: static files of the package, calling the API above from the browser (the
    # data needs an admin key when the service has keys; the files themselves hold none).
    app.mount("/ui", WithPageHeaders(StaticFiles(directory=UI, html=True)), name="ui")
    # The Amazon SQS and SNS doors (simplequeue.api.aws): POST / and POST /{account_id}/{queue},
    # and a GET of either that names an Action, outside the spec. Before the redirect below, which
    # takes every other GET /.
    app.router.routes.extend(aws_routes())
    # EventBridge Scheduler's door (simplequeue.api.scheduler): /schedules and /schedules/{Name}
    # signed for `scheduler`, so ahead of the REST API's routes of the same paths.
    app.router.routes[:0] = scheduler_routes()
    # A person who opens the service's address finds the dashboard (POST / is the SQS door's).
    app.add_route("/", to_the_dashboard, methods=["GET", "HEAD"], include_in_schema=False)
    declare_security(app)
    install_error_handlers(app, router.routes)
    app.door = DoorRules(
        keyring or Keyring(), max_body_bytes, body_timeout_seconds, access_log, observers, aws.refusal
    )
    return app


__all__ = ["Lifespan", "QueueApi", "build_api"]
