"""Amazon SNS's HTTP/S delivery policy: a topic's or a subscription's DeliveryPolicy parsed and
refused as SNS does, the policy a subscription's deliveries follow, and the delay before each retry.

Sources: AWS's SNS developer guide, "Amazon SNS message delivery retries" (the four phases, the
3,600 s cap on a policy's total retry time, the HTTP/S default "up to three retries, 20 seconds
apart") and its DeliveryPolicy JSON pages for SetTopicAttributes and SetSubscriptionAttributes.

The default is the one SNS answers as EffectiveDeliveryPolicy and documents for HTTP/S: 3 retries,
none immediate, 20 s apart (min = max = 20, linear). "3 immediate retries, then backoff" is SNS's
policy for AWS-managed endpoints (SQS, Lambda), which no one can change; HTTP/S does not have it.

A delivery's attempts, numbered from 1 (the first try): after the first try come numRetries
retries in four phases: numNoDelayRetries with no delay, numMinDelayRetries at minDelayTarget, the
backoff phase (what is left) rising from minDelayTarget to maxDelayTarget, numMaxDelayRetries at
maxDelayTarget. AWS draws but does not define the backoff functions; here, over the phase's retries
k = 1..n, first at the minimum and last at the maximum:
- linear: equal steps;
- arithmetic: steps that grow by a constant amount (delays on a parabola);
- geometric: a constant ratio between delays (min * (max/min)^x);
- exponential: steps that double.

Where AWS is not followed, or says nothing and this chose: the limits' error texts are worded here
(only "Total policy retry time cannot be greater than 3600 seconds" is SNS's, as users quote it);
no jitter (SNS applies some: the caller may); sicklyRetryPolicy is accepted and ignored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

MAX_RETRIES = 100
MAX_DELAY_TARGET = 3600
MAX_TOTAL_RETRY_SECONDS = 3600
DEFAULT_CONTENT_TYPE = "text/plain; charset=UTF-8"
CONTENT_TYPES = frozenset(
    {"text/plain", "text/html", "text/xml", "text/csv", "application/json", "application/xml"}
)
"""Media types headerContentType may name, each alone or with "; charset=UTF-8"."""


class BackoffFunction(StrEnum):
    LINEAR = "linear"
    ARITHMETIC = "arithmetic"
    GEOMETRIC = "geometric"
    EXPONENTIAL = "exponential"


class DeliveryPolicyError(ValueError):
    """A DeliveryPolicy SNS would refuse: ``str(error)`` is the InvalidParameter message."""

    code = "InvalidParameter"

    def __init__(self, reason: str) -> None:
        super().__init__(f"Invalid parameter: DeliveryPolicy: {reason}")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """healthyRetryPolicy: numRetries retries after the first try, in four phases."""

    num_retries: int = 3
    num_no_delay_retries: int = 0
    min_delay_target: int = 20
    max_delay_target: int = 20
    num_min_delay_retries: int = 0
    num_max_delay_retries: int = 0
    backoff_function: BackoffFunction = BackoffFunction.LINEAR

    @property
    def num_backoff_retries(self) -> int:
        return (
            self.num_retries
            - self.num_no_delay_retries
            - self.num_min_delay_retries
            - self.num_max_delay_retries
        )

    def as_json(self) -> dict[str, object]:
        return {
            "minDelayTarget": self.min_delay_target,
            "maxDelayTarget": self.max_delay_target,
            "numRetries": self.num_retries,
            "numMaxDelayRetries": self.num_max_delay_retries,
            "numNoDelayRetries": self.num_no_delay_retries,
            "numMinDelayRetries": self.num_min_delay_retries,
            "backoffFunction": self.backoff_function.value,
        }


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    """What one HTTP/S subscription's deliveries follow."""

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_receives_per_second: int | None = None
    """None: no throttling."""
    header_content_type: str = DEFAULT_CONTENT_TYPE


