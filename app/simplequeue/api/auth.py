"""API keys: who is calling (the front door asks, before any body is parsed) and what they may do (each
route asks its caller, for the queue it touches).

With no keys configured, every caller is `OPEN` (all may do all: the service refuses to listen on
anything but loopback that way unless told to; see simplequeue.cli). With keys, every request but
the open paths needs `Authorization: Bearer <key>`: none or unknown is 401, a key whose role or
queues do not cover the request is 403. Keys are held as SHA-256 digests and compared in constant
time against every key; they never reach a log line or an answer.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Annotated

from fastapi import Depends, Request
from starlette.responses import Response
from starlette.types import Scope

from simplequeue.api.errors import BEARER_CHALLENGE, Forbidden, Unauthenticated, envelope

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
"""Liveness and readiness (for orchestrators), and the spec with its viewers (the public contract,
also in the repository): everything else needs a key once keys exist."""


def is_open(path: str) -> bool:
    """The open paths, and the dashboard's static files (its data comes from the API, with a key)."""
    return path in OPEN_PATHS or path == "/ui" or path.startswith("/ui/")


class Role(StrEnum):
    PRODUCER = "producer"
    CONSUMER = "consumer"
    ADMIN = "admin"


class Action(StrEnum):
    PUSH = "push"
    CONSUME = "consume"  # pop, complete, fail, extend, read an item
    READ_STATS = "read queue stats"
    ADMINISTER = "administer"  # queue settings, dead letters, history, redrive, purge, metrics


ALLOWED: dict[Role, frozenset[Action]] = {
    Role.PRODUCER: frozenset({Action.PUSH, Action.READ_STATS}),
    Role.CONSUMER: frozenset({Action.CONSUME, Action.READ_STATS}),
    Role.ADMIN: frozenset(Action),
}


@dataclass(frozen=True, slots=True)
class Grant:
    """What one key may do. `queues`: glob patterns (fnmatch, case-sensitive), None for every queue."""

    name: str
    role: Role
    queues: tuple[str, ...] | None = None

    def covers(self, queue: str) -> bool:
        return self.queues is None or any(fnmatchcase(queue, pattern) for pattern in self.queues)

    def may(self, action: Action, queue: str | None = None) -> bool:
        return action in ALLOWED[self.role] and (queue is None or self.covers(queue))

    def require(self, action: Action, queue: str | None = None) -> None:
        if action not in ALLOWED[self.role]:
            raise Forbidden(f"a {self.role} key may not {action}")
        if queue is not None and not self.covers(queue):
            raise Forbidden(f"this key may not use queue {queue!r}")

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN


OPEN = Grant(name="anonymous", role=Role.ADMIN)
"""Every caller, when the service has no keys."""


@dataclass(frozen=True, slots=True)
class ApiKey:
    key: str
    grant: Grant


class Keyring:
    def __init__(self, keys: Iterable[ApiKey] = ()) -> None:
        self._digests = [(_digest(k.key), k.grant) for k in keys]

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    def grant_for(self, presented: str) -> Grant | None:
        # Every digest is compared, so the time taken says nothing about which key came close.
        digest = _digest(presented)
        found: Grant | None = None
        for known, grant in self._digests:
            if hmac.compare_digest(known, digest):
                found = grant
        return found


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def authenticate(keyring: Keyring, scope: Scope) -> Response | None:
    """Puts the caller's Grant in the request's state; or the 401 to answer, before the app sees
    the request."""
    grant: Grant | None = OPEN
    if keyring.enabled:
        presented = _bearer(scope)
        grant = keyring.grant_for(presented) if presented else None
        if grant is None and not is_open(scope["path"]):
            why = "unknown API key" if presented else "an API key is required"
            detail = f"{why}: send Authorization: Bearer <key>"
            return envelope(401, "Unauthorized", detail, headers=BEARER_CHALLENGE)
    scope.setdefault("state", {})["grant"] = grant
    return None


def _bearer(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return ""


async def caller(request: Request) -> Grant:
    """The caller's Grant, as authenticate() found it. None only on an open path, which asks for
    no caller; if one ever does, it gets 401 rather than anything."""
    grant: Grant | None = getattr(request.state, "grant", None)
    if grant is None:
        raise Unauthenticated("an API key is required")
    return grant


Caller = Annotated[Grant, Depends(caller)]
