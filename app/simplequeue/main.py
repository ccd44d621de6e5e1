"""The application factory: `create_app(settings)` wires settings, store and routes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from fastapi import FastAPI

from simplequeue import __version__
from simplequeue.api.errors import install_error_handlers
from simplequeue.api.guard import RequestGuard
from simplequeue.api.routes import router
from simplequeue.domain import Clock, system_clock
from simplequeue.service.pushing import PushCoalescer
from simplequeue.service.queues import Services
from simplequeue.service.upkeep import sweep_forever
from simplequeue.service.waiting import Waiting
from simplequeue.settings import Settings
from simplequeue.shutdown import on_stop_signal
from simplequeue.store.factory import create_store
from simplequeue.store.protocol import Store


def create_app(
    settings: Settings | None = None, *, clock: Clock | None = None, store: Store | None = None
) -> FastAPI:
    """Build the service. `clock` replaces the service's UTC clock (and the database clock,
    where the store supports it) so that tests can control time. `store` replaces the one the
    settings name (the lifespan still opens and closes it)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        nonlocal store
        store = store or create_store(settings, clock)
        sweeper: asyncio.Task[None] | None = None
        await store.open()
        waiting = Waiting(store, recheck_seconds=settings.wait_recheck_seconds)
        try:
            if settings.migrate_on_start:
                await store.migrate()
            await store.subscribe(waiting.notify)
            app.state.services = Services(
                settings, clock or system_clock, store, waiting, PushCoalescer(store)
            )
            if settings.sweep:
                sweeper = asyncio.create_task(
                    sweep_forever(
                        store,
                        reap_every=settings.reap_interval_seconds,
                        purge_every=settings.purge_interval_seconds,
                    ),
                    name="simplequeue-sweep",
                )
            with on_stop_signal(waiting.close):
                yield
        finally:
            waiting.close()
            if sweeper is not None:
                sweeper.cancel()
                with suppress(asyncio.CancelledError):
                    await sweeper
            await store.close()

    app = FastAPI(
        title="simplequeue",
        version=__version__,
        summary="A queue over HTTP, backed by SQLite, PostgreSQL or SQL Server.",
        lifespan=lifespan,
    )
    app.include_router(router)
    install_error_handlers(app, router.routes)
    app.add_middleware(
        RequestGuard,
        max_body_bytes=settings.max_request_bytes,
        body_timeout_seconds=settings.body_timeout_seconds,
    )
    return app


def app_from_env() -> FastAPI:
    """Factory for `uvicorn --factory` and multi-worker serving."""
    return create_app(Settings())
