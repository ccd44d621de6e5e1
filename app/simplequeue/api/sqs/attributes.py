"""A queue's SQS attributes: which the door takes, the values each may have, and where each lives.

- VisibilityTimeout is the queue's lease setting, shared with the REST API.
- DelaySeconds, ReceiveMessageWaitTimeSeconds and MaximumMessageSize are kept as the queue's
  attributes and apply to SQS calls (a send without its own DelaySeconds, a receive without its own
  WaitTimeSeconds, every send's size); REST pushes and pops say their own delay, wait and size.
- MessageRetentionPeriod is the queue's message_retention_seconds setting, shared with the REST
  API: a receive never hands out a message older than it, and the sweep deletes them (a queue made
  through SQS keeps SQS's default of 4 days; one made through the REST API, none).
- Policy and RedriveAllowPolicy are kept and answered as given: the door's access is the service's
  keys and roles, and RedriveAllowPolicy only matters to a RedrivePolicy naming this queue.
- RedrivePolicy is the queue's dead_letter_queue and max_attempts settings (its target and its
  maxReceiveCount; simplequeue.api.sqs.queues checks the target), shared with the REST API, and
  answered from them as SQS answers it (compact JSON, maxReceiveCount a number) while a target is set.
- ContentBasedDeduplication (FIFO queues) is kept, and a send without a MessageDeduplicationId
  to a queue that has it true is deduplicated by the SHA-256 of its body.
- DeduplicationScope and FifoThroughputLimit (FIFO queues, high throughput) are kept; with
  DeduplicationScope messageGroup a deduplication id matches within its message group only.
  Throughput has no per-queue cap here to lift, so FifoThroughputLimit changes nothing else.
- SqsManagedSseEnabled, KmsMasterKeyId and KmsDataKeyReusePeriodSeconds are kept and answered, so
  that queues made by Terraform, CloudFormation or the CDK come up: encryption at rest is the
  database's own (its disk or TDE), which no key named here changes.
- Booleans are taken in any case ("True", as CloudFormation sends them) and answered lower-case.
- The rest of SQS's attributes are refused with the attribute named, never accepted and ignored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from simplequeue.api.sqs import params
from simplequeue.api.sqs.errors import SqsError, invalid
from simplequeue.api.sqs.urls import is_fifo
from simplequeue.domain.metadata import QueueMetadata

MAX_REDRIVE_SOURCES = 10
PERMISSIONS = ("allowAll", "denyAll", "byQueue")  # RedriveAllowPolicy's redrivePermission
FIFO_ONLY = {
    "ContentBasedDeduplication": "Unknown Attribute {key}.",
    "DeduplicationScope": "You can specify the {key} only when FifoQueue is set to true.",
    "FifoThroughputLimit": "You can specify the {key} only when FifoQueue is set to true.",
}
"""Attributes a standard queue does not know: InvalidAttributeName, with SQS's words for each."""
FIFO_DEFAULTS = {
    "ContentBasedDeduplication": "false",
    "DeduplicationScope": "queue",
    "FifoThroughputLimit": "perQueue",
}
"""What a FIFO queue answers for the FIFO-only attributes it never set."""
COUNTS = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)
TIMESTAMPS = ("CreatedTimestamp", "LastModifiedTimestamp")


def _bad(name: str, why: str) -> SqsError:
    return SqsError("InvalidAttributeValue", f"Invalid value for the parameter {name}. Reason: {why}")


def _integer(low: int, high: int) -> Callable[[str, str, int], str]:
    def check(name: str, value: str, limit: int) -> str:
        if not value.strip().isdigit() or not low <= int(value) <= high:
            raise _bad(name, f"an integer from {low} to {high}.")
        return str(int(value))

    return check


def _one_of(*choices: str) -> Callable[[str, str, int], str]:
    def check(name: str, value: str, limit: int) -> str:
        if value not in choices:
            raise _bad(name, f"one of {', '.join(choices)}.")
        return value

    return check


def _any_text(name: str, value: str, limit: int) -> str:
    return value


def _size(name: str, value: str, limit: int) -> str:
    if not value.strip().isdigit() or not 1024 <= int(value) <= limit:
        why = f"an integer from 1024 to {limit}, the service's SIMPLEQUEUE_MAX_PAYLOAD_BYTES."
        raise _bad(name, why)
    return str(int(value))


