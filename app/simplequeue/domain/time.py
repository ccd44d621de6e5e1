"""The service's clock, injected so that time-dependent tests are deterministic."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""Returns an aware UTC datetime."""


def system_clock() -> datetime:
    return datetime.now(UTC)
