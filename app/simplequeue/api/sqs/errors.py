"""SQS's errors: the codes callers switch on, and their exact shapes on the wire.

An error has two codes. The JSON protocol's (`__type`, `com.amazonaws.sqs#QueueDoesNotExist`) and
the query protocol's legacy one (`AWS.SimpleQueueService.NonExistentQueue`), which JSON answers
carry too, in `x-amzn-query-error: <code>;Sender`: botocore fills `Error.Code` from that header
(SQS is "awsQueryCompatible"), so code written against the query protocol keeps working. The legacy
codes are those of botocore's query-protocol model of SQS (before 1.34.90).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from xml.sax.saxutils import escape

from starlette.responses import Response

from simplequeue.domain import (
    DatabaseUnavailable,
    InvalidAttributes,
    InvalidPayload,
    PayloadTooLarge,
    QueueError,
    QueueNotFound,
    SchemaNotReady,
    TooManyQueues,
)

NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"
JSON_CONTENT_TYPE = "application/x-amz-json-1.0"
MAX_MESSAGE = 1024  # characters of an error's message: it may quote what the caller sent
# Characters an error message does not carry as they are: those XML 1.0 cannot (an ErrorResponse
# holding one would not parse), and line ends (a message is one line).
_NOT_SHOWN = re.compile("[^\t\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


SQS_NAMESPACE = "com.amazonaws.sqs#"
COMMON_NAMESPACE = "com.amazon.coral.service#"


@dataclass(frozen=True, slots=True)
class Kind:
    query_code: str
    status: int = 400
    sender: bool = True  # the caller's fault (Sender) or the service's (Receiver)
    json_type: str | None = None
    """The JSON protocol's `__type` when it is not the code in SQS's namespace: the errors common
    to AWS's services are named by AWS's own front, differently (boto3 reports it as the error's
    QueryErrorCode; what callers switch on, Error.Code, comes from x-amzn-query-error)."""


KINDS: dict[str, Kind] = {
    # SQS's own (its model's error shapes).
    "QueueDoesNotExist": Kind("AWS.SimpleQueueService.NonExistentQueue"),
    "QueueNameExists": Kind("QueueAlreadyExists"),
    "QueueDeletedRecently": Kind("AWS.SimpleQueueService.QueueDeletedRecently"),
    "PurgeQueueInProgress": Kind("AWS.SimpleQueueService.PurgeQueueInProgress", 403),
    "UnsupportedOperation": Kind("AWS.SimpleQueueService.UnsupportedOperation"),
    "TooManyEntriesInBatchRequest": Kind("AWS.SimpleQueueService.TooManyEntriesInBatchRequest"),
    "BatchEntryIdsNotDistinct": Kind("AWS.SimpleQueueService.BatchEntryIdsNotDistinct"),
    "BatchRequestTooLong": Kind("AWS.SimpleQueueService.BatchRequestTooLong"),
    "EmptyBatchRequest": Kind("AWS.SimpleQueueService.EmptyBatchRequest"),
    "InvalidBatchEntryId": Kind("AWS.SimpleQueueService.InvalidBatchEntryId"),
    "MessageNotInflight": Kind("AWS.SimpleQueueService.MessageNotInflight"),
    "ReceiptHandleIsInvalid": Kind("ReceiptHandleIsInvalid"),
    "InvalidAttributeName": Kind("InvalidAttributeName"),
    "InvalidAttributeValue": Kind("InvalidAttributeValue"),
    "InvalidMessageContents": Kind("InvalidMessageContents"),
    "OverLimit": Kind("OverLimit", 403),
    "ResourceNotFoundException": Kind("ResourceNotFoundException", 404),  # a move task's queue or task
    # A request larger than the service reads (SIMPLEQUEUE_MAX_REQUEST_BYTES): SQS's front answers a
    # bare 413 Request Entity Too Large; this door answers the same status with an SQS error body.
    "RequestEntityTooLarge": Kind("RequestEntityTooLarge", 413),
    # A request whose body did not arrive within SIMPLEQUEUE_BODY_TIMEOUT_SECONDS: SQS's front
    # closes such a connection; this door answers 408 first, with an SQS error body.
    "RequestTimeout": Kind("RequestTimeout", 408),
    # The errors common to every AWS service.
    # Their JSON names are as AWS answers them (recorded by LocalStack's AWS-validated snapshots:
    # tests/aws/services/sqs/test_sqs.snapshot.json, QueryErrorCode).
    "MissingParameter": Kind(
        "MissingParameter", json_type=COMMON_NAMESPACE + "MissingRequiredParameterException"
    ),
    "InvalidParameterValue": Kind(
        "InvalidParameterValue", json_type=COMMON_NAMESPACE + "InvalidParameterValueException"
    ),
    "InvalidParameterCombination": Kind("InvalidParameterCombination"),
    "MalformedQueryString": Kind("MalformedQueryString", 404),
    "InvalidAction": Kind("InvalidAction"),
    "AccessDenied": Kind("AccessDenied", 403),
    "InvalidClientTokenId": Kind("InvalidClientTokenId", 403),
    "SignatureDoesNotMatch": Kind("SignatureDoesNotMatch", 403),
    "RequestExpired": Kind("RequestExpired", 400),
    "IncompleteSignature": Kind("IncompleteSignature", 400),
    "MissingAuthenticationToken": Kind("MissingAuthenticationToken", 403),
    "InternalFailure": Kind("InternalFailure", 500, sender=False),
    "ServiceUnavailable": Kind("ServiceUnavailable", 503, sender=False),
}


class SqsError(Exception):
    """An SQS error to answer: `code` is the JSON protocol's (a key of KINDS)."""

    def __init__(
        self, code: str, message: str, status: int | None = None, *, query_message: str | None = None
    ) -> None:
        message = readable(message)
        super().__init__(message)
        self.code = code
        self.message = message
        self.query_message = readable(query_message) if query_message is not None else message
        """The message the query protocol answers, where SQS words it otherwise."""
        self.kind = KINDS[code]
        self.status = status if status is not None else self.kind.status

    @property
    def query_code(self) -> str:
        return self.kind.query_code

    @property
    def fault(self) -> str:
        return "Sender" if self.kind.sender else "Receiver"


