"""Answering long-polls as soon as the server is told to stop.

Uvicorn (and gunicorn's uvicorn workers) run the lifespan's shutdown only after in-flight
requests finish, so without this a stop would wait out every long-poll's wait_seconds. The
server installs its SIGINT/SIGTERM handlers before the lifespan starts; we chain onto them:
first wake the waiters (they answer with an empty list), then let the server stop as it would.
No lease is lost: a pop whose statement already ran still returns its items.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def on_stop_signal(callback: Callable[[], None]) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread; nothing to chain onto
        return
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def chained(sig: int, frame: FrameType | None) -> None:
        # A handler runs between two bytecodes of the loop's own thread: schedule, do not touch.
        loop.call_soon_threadsafe(callback)
        handler: Any = previous[signal.Signals(sig)]
        if callable(handler):
            handler(sig, frame)

    installed = [sig for sig, handler in previous.items() if callable(handler)]
    for sig in installed:  # only where a server installed a handler: never replace the default
        signal.signal(sig, chained)
    try:
        yield
    finally:
        for sig in installed:
            signal.signal(sig, previous[sig])
