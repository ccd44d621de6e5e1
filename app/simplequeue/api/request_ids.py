"""Each HTTP request's id: the client's `X-Request-ID` when it is sensible, else a new one. Log
lines about a request name it, so that an operator can find what a client saw."""

from __future__ import annotations

import re
from contextvars import ContextVar
from uuid import uuid4

from starlette.types import Scope

REQUEST_ID: ContextVar[str] = ContextVar("simplequeue_request_id", default="-")
_SENSIBLE = re.compile(rb"[A-Za-z0-9._:-]{1,128}")


def request_id_of(scope: Scope) -> str:
    value: bytes
    for name, value in scope["headers"]:
        if name == b"x-request-id" and _SENSIBLE.fullmatch(value):
            return value.decode("ascii")
    return uuid4().hex
