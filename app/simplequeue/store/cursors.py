"""Page cursors: where a newest-first page (or a page of queues, by name) ended, opaque to clients."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from datetime import datetime

from simplequeue.domain import InvalidCursor
from simplequeue.domain.names import is_queue_name
from simplequeue.domain.topics import is_topic_name
from simplequeue.store.rows import Row, as_utc


def encode_cursor(moment: datetime | str, seq: int) -> str:
    """Where a newest-first page ended: (time, seq) of its last row, opaque to clients."""
    raw = f"{as_utc(moment).isoformat()}|{seq}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def next_cursor(page: Sequence[Row], limit: int, at: str) -> str | None:
    """The cursor after a full page (its last row's `at` time and seq); None after a short one,
    which was the last."""
    if len(page) < limit or not page:
        return None
    return encode_cursor(page[-1][at], page[-1]["seq"])


def decode_cursor(cursor: str | None) -> tuple[datetime, int] | tuple[None, None]:
    """The (time, seq) of a cursor that encode_cursor made; anything else is InvalidCursor, before
    any value of it reaches a statement."""
    if cursor is None:
        return None, None
    try:
        moment, seq = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().split("|")
        decoded = as_utc(moment), int(seq)
    except (ValueError, OverflowError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidCursor() from exc
    # Only the exact text encode_cursor gives back: UTC, and a seq that a BIGINT holds.
    if not 0 < decoded[1] < 2**63 or encode_cursor(*decoded) != cursor.rstrip("="):
        raise InvalidCursor()
    return decoded


# A queue cursor is the last name of its page, marked so that no item cursor passes for one; a
# topic cursor likewise, marked apart from both.
_NAME_MARK = "q:"
_TOPIC_MARK = "t:"


def encode_name_cursor(name: str, mark: str = _NAME_MARK) -> str:
    """Where a page of queues (in name order) ended: its last name, opaque to clients."""
    return base64.urlsafe_b64encode(f"{mark}{name}".encode()).decode().rstrip("=")


def decode_name_cursor(
    cursor: str | None, mark: str = _NAME_MARK, valid: Callable[[str], bool] = is_queue_name
) -> str | None:
    """The name of a cursor that encode_name_cursor made; anything else is InvalidCursor."""
    if cursor is None:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidCursor() from exc
    name = text.removeprefix(mark)
    if name == text or not valid(name) or encode_name_cursor(name, mark) != cursor.rstrip("="):
        raise InvalidCursor()
    return name


def encode_topic_cursor(name: str) -> str:
    return encode_name_cursor(name, _TOPIC_MARK)


def decode_topic_cursor(cursor: str | None) -> str | None:
    return decode_name_cursor(cursor, _TOPIC_MARK, is_topic_name)
