"""SNS's HTTP/S delivery policy (domain.delivery_policy): parsing, limits, and the delay before
each attempt, against the policies AWS's guide shows."""

from __future__ import annotations

import json

import pytest
from simplequeue.domain.delivery_policy import (
    DEFAULT_CONTENT_TYPE,
    DEFAULT_POLICY,
    BackoffFunction,
    DeliveryPolicy,
    DeliveryPolicyError,
    RetryPolicy,
    delay_before,
    effective_policy,
    effective_policy_json,
    parse_subscription_policy,
    parse_topic_policy,
    retry_delays,
    total_retry_seconds,
)


def attempts(policy: DeliveryPolicy | RetryPolicy) -> list[float | None]:
    """delay_before for attempts 1.. until the policy gives up (and that None)."""
    out: list[float | None] = []
    attempt = 1
    while True:
        delay = delay_before(attempt, policy)
        out.append(None if delay is None else round(delay, 3))
        if delay is None:
            return out
        attempt += 1


def test_the_default_is_three_retries_twenty_seconds_apart() -> None:
    # "By default, if the initial delivery of the message fails, Amazon SNS attempts up to three
    # retries with a delay between failed attempts set at 20 seconds."
    assert attempts(DEFAULT_POLICY) == [0.0, 20.0, 20.0, 20.0, None]
    assert DEFAULT_POLICY.header_content_type == "text/plain; charset=UTF-8"
    assert DEFAULT_POLICY.max_receives_per_second is None


def test_the_default_matches_what_sns_answers_as_effective_delivery_policy() -> None:
    answered = json.loads(effective_policy_json(DEFAULT_POLICY))
    assert answered["healthyRetryPolicy"] == {
        "minDelayTarget": 20,
        "maxDelayTarget": 20,
        "numRetries": 3,
        "numMaxDelayRetries": 0,
        "numNoDelayRetries": 0,
        "numMinDelayRetries": 0,
        "backoffFunction": "linear",
    }


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # The phases of SNS's AWS-managed policy (3 immediate, 2 one second apart, backoff 1 -> 20 s,
        # then at 20 s), with a short post-backoff phase: HTTP/S policies may take this shape.
        (
            RetryPolicy(
                num_retries=17,
                num_no_delay_retries=3,
                num_min_delay_retries=2,
                min_delay_target=1,
                max_delay_target=20,
                num_max_delay_retries=2,
                backoff_function=BackoffFunction.LINEAR,
            ),
            [
                *(0.0, 0.0, 0.0, 0.0),  # the first try, then 3 immediate retries
                *(1.0, 1.0),  # pre-backoff, at minDelayTarget
                *(1.0, 3.111, 5.222, 7.333, 9.444, 11.556, 13.667, 15.778, 17.889, 20.0),  # backoff
                *(20.0, 20.0),  # post-backoff, at maxDelayTarget
                None,
            ],
        ),
        # The CDK's example: min 5 s, max 10 s, 6 retries, exponential: all six are the backoff phase.
        (
            RetryPolicy(
                num_retries=6,
                min_delay_target=5,
                max_delay_target=10,
                backoff_function=BackoffFunction.EXPONENTIAL,
            ),
            [0.0, 5.0, 5.161, 5.484, 6.129, 7.419, 10.0, None],
        ),
        # SetSubscriptionAttributes' example: {"healthyRetryPolicy": {"numRetries": 5}}.
        (RetryPolicy(num_retries=5), [0.0, 20.0, 20.0, 20.0, 20.0, 20.0, None]),
        (RetryPolicy(num_retries=0), [0.0, None]),
        (RetryPolicy(num_retries=2, num_no_delay_retries=2), [0.0, 0.0, 0.0, None]),
    ],
)
def test_phases(policy: RetryPolicy, expected: list[float | None]) -> None:
    assert attempts(policy) == expected


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        (BackoffFunction.LINEAR, [2.0, 4.5, 7.0, 9.5, 12.0]),
        (BackoffFunction.ARITHMETIC, [2.0, 2.625, 4.5, 7.625, 12.0]),
        (BackoffFunction.GEOMETRIC, [2.0, 3.130, 4.899, 7.667, 12.0]),
        (BackoffFunction.EXPONENTIAL, [2.0, 2.667, 4.0, 6.667, 12.0]),
    ],
)
def test_backoff_functions_rise_from_min_to_max(function: BackoffFunction, expected: list[float]) -> None:
    policy = RetryPolicy(num_retries=5, min_delay_target=2, max_delay_target=12, backoff_function=function)
    assert [round(d, 3) for d in retry_delays(policy)] == expected


