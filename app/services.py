"""What the routes work with: built once per process by the app's lifespan."""

from __future__ import annotations

from dataclasses import dataclass

from app.domain import Clock
from app.pushing import PushCoalescer
from app.settings import Settings
from app.store import Store
from app.waiting import Waiting


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    clock: Clock
    store: Store
    waiting: Waiting
    pusher: PushCoalescer