def _policy(name: str, value: str, limit: int) -> str:
    if value == "":
        return value  # removes the policy
    try:
        parsed = json.loads(value)
    except ValueError:
        raise _bad(name, "a JSON policy document.") from None
    if not isinstance(parsed, dict):
        raise _bad(name, "a JSON object.")
    return value


def _redrive_allow(name: str, value: str, limit: int) -> str:
    if value == "":
        return value
    try:
        parsed = json.loads(value)
    except ValueError:
        raise _bad(name, "a JSON object.") from None
    if not isinstance(parsed, dict) or parsed.get("redrivePermission") not in (
        "allowAll",
        "denyAll",
        "byQueue",
    ):
        raise _bad(name, 'redrivePermission must be "allowAll", "denyAll" or "byQueue".')
    sources = parsed.get("sourceQueueArns")
    if parsed["redrivePermission"] == "byQueue":
        if not isinstance(sources, list) or not 1 <= len(sources) <= MAX_REDRIVE_SOURCES:
            raise _bad(name, f"byQueue needs sourceQueueArns: 1 to {MAX_REDRIVE_SOURCES} queue ARNs.")
        if not all(isinstance(arn, str) and arn.startswith("arn:") for arn in sources):
            raise _bad(name, "sourceQueueArns must be queue ARNs.")
    elif sources is not None:
        raise _bad(name, "sourceQueueArns goes only with redrivePermission byQueue.")
    return value


REDRIVE_KEYS = ("deadLetterTargetArn", "maxReceiveCount")
MAX_RECEIVE_COUNT = 1000


@dataclass(frozen=True, slots=True)
class Redrive:
    target_arn: str
    max_receive_count: int


def redrive_policy(value: str) -> Redrive | None:
    """A RedrivePolicy's target and count, checked as SQS checks them (None: "" or {}, which remove
    the policy)."""

    def bad(reason: str) -> SqsError:
        return invalid("RedrivePolicy", value, reason)

    if value == "":
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        raise bad("Redrive policy is not a valid JSON map.") from None
    if not isinstance(parsed, dict):
        raise bad("Redrive policy is not a valid JSON map.")
    if not parsed:
        return None
    for key in REDRIVE_KEYS:
        if key not in parsed:
            raise bad(f"Redrive policy does not contain mandatory attribute: {key}.")
    if set(parsed) - set(REDRIVE_KEYS):
        raise bad("Only following attributes are supported: [deadLetterTargetArn, maxReceiveCount].")
    arn, count = parsed["deadLetterTargetArn"], parsed["maxReceiveCount"]
    if not isinstance(arn, str):
        raise bad("Dead letter target does not exist.")
    number = count if isinstance(count, int) and not isinstance(count, bool) else None
    if isinstance(count, str) and count.strip().lstrip("-").isdigit():
        number = int(count)
    if number is None or not 1 <= number <= MAX_RECEIVE_COUNT:
        raise bad(
            f"Invalid value for maxReceiveCount: {count}, valid values are from 1 to "
            f"{MAX_RECEIVE_COUNT} both inclusive."
        )
    return Redrive(arn, number)


def _boolean(name: str, value: str, limit: int) -> str:
    if value.lower() not in ("true", "false"):
        raise _bad(name, "true or false.")
    return value.lower()


