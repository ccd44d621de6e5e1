"""The SQS door's routes and its dispatch: `POST /` and `POST /{account_id}/{queue}`.

They are no part of the OpenAPI spec (the REST API's contract): SQS's own model describes them. A
request is decoded in whichever protocol it came (simplequeue.api.sqs.protocol), its action called,
and the answer or the error written in that protocol. Every error is SQS's, never the REST API's
envelope: SQS's clients read no other.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Scope

from simplequeue.api.auth import Grant, signs_itself
from simplequeue.api.front import DoorRules
from simplequeue.api.request_ids import REQUEST_ID
from simplequeue.api.sqs import handles, identity, moves, permissions, queues, receives, sends, tags
from simplequeue.api.sqs.context import Context
from simplequeue.api.sqs.errors import (
    JSON_CONTENT_TYPE,
    NAMESPACE,
    SqsError,
    from_domain,
    response,
    unsupported,
)
from simplequeue.api.sqs.protocol import Call, Wire, decode, to_json, to_xml
from simplequeue.api.sqs.sigv4 import SERVICES, SigV4Refusal, verify
from simplequeue.api.sqs.urls import Place, base_url, queue_of_path
from simplequeue.domain import QueueError
from simplequeue.service.queues import QueueService

log = logging.getLogger("simplequeue.sqs")

Handler = Callable[[Context, dict[str, Any]], Awaitable[dict[str, Any]]]

ACTIONS: dict[str, Handler] = {
    "CreateQueue": queues.create_queue,
    "GetQueueUrl": queues.get_queue_url,
    "ListQueues": queues.list_queues,
    "GetQueueAttributes": queues.get_queue_attributes,
    "SetQueueAttributes": queues.set_queue_attributes,
    "DeleteQueue": queues.delete_queue,
    "PurgeQueue": queues.purge_queue,
    "ListDeadLetterSourceQueues": queues.list_dead_letter_source_queues,
    "AddPermission": permissions.add_permission,
    "RemovePermission": permissions.remove_permission,
    "TagQueue": tags.tag_queue,
    "UntagQueue": tags.untag_queue,
    "ListQueueTags": tags.list_queue_tags,
    "SendMessage": sends.send_message,
    "SendMessageBatch": sends.send_message_batch,
    "ReceiveMessage": receives.receive_message,
    "DeleteMessage": handles.delete_message,
    "DeleteMessageBatch": handles.delete_message_batch,
    "ChangeMessageVisibility": handles.change_message_visibility,
    "ChangeMessageVisibilityBatch": handles.change_message_visibility_batch,
    "StartMessageMoveTask": moves.start_message_move_task,
    "ListMessageMoveTasks": moves.list_message_move_tasks,
    "CancelMessageMoveTask": moves.cancel_message_move_task,
    # STS's, which SDKs and tools ask on the same endpoint (its own namespace, below).
    "GetCallerIdentity": identity.get_caller_identity,
}
NAMESPACES = {"GetCallerIdentity": identity.STS_NAMESPACE}


@dataclass(frozen=True, slots=True)
class Named:
    """How the access log and the metrics name an SQS request (their `route`): by its action, of a
    bounded set, never by anything the caller chose."""

    path_format: str


NAMED = {action: Named(f"/ (SQS {action})") for action in ACTIONS}
UNNAMED = Named("/ (SQS)")


@dataclass(frozen=True, slots=True)
class SqsConfig:
    """The settings the door answers by (SIMPLEQUEUE_PUBLIC_URL, _SQS_ACCOUNT_ID, _SQS_REGION)."""

    public_url: str | None = None
    account_id: str = "000000000000"
    region: str = "us-east-1"


class SqsDoor(Route):
    """Matches the door's POSTs only: any other method at `/` is answered as before (404)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and signs_itself(scope):
            return Match.FULL, {"endpoint": self.endpoint, "path_params": {}}
        return Match.NONE, {}