def test_backoff_functions_order_between_the_ends() -> None:
    # The later in the phase a function rises, the less it waits in the middle.
    middle = {
        f: retry_delays(
            RetryPolicy(num_retries=9, min_delay_target=1, max_delay_target=100, backoff_function=f)
        )[4]
        for f in BackoffFunction
    }
    assert (
        middle[BackoffFunction.EXPONENTIAL]
        < middle[BackoffFunction.GEOMETRIC]
        < middle[BackoffFunction.ARITHMETIC]
        < middle[BackoffFunction.LINEAR]
    )


def test_attempts_count_from_one() -> None:
    with pytest.raises(ValueError, match="from 1"):
        delay_before(0, DEFAULT_POLICY)


def test_a_topic_policy_as_users_write_it() -> None:
    topic = parse_topic_policy(
        json.dumps(
            {
                "http": {
                    "defaultHealthyRetryPolicy": {
                        "minDelayTarget": 20,
                        "maxDelayTarget": 20,
                        "numRetries": 3,
                        "numMaxDelayRetries": 0,
                        "numNoDelayRetries": 0,
                        "numMinDelayRetries": 0,
                        "backoffFunction": "linear",
                    },
                    "disableSubscriptionOverrides": False,
                    "defaultThrottlePolicy": {"maxReceivesPerSecond": 1},
                    "defaultRequestPolicy": {"headerContentType": "text/plain; charset=UTF-8"},
                }
            }
        )
    )
    assert topic.retry == RetryPolicy()
    assert topic.max_receives_per_second == 1
    assert topic.header_content_type == "text/plain; charset=UTF-8"
    assert not topic.disable_subscription_overrides


def test_a_subscription_policy_overrides_the_topics_sections_it_sets() -> None:
    topic = parse_topic_policy(
        '{"http": {"defaultHealthyRetryPolicy": {"numRetries": 5},'
        ' "defaultThrottlePolicy": {"maxReceivesPerSecond": 7}}}'
    )
    subscription = parse_subscription_policy(
        '{"healthyRetryPolicy": {"numRetries": 2, "minDelayTarget": 1, "maxDelayTarget": 9,'
        ' "backoffFunction": "EXPONENTIAL"}, "requestPolicy": {"headerContentType": "application/json"}}'
    )
    effective = effective_policy(topic, subscription)
    assert effective.retry == RetryPolicy(
        num_retries=2, min_delay_target=1, max_delay_target=9, backoff_function=BackoffFunction.EXPONENTIAL
    )
    assert effective.max_receives_per_second == 7
    assert effective.header_content_type == "application/json"
    assert effective_policy(None, None) == DEFAULT_POLICY


def test_a_topic_may_disable_subscription_overrides() -> None:
    topic = parse_topic_policy(
        '{"http": {"defaultHealthyRetryPolicy": {"numRetries": 1}, "disableSubscriptionOverrides": true}}'
    )
    subscription = parse_subscription_policy('{"healthyRetryPolicy": {"numRetries": 9}}')
    effective = effective_policy(topic, subscription)
    assert effective.retry.num_retries == 1
    assert effective.header_content_type == DEFAULT_CONTENT_TYPE


