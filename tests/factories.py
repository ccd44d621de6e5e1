"""Items for tests to push."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

from simplequeue.domain import NewItem


def new_item(
    queue: str,
    payload: Any = None,
    *,
    created_at: datetime | None = None,
    id: UUID | None = None,
    priority: int = 0,
    group: str | None = None,
    dedup_key: str | None = None,
    delay_seconds: float = 0.0,
    not_before: datetime | None = None,
    id_given: bool = False,
    fairness_key: str | None = None,
) -> NewItem:
    return NewItem(
        id=id or uuid4(),
        queue=queue,
        payload_json=json.dumps(payload),
        created_at=created_at or datetime.now(UTC),
        priority=priority,
        group=group,
        dedup_key=dedup_key,
        delay_seconds=delay_seconds,
        not_before=not_before,
        id_given=id_given,
        fairness_key=fairness_key,
    )


def given(queue: str, payload: Any = None, *, id: UUID | None = None, **fields: Any) -> NewItem:
    """An item whose id its producer chose, as every push through the API that carries an id."""
    return new_item(queue, payload, id=id or uuid4(), id_given=True, **fields)
