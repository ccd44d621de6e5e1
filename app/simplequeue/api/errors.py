"""The one JSON error envelope: its shape in the spec (ErrorBody), and how the domain's error tree,
validation errors and HTTP errors map to it.

What nothing here recognises is answered by simplequeue.api.front."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Route, compile_path
from starlette.types import ExceptionHandler

from simplequeue.api.request_ids import REQUEST_ID
from simplequeue.domain import (
    Conflict,
    DatabaseUnavailable,
    InvalidAttributes,
    InvalidCursor,
    InvalidPayload,
    InvalidSettings,
    NotFound,
    PayloadTooLarge,
    QueueError,
    SchemaNotReady,
    StoreError,
)
from simplequeue.domain.errors import DatabaseMisconfigured
from simplequeue.domain.schedules import InvalidSchedule
from simplequeue.domain.topics import InvalidSubscription, InvalidTopic

log = logging.getLogger("simplequeue")


def envelope(
    status: int,
    code: str,
    detail: str,
    fields: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    if status == 503:
        headers = {**(headers or {}), "Retry-After": "1"}
    content = {"error": code, "detail": detail} | ({"fields": fields} if fields is not None else {})
    return JSONResponse(content, status_code=status, headers=headers)


class FieldError(BaseModel):
    loc: list[str | int]
    msg: str


class ErrorCode(StrEnum):
    """Every code the error envelope may carry: one per class of the domain's error tree (its name),
    and those of errors the HTTP layer answers itself. Stable: clients switch on them."""

    # The domain's (simplequeue.domain.errors); a base class's code when it is raised itself.
    NOT_FOUND = "NotFound"
    ITEM_NOT_FOUND = "ItemNotFound"
    QUEUE_NOT_FOUND = "QueueNotFound"
    CONFLICT = "Conflict"
    ITEM_EXISTS = "ItemExists"
    LEASE_MISMATCH = "LeaseMismatch"
    LEASE_EXPIRED = "LeaseExpired"
    ITEM_DEAD = "ItemDead"
    TOO_MANY_QUEUES = "TooManyQueues"
    TOPIC_NOT_FOUND = "TopicNotFound"
    SUBSCRIPTION_NOT_FOUND = "SubscriptionNotFound"
    SCHEDULE_NOT_FOUND = "ScheduleNotFound"
    TOPIC_EXISTS = "TopicExists"
    INVALID_TOPIC = "InvalidTopic"
    INVALID_SUBSCRIPTION = "InvalidSubscription"
    INVALID_PAYLOAD = "InvalidPayload"
    INVALID_ATTRIBUTES = "InvalidAttributes"
    INVALID_CURSOR = "InvalidCursor"
    PAYLOAD_TOO_LARGE = "PayloadTooLarge"
    DATABASE_UNAVAILABLE = "DatabaseUnavailable"
    SCHEMA_NOT_READY = "SchemaNotReady"
    STORE_ERROR = "StoreError"
    # The HTTP layer's (NotFound and PayloadTooLarge above are answered by it too).
    QUEUE_IN_USE = "QueueInUse"
    MALFORMED_JSON = "MalformedJSON"
    UNAUTHORIZED = "Unauthorized"
    FORBIDDEN = "Forbidden"
    UNSUPPORTED_MEDIA_TYPE = "UnsupportedMediaType"
    VALIDATION_ERROR = "ValidationError"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    REQUEST_TIMEOUT = "RequestTimeout"
    INTERNAL_ERROR = "InternalError"

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # Generators that read x-enum-varnames (openapi-python-client) name the members as we do
        # (ErrorCode.ITEM_NOT_FOUND), rather than upper-casing the values (ITEMNOTFOUND).
        schema = handler.resolve_ref_schema(handler(core_schema))
        schema["x-enum-varnames"] = [code.name for code in cls]
        return schema


class ErrorBody(BaseModel):
    """The one error envelope. `error` is a stable code that clients can switch on."""

    error: ErrorCode
    detail: str
    fields: list[FieldError] | None = Field(
        None, description="Which inputs were invalid (ValidationError only)."
    )


STATUS_OF: dict[type[QueueError], int] = {
    NotFound: 404,
    Conflict: 409,
    PayloadTooLarge: 413,
    InvalidPayload: 422,
    InvalidAttributes: 422,
    InvalidCursor: 422,
    InvalidSettings: 422,
    InvalidTopic: 422,
    InvalidSubscription: 422,
    StoreError: 500,
    DatabaseUnavailable: 503,
    SchemaNotReady: 503,
}
"""The one place the domain's errors meet HTTP: each class's status (a subclass takes its
nearest ancestor's). Its code is the class's name."""

ANSWERED_AS: dict[type[QueueError], type[QueueError]] = {DatabaseMisconfigured: DatabaseUnavailable}
"""Errors whose detail is the operator's business (it names the database, its server, the login):
callers get the code and plain sentence of the class each is a case of, and the log the detail.
Their codes are not the API's (not in ErrorCode)."""

AS_VALIDATION: frozenset[type[QueueError]] = frozenset({InvalidSettings, InvalidSchedule})
"""Errors about one field of the body that only the service can judge (a queue named must exist):
answered as the body's schema answers its own checks, 422 ValidationError naming the field."""


HTTP_CODES: dict[int, tuple[str, ...]] = {
    400: ("MalformedJSON",),
    401: ("Unauthorized",),
    403: ("Forbidden",),
    404: ("NotFound",),
    405: ("MethodNotAllowed",),
    408: ("RequestTimeout",),
    413: ("PayloadTooLarge",),
    415: ("UnsupportedMediaType",),
    422: ("ValidationError",),
    500: ("InternalError",),
}
"""The codes the HTTP layer answers itself (here, in simplequeue.api.front and .server), by status."""


class Unauthenticated(Exception):
    """No API key, or one the service does not know: 401 (simplequeue.api.auth)."""


class Forbidden(Exception):
    """A known key that may not do this: 403. The message names the role or the queue."""


BEARER_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="simplequeue"'}


def status_of(error: QueueError | type[QueueError]) -> int:
    for cls in (error if isinstance(error, type) else type(error)).__mro__:
        if cls in STATUS_OF:
            return STATUS_OF[cls]
    return 500


def domain_errors() -> list[type[QueueError]]:
    """Every class of the domain's error tree below QueueError whose code callers may get (all
    but ANSWERED_AS's and AS_VALIDATION's), depth first."""
    found: list[type[QueueError]] = []
    for cls in QueueError.__subclasses__():
        found += [cls, *_below(cls)]
    return [cls for cls in found if cls not in ANSWERED_AS and cls not in AS_VALIDATION]


def _below(cls: type[QueueError]) -> list[type[QueueError]]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_below(sub))]