@dataclass(frozen=True, slots=True)
class TopicDeliveryPolicy:
    """A topic's DeliveryPolicy ("http": defaults for its HTTP/S subscriptions). Sections it leaves
    out are None, so that a subscription's own sections (or SNS's defaults) apply."""

    retry: RetryPolicy | None = None
    max_receives_per_second: int | None = None
    header_content_type: str | None = None
    disable_subscription_overrides: bool = False


@dataclass(frozen=True, slots=True)
class SubscriptionDeliveryPolicy:
    retry: RetryPolicy | None = None
    max_receives_per_second: int | None = None
    header_content_type: str | None = None


DEFAULT_POLICY = DeliveryPolicy()

_RETRY_KEYS = {
    "numRetries": "num_retries",
    "numNoDelayRetries": "num_no_delay_retries",
    "minDelayTarget": "min_delay_target",
    "maxDelayTarget": "max_delay_target",
    "numMinDelayRetries": "num_min_delay_retries",
    "numMaxDelayRetries": "num_max_delay_retries",
}


def _object(value: object, path: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise DeliveryPolicyError(f"{path}: must be a JSON object")
    return value


def _whole(value: object, path: str) -> int:
    # JSON numbers only: true is an int to Python, and 2.5 seconds is no whole number of seconds.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DeliveryPolicyError(f"{path}: must be an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise DeliveryPolicyError(f"{path}: must be an integer")
        return int(value)
    return value


def _load(text: str) -> Mapping[str, object]:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        raise DeliveryPolicyError("must be valid JSON") from None
    return _object(document, "policy")


def _unknown(section: Mapping[str, object], known: set[str], path: str) -> None:
    for key in section:
        if key not in known:
            raise DeliveryPolicyError(f"{path}: unknown field {key!r}")


def parse_retry_policy(value: object, path: str) -> RetryPolicy:
    """One healthyRetryPolicy object; fields left out take SNS's defaults."""
    section = _object(value, path)
    _unknown(section, {*_RETRY_KEYS, "backoffFunction"}, path)
    defaults = RetryPolicy()

    def number(key: str) -> int:
        given = section.get(key)
        return getattr(defaults, _RETRY_KEYS[key]) if given is None else _whole(given, f"{path}.{key}")

    function = defaults.backoff_function
    if section.get("backoffFunction") is not None:
        name = section["backoffFunction"]
        try:
            function = BackoffFunction(name.lower() if isinstance(name, str) else "")
        except ValueError:
            raise DeliveryPolicyError(
                f"{path}.backoffFunction: must be one of linear, arithmetic, geometric, exponential"
            ) from None
    policy = RetryPolicy(
        num_retries=number("numRetries"),
        num_no_delay_retries=number("numNoDelayRetries"),
        min_delay_target=number("minDelayTarget"),
        max_delay_target=number("maxDelayTarget"),
        num_min_delay_retries=number("numMinDelayRetries"),
        num_max_delay_retries=number("numMaxDelayRetries"),
        backoff_function=function,
    )
    _check_limits(policy, path)
    return policy


def _check_limits(p: RetryPolicy, path: str) -> None:
    if not 0 <= p.num_retries <= MAX_RETRIES:
        raise DeliveryPolicyError(f"{path}.numRetries: must be between 0 and {MAX_RETRIES}")
    for key in ("numNoDelayRetries", "numMinDelayRetries", "numMaxDelayRetries"):
        if getattr(p, _RETRY_KEYS[key]) < 0:
            raise DeliveryPolicyError(f"{path}.{key}: must be 0 or greater")
    if p.min_delay_target < 1:
        raise DeliveryPolicyError(f"{path}.minDelayTarget: must be at least 1")
    if p.max_delay_target > MAX_DELAY_TARGET:
        raise DeliveryPolicyError(f"{path}.maxDelayTarget: must be at most {MAX_DELAY_TARGET}")
    if p.min_delay_target > p.max_delay_target:
        raise DeliveryPolicyError(f"{path}: minDelayTarget must be less than or equal to maxDelayTarget")
    if p.num_backoff_retries < 0:
        raise DeliveryPolicyError(
            f"{path}: numRetries must be at least numNoDelayRetries + numMinDelayRetries + numMaxDelayRetries"
        )
    if total_retry_seconds(p) > MAX_TOTAL_RETRY_SECONDS:
        raise DeliveryPolicyError(
            f"{path}: Total policy retry time cannot be greater than {MAX_TOTAL_RETRY_SECONDS} seconds"
        )


def _throttle(value: object, path: str) -> int | None:
    section = _object(value, path)
    _unknown(section, {"maxReceivesPerSecond"}, path)
    if "maxReceivesPerSecond" not in section:
        return None
    rate = _whole(section["maxReceivesPerSecond"], f"{path}.maxReceivesPerSecond")
    if rate < 1:
        raise DeliveryPolicyError(f"{path}.maxReceivesPerSecond: must be at least 1")
    return rate


def _content_type(value: object, path: str) -> str | None:
    section = _object(value, path)
    _unknown(section, {"headerContentType"}, path)
    if "headerContentType" not in section:
        return None
    text = section["headerContentType"]
    key = f"{path}.headerContentType"
    if not isinstance(text, str):
        raise DeliveryPolicyError(f"{key}: must be a string")
    media, _, parameter = (part.strip() for part in text.partition(";"))
    if media.lower() not in CONTENT_TYPES or parameter.replace(" ", "").lower() not in ("", "charset=utf-8"):
        allowed = ", ".join(sorted(CONTENT_TYPES))
        raise DeliveryPolicyError(f"{key}: must be one of {allowed} (optionally with '; charset=UTF-8')")
    return text


def parse_topic_policy(text: str) -> TopicDeliveryPolicy:
    """A topic's DeliveryPolicy attribute: {"http": {"defaultHealthyRetryPolicy": ...,
    "disableSubscriptionOverrides": ..., "defaultThrottlePolicy": ..., "defaultRequestPolicy": ...}}.
    Protocols other than http are kept by SNS for other endpoints and ignored here."""
    document = _load(text)
    if "http" not in document:
        return TopicDeliveryPolicy()
    http = _object(document["http"], "http")
    _unknown(
        http,
        {
            "defaultHealthyRetryPolicy",
            "defaultSicklyRetryPolicy",
            "disableSubscriptionOverrides",
            "defaultThrottlePolicy",
            "defaultRequestPolicy",
        },
        "http",
    )
    retry = None
    if http.get("defaultHealthyRetryPolicy") is not None:
        retry = parse_retry_policy(http["defaultHealthyRetryPolicy"], "http.defaultHealthyRetryPolicy")
    disable = http.get("disableSubscriptionOverrides", False)
    if not isinstance(disable, bool):
        raise DeliveryPolicyError("http.disableSubscriptionOverrides: must be a boolean")
    throttle = http.get("defaultThrottlePolicy")
    request = http.get("defaultRequestPolicy")
    return TopicDeliveryPolicy(
        retry=retry,
        max_receives_per_second=None
        if throttle is None
        else _throttle(throttle, "http.defaultThrottlePolicy"),
        header_content_type=None if request is None else _content_type(request, "http.defaultRequestPolicy"),
        disable_subscription_overrides=disable,
    )


def parse_subscription_policy(text: str) -> SubscriptionDeliveryPolicy:
    """A subscription's DeliveryPolicy attribute: {"healthyRetryPolicy": ..., "throttlePolicy":
    ..., "requestPolicy": ...}."""
    document = _load(text)
    _unknown(
        document, {"healthyRetryPolicy", "sicklyRetryPolicy", "throttlePolicy", "requestPolicy"}, "policy"
    )
    retry = None
    if document.get("healthyRetryPolicy") is not None:
        retry = parse_retry_policy(document["healthyRetryPolicy"], "healthyRetryPolicy")
    throttle = document.get("throttlePolicy")
    request = document.get("requestPolicy")
    return SubscriptionDeliveryPolicy(
        retry=retry,
        max_receives_per_second=None if throttle is None else _throttle(throttle, "throttlePolicy"),
        header_content_type=None if request is None else _content_type(request, "requestPolicy"),
    )


def effective_policy(
    topic: TopicDeliveryPolicy | None, subscription: SubscriptionDeliveryPolicy | None
) -> DeliveryPolicy:
    """What a subscription's deliveries follow: each section from the subscription when it sets
    one (unless the topic disables overrides), else from the topic, else SNS's default."""
    topic = topic or TopicDeliveryPolicy()
    own = subscription if subscription is not None and not topic.disable_subscription_overrides else None
    own = own or SubscriptionDeliveryPolicy()
    return DeliveryPolicy(
        retry=own.retry or topic.retry or RetryPolicy(),
        max_receives_per_second=own.max_receives_per_second or topic.max_receives_per_second,
        header_content_type=own.header_content_type or topic.header_content_type or DEFAULT_CONTENT_TYPE,
    )


def _backoff_delay(k: int, p: RetryPolicy) -> float:
    """The k-th (1..n) retry of the backoff phase's n: minDelayTarget first, maxDelayTarget last."""
    n = p.num_backoff_retries
    low, high = float(p.min_delay_target), float(p.max_delay_target)
    if n == 1 or low == high:
        return high
    x = (k - 1) / (n - 1)
    match p.backoff_function:
        case BackoffFunction.LINEAR:
            share = x
        case BackoffFunction.ARITHMETIC:
            share = x * x
        case BackoffFunction.GEOMETRIC:
            return low * math.pow(high / low, x)
        case BackoffFunction.EXPONENTIAL:
            share = (2.0 ** (k - 1) - 1) / (2.0 ** (n - 1) - 1)
    return low + (high - low) * share


def delay_before(attempt: int, policy: DeliveryPolicy | RetryPolicy) -> float | None:
    """Seconds to wait before attempt `attempt` (1: the first try, which waits 0) after the one
    before it failed; None once the policy is spent: the delivery goes to the dead-letter queue,
    if any, else is dropped."""
    if attempt < 1:
        raise ValueError(f"attempts count from 1, got {attempt}")
    p = policy.retry if isinstance(policy, DeliveryPolicy) else policy
    retry = attempt - 1
    if retry == 0:
        return 0.0
    if retry > p.num_retries:
        return None
    if retry <= p.num_no_delay_retries:
        return 0.0
    retry -= p.num_no_delay_retries
    if retry <= p.num_min_delay_retries:
        return float(p.min_delay_target)
    retry -= p.num_min_delay_retries
    if retry <= p.num_backoff_retries:
        return _backoff_delay(retry, p)
    return float(p.max_delay_target)


def retry_delays(policy: DeliveryPolicy | RetryPolicy) -> list[float]:
    """The delay before each retry, in order (numRetries of them)."""
    p = policy.retry if isinstance(policy, DeliveryPolicy) else policy
    return [d for a in range(2, p.num_retries + 2) if (d := delay_before(a, p)) is not None]


def total_retry_seconds(policy: DeliveryPolicy | RetryPolicy) -> float:
    """Seconds from the first try to the last retry, not counting the tries themselves."""
    return sum(retry_delays(policy))


def effective_policy_json(policy: DeliveryPolicy) -> str:
    """The subscription's EffectiveDeliveryPolicy as SNS answers it (GetSubscriptionAttributes)."""
    document: dict[str, object] = {
        "healthyRetryPolicy": policy.retry.as_json(),
        "requestPolicy": {"headerContentType": policy.header_content_type},
    }
    if policy.max_receives_per_second is not None:
        document["throttlePolicy"] = {"maxReceivesPerSecond": policy.max_receives_per_second}
    return json.dumps(document, separators=(",", ":"))


__all__ = [
    "DEFAULT_CONTENT_TYPE",
    "DEFAULT_POLICY",
    "BackoffFunction",
    "DeliveryPolicy",
    "DeliveryPolicyError",
    "RetryPolicy",
    "SubscriptionDeliveryPolicy",
    "TopicDeliveryPolicy",
    "delay_before",
    "effective_policy",
    "effective_policy_json",
    "parse_retry_policy",
    "parse_subscription_policy",
    "parse_topic_policy",
    "retry_delays",
    "total_retry_seconds",
]