def readable(message: str) -> str:
    """At most MAX_MESSAGE characters (and a "…"), each that XML cannot carry or that ends a line
    shown as its Python escape (`\\x1f`, `\\n`, `\\ud800`)."""
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + "…"
    return _NOT_SHOWN.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), message)


def missing(name: str) -> SqsError:
    return SqsError("MissingParameter", f"The request must contain the parameter {name}.")


def invalid(name: str, value: object, reason: str) -> SqsError:
    return SqsError(
        "InvalidParameterValue", f"Value {value} for parameter {name} is invalid. Reason: {reason}"
    )


def no_queue() -> SqsError:
    # The query protocol's words are older (AWS-validated: LocalStack's test_non_existent_queue).
    return SqsError(
        "QueueDoesNotExist",
        "The specified queue does not exist.",
        query_message="The specified queue does not exist for this wsdl version.",
    )


def unsupported(action: str) -> SqsError:
    return SqsError("UnsupportedOperation", f"{action} is not supported by simplequeue's SQS door.")


def from_domain(exc: QueueError) -> SqsError:
    """The service's errors, as SQS names them."""
    if isinstance(exc, QueueNotFound):
        return no_queue()
    if isinstance(exc, PayloadTooLarge):
        return SqsError("InvalidParameterValue", f"One or more parameters are invalid. Reason: {exc.detail}")
    if isinstance(exc, InvalidAttributes):
        return SqsError("InvalidParameterValue", f"Message attributes are invalid: {exc.detail}.")
    if isinstance(exc, InvalidPayload):
        return SqsError("InvalidMessageContents", exc.detail)
    if isinstance(exc, TooManyQueues):
        return SqsError("OverLimit", f"Too many queues: {exc.detail}.")
    if isinstance(exc, DatabaseUnavailable | SchemaNotReady):
        return SqsError("ServiceUnavailable", "The service is unavailable; try again.")
    return SqsError("InternalFailure", "The request processing has failed because of an internal error.")


def json_error(error: SqsError) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of the JSON protocol's answer."""
    type_ = error.kind.json_type or SQS_NAMESPACE + error.code
    body = json.dumps({"__type": type_, "message": error.message}).encode()
    headers = {
        "content-type": JSON_CONTENT_TYPE,
        "x-amzn-errortype": type_,
        "x-amzn-query-error": f"{error.query_code};{error.fault}",
    }
    return error.status, headers, body


def xml_error(error: SqsError, request_id: str) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of the query protocol's answer: an ErrorResponse."""
    body = (
        f'<?xml version="1.0"?><ErrorResponse xmlns="{NAMESPACE}"><Error><Type>{error.fault}</Type>'
        f"<Code>{escape(error.query_code)}</Code><Message>{escape(error.query_message)}</Message><Detail/>"
        f"</Error><RequestId>{escape(request_id)}</RequestId></ErrorResponse>"
    )
    return error.status, {"content-type": "text/xml"}, body.encode()


def response(
    error: SqsError, *, json_wire: bool, request_id: str, headers: Mapping[str, str] | None = None
) -> Response:
    """The answer to a request that fails with `error`, in the protocol it came in."""
    status, shape_headers, body = json_error(error) if json_wire else xml_error(error, request_id)
    return Response(body, status, {**shape_headers, "x-amzn-requestid": request_id, **(headers or {})})
