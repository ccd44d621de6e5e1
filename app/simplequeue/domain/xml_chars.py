"""The characters XML 1.0 can carry: #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
#x10000-#x10FFFF. SQS lets a body and a String attribute hold these only, since its query protocol
answers in XML, where no escape can write any other (`&#x1;` is as ill-formed as the raw byte)."""

from __future__ import annotations

import re

NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def first_not_xml(text: str) -> tuple[int, str] | None:
    """The first character XML cannot carry, as (its index, `U+XXXX`), or None."""
    found = NOT_XML.search(text)
    if found is None:
        return None
    return found.start(), f"U+{ord(found.group()):04X}"


def xml_safe_json(text: str) -> str:
    """JSON text with every character XML cannot carry written as its `\\u` escape: the same JSON
    value. Outside strings JSON has only ASCII, and inside one an escape means the character."""
    return NOT_XML.sub(_escape, text)


def _escape(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"
