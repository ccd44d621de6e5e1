"""Reading an action's parameters, with SQS's limits and SQS's errors for breaking them.

Numbers arrive as JSON numbers (the JSON protocol) or as text (the query protocol); both are taken.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from simplequeue.api.sqs.errors import SqsError, invalid, missing
from simplequeue.domain.xml_chars import first_not_xml

T = TypeVar("T")

MAX_BATCH = 10
BATCH_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
FIFO_KEY = re.compile(r"[\x21-\x7e]{1,128}")  # alphanumerics and punctuation, as SQS allows


def carried_by_xml(value: str) -> bool:
    """Whether the query protocol's XML can carry this text: every text the door keeps and answers
    (a body, a tag, an attribute) must be such, or that answer would not parse."""
    return first_not_xml(value) is None


def text(params: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = params.get(name)
    if value is None:
        if required:
            raise missing(name)
        return None
    if not isinstance(value, str):
        raise invalid(name, value, "it must be a string.")
    return value


def required_text(params: dict[str, Any], name: str) -> str:
    value = text(params, name)
    assert value is not None
    return value


def integer(
    params: dict[str, Any], name: str, low: int, high: int, default: T, reason: str | None = None
) -> int | T:
    """The integer parameter `name`, `default` when absent; out of low..high (or not an integer),
    InvalidParameterValue with `reason`, SQS's words for that parameter (its most common ones
    when not given)."""
    value = params.get(name)
    if value is None:
        return default
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"-?\d{1,12}", value.strip()):
        number = int(value)
    if number is None or not low <= number <= high:
        raise invalid(name, value, reason or f"Must be between {low} and {high}, if provided.")
    return number


def names(params: dict[str, Any], name: str) -> list[str]:
    value = params.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(name, value, "it must be a list of strings.")
    return value


def fifo_key(params: dict[str, Any], name: str) -> str | None:
    """A FIFO id parameter (MessageGroupId, MessageDeduplicationId), if given."""
    value = text(params, name, required=False)
    if value is not None:
        check_fifo_key(name, value)
    return value


def check_fifo_key(name: str, value: str) -> None:
    if not FIFO_KEY.fullmatch(value):
        raise invalid(
            name,
            value,
            f"{name} can only include alphanumeric and punctuation characters. 1 to 128 in length.",
        )


def mapping(params: dict[str, Any], name: str) -> dict[str, Any]:
    value = params.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid(name, value, "it must be a map.")
    return value


def body(params: dict[str, Any], name: str = "MessageBody") -> str:
    value = required_text(params, name)
    if not value:
        raise missing(name)
    if not carried_by_xml(value):
        raise SqsError(
            "InvalidMessageContents",
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | "
            "#xE000 to #xFFFD | #x10000 to #x10FFFF",
        )
    return value


def entries(params: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """A batch's entries: 1 to 10, each with an Id of its own. `kind`: what SQS calls one
    (SendMessageBatchRequestEntry...), which its errors name."""
    value = params.get("Entries")
    if value is None or value == []:  # the query protocol sends no Entries for none
        raise SqsError("EmptyBatchRequest", f"There should be at least one {kind} in the request.")
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise invalid("Entries", value, "it must be a list of entries.")
    if len(value) > MAX_BATCH:
        raise SqsError(
            "TooManyEntriesInBatchRequest",
            f"Maximum number of entries per request are {MAX_BATCH}. You have sent {len(value)}.",
        )
    ids: set[str] = set()
    for entry in value:
        entry_id = entry.get("Id")
        if entry_id is None:
            raise missing("Id")
        if not isinstance(entry_id, str) or not BATCH_ENTRY_ID.fullmatch(entry_id):
            raise SqsError(
                "InvalidBatchEntryId",
                "A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
                "It can be at most 80 letters long.",
            )
        if entry_id in ids:
            raise SqsError("BatchEntryIdsNotDistinct", f"Id {entry_id} repeated.")
        ids.add(entry_id)
    return value


def failed(entry_id: str, error: SqsError) -> dict[str, Any]:
    """A batch entry's failure, as the batch's `Failed` lists it."""
    return {"Id": entry_id, "SenderFault": error.kind.sender, "Code": error.code, "Message": error.message}


def answer(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """A batch's answer from its entries' outcomes (a `failed` one or a success). An empty list is
    left out, as SQS leaves it out (a batch without failures has no `Failed`: code written against
    SQS reads it with a default)."""
    lists = {
        "Successful": [o for o in outcomes if "Code" not in o],
        "Failed": [o for o in outcomes if "Code" in o],
    }
    return {key: entries for key, entries in lists.items() if entries}
