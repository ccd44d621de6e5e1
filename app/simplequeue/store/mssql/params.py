"""Values as this dialect binds them: str and int only, which pyodbc types without asking the server.

Times, floats and UUIDs go as text that the batch CASTs, optional values as '' for none, and a
batch of items as one JSON text that the batch reads with OPENJSON (see queries.sql for why).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from uuid import UUID

from simplequeue.domain import Completion, NewItem
from simplequeue.domain.rules import redrive_delay


def timestamp(moment: datetime) -> str:
    """Naive UTC ISO-8601, which CAST(... AS DATETIME2) reads the same under every language setting."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")


def optional(value: object | None) -> str:
    """An optional value as text: '' stands for none (see queries.sql)."""
    return "" if value is None else str(value)


def bound(value: object) -> str | int:
    """Any value of the topics' and schedules' statements (store/topics.py, store/schedules.py):
    ints and text as they are, flags as 0 or 1, times and UUIDs as text, None as ''; a list of
    rows (dicts) as the JSON text that a batch statement reads with OPENJSON, each value bound so."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | str):
        return value
    if isinstance(value, datetime):
        return timestamp(value)
    if isinstance(value, list):
        return json_text([{k: bound(v) for k, v in row.items()} for row in value])
    return optional(value)


def float_text(value: float) -> str:
    """A float as text that CAST(... AS FLOAT) reads back exactly (repr is the shortest round trip)."""
    return repr(float(value))


def optional_float(value: float | None) -> str:
    return "" if value is None else float_text(value)


def optional_time(moment: datetime | None) -> str:
    return "" if moment is None else timestamp(moment)


def split_seconds(delta: timedelta) -> tuple[int, int]:
    """Whole seconds and microseconds, added by two DATEADDs: one DATEADD(MICROSECOND, ...) would
    overflow its INT for delays past about 35.8 minutes."""
    return delta.days * 86400 + delta.seconds, delta.microseconds


def index_order(item_id: UUID) -> bytes:
    """The order in which SQL Server sorts UNIQUEIDENTIFIER, and so its index on sq_items.id: the last
    six bytes first, then the fourth group, both as written; then the third, second and first groups,
    each compared byte-reversed (little-endian)."""
    raw = item_id.bytes  # as written: groups of 4, 2, 2, 2 and 6 bytes
    return raw[10:16] + raw[8:10] + raw[6:8][::-1] + raw[4:6][::-1] + raw[0:4][::-1]


def json_text(value: object) -> str:
    """A JSON parameter: compact, and with text as it is (pyodbc binds str as NVARCHAR anyway)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def push_json(items: Sequence[NewItem]) -> str:
    """The call as dbo.sq_push_items reads it (store/mssql/procedures.sql): every
    item, each with its place in `items` as n, which orders the inserts and the answers (the
    procedure reads the items into tables keyed like the indexes it locks, so the array's own order
    does not matter). The payload is a JSON string holding the payload's text, so that the text
    arrives exactly (an object would come back re-serialised). The delay goes as whole seconds and
    microseconds, which the server adds to its clock. remember (0 or 1, read as BIT) says whether
    the id is the item's idempotency key (NewItem.remembers_id), to be claimed in sq_client_ids.
    attributes, only on an item that has some, is their JSON text, inserted as it is (v8); the
    procedure reads NULL where it is missing, as it does in the items applications push."""
    return json_text([_push_entry(n, item) for n, item in enumerate(items)])


def _push_entry(n: int, item: NewItem) -> dict[str, object]:
    delay_seconds, delay_micros = split_seconds(timedelta(seconds=item.delay_seconds))
    entry: dict[str, object] = {
        "n": n,
        "id": str(item.id),
        "queue": item.queue,
        "payload": item.payload_json,
        "created_at": timestamp(item.created_at),
        "priority": item.priority,
        "group_key": item.group,
        "dedup_key": item.dedup_key,
        "fairness_key": item.fairness_key,
        "delay_seconds": delay_seconds,
        "delay_micros": delay_micros,
        "not_before": timestamp(item.not_before) if item.not_before else None,
        "remember": int(item.remembers_id),
    }
    if item.attributes_json is not None:
        entry["attributes"] = item.attributes_json
    return entry


def complete_json(items: Sequence[Completion]) -> str:
    """The batch as complete_batch's OPENJSON reads it; null where no token was given. In the id
    index's order: two batches that share items lock them in the same order and so wait for each
    other instead of deadlocking."""
    ordered = sorted(items, key=lambda item: index_order(item.id))
    return json_text(
        [
            {"id": str(item.id), "token": str(item.lease_token) if item.lease_token else None}
            for item in ordered
        ]
    )


def revive_json(seqs: Sequence[int], first: int, rate_per_second: float | None) -> str:
    """revive's plan: each picked item's place, seq and delay from now, the k-th of the whole redrive
    (from `first` on) becoming poppable k / rate seconds from now."""
    plan = []
    for k, seq in enumerate(seqs):
        seconds, micros = split_seconds(redrive_delay(first + k, rate_per_second))
        plan.append({"n": k, "seq": seq, "seconds": seconds, "micros": micros})
    return json_text(plan)
