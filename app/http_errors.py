"""Maps the domain's error tree, validation errors and HTTP errors to one JSON envelope."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import QueueError
from app.schemas import ErrorBody

log = logging.getLogger("simplequeue")


def envelope(
    status: int,
    code: str,
    detail: str,
    fields: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = ErrorBody(error=code, detail=detail, fields=fields)
    if status == 503:
        headers = {**(headers or {}), "Retry-After": "1"}
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status, headers=headers)


async def on_queue_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, QueueError)
    if exc.status_code >= 500:
        log.warning("%s: %s", exc.code, exc.detail, exc_info=exc.__cause__)
    return envelope(exc.status_code, exc.code, exc.detail)


async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    content_type = request.headers.get("content-type", "")
    if request.method in ("POST", "PUT", "PATCH") and "json" not in content_type:
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


async def on_http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = HTTPStatus(exc.status_code).phrase.replace(" ", "").replace("-", "")
    return envelope(exc.status_code, code, str(exc.detail), headers=exc.headers)  # keeps 405's Allow


async def on_unexpected_error(_: Request, exc: Exception) -> JSONResponse:
    # Only what nothing else recognised lands here; it is a bug worth a traceback.
    log.error("unhandled error", exc_info=exc)
    return envelope(500, "InternalError", "the server failed unexpectedly; see its log")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(QueueError, on_queue_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected_error)


class BodyLimit:
    """Refuses request bodies over a limit without reading more than the limit into memory."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit():
            if int(declared) > self.max_bytes:
                await self._refuse(scope, receive, send)
            else:  # the server holds the client to its Content-Length
                await self.app(scope, receive, send)
            return
        # Chunked: read up to the limit here, because FastAPI turns any error raised while it
        # reads the body into a generic 400.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = envelope(413, "PayloadTooLarge", f"request body is over {self.max_bytes} bytes")
        await response(scope, receive, send)