def codes_of(status: int) -> list[str]:
    """The codes an error answer with this status may carry."""
    domain = [cls.__name__ for cls in domain_errors() if status_of(cls) == status]
    return list(dict.fromkeys([*domain, *HTTP_CODES.get(status, ())]))


async def on_queue_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, QueueError)
    status = status_of(exc)
    public = ANSWERED_AS.get(type(exc))
    if status >= 500:
        # What the driver said goes to the log only: clients get a stable code and a plain sentence.
        log.warning(
            "request %s: %s %s answered %d %s: %s",
            REQUEST_ID.get(),
            request.method,
            request.url.path,
            status,
            exc.code,
            exc.detail if public or not exc.__cause__ else describe(exc.__cause__),
        )
    if public is not None:
        return envelope(status, public.__name__, public().detail)
    if isinstance(exc, InvalidSettings):
        fields = [{"loc": ["body", exc.field], "msg": exc.detail}]
        return envelope(422, "ValidationError", f"body.{exc.field}: {exc.detail}", fields)
    return envelope(status, exc.code, exc.detail)


def describe(cause: BaseException) -> str:
    """One line about a driver's exception: its type and the first line of its message."""
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0]}" if lines else type(cause).__name__


async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    content_type = request.headers.get("content-type", "")
    about_body = any(e.get("loc", ("",))[0] == "body" for e in errors)
    if request.method in ("POST", "PUT", "PATCH") and "json" not in content_type and about_body:
        return envelope(
            415, "UnsupportedMediaType", "send the body as JSON with Content-Type: application/json"
        )
    if any(e.get("type") == "json_invalid" for e in errors):
        return envelope(400, "MalformedJSON", "the request body is not valid JSON")
    fields = [
        {"loc": [str(p) if not isinstance(p, int) else p for p in e["loc"]], "msg": e["msg"]} for e in errors
    ]
    summary = "; ".join(f"{'.'.join(map(str, f['loc']))}: {f['msg']}" for f in fields)
    return envelope(422, "ValidationError", summary, fields)


def on_http_error(routes: Sequence[BaseRoute]) -> ExceptionHandler:
    served = methods_by_path(routes)

    async def handle(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400:
            # FastAPI's own 400 is a body it could not hand to its JSON parser (not UTF-8), or one the
            # parser gave up on (nested too deeply for it); the exception does not say which.
            detail = "the request body could not be read as JSON: it is not UTF-8, or nests too deeply"
            return envelope(400, "MalformedJSON", detail)
        headers, detail = exc.headers, str(exc.detail)
        if exc.status_code == 404:
            path = request.url.path
            hint = " (item ids are UUIDs)" if path.startswith("/items/") else ""
            detail = f"nothing is served at {path}{hint}"
        if exc.status_code == 405:
            headers = {"Allow": ", ".join(allowed_methods(served, request.url.path))}
        code = HTTPStatus(exc.status_code).phrase.replace(" ", "").replace("-", "")
        return envelope(exc.status_code, code, detail, headers=headers)

    return handle


def methods_by_path(routes: Sequence[BaseRoute]) -> list[tuple[re.Pattern[str], set[str]]]:
    """Each route's path, compiled as Starlette compiles it, with the methods it serves."""
    return [(compile_path(r.path)[0], r.methods) for r in routes if isinstance(r, Route) and r.methods]


def allowed_methods(served: Sequence[tuple[re.Pattern[str], set[str]]], path: str) -> list[str]:
    """Every method some route serves at this path. Starlette's 405 names the first matching
    route's only (`Allow: DELETE` where GET is served too)."""
    methods: set[str] = set()
    for pattern, served_here in served:
        if pattern.fullmatch(path):
            methods |= served_here
    return sorted(methods)


async def on_unauthenticated(request: Request, exc: Exception) -> JSONResponse:
    return envelope(401, "Unauthorized", f"{exc}: send Authorization: Bearer <key>", headers=BEARER_CHALLENGE)


async def on_forbidden(request: Request, exc: Exception) -> JSONResponse:
    return envelope(403, "Forbidden", str(exc))


def unexpected() -> JSONResponse:
    """The answer to a failure nothing recognised (details go to the log only)."""
    return envelope(500, "InternalError", "the server failed unexpectedly; see its log")


async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    # Starlette's error middleware answers with this, then re-raises for the front door to log.
    return unexpected()


def install_error_handlers(app: FastAPI, routes: Sequence[BaseRoute]) -> None:
    app.add_exception_handler(500, on_unexpected)
    app.add_exception_handler(QueueError, on_queue_error)
    app.add_exception_handler(Unauthenticated, on_unauthenticated)
    app.add_exception_handler(Forbidden, on_forbidden)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error([*app.routes, *routes]))
