"""Running the app under uvicorn, with a shutdown that does not wait out long-polls."""

from __future__ import annotations

import asyncio
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.supervisors import Multiprocess

from app.settings import Settings


class DrainingServer(uvicorn.Server):
    """On SIGINT/SIGTERM, answer waiting pops at once (empty), then stop as uvicorn does.

    Uvicorn runs the lifespan's shutdown only after in-flight requests finish, so without this a
    stop would wait for every long-poll's full wait_seconds. No lease is lost: a pop whose
    statement already ran still returns its items.
    """

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        app = _fastapi_app(self.config.loaded_app) if self.config.loaded else None
        waiting = getattr(app.state, "waiting", None) if app else None
        if waiting is not None:
            # Signal handlers run between bytecodes of the loop's thread: schedule, do not touch.
            asyncio.get_event_loop().call_soon_threadsafe(waiting.close)
        super().handle_exit(sig, frame)


def _fastapi_app(app: Any) -> FastAPI | None:
    """uvicorn wraps the app in its own middleware; find ours inside."""
    while app is not None and not isinstance(app, FastAPI):
        app = getattr(app, "app", None)
    return app


def run(settings: Settings, *, host: str, port: int, workers: int) -> None:
    config = uvicorn.Config(
        "app.main:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=settings.log_level,
    )
    server = DrainingServer(config)
    if workers > 1:
        sock = config.bind_socket()
        Multiprocess(config, target=server.run, sockets=[sock]).run()
    else:
        server.run()
