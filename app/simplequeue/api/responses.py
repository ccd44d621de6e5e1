"""How the routes answer: bodies serialized once, payloads spliced in as the text the store holds;
and what each operation declares to the spec besides its own answer (`also`, `errors`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import Response, status
from pydantic import BaseModel

from simplequeue.api.errors import ErrorBody, codes_of
from simplequeue.domain import Page

T = TypeVar("T")


def serialized(body: BaseModel, status_code: int = status.HTTP_200_OK) -> Response:
    """The hot routes' answer, serialized once by pydantic-core.

    A route that returns a model has FastAPI validate it again before serializing it; these
    bodies are built from values the store and the request already validated, and under load
    that second validation was the largest cost left in the service (see bench/).
    """
    return Response(body.model_dump_json(), status_code=status_code, media_type="application/json")


def json_text(text: str, status_code: int = status.HTTP_200_OK) -> Response:
    """An answer already serialized as JSON (payloads go out as the text the store holds)."""
    return Response(text, status_code=status_code, media_type="application/json")


def page_response(page: Page[T], json_of: Callable[[T], str]) -> Response:
    """A page, each entry serialized by `json_of` (payloads spliced in), and its next cursor."""
    entries = ",".join(json_of(entry) for entry in page.items)
    return json_text('{"items":[' + entries + '],"next_cursor":' + json.dumps(page.next_cursor) + "}")


def with_payload(model: BaseModel, payload_json: str | None, **texts: str | None) -> str:
    """The model as JSON with its `payload` as the stored JSON text, spliced in unparsed: whatever
    the store holds can be answered, at no cost of decoding and encoding it again. `texts` are
    further fields the store holds as JSON text (an item's attributes), spliced in likewise."""
    head = model.model_dump_json(exclude={"payload", *texts})
    spliced = "".join(f',"{name}":{_or_null(text)}' for name, text in texts.items())
    return f'{head[:-1]},"payload":{_or_null(payload_json)}{spliced}}}'


def _or_null(text: str | None) -> str:
    return "null" if text is None else text


def also(code: int, model: type[BaseModel], description: str) -> dict[int | str, dict[str, Any]]:
    """A success status besides the route's own, for the spec."""
    return {code: {"model": model, "description": description}}


_WHY: dict[int, str] = {
    400: "The body is not valid JSON.",
    401: "The service has API keys, and none (or an unknown one) was sent.",
    403: "The API key's role or queues do not allow this.",
    404: "No such item or queue.",
    408: "The request's headers or body did not arrive in time; the connection is closed.",
    409: "Conflicts with the item's current state (or would make a queue past the service's most).",
    413: "The request body is over the service's limit (pushes: or a payload over its limit).",
    415: "The body was not sent as application/json.",
    422: "Invalid input.",
    500: "The database refused a statement, or the server failed unexpectedly.",
    503: "The database is unavailable or not migrated.",
}


def errors(*codes: int, public: bool = False) -> dict[int | str, dict[str, Any]]:
    """The error answers an operation may give, with the codes each may carry. Any request may meet
    the header and body deadlines (408) or an unexpected failure (500); any but the public ones may
    lack a key (401) or the key its rights (403)."""
    always = {408, 500} if public else {401, 403, 408, 500}
    return {
        code: {"model": ErrorBody, "description": f"{_WHY[code]} Codes: {', '.join(codes_of(code))}."}
        for code in sorted({*codes, *always})
    }
