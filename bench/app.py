"""The service as benchmarked, plus what only the benchmark needs.

- POST /bench/noop parses the same body as POST /push and answers the same shape without
  touching the database: the baseline for the single-push ratio. It is served as POST /push is
  (by the front door, simplequeue.api.hot), so the ratio is the database's and the service's share.
- The store is wrapped so that every call is counted (GET /bench/counters): each call is one
  statement on the hot paths, which is how the idle long-poll load is measured on SQLite.
"""

from __future__ import annotations

from collections import Counter
from typing import Any
from uuid import uuid4

from fastapi import Response, status
from simplequeue.api.app import QueueApi
from simplequeue.api.auth import Action, Caller, Grant
from simplequeue.api.dependencies import ServiceDep
from simplequeue.api.hot import hot
from simplequeue.api.items.schemas import PushRequest, PushResponse
from simplequeue.api.responses import serialized
from simplequeue.domain import NewItem, encode_payload, system_clock
from simplequeue.main import create_app, store_for
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store


class CountedStore:
    def __init__(self, store: Store) -> None:
        self._store = store
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if not callable(attribute) or name.startswith("_"):
            return attribute

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return await attribute(*args, **kwargs)

        return counted


def create() -> QueueApi:
    settings = Settings()
    counted = CountedStore(store_for(settings))
    app = create_app(settings, store=counted)  # type: ignore[arg-type]

    def pushed(who: Grant, body: PushRequest) -> Response:
        who.require(Action.PUSH, body.queue)
        item = NewItem(
            id=body.id or uuid4(),
            queue=body.queue,
            payload_json=encode_payload(body.payload, settings.max_payload_bytes),
            created_at=body.created_at or system_clock(),
        )
        answer = PushResponse.model_construct(
            id=item.id, queue=item.queue, created_at=item.created_at, created=True
        )
        return serialized(answer, status.HTTP_201_CREATED)

    @app.post(
        "/bench/noop", status_code=status.HTTP_201_CREATED, include_in_schema=False, operation_id="benchNoop"
    )
    @hot  # served as push is, by the front door: the body parsed, the service looked up, the caller
    async def noop(body: PushRequest, sq: ServiceDep, who: Caller) -> Response:
        return pushed(who, body)

    @app.get("/bench/counters", include_in_schema=False)
    async def counters() -> dict[str, int]:
        return dict(counted.calls)

    return app
