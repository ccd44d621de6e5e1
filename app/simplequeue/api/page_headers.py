"""The headers the dashboard's files are served with: a page with destructive buttons (purge,
redrive) must not be framed by another site, nor run script or style from anywhere but its own
files, nor have its files' types guessed, nor tell other sites where it was."""

from __future__ import annotations

from http import HTTPStatus

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from simplequeue.api.errors import envelope

PAGE_HEADERS: dict[str, str] = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_RAW = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in PAGE_HEADERS.items()]


class WithPageHeaders:
    """An ASGI app (the dashboard's StaticFiles) whose every answer, its 404s included, carries
    PAGE_HEADERS. A file that is not there is answered here, in the API's error envelope, rather than
    by the app's handler, which would answer past these headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in dict(_RAW)]
                message = {**message, "headers": [*kept, *_RAW]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except HTTPException as e:
            path = scope.get("path", "")
            code = HTTPStatus(e.status_code).phrase.replace(" ", "")
            answer = envelope(e.status_code, code, f"nothing is served at {path}", headers=e.headers)
            await answer(scope, receive, send_with_headers)
