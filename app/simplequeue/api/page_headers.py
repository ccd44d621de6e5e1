"""The headers the service's pages are served with (the dashboard, the spec's viewers): a page with
destructive buttons (purge, redrive) must not be framed by another site, nor run script or style
from anywhere but its own files, nor have its files' types guessed, nor tell other sites where it
was."""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from simplequeue.api.errors import envelope


def page_headers(*directives: str) -> dict[str, str]:
    """The headers of a page whose CSP also has `directives` (e.g. "img-src 'self' data:"), each
    narrowing default-src's 'self' for one kind of resource."""
    return {
        "Content-Security-Policy": "; ".join(["default-src 'self'", *directives, "frame-ancestors 'none'"]),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
    }


PAGE_HEADERS = page_headers()


class WithPageHeaders:
    """An ASGI app (the dashboard's StaticFiles) whose every answer, its 404s included, carries
    `headers` (PAGE_HEADERS unless given). A file that is not there is answered here, in the API's
    error envelope, rather than by the app's handler, which would answer past these headers."""

    def __init__(self, app: ASGIApp, headers: Mapping[str, str] = PAGE_HEADERS) -> None:
        self.app = app
        self.raw = [
            (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ours = {name for name, _ in self.raw}

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in ours]
                message = {**message, "headers": [*kept, *self.raw]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except HTTPException as e:
            path = scope.get("path", "")
            code = HTTPStatus(e.status_code).phrase.replace(" ", "")
            answer = envelope(e.status_code, code, f"nothing is served at {path}", headers=e.headers)
            await answer(scope, receive, send_with_headers)
