"""The outermost layer of our own around every HTTP request.

- Gives each request an id (the client's `X-Request-ID` when it is sensible, else a new one),
  answered in `X-Request-ID` and named in every log line about the request.
- Reads the body whole before the app sees it, within a size limit (413) and a time limit (408):
  a client that trickles its body cannot hold a connection and its file descriptor for long.
- Answers what the app failed on unexpectedly with the 500 envelope itself. Starlette's own
  handler re-raises after answering, and the server then drops the keep-alive connection without
  saying so, so the client's next request on it fails with a reset.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from simplequeue.api.errors import envelope
from simplequeue.api.request_ids import REQUEST_ID, request_id_of

log = logging.getLogger("simplequeue.http")

_CLOSE = {"Connection": "close"}


class RequestGuard:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int, body_timeout_seconds: float) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        token = REQUEST_ID.set(request_id)
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self._serve(scope, receive, send_with_id)
        except Exception:
            log.exception("request %s: %s %s failed unexpectedly", request_id, scope["method"], scope["path"])
            if started:
                raise  # half an answer went out: only closing the connection can tell the client
            response = envelope(500, "InternalError", "the server failed unexpectedly; see its log")
            await response(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is None and b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body to wait for
            return
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._refuse_size(scope, receive, send)
            return
        try:
            async with asyncio.timeout(self.body_timeout):
                body = await self._read_body(receive)
        except TimeoutError:
            detail = f"the request body did not arrive within {self.body_timeout:g} seconds"
            await envelope(408, "RequestTimeout", detail, headers=_CLOSE)(scope, receive, send)
            return
        if body is None:
            return  # the client went away: there is nobody to answer
        if len(body) > self.max_body_bytes:
            await self._refuse_size(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read_body(self, receive: Receive) -> bytes | None:
        """The whole body; None if the client disconnected. Stops reading past the limit."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body_bytes or not message.get("more_body", False):
                return b"".join(chunks)

    async def _refuse_size(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Connection: close, or the server would go on reading the rest of the body it refused.
        detail = f"request body is over {self.max_body_bytes} bytes"
        await envelope(413, "PayloadTooLarge", detail, headers=_CLOSE)(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()  # disconnects, after the body
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
