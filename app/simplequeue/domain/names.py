"""What the service stores as a queue's name, and as a key (group, dedup_key): the same rules
wherever an item comes in (the HTTP API's fields, the SQS door, simplequeue.outbox; the SQL entry
points check the same in SQL)."""

from __future__ import annotations

import re

QUEUE_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"
"""The rule as the API's schema states it (JSON Schema's patterns are ECMA-262's, where `$` is the
end of the text). Not for Python's re: there `$` also matches before a last newline."""
QUEUE_NAME = re.compile(r"\A[A-Za-z0-9._-]{1,128}\Z")
"""The rule for Python: anchored with \\A and \\Z, so match, fullmatch and search all agree."""


def is_queue_name(value: object) -> bool:
    """Whether a value may be a queue's name."""
    return isinstance(value, str) and QUEUE_NAME.fullmatch(value) is not None


def text_problem(value: str) -> str | None:
    """Why text cannot be stored (PostgreSQL cannot hold NUL; UTF-8 has no lone surrogates), or None."""
    if "\x00" in value:
        return "text must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "text must be valid Unicode (no lone surrogates)"
    return None


def key_problem(value: str) -> str | None:
    """Why text cannot be a key, beyond text_problem's rules, or None. The same rules on every
    engine, set by the strictest: SQL Server's NVARCHAR(128) counts UTF-16 code units (a character
    beyond U+FFFF takes two), and its = ignores trailing spaces, so "k" and "k " would be one key
    there and two elsewhere."""
    if not value:
        return "a key must not be empty"
    if value.endswith(" "):
        return "a key must not end with a space"
    if len(value.encode("utf-16-le", "surrogatepass")) > 256:
        return "a key holds at most 128 UTF-16 code units (a character beyond U+FFFF counts two)"
    return None
