"""What every driver's push shares: the caller's items checked by the service's own rules before
anything touches the database, the schema and limits read from the database, and the errors."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from simplequeue.domain import (
    MAX_PAYLOAD_DEPTH,
    InvalidPayload,
    ItemExists,
    NewItem,
    PayloadTooLarge,
    SchemaNotReady,
    encode_payload,
)
from simplequeue.domain.fields import delay_problem, priority_problem
from simplequeue.domain.names import QUEUE_NAME, is_queue_name, key_problem, text_problem
from simplequeue.domain.payloads import depth_of
from simplequeue.store.migrations import latest_version

__all__ = ["QUEUE_NAME", "InvalidInput", "ItemExists", "NotInTransaction", "Pushed"]

SAVEPOINT = "simplequeue_push"

# SQLite's and SQL Server's: the schema's version and the limits `simplequeue migrate` wrote.
# (PostgreSQL reads the same row from sq_push_limits(), which an EXECUTE-only role may call.)
# Run inside the push's savepoint: on PostgreSQL a missing table would abort the caller's transaction.
SETTINGS_SQL = (
    "SELECT (SELECT max(version) FROM sq_schema_version),"
    " (SELECT value FROM sq_settings WHERE name = 'max_payload_bytes'),"
    " (SELECT value FROM sq_settings WHERE name = 'max_payload_depth')"
)


class NotInTransaction(RuntimeError):
    """The connection is not inside a transaction: begin one (or write first), then push."""

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail or (type(self).__doc__ or "").strip())


class InvalidInput(ValueError):
    """A queue name, key, priority or delay the service would refuse. (Not a QueueError: those are
    the service's answers, each a code of the HTTP API's envelope.)"""


@dataclass(frozen=True, slots=True)
class Pushed:
    id: UUID
    created: bool


@dataclass(frozen=True, slots=True)
class Checked:
    """One item as the caller gave it, checked; its payload already JSON text."""

    queue: str
    payload_json: str
    priority: int
    delay_seconds: float
    not_before: datetime | None
    created_at: datetime | None
    group: str | None
    dedup_key: str | None
    id: UUID | None
    payload: Any  # as given: its depth is measured again only if the database's limit is lower
    fairness_key: str | None = None

    def new_item(self, now: datetime) -> NewItem:
        """As the SQLite store pushes it (an id made here when the caller gave none)."""
        return NewItem(
            id=self.id or uuid4(),
            queue=self.queue,
            payload_json=self.payload_json,
            created_at=self.created_at or now,
            priority=self.priority,
            group=self.group,
            dedup_key=self.dedup_key,
            delay_seconds=self.delay_seconds,
            not_before=self.not_before,
            id_given=self.id is not None,
            fairness_key=self.fairness_key,
        )

    def as_json(self) -> str:
        """As an element of sq_push_batch's array (PostgreSQL's function, SQL Server's procedure):
        only what the caller gave, so that the database decides the rest as the service does (an
        id the caller did not give is not remembered as a producer's)."""
        fields: dict[str, Any] = {"queue": self.queue}
        if self.priority:
            fields["priority"] = self.priority
        if self.delay_seconds:
            fields["delay_seconds"] = self.delay_seconds
        for name, moment in (("not_before", self.not_before), ("created_at", self.created_at)):
            if moment is not None:
                fields[name] = moment.isoformat()
        keys = (("group_key", self.group), ("dedup_key", self.dedup_key), ("fairness_key", self.fairness_key))
        for name, text in keys:
            if text is not None:
                fields[name] = text
        if self.id is not None:
            fields["id"] = str(self.id)
        # The payload's text goes in as it is: encoded once, by the service's rules.
        return (
            '{"payload":'
            + self.payload_json
            + ","
            + json.dumps(fields, ensure_ascii=False, separators=(",", ":"))[1:]
        )


def batch_json(items: Sequence[Checked]) -> str:
    return "[" + ",".join(i.as_json() for i in items) + "]"


def check_items(queue: str, items: Sequence[Mapping[str, Any]]) -> list[Checked]:
    """The items checked by the service's rules; the payload's size waits for the database's limit."""
    if isinstance(items, Mapping) or not isinstance(items, Sequence):
        raise InvalidInput("items must be a sequence of mappings (push's keyword arguments)")
    return [_check(queue, item, n) for n, item in enumerate(items)]


def _check(queue: str, item: Mapping[str, Any], n: int) -> Checked:
    if not is_queue_name(queue):
        raise InvalidInput(f"queue {queue!r} is not 1..128 characters of [A-Za-z0-9._-]")
    if not isinstance(item, Mapping) or "payload" not in item:
        raise InvalidInput(f"items[{n}] must be a mapping with a payload")
    unknown = set(item) - _OPTIONS
    if unknown:
        raise InvalidInput(f"items[{n}] has unknown options: {', '.join(sorted(map(str, unknown)))}")
    priority = item.get("priority") or 0
    if problem := priority_problem(priority):
        raise InvalidInput(f"items[{n}].priority {problem}")
    delay = item.get("delay_seconds") or 0.0
    if problem := delay_problem(delay):
        raise InvalidInput(f"items[{n}].delay_seconds {problem}")
    for name in ("created_at", "not_before"):
        moment = item.get(name)
        if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
            raise InvalidInput(f"items[{n}].{name} must be a datetime with a time zone")
    given = item.get("id")
    if given is not None and not isinstance(given, UUID):
        raise InvalidInput(f"items[{n}].id must be a UUID")
    where = f"items[{n}].payload"
    return Checked(
        queue=queue,
        payload_json=encode_payload(item["payload"], sys.maxsize, where),
        priority=priority,
        delay_seconds=float(delay),
        not_before=item.get("not_before"),
        created_at=item.get("created_at"),
        group=_key(item.get("group"), f"items[{n}].group"),
        dedup_key=_key(item.get("dedup_key"), f"items[{n}].dedup_key"),
        id=given,
        payload=item["payload"],
        fairness_key=_key(item.get("fairness_key"), f"items[{n}].fairness_key"),
    )


_OPTIONS = {
    "payload",
    "id",
    "priority",
    "delay_seconds",
    "not_before",
    "created_at",
    "group",
    "dedup_key",
    "fairness_key",
}


def _key(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{where} must be text")
    if problem := text_problem(value) or key_problem(value):
        raise InvalidInput(f"{where}: {problem}")
    return value


@dataclass(frozen=True, slots=True)
class Limits:
    max_payload_bytes: int
    max_payload_depth: int


def check_version(version: Any, dialect: str) -> None:
    """The schema's version is this code's, or SchemaNotReady names both."""
    needed = latest_version(dialect)
    if version != needed:
        raise SchemaNotReady(
            f"this database's simplequeue schema is at version {version}, this code needs "
            f"{needed}: run `simplequeue migrate`"
        )


def limits_from(row: Sequence[Any] | None, dialect: str) -> Limits:
    """The schema's version checked, and the limits read, from SETTINGS_SQL's row."""
    version, max_bytes, max_depth = row if row is not None else (None, None, None)
    check_version(version, dialect)
    if max_bytes is None or max_depth is None:
        raise SchemaNotReady("this database has no payload limits in sq_settings: run `simplequeue migrate`")
    return Limits(int(max_bytes), int(max_depth))


def no_schema(dialect: str) -> SchemaNotReady:
    return SchemaNotReady(
        f"this database has no simplequeue schema at version {latest_version(dialect)}: "
        "run `simplequeue migrate`"
    )


def check_limits(items: Sequence[Checked], limits: Limits) -> None:
    """The database's limits, which the service applies too (it writes them there)."""
    for n, item in enumerate(items):
        size = len(item.payload_json.encode("utf-8"))
        if size > limits.max_payload_bytes:
            raise PayloadTooLarge(
                f"items[{n}].payload is {size} bytes as JSON; the limit is {limits.max_payload_bytes}"
            )
        if limits.max_payload_depth < MAX_PAYLOAD_DEPTH and depth_of(item.payload) > limits.max_payload_depth:
            raise InvalidPayload(
                f"items[{n}].payload nests arrays and objects deeper than {limits.max_payload_depth} levels"
            )


# The refusals the SQL entry points raise: PostgreSQL's SQLSTATEs, SQL Server's error numbers.
_REFUSALS: dict[str, type[Exception]] = {
    "SQ409": ItemExists,
    "SQ400": InvalidInput,
    "SQ413": PayloadTooLarge,
    "51409": ItemExists,
    "51400": InvalidInput,
    "51413": PayloadTooLarge,
}

# pyodbc ends each diagnostic record with "(native error number) (ODBC function)".
_NATIVE = re.compile(r"\((-?\d+)\)(?=\s*\(SQL\w*\)|\s*;|\s*$)")
_MESSAGE = re.compile(r"simplequeue: [^\r\n;]*?(?=\s*\(-?\d+\)\s*(?:\(SQL\w*\)|;|$)|\s*$|[\r\n])")


def codes_of(exc: BaseException) -> list[str]:
    """An error's SQLSTATE (asyncpg, psycopg, SQLAlchemy's adapters) or SQL Server's native
    numbers (pyodbc, in its message), looking through SQLAlchemy's wrapper."""
    found: list[str] = []
    for error in (exc, getattr(exc, "orig", None)):
        if error is None:
            continue
        for attribute in ("sqlstate", "pgcode"):
            value = getattr(error, attribute, None)
            if isinstance(value, str):
                found.append(value)
        found.extend(_NATIVE.findall(str(error)))
    return found


def refusal(exc: BaseException) -> Exception | None:
    """The outbox's own error for an SQL entry point's refusal, or None."""
    for code in codes_of(exc):
        if code in _REFUSALS:
            text = str(getattr(exc, "orig", None) or exc)
            match = _MESSAGE.search(text)
            return _REFUSALS[code](match[0] if match else text.strip().splitlines()[0])
    return None


def is_missing_table(exc: BaseException) -> bool:
    """PostgreSQL's undefined_table, SQL Server's invalid object name, SQLite's "no such table"."""
    codes = codes_of(exc)
    return "42P01" in codes or "208" in codes or "no such table" in str(exc)


def as_uuid(value: Any) -> UUID:
    # asyncpg answers its own UUID subclass; pyodbc, text unless pyodbc.native_uuid is set.
    return value if type(value) is UUID else UUID(str(value))
