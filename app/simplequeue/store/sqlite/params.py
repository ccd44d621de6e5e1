"""Values as this dialect stores them: times as fixed-width UTC text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from simplequeue.domain import NewItem
from simplequeue.store import rows


def to_text(moment: datetime) -> str:
    """Fixed-width UTC text, so that SQLite's text comparison is time order.

    isoformat, not strftime: strftime's %Y does not pad years before 1000 ('315-…'), which
    broke both the order and the parsing of such a client-supplied created_at.
    """
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def add_seconds(moment: str, seconds: float) -> str:
    return to_text(rows.as_utc(moment) + timedelta(seconds=seconds))


def insert_params(item: NewItem, now: datetime) -> dict[str, Any]:
    visible_at = now + timedelta(seconds=item.delay_seconds)
    if item.not_before is not None:
        visible_at = max(visible_at, item.not_before)
    return {
        "id": str(item.id),
        "queue": item.queue,
        "payload": item.payload_json,
        "created_at": to_text(item.created_at),
        "visible_at": to_text(visible_at),
        "priority": item.priority,
        "group_key": item.group,
        "dedup_key": item.dedup_key,
        "attributes": item.attributes_json,
        "fairness_key": item.fairness_key,
    }
