"""API keys: who is calling (the front door asks, before any body is parsed) and what they may do (each
route asks its caller, for the queue it touches).

With no keys configured, every caller is `OPEN` (all may do all: the service refuses to listen on
anything but loopback that way unless told to; see simplequeue.cli). With keys, every request but
the open paths needs `Authorization: Bearer <key>`: none or unknown is 401, a key whose role or
queues do not cover the request is 403. Keys are held as SHA-256 digests and compared in constant
time against every key; they never reach a log line or an answer.

A key with an `access_key_id` is also an AWS access key for the Amazon SQS door, its `key` the
SigV4 secret: `Keyring.sigv4` finds it by id, and simplequeue.api.sqs.sigv4 checks the request's
signature with it (an HMAC, compared in constant time). The secret never leaves that check.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Annotated, NamedTuple

from fastapi import Depends, Request
from starlette.responses import Response
from starlette.types import Scope

from simplequeue.api.errors import BEARER_CHALLENGE, Forbidden, Unauthenticated, envelope
from simplequeue.api.sqs.sigv4 import scope_service
from simplequeue.service.topics import CERTIFICATE_PATH

OPEN_PATHS = frozenset(
    {"/", "/healthz", "/readyz", "/openapi.json", "/docs", "/redoc", "/ui", CERTIFICATE_PATH}
)
"""The front page (a redirect to the dashboard), liveness and readiness (for orchestrators), the
spec with its viewers (the public contract, also in the repository), and the certificate that
topics' subscribers check signatures with: everything else needs a key once keys exist."""
OPEN_FOLDERS = ("/ui/", "/docs/", "/redoc/")
"""The static files of the dashboard and of the spec's viewers (their data comes from the API)."""


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_FOLDERS)


SIGV4_PATH = re.compile(r"/(\d{12}/[^/]+)?")
SCHEDULER_PATH = re.compile(r"/schedules(?:/([^/]+))?")
QUERY_ACTION = re.compile(rb"(?:^|&)Action=")


def signs_itself(scope: Scope) -> bool:
    """A request to the Amazon SQS door (simplequeue.api.sqs): POST / or POST /{account_id}/{queue},
    or a GET of either whose query names an Action (the query protocol may be sent so); or one to
    the EventBridge Scheduler door (to_scheduler). It carries an AWS SigV4 signature rather than a
    Bearer key, and the door checks it itself."""
    if SIGV4_PATH.fullmatch(scope["path"]) is None:
        return to_scheduler(scope)
    method = scope["method"]
    return method == "POST" or (
        method == "GET" and QUERY_ACTION.search(scope.get("query_string", b"")) is not None
    )


def to_scheduler(scope: Scope) -> bool:
    """A request to the EventBridge Scheduler door (simplequeue.api.scheduler): to `/schedules` or
    `/schedules/{Name}`, signed with SigV4 for the service `scheduler` (the signature unchecked
    yet). Any other request there, a Bearer key's or none, is the REST API's."""
    if SCHEDULER_PATH.fullmatch(scope["path"]) is None:
        return False
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    return scope_service(headers, scope.get("query_string", b"").decode("latin-1")) == "scheduler"


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
    access_key_id: str | None = None
    """For the Amazon SQS door: the access key id whose SigV4 secret is `key`."""


class SigV4Key(NamedTuple):
    """What an access key id stands for: its SigV4 secret and its Grant. Its repr hides the secret."""

    secret: str
    grant: Grant

    def __repr__(self) -> str:
        return f"SigV4Key(secret=<hidden>, grant={self.grant!r})"


class Keyring:
    def __init__(self, keys: Iterable[ApiKey] = ()) -> None:
        keys = list(keys)
        self._digests = [(_digest(k.key), k.grant) for k in keys]
        # SigV4 needs the secret itself (an HMAC key), not a digest. An access key id is no secret
        # (every signed request carries it), so finding it by dictionary says nothing of any key.
        self._sigv4: dict[str, SigV4Key] = {}
        for k in keys:
            if k.access_key_id is not None:
                if k.access_key_id in self._sigv4:
                    raise ValueError(f"api_keys: access_key_id {k.access_key_id!r} is given twice")
                self._sigv4[k.access_key_id] = SigV4Key(k.key, k.grant)

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

    def sigv4(self, access_key_id: str) -> SigV4Key | None:
        """The secret and Grant of a SigV4 access key id, None for an unknown one; for
        `sigv4.verify(..., secrets=lambda akid: (k.secret if (k := keyring.sigv4(akid)) else None))`.
        The signature itself is compared in constant time there."""
        return self._sigv4.get(access_key_id)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def authenticate(keyring: Keyring, scope: Scope) -> Response | None:
    """Puts the caller's Grant in the request's state; or the 401 to answer, before the app sees
    the request."""
    grant: Grant | None = OPEN
    if keyring.enabled:
        presented = _bearer(scope)
        grant = keyring.grant_for(presented) if presented else None
        if grant is None and not is_open(scope["path"]) and not signs_itself(scope):
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
