"""What the API's bodies and parameters are made of: the types of their fields as the service
validates them (a queue's name, a key, a time, a JSON number, an error's text), and Body, the base
of every request body."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from simplequeue.domain.fields import MAX_PRIORITY, MIN_PRIORITY
from simplequeue.domain.names import QUEUE_NAME_PATTERN as QUEUE_NAME_PATTERN  # re-exported: tests compare
from simplequeue.domain.names import is_queue_name, key_problem, text_problem


def _to_utc(value: datetime) -> datetime:
    """A time without an offset is taken as UTC (the seed's clients send UTC wall-clock text)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("time is out of range once converted to UTC") from exc


def _storable_text(value: str) -> str:
    if problem := text_problem(value):
        raise ValueError(problem)
    return value


def _json_number(value: Any) -> Any:
    # Lax validation would read true as 1 and "5" as 5; a client sending those has a bug to hear about.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a JSON number")
    return value


# Any number of fraction digits, as RFC 3339 allows (pydantic keeps microseconds: the rest is cut off).
_DATE_TIME = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d(:\d\d(\.\d+)?)?([Zz]|[+-]\d\d:?\d\d)?", re.ASCII)


def _iso_text(value: Any) -> Any:
    # Lax validation would read 0, or a query's "0.5", as Unix times; the API takes ISO-8601 text only.
    if not isinstance(value, str) or not _DATE_TIME.fullmatch(value):
        raise ValueError("must be an ISO-8601 date-time such as 2026-11-20T09:30:00Z")
    return value


Number = BeforeValidator(_json_number)


def _queue_name(value: str) -> str:
    # The domain's rule decides, as at every other door; the schema's pattern states it for clients.
    if not is_queue_name(value):
        raise ValueError("must be 1 to 128 of the characters A-Z, a-z, 0-9, '.', '_' and '-'")
    return value


QueueName = Annotated[
    str,
    Field(
        min_length=1, max_length=128, json_schema_extra={"pattern": QUEUE_NAME_PATTERN}, examples=["default"]
    ),
    AfterValidator(_queue_name),
]
UtcDatetime = Annotated[datetime, BeforeValidator(_iso_text), AfterValidator(_to_utc)]
TIME_TEXT = "ISO-8601; UTC if no offset; no leap second :60; in years 1 to 9999 once in UTC"
"""What a UtcDatetime accepts, for the spec's descriptions."""
NO_NUL_PATTERN = r"^[^\u0000]*$"
"""What the spec says of text the service stores: no NUL characters (PostgreSQL cannot hold them).
_storable_text enforces it with a plainer message than a pattern's."""
_NO_NUL = {"pattern": NO_NUL_PATTERN}
ErrorText = Annotated[
    str, Field(min_length=1, max_length=16384, json_schema_extra=_NO_NUL), AfterValidator(_storable_text)
]
KEY_PATTERN = r"^[^\u0000]*[^\u0000 ]$"
KEY_TEXT = (
    "At most 128 UTF-16 code units (a character beyond U+FFFF counts two, so 64 such characters "
    "at most; 422 beyond), and no space at its end."
)
"""What a key's schema cannot say itself (maxLength counts characters): in its description."""
"""What the spec says of a key (group, dedup_key): no NUL, and no space at its end. _key_text
enforces it, and the length in UTF-16 code units, with plainer messages."""


def _key_text(value: str) -> str:
    # Emptiness is the schema's (min_length): its own error, in FastAPI's words.
    if value and (problem := key_problem(value)):
        raise ValueError(problem)
    return value


Key = Annotated[
    str,
    Field(min_length=1, max_length=128, json_schema_extra={"pattern": KEY_PATTERN}),
    AfterValidator(_storable_text),
    AfterValidator(_key_text),
]
Int32 = Annotated[int, Field(ge=MIN_PRIORITY, le=MAX_PRIORITY), Number]


def _defaults_in_words(schema: dict[str, Any]) -> None:
    """A request field's default goes into its description, not the schema's `default`: generators
    such as openapi-typescript make a property with a `default` required, and a caller must be able
    to omit it. The server applies the default (the model's own)."""
    for prop in schema.get("properties", {}).values():
        if "default" not in prop:
            continue
        default = prop.pop("default")
        if default is not None:
            said = f"Default: {json.dumps(default)}."
            prop["description"] = f"{prop['description']} {said}" if "description" in prop else said


class Body(BaseModel):
    """A request body. A misspelt field is an error, not a silently ignored option."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_defaults_in_words)
