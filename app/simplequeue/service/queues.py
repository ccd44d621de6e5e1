"""What the routes work with: built once per process by the app's lifespan."""

from __future__ import annotations

from dataclasses import dataclass

from simplequeue.domain import Clock
from simplequeue.service.pushing import PushCoalescer
from simplequeue.service.waiting import Waiting
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    clock: Clock
    store: Store
    waiting: Waiting
    pusher: PushCoalescer
