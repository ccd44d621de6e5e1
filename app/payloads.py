"""Turning a client's JSON value into the text the store keeps."""

from __future__ import annotations

import json
from typing import Any

from app.errors import InvalidPayload, PayloadTooLarge


def encode_payload(payload: Any, limit_bytes: int, where: str = "payload") -> str:
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
        raise PayloadTooLarge(f"{where} is {size} bytes as JSON; the limit is {limit_bytes}")
    return text
