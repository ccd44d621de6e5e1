"""The AWS doors on the service's port: Amazon SQS's (with STS's GetCallerIdentity,
simplequeue.api.sqs) and Amazon SNS's (simplequeue.api.sns), both `POST /` (or a GET naming an
Action), told apart as AWS's own endpoints need not (each service has its host there):

1. a request in the JSON protocol (`X-Amz-Target`) is SQS's: SNS speaks the query protocol only.
2. a request signed with SigV4 goes to the door its credential scope names: `sns` to SNS's, any
   other (`sqs`, `sts`, or one the SQS door then refuses) to SQS's. The scope is read before the
   signature is checked, and each door checks it with its own scopes only: a signature made for
   one service is never taken by the other door.
3. an unsigned request (the service has no keys, or it is refused for want of a signature): its
   `Action` decides. One of SNS's actions goes to SNS's door, anything else (SQS's, STS's, or one
   neither knows) to SQS's, as before the SNS door was. The two sets share no name, so nothing is
   ambiguous; SNS's UnsubscribeURL (`GET /?Action=Unsubscribe&SubscriptionArn=...`) arrives so.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Scope

from simplequeue.api.front import sqs_refusal
from simplequeue.api.request_ids import REQUEST_ID
from simplequeue.api.scheduler.errors import SchedulerError
from simplequeue.api.scheduler.errors import response as scheduler_response
from simplequeue.api.scheduler.routes import scheduler_routes
from simplequeue.api.sns import routes as sns
from simplequeue.api.sns.errors import SnsError
from simplequeue.api.sns.errors import response as sns_response
from simplequeue.api.sns.protocol import form
from simplequeue.api.sqs import routes as sqs
from simplequeue.api.sqs.sigv4 import scope_service


async def dispatch(request: Request) -> Response:
    return await (sns.serve(request) if await _is_sns(request) else sqs.serve(request))


async def _is_sns(request: Request) -> bool:
    headers = request.headers
    if "x-amz-target" in headers:
        return False
    query = request.scope.get("query_string", b"").decode("latin-1")
    service = scope_service({k.lower(): v for k, v in headers.items()}, query)
    if service is not None:
        return service == "sns"
    body = await request.body()  # kept by the request: the door reads it again
    try:
        action = form(query, body, headers.get("content-type")).get("Action", "")
    except SnsError:
        return False  # malformed: the SQS door says so as it always has
    return action in sns.ACTIONS


def refusal(scope: Scope, status: int, code: str, message: str) -> Response:
    """The front door's refusal (a body too large or too slow) in the shape of the door the
    request's signature names: SNS's XML for `sns`, EventBridge Scheduler's JSON for `scheduler`,
    else SQS's, in its protocol."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    service = scope_service(headers, scope.get("query_string", b"").decode("latin-1"))
    if service == "sns":
        return sns_response(SnsError(code, message, status), REQUEST_ID.get())
    if service == "scheduler":
        return scheduler_response(SchedulerError(code, message, status), REQUEST_ID.get())
    return sqs_refusal(scope, status, code, message)


__all__ = ["aws_routes", "dispatch", "refusal", "scheduler_routes"]


def aws_routes() -> list[Route]:
    return [sqs.SqsDoor("/", dispatch, methods=["GET", "POST"], include_in_schema=False, name="sqs")]