async def serve(request: Request) -> Response:
    request_id = REQUEST_ID.get()
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.scope["headers"]}
    wire = Wire.JSON if "x-amz-target" in headers else Wire.QUERY
    action = "?"
    request.scope["route"] = UNNAMED
    try:
        body = await request.body()
        grant = caller(request, body)
        call = decode(headers, request.url.query, body)
        wire, action = call.wire, call.action
        request.scope["route"] = NAMED.get(action, UNNAMED)
        result = await _call(request, headers, call, grant)
    except SqsError as exc:
        return _error(exc, wire, request_id)
    except QueueError as exc:
        error = from_domain(exc)
        if error.status >= 500:
            log.warning("request %s: SQS %r failed: %s: %s", request_id, action[:80], exc.code, exc.detail)
        return _error(error, wire, request_id)
    except Exception:
        log.exception("request %s: SQS %r failed unexpectedly", request_id, action[:80])
        return _error(from_domain(QueueError()), wire, request_id)
    answer_headers = {"x-amzn-requestid": request_id}
    if wire is Wire.JSON:
        return Response(to_json(result), 200, answer_headers, media_type=JSON_CONTENT_TYPE)
    namespace = NAMESPACES.get(action, NAMESPACE)
    return Response(to_xml(action, result, request_id, namespace), 200, answer_headers, media_type="text/xml")


async def _call(request: Request, headers: dict[str, str], call: Call, grant: Grant) -> dict[str, Any]:
    config: SqsConfig = getattr(request.app.state, "sqs", None) or SqsConfig()
    handler = ACTIONS.get(call.action)
    if handler is None:
        raise unsupported(call.action)
    place = Place(
        base_url(config.public_url, request.url.scheme, headers.get("host", request.url.netloc)),
        config.account_id,
        config.region,
    )
    service: QueueService = request.app.state.service
    service.require_ready()
    state = request.app.state
    context = Context(
        service,
        place,
        grant,
        path_queue=queue_of_path(request.url.path, config.account_id),
        gone=request.is_disconnected,
        xml=call.wire is Wire.QUERY,
        # This process's own state for the door (simplequeue.service.local), from the lifespan.
        moves=getattr(state, "sqs_moves", None),
        attempts=getattr(state, "sqs_attempts", None),
        purges=getattr(state, "sqs_purges", None),
    )
    return await handler(context, call.params)


def caller(request: Request, body: bytes, services: frozenset[str] = SERVICES) -> Grant:
    """Who calls: with no keys, anyone (the front door said so); with keys, the key whose SigV4
    signature the request carries (or a Bearer key the front door knew). `services`: the scopes
    the signature may name (the SNS door asks with its own)."""
    grant: Grant | None = getattr(request.state, "grant", None)
    if grant is not None:
        return grant
    door: DoorRules | None = getattr(request.app, "door", None)
    if door is None:
        raise SqsError("MissingAuthenticationToken", "Request is missing Authentication Token")
    keyring = door.keyring
    scope = request.scope
    headers: dict[str, str] = {}
    for key, value in scope["headers"]:
        name, text = key.decode("latin-1").lower(), value.decode("latin-1")
        headers[name] = f"{headers[name]},{text}" if name in headers else text
    raw_path = scope.get("raw_path") or scope["path"].encode()
    try:
        access_key_id = verify(
            scope["method"],
            raw_path.decode("latin-1"),
            scope.get("query_string", b"").decode("latin-1"),
            headers,
            body,
            lambda akid: k.secret if (k := keyring.sigv4(akid)) is not None else None,
            datetime.now(UTC),
            services,
        )
    except SigV4Refusal as refusal:
        raise SqsError(refusal.code, refusal.message, refusal.status) from None
    key = keyring.sigv4(access_key_id)
    if key is None:  # the keyring changed between the two looks; it does not, but say so if it did
        raise SqsError("InvalidClientTokenId", "The security token included in the request is invalid.")
    return key.grant


def _error(error: SqsError, wire: Wire, request_id: str) -> Response:
    return response(error, json_wire=wire is Wire.JSON, request_id=request_id)


def sqs_routes() -> list[Route]:
    return [SqsDoor("/", serve, methods=["GET", "POST"], include_in_schema=False, name="sqs")]
