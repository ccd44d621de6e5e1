"""Each HTTP request's id: the client's `X-Request-ID` when it is sensible, else a new one. Log
lines about a request name it, so that an operator can find what a client saw."""

from __future__ import annotations

import re
from contextvars import ContextVar
from random import getrandbits

from starlette.types import Scope

REQUEST_ID: ContextVar[str] = ContextVar("simplequeue_request_id", default="-")
_SENSIBLE = re.compile(rb"[A-Za-z0-9._:-]{1,128}")


def request_id_of(scope: Scope) -> str:
    value: bytes
    for name, value in scope["headers"]:
        if name == b"x-request-id" and _SENSIBLE.fullmatch(value):
            return value.decode("ascii")
    # 128 random bits as 32 hex digits, as uuid4().hex was, without its read of os.urandom and its
    # UUID object on every request: an id names a request in the logs, it guards nothing.
    return f"{getrandbits(128):032x}"
