"""SNS's errors: the codes callers switch on, and their shape on the wire (the query protocol's
`ErrorResponse` in SNS's namespace). `from_domain` says the service's errors in SNS's words, in
one place."""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape

from starlette.responses import Response

from simplequeue.api.sqs.errors import SqsError, readable
from simplequeue.domain import (
    DatabaseUnavailable,
    InvalidAttributes,
    InvalidCursor,
    InvalidPayload,
    PayloadTooLarge,
    QueueError,
    SchemaNotReady,
)
from simplequeue.domain.topics import (
    InvalidSubscription,
    InvalidTopic,
    SubscriptionNotFound,
    TopicExists,
    TopicNotFound,
)

NAMESPACE = "http://sns.amazonaws.com/doc/2010-03-31/"


@dataclass(frozen=True, slots=True)
class Kind:
    status: int = 400
    sender: bool = True  # the caller's fault (Sender) or the service's (Receiver)


KINDS: dict[str, Kind] = {
    # SNS's own (its model's error shapes: code and status).
    "NotFound": Kind(404),
    "ResourceNotFound": Kind(404),
    "InvalidParameter": Kind(),
    "ParameterValueInvalid": Kind(),  # botocore's InvalidParameterValueException
    "AuthorizationError": Kind(403),
    "TagLimitExceeded": Kind(),
    "TooManyEntriesInBatchRequest": Kind(),
    "BatchEntryIdsNotDistinct": Kind(),
    "EmptyBatchRequest": Kind(),
    "InvalidBatchEntryId": Kind(),
    "BatchRequestTooLong": Kind(),
    "InternalError": Kind(500, sender=False),
    # The errors common to AWS's services.
    "ValidationError": Kind(),
    "InvalidAction": Kind(),
    "ServiceUnavailable": Kind(503, sender=False),
}


class SnsError(Exception):
    """An SNS error to answer. `code` a key of KINDS, or one the SQS door's shared pieces raise
    (SigV4's refusals, a malformed form), whose status and fault it then carries."""

    def __init__(
        self, code: str, message: str, status: int | None = None, sender: bool | None = None
    ) -> None:
        message = readable(message)
        super().__init__(message)
        kind = KINDS.get(code, Kind())
        self.code = code
        self.message = message
        self.status = status if status is not None else kind.status
        self.sender = sender if sender is not None else kind.sender

    @property
    def fault(self) -> str:
        return "Sender" if self.sender else "Receiver"


def from_sqs(error: SqsError) -> SnsError:
    """An error of a piece shared with the SQS door (SigV4, the form's limits), as SNS answers:
    the same code, status and words."""
    return SnsError(error.query_code, error.query_message, error.status, error.kind.sender)


def invalid(name: str, reason: str | None = None) -> SnsError:
    """SNS's usual refusal: `Invalid parameter: <name>` and, if given, its reason."""
    return SnsError(
        "InvalidParameter", f"Invalid parameter: {name}" + (f" Reason: {reason}" if reason else "")
    )


def missing(name: str) -> SnsError:
    """A required parameter not sent (boto3 never lets this happen; a hand-made request may)."""
    field = name[:1].lower() + name[1:]
    return SnsError(
        "ValidationError",
        f"1 validation error detected: Value null at '{field}' failed to satisfy constraint: "
        "Member must not be null",
    )


def no_topic() -> SnsError:
    return SnsError("NotFound", "Topic does not exist")


def no_subscription() -> SnsError:
    return SnsError("NotFound", "Subscription does not exist")


def unsupported(action: str) -> SnsError:
    return SnsError("InvalidAction", f"The action {action} is not valid for this web service.")


def from_domain(exc: QueueError) -> SnsError:
    """The service's errors, as SNS names them (InvalidTopic's and InvalidSubscription's details
    are SNS's own words already)."""
    if isinstance(exc, TopicNotFound):
        return no_topic()
    if isinstance(exc, SubscriptionNotFound):
        return no_subscription()
    if isinstance(exc, InvalidTopic | InvalidSubscription | TopicExists):
        return SnsError("InvalidParameter", exc.detail)
    if isinstance(exc, InvalidAttributes):
        return SnsError("ParameterValueInvalid", f"Message attributes are invalid: {exc.detail}.")
    if isinstance(exc, PayloadTooLarge):
        return invalid("Message too long")
    if isinstance(exc, InvalidPayload):
        return invalid("Message", exc.detail)
    if isinstance(exc, InvalidCursor):
        return invalid("NextToken")
    if isinstance(exc, DatabaseUnavailable | SchemaNotReady):
        return SnsError("ServiceUnavailable", "The service is unavailable; try again.")
    return SnsError("InternalError", "The request processing has failed because of an internal error.")


def response(error: SnsError, request_id: str) -> Response:
    body = (
        f'<?xml version="1.0"?><ErrorResponse xmlns="{NAMESPACE}"><Error><Type>{error.fault}</Type>'
        f"<Code>{escape(error.code)}</Code><Message>{escape(error.message)}</Message></Error>"
        f"<RequestId>{escape(request_id)}</RequestId></ErrorResponse>"
    )
    headers = {"x-amzn-requestid": request_id}
    return Response(body.encode(), error.status, headers, media_type="text/xml")
