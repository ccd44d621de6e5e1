"""Turning a client's JSON value into the text the store keeps."""

from __future__ import annotations

import json
from typing import Any

from simplequeue.domain.errors import InvalidPayload, PayloadTooLarge

MAX_PAYLOAD_DEPTH = 64
"""Deepest nesting of arrays and objects a payload may have. Many JSON readers stop near here
(System.Text.Json's default is 64, Python's own parser at about 1,000), and every item pushed must
be one that every worker can read back."""


def encode_payload(payload: Any, limit_bytes: int, where: str = "payload", beside: int = 0) -> str:
    """The payload's JSON text, if it fits in limit_bytes; `beside` is the size of what shares the
    limit with it (its item's attributes), which limit_bytes already leaves out."""
    try:
        # allow_nan=False: 1e999 parses to inf, which no database JSON type accepts back.
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        size = len(text.encode("utf-8"))
    except ValueError as exc:  # NaN/Infinity, or lone surrogates (UnicodeEncodeError)
        raise InvalidPayload(f"{where} is not storable JSON: {exc}") from exc
    if "\\u0000" in text:
        # PostgreSQL and several JSON readers cannot hold NUL; refuse it on every engine alike.
        raise InvalidPayload(f"{where} must not contain NUL characters (\\u0000)")
    if size > limit_bytes:
        if beside:
            raise PayloadTooLarge(
                f"{where} is {size} bytes as JSON and its attributes {beside}; together the limit "
                f"is {limit_bytes + beside}"
            )
        raise PayloadTooLarge(f"{where} is {size} bytes as JSON; the limit is {limit_bytes}")
    # Counting brackets is C-fast and bounds the depth from above, so most payloads skip the walk.
    if text.count("[") + text.count("{") > MAX_PAYLOAD_DEPTH and depth_of(payload) > MAX_PAYLOAD_DEPTH:
        raise InvalidPayload(f"{where} nests arrays and objects deeper than {MAX_PAYLOAD_DEPTH} levels")
    return text


def depth_of(value: Any) -> int:
    """How deeply arrays and objects nest in a decoded JSON value (a scalar: 0). Iterative, so that
    no input can exhaust the interpreter's stack."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, list):
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in node if isinstance(child, dict | list))
    return deepest
