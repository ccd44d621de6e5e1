"""The one layer of ours around every HTTP request: the front door.

In order, for each request:
- an id (the client's `X-Request-ID` when it is sensible, else a new one), answered in
  `X-Request-ID` and named in every log line about the request;
- the body, read whole within a size limit (413; in SQS's error shape at the SQS door) and a time
  limit (408), so that a client that trickles its body cannot hold a connection and its file
  descriptor for long;
- the caller, from its API key (401 before anything is parsed; see simplequeue.api.auth);
- the answer: a hot route (push, pop, complete, fail, extend, get an item) is looked up in a
  small table and its function called straight from here with the inputs read in plain code
  (simplequeue.api.hot); every other request, and one whose inputs the hot path declines, goes on
  to FastAPI's own stack;
- one access-log line and the metrics' observation, after the answer.

What the app fails on unexpectedly is answered here with the 500 envelope. Starlette's own error
middleware re-raises after answering, and the server then drops the keep-alive connection without
saying so, so the client's next request on it would fail with a reset: an exception after a
complete answer is logged and goes no further.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, ExceptionHandler, Message, Receive, Scope, Send

from simplequeue.api.access_log import Observer, Served, log_served, template_of
from simplequeue.api.auth import Keyring, authenticate, signs_itself
from simplequeue.api.errors import envelope, unexpected
from simplequeue.api.hot import Declined, HotCall, HotRoute, HotRoutes
from simplequeue.api.request_ids import REQUEST_ID, request_id_of
from simplequeue.api.sqs.errors import SqsError
from simplequeue.api.sqs.errors import response as sqs_response

log = logging.getLogger("simplequeue.http")

HttpHandler = Callable[[Request, Exception], Awaitable[Response]]

_CLOSE = {"Connection": "close"}


AwsRefusal = Callable[[Scope, int, str, str], Response]
"""(scope, status, AWS's error code, message) -> the refusal in the AWS door's own shape and protocol
(the SQS door's or the SNS door's: api.aws tells them apart, which the front door need not know)."""


def sqs_refusal(scope: Scope, status: int, code: str, message: str) -> Response:
    json_wire = any(name == b"x-amz-target" for name, _ in scope["headers"])
    return sqs_response(SqsError(code, message), json_wire=json_wire, request_id=REQUEST_ID.get())


@dataclass(frozen=True)
class DoorRules:
    """What the front door holds every request to, and who hears of it."""

    keyring: Keyring
    max_body_bytes: int
    body_timeout_seconds: float
    access_log: bool = True
    observers: Sequence[Observer] = ()
    aws_refusal: AwsRefusal = sqs_refusal


class FrontDoor:
    def __init__(
        self,
        app: ASGIApp,
        rules: DoorRules,
        *,
        hot: HotRoutes,
        routes: Sequence[BaseRoute],
        exception_handlers: Mapping[Any, ExceptionHandler],
    ) -> None:
        self.app = app  # FastAPI's own stack, for everything but the hot routes
        self.hot = hot
        self.routes = routes
        self.handlers = exception_handlers
        self.keyring = rules.keyring
        self.max_body_bytes = rules.max_body_bytes
        self.body_timeout = rules.body_timeout_seconds
        self.access_log = rules.access_log
        self.observers = list(rules.observers)
        self.aws_refusal = rules.aws_refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started_at = time.perf_counter()
        request_id = request_id_of(scope)
        token = REQUEST_ID.set(request_id)
        id_header = (b"x-request-id", request_id.encode())
        status = 500  # what the client sees if the app fails before answering
        started = complete = False

        async def answer(message: Message) -> None:
            nonlocal status, started, complete
            if message["type"] == "http.response.start":
                started, status = True, message["status"]
                message["headers"] = [*message.get("headers", ()), id_header]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                complete = True
            await send(message)

        hot = self.hot.match(scope)
        try:
            await self._serve(scope, receive, answer, hot)
        except Exception:
            log.exception("request %s: %s %s failed unexpectedly", request_id, scope["method"], scope["path"])
            if not started:
                await unexpected()(scope, receive, answer)
            elif not complete:
                raise  # half an answer went out: only closing the connection can tell the client
        finally:
            REQUEST_ID.reset(token)
            if self.access_log or self.observers:
                route = hot[0].template if hot else template_of(scope, self.routes)
                seconds = time.perf_counter() - started_at
                served = Served(request_id, scope["method"], scope["path"], route, status, seconds)
                for observe in self.observers:
                    observe(served)
                if self.access_log:
                    log_served(served)

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, hot: tuple[HotRoute, dict[str, Any]] | None
    ) -> None:
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        body = b""
        if declared is not None or b"transfer-encoding" in headers:
            if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
                await self._refuse_size(scope, receive, send)
                return
            try:
                async with asyncio.timeout(self.body_timeout):
                    read = await self._read_body(receive)
            except TimeoutError:
                detail = f"the request body did not arrive within {self.body_timeout:g} seconds"
                await self._refuse(scope, receive, send, 408, ("RequestTimeout", "RequestTimeout"), detail)
                return
            if read is None:
                return  # the client went away: there is nobody to answer
            if len(read) > self.max_body_bytes:
                await self._refuse_size(scope, receive, send)
                return
            body = read
            receive = _replay(body, receive)
        refusal = authenticate(self.keyring, scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if hot is None:
            await self.app(scope, receive, send)
            return
        route, path_params = hot
        request = Request(scope, receive)
        try:
            response = await route.function(HotCall(request, body, path_params))
        except Declined:
            # An input the hot path does not read: FastAPI's reading answers (nothing has been
            # taken from `receive` yet, which replays the body).
            await self.app(scope, receive, send)
            return
        except Exception as exc:
            handler = self._handler_for(exc)
            if handler is None:
                raise
            response = await handler(request, exc)
        await response(scope, receive, send)

    def _handler_for(self, exc: Exception) -> HttpHandler | None:
        """The app's handler for this exception, as Starlette would pick it (nearest class first);
        every handler of ours is an async function of a Request."""
        for cls in type(exc).__mro__:
            if cls in self.handlers:
                return cast(HttpHandler, self.handlers[cls])
        return None

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
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _refuse_size(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"request body is over {self.max_body_bytes} bytes"
        await self._refuse(scope, receive, send, 413, ("PayloadTooLarge", "RequestEntityTooLarge"), detail)

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, status: int, codes: tuple[str, str], detail: str
    ) -> None:
        """Refuse a request the front door will not read on, closing the connection (else the
        server would go on reading the rest of a body it refused), in the caller's shape: AWS's
        clients read their service's error shapes only, in their protocol. codes: the HTTP API's
        code, then AWS's."""
        code, aws_code = codes
        if signs_itself(scope):
            refusal = self.aws_refusal(scope, status, aws_code, f"The {detail}.")
            refusal.headers.update(_CLOSE)
            await refusal(scope, receive, send)
            return
        await envelope(status, code, detail, headers=_CLOSE)(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()  # disconnects, after the body
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
