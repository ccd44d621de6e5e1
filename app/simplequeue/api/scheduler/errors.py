"""The door's errors as botocore reads them in the rest-json protocol: the code in the
`x-amzn-ErrorType` header (and the body's `__type`), the message in the body's `Message`."""

from __future__ import annotations

import json

from starlette.responses import Response

from simplequeue.api.sqs.errors import SqsError
from simplequeue.domain import (
    DatabaseUnavailable,
    InvalidCursor,
    InvalidPayload,
    PayloadTooLarge,
    QueueError,
    SchemaNotReady,
    TooManyQueues,
)
from simplequeue.domain.schedules import InvalidSchedule, ScheduleNotFound

_STATUS = {
    "ValidationException": 400,
    "AccessDeniedException": 403,
    "ResourceNotFoundException": 404,
    "ConflictException": 409,
    "ServiceQuotaExceededException": 402,
    "InternalServerException": 500,
}
_SIGV4 = {
    # SigV4's refusals in the words of AWS's rest-json services (SQS's query names, 403 both).
    "SignatureDoesNotMatch": "InvalidSignatureException",
    "InvalidClientTokenId": "UnrecognizedClientException",
}


_FIELDS = {
    "every_seconds": "ScheduleExpression",
    "cron": "ScheduleExpression",
    "at": "ScheduleExpression",
    "timezone": "ScheduleExpressionTimezone",
    "queue": "Target.Arn",
    "group": "Target.SqsParameters.MessageGroupId",
    "jitter_seconds": "FlexibleTimeWindow.MaximumWindowInMinutes",
    "name": "Name",
}
"""Our schedules' fields by the names this door's callers gave them."""


class SchedulerError(Exception):
    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status or _STATUS.get(code, 400)


def invalid(message: str) -> SchedulerError:
    return SchedulerError("ValidationException", message)


def no_schedule(name: str) -> SchedulerError:
    return SchedulerError("ResourceNotFoundException", f"Schedule {name} does not exist.")


def from_sigv4(error: SqsError) -> SchedulerError:
    """A signature's refusal (simplequeue.api.sqs.routes.caller), with its status."""
    return SchedulerError(_SIGV4.get(error.code, error.code), error.message, error.status)


def from_domain(error: QueueError, name: str) -> SchedulerError:
    """The domain's error as this door answers it; `name`: the schedule the call names."""
    if isinstance(error, ScheduleNotFound):
        return no_schedule(name)
    if isinstance(error, InvalidSchedule):
        return invalid(f"{_FIELDS.get(error.field, error.field)}: {error.detail}")
    if isinstance(error, InvalidPayload | PayloadTooLarge):
        return invalid(f"Target.Input: {error.detail}")
    if isinstance(error, InvalidCursor):
        return invalid("NextToken is not one this service handed out.")
    if isinstance(error, TooManyQueues):
        return SchedulerError("ServiceQuotaExceededException", error.detail)
    if isinstance(error, DatabaseUnavailable | SchemaNotReady):
        return SchedulerError("InternalServerException", "The service cannot reach its database; try again.")
    return SchedulerError("InternalServerException", "The service failed to answer; try again.")


def response(error: SchedulerError, request_id: str) -> Response:
    body = json.dumps({"__type": error.code, "Message": error.message})
    headers = {"x-amzn-ErrorType": error.code, "x-amzn-requestid": request_id}
    return Response(body, error.status, headers, media_type="application/json")
