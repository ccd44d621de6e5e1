"""An item's fields beyond its payload, as a producer gives them: the same rules at every door.
The HTTP API's request models state them in their schema (api/fields.py's Int32, the items'
delay_seconds) from these bounds; simplequeue.outbox, whose callers hand in any Python object,
checks them with these functions (and a key with domain.names'); the SQL entry points check the
same in SQL."""

from __future__ import annotations

MIN_PRIORITY = -(2**31)
MAX_PRIORITY = 2**31 - 1
"""A priority is a 32-bit integer: the column's type on every engine."""
MAX_DELAY_SECONDS = 31536000
"""A push's delay_seconds: from 0 to a year."""


def is_number(value: object) -> bool:
    """A JSON number: an int or a float, and not a bool (Python's bool is an int)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def priority_problem(value: object) -> str | None:
    """Why a value cannot be a priority, or None."""
    if not isinstance(value, int) or not is_number(value) or not MIN_PRIORITY <= value <= MAX_PRIORITY:
        return "must be a 32-bit integer"
    return None


def delay_problem(value: object) -> str | None:
    """Why a value cannot be a push's delay_seconds, or None."""
    if not is_number(value) or not 0 <= value <= MAX_DELAY_SECONDS:  # type: ignore[operator]
        return f"must be from 0 to {MAX_DELAY_SECONDS}"
    return None