def _redrive(name: str, value: str, limit: int) -> str:
    """The policy as SQS answers it: compact JSON, maxReceiveCount a number ("" or {}: removes it)."""
    policy = redrive_policy(value)
    if policy is None:
        return ""
    answer = {"deadLetterTargetArn": policy.target_arn, "maxReceiveCount": policy.max_receive_count}
    return json.dumps(answer, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Kept:
    """An attribute kept in the queue's metadata: its check, and its value when never set (None:
    not answered until set)."""

    check: Callable[[str, str, int], str]
    default: Callable[[int], str | None]


KEPT: dict[str, Kept] = {
    "DelaySeconds": Kept(_integer(0, 900), lambda limit: "0"),
    "ReceiveMessageWaitTimeSeconds": Kept(_integer(0, 20), lambda limit: "0"),
    "MaximumMessageSize": Kept(_size, str),
    # Not answered for a queue made through the REST API, whose items stay until they finish.
    "MessageRetentionPeriod": Kept(_integer(60, 1_209_600), lambda limit: None),
    "Policy": Kept(_policy, lambda limit: None),
    "RedriveAllowPolicy": Kept(_redrive_allow, lambda limit: None),
    "RedrivePolicy": Kept(_redrive, lambda limit: None),
    # FIFO queues only (checked): a send without a MessageDeduplicationId is deduplicated by the
    # SHA-256 of its body. Answered "false" for a FIFO queue that never set it.
    "ContentBasedDeduplication": Kept(_boolean, lambda limit: None),
    "DeduplicationScope": Kept(_one_of("messageGroup", "queue"), lambda limit: None),
    "FifoThroughputLimit": Kept(_one_of("perQueue", "perMessageGroupId"), lambda limit: None),
    # SQS encrypts new queues with its own keys unless given a KMS key: answered so by default.
    "SqsManagedSseEnabled": Kept(_boolean, lambda limit: None),
    "KmsMasterKeyId": Kept(_any_text, lambda limit: None),
    "KmsDataKeyReusePeriodSeconds": Kept(_integer(60, 86400), lambda limit: None),
}
DEFAULT_RETENTION_SECONDS = "345600"  # SQS's default MessageRetentionPeriod: 4 days
DEFAULT_KMS_REUSE_SECONDS = "300"
SETTINGS = frozenset({"VisibilityTimeout", "MessageRetentionPeriod", "RedrivePolicy"})
"""Attributes that are the queue's settings (QueueSettings), not kept in its metadata: checked here,
written and answered by simplequeue.api.sqs.queues."""
EMPTY_REMOVES = frozenset({"Policy", "RedriveAllowPolicy", "RedrivePolicy", "KmsMasterKeyId"})
"""Set to "", these are removed, as SQS removes them."""
READABLE = frozenset({"QueueArn", *COUNTS, "VisibilityTimeout", "FifoQueue", *KEPT})
KNOWN = frozenset({*READABLE, *TIMESTAMPS, "All"})


def checked(name: str, attributes: Mapping[str, Any], limit: int) -> dict[str, str]:
    """The attributes given for queue `name`, each known and of a value the service can hold,
    normalised as they will be answered. `limit` is the service's largest payload. FifoQueue is
    checked against the name by CreateQueue (simplequeue.api.sqs.queues)."""
    values: dict[str, str] = {}
    for key, value in attributes.items():
        if not isinstance(value, str):
            raise SqsError("InvalidAttributeValue", f"Invalid value for the parameter {key}.")
        if key in FIFO_ONLY and not is_fifo(name):
            raise SqsError("InvalidAttributeName", FIFO_ONLY[key].format(key=key))
        if not params.carried_by_xml(value):  # kept and answered: the query protocol must carry it
            raise SqsError("InvalidAttributeValue", f"The value of {key} holds a character XML cannot carry.")
        if key == "VisibilityTimeout":
            if not value.strip().isdigit() or not 0 <= int(value) <= 43200:
                raise _bad(key, "an integer from 0 to 43200.")
            value = str(int(value))
        elif key in KEPT:
            value = KEPT[key].check(key, value, limit)
        elif key == "FifoQueue":
            value = _boolean(key, value, limit)
        else:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {key}.")
        values[key] = value
    return values


def check_throughput(values: Mapping[str, str]) -> None:
    """A queue's attributes as they will be (kept and given): SQS allows FifoThroughputLimit
    perMessageGroupId only beside DeduplicationScope messageGroup."""
    scope = values.get("DeduplicationScope", "queue")
    if values.get("FifoThroughputLimit") == "perMessageGroupId" and scope != "messageGroup":
        raise _bad("FifoThroughputLimit", "perMessageGroupId needs DeduplicationScope messageGroup.")


def kept_of(metadata: QueueMetadata | None, limit: int) -> dict[str, str]:
    """The kept attributes' values: as set, else their defaults (those that have one)."""
    stored = metadata.attributes if metadata else {}
    values: dict[str, str] = {}
    for key, kept in KEPT.items():
        value = stored.get(key, kept.default(limit))
        if value is not None:
            values[key] = value
    # Set when the service allowed more: the service's limit holds now.
    values["MaximumMessageSize"] = str(min(int(values["MaximumMessageSize"]), limit))
    if "KmsMasterKeyId" in values:
        values.setdefault("KmsDataKeyReusePeriodSeconds", DEFAULT_KMS_REUSE_SECONDS)
        values.setdefault("SqsManagedSseEnabled", "false")
    else:
        values.setdefault("SqsManagedSseEnabled", "true")
    return values


def kept_number(metadata: QueueMetadata | None, key: str, limit: int) -> int:
    return int(kept_of(metadata, limit)[key])