def test_other_protocols_in_a_topic_policy_are_left_alone() -> None:
    assert parse_topic_policy('{"sqs": {"anything": 1}}').retry is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "must be valid JSON"),
        ("[]", "must be a JSON object"),
        (
            '{"healthyRetryPolicy": {"numRetries": 101}}',
            "healthyRetryPolicy.numRetries: must be between 0 and 100",
        ),
        ('{"healthyRetryPolicy": {"numRetries": -1}}', "numRetries: must be between 0 and 100"),
        ('{"healthyRetryPolicy": {"numRetries": "3"}}', "numRetries: must be an integer"),
        ('{"healthyRetryPolicy": {"numRetries": true}}', "numRetries: must be an integer"),
        ('{"healthyRetryPolicy": {"minDelayTarget": 2.5}}', "minDelayTarget: must be an integer"),
        ('{"healthyRetryPolicy": {"minDelayTarget": 0}}', "minDelayTarget: must be at least 1"),
        ('{"healthyRetryPolicy": {"maxDelayTarget": 3601}}', "maxDelayTarget: must be at most 3600"),
        (
            '{"healthyRetryPolicy": {"minDelayTarget": 30, "maxDelayTarget": 20}}',
            "minDelayTarget must be less than or equal to maxDelayTarget",
        ),
        ('{"healthyRetryPolicy": {"numNoDelayRetries": -1}}', "numNoDelayRetries: must be 0 or greater"),
        (
            '{"healthyRetryPolicy": {"numRetries": 3, "numNoDelayRetries": 2, "numMaxDelayRetries": 2}}',
            "numRetries must be at least numNoDelayRetries + numMinDelayRetries + numMaxDelayRetries",
        ),
        ('{"healthyRetryPolicy": {"backoffFunction": "cubic"}}', "backoffFunction: must be one of linear"),
        ('{"healthyRetryPolicy": {"numRetriez": 3}}', "unknown field 'numRetriez'"),
        ('{"throttlePolicy": {"maxReceivesPerSecond": 0}}', "maxReceivesPerSecond: must be at least 1"),
        ('{"requestPolicy": {"headerContentType": "image/png"}}', "headerContentType: must be one of"),
        ('{"requestPolicy": {"headerContentType": "text/plain; charset=latin-1"}}', "headerContentType"),
    ],
)
def test_refusals(text: str, message: str) -> None:
    with pytest.raises(DeliveryPolicyError, match=r"^Invalid parameter: DeliveryPolicy: ") as caught:
        parse_subscription_policy(text)
    assert message in str(caught.value)
    assert caught.value.code == "InvalidParameter"


def test_total_retry_time_is_capped_at_an_hour() -> None:
    # The message users quote from SNS for minDelayTarget 3599, maxDelayTarget 3600 (3 retries).
    text = '{"http": {"defaultHealthyRetryPolicy": {"minDelayTarget": 3599, "maxDelayTarget": 3600}}}'
    with pytest.raises(DeliveryPolicyError) as caught:
        parse_topic_policy(text)
    assert str(caught.value) == (
        "Invalid parameter: DeliveryPolicy: http.defaultHealthyRetryPolicy: "
        "Total policy retry time cannot be greater than 3600 seconds"
    )
    at_the_cap = RetryPolicy(num_retries=3, min_delay_target=1200, max_delay_target=1200)
    assert total_retry_seconds(at_the_cap) == 3600
    assert (
        parse_subscription_policy(
            '{"healthyRetryPolicy": {"minDelayTarget": 1200, "maxDelayTarget": 1200}}'
        ).retry
        == at_the_cap
    )


def test_content_types_with_and_without_charset() -> None:
    for given in ("application/json", "application/xml; charset=UTF-8", "text/html;charset=utf-8"):
        policy = parse_subscription_policy(json.dumps({"requestPolicy": {"headerContentType": given}}))
        assert policy.header_content_type == given
