"""A queue's metadata as every dialect reads and writes it: the lists come back as JSON arrays of
{"n": name, "v": value}, the changes go in as JSON objects (to write) and arrays (to remove)."""

from __future__ import annotations

import json
from typing import Any

from simplequeue.domain.metadata import MetadataChange, QueueMetadata
from simplequeue.store import rows
from simplequeue.store.rows import Row


def _pairs(text: str | None) -> dict[str, str]:
    return {pair["n"]: pair["v"] for pair in json.loads(text)} if text else {}


def metadata_of(row: Row) -> QueueMetadata:
    return QueueMetadata(
        created_at=rows.as_utc(row["created_at"]),
        modified_at=rows.as_utc_or_none(row["modified_at"]),
        attributes=_pairs(row["attributes"]),
        tags=_pairs(row["tags"]),
    )


def change_params(change: MetadataChange) -> dict[str, Any]:
    return {
        "set_attributes": json.dumps(dict(change.set_attributes)),
        "unset_attributes": json.dumps(sorted(change.unset_attributes)),
        "set_tags": json.dumps(dict(change.set_tags)),
        "unset_tags": json.dumps(sorted(change.unset_tags)),
        "max_tags": change.max_tags,
        "touch": change.touches,
    }
