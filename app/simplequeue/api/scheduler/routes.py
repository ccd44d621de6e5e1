"""The EventBridge Scheduler door's route and dispatch: `/schedules` and `/schedules/{Name}`,
signed with SigV4 for the service `scheduler` (simplequeue.api.auth.to_scheduler), ahead of the
REST API's routes of the same paths, which serve every other request there.

The signature is checked as the SQS door checks it (the same keys), for the scope `scheduler`
only; who may do what follows the REST schedule routes (an admin key covering the queue). Answers
and errors are rest-json, as botocore reads them."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Scope

from simplequeue.api.auth import SCHEDULER_PATH, to_scheduler
from simplequeue.api.request_ids import REQUEST_ID
from simplequeue.api.scheduler import actions
from simplequeue.api.scheduler.actions import Context
from simplequeue.api.scheduler.errors import SchedulerError, from_domain, from_sigv4, invalid, response
from simplequeue.api.sqs.errors import SqsError
from simplequeue.api.sqs.routes import Named, SqsConfig, caller
from simplequeue.api.sqs.sigv4 import SCHEDULER_SERVICES
from simplequeue.api.sqs.urls import Place, base_url
from simplequeue.domain import QueueError

log = logging.getLogger("simplequeue.scheduler")

Operation = Callable[[Context, str | None, dict[str, Any], dict[str, Any]], Awaitable[dict[str, Any]]]

OPERATIONS: dict[tuple[str, bool], tuple[str, Operation]] = {
    # (method, whether the path names a schedule): EventBridge Scheduler's operation
    ("POST", True): ("CreateSchedule", actions.create_schedule),
    ("GET", True): ("GetSchedule", actions.get_schedule),
    ("PUT", True): ("UpdateSchedule", actions.update_schedule),
    ("DELETE", True): ("DeleteSchedule", actions.delete_schedule),
    ("GET", False): ("ListSchedules", actions.list_schedules),
}
NAMED = {key: Named(f"/schedules (EventBridge Scheduler {op})") for key, (op, _) in OPERATIONS.items()}
UNNAMED = Named("/schedules (EventBridge Scheduler)")


class SchedulerDoor(Route):
    """Matches the requests signed for `scheduler` only: any other at these paths is the REST API's."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and to_scheduler(scope):
            return Match.FULL, {"endpoint": self.endpoint, "path_params": {}}
        return Match.NONE, {}


async def serve(request: Request) -> Response:
    request_id = REQUEST_ID.get()
    match = SCHEDULER_PATH.fullmatch(request.scope["path"])
    assert match is not None, "the door matched the path"
    name = match[1]  # the path as the server decoded it once
    key = (request.method, name is not None)
    request.scope["route"] = NAMED.get(key, UNNAMED)
    operation = "?"
    try:
        body = await request.body()
        try:
            grant = caller(request, body, SCHEDULER_SERVICES)
        except SqsError as exc:
            raise from_sigv4(exc) from None
        if key not in OPERATIONS:
            raise SchedulerError("UnknownOperationException", "No operation of this door is sent so.", 404)
        operation, call = OPERATIONS[key]
        request.app.state.service.require_ready()
        result = await call(_context(request, grant), name, _params(body), dict(parse_qsl(request.url.query)))
    except SchedulerError as exc:
        return response(exc, request_id)
    except QueueError as exc:
        error = from_domain(exc, name or "")
        if error.status >= 500:
            log.warning("request %s: %s failed: %s: %s", request_id, operation, exc.code, exc.detail)
        return response(error, request_id)
    except Exception:
        log.exception("request %s: %s failed unexpectedly", request_id, operation)
        return response(from_domain(QueueError(), name or ""), request_id)
    return Response(json.dumps(result), 200, {"x-amzn-requestid": request_id}, media_type="application/json")


def _context(request: Request, grant: Any) -> Context:
    config: SqsConfig = getattr(request.app.state, "sqs", None) or SqsConfig()
    host = request.headers.get("host", request.url.netloc)
    place = Place(base_url(config.public_url, request.url.scheme, host), config.account_id, config.region)
    return Context(request.app.state.schedules, grant, place)


def _params(body: bytes) -> dict[str, Any]:
    if not body:
        return {}
    try:
        params = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise invalid("The body is not JSON.") from None
    if not isinstance(params, dict):
        raise invalid("The body must be a JSON object.")
    return params


def scheduler_routes() -> list[Route]:
    methods = ["GET", "POST", "PUT", "DELETE"]
    return [SchedulerDoor("/schedules", serve, methods=methods, include_in_schema=False)]
