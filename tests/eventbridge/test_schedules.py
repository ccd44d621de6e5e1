"""boto3's `scheduler` client, unchanged, against the EventBridge Scheduler door on each engine:
the five operations, each kind of expression both ways, the errors as AWS names them, the
dispatch by signing scope beside the REST routes of the same paths, and a firing that SQS's
ReceiveMessage returns with Body == Input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.eventbridge.conftest import ACCOUNT, REGION, queue_arn, target
from tests.sqs.conftest import error_code

OFF = {"Mode": "OFF"}


def create(scheduler: Any, name: str, queue: str, expression: str = "rate(5 minutes)", **more: Any) -> str:
    more.setdefault("Target", target(queue))
    more.setdefault("FlexibleTimeWindow", OFF)
    arn: str = scheduler.create_schedule(Name=name, ScheduleExpression=expression, **more)["ScheduleArn"]
    return arn


def test_create_get_update_delete(scheduler: Any, sqs_base: str, name: str, queue: str) -> None:
    given = target(
        queue,
        '{"job": "report"}',
        RetryPolicy={"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 600},
        DeadLetterConfig={"Arn": queue_arn("dead")},
    )
    arn = create(scheduler, name, queue, "rate(5 minutes)", Target=given, Description="the report")
    assert arn == f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/default/{name}"

    got = scheduler.get_schedule(Name=name)
    assert (got["Arn"], got["Name"], got["GroupName"], got["State"]) == (arn, name, "default", "ENABLED")
    assert got["ScheduleExpression"] == "rate(5 minutes)"
    assert got["Target"] == given
    assert got["FlexibleTimeWindow"] == OFF
    assert got["Description"] == "the report"
    assert got["ActionAfterCompletion"] == "NONE"
    assert isinstance(got["CreationDate"], datetime)

    # A normal schedule: the REST API sees it as its own.
    rest = httpx.get(f"{sqs_base}/schedules/{name}").json()
    assert (rest["queue"], rest["every_seconds"], rest["payload"]) == (queue, 300, '{"job": "report"}')

    window = {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 15}
    scheduler.update_schedule(
        Name=name,
        ScheduleExpression="cron(30 9 ? * MON-FRI *)",
        ScheduleExpressionTimezone="Europe/Berlin",
        Target=target(queue, "updated"),
        FlexibleTimeWindow=window,
        State="DISABLED",
    )
    got = scheduler.get_schedule(Name=name, GroupName="default")
    assert (got["ScheduleExpression"], got["ScheduleExpressionTimezone"]) == (
        "cron(30 9 ? * MON-FRI *)",
        "Europe/Berlin",
    )
    assert (got["State"], got["FlexibleTimeWindow"], got["Target"]["Input"]) == (
        "DISABLED",
        window,
        "updated",
    )
    assert "Description" not in got  # an update replaces the whole schedule, as AWS's does
    rest = httpx.get(f"{sqs_base}/schedules/{name}").json()
    assert (rest["cron"], rest["timezone"], rest["paused"], rest["jitter_seconds"]) == (
        "30 9 * * MON-FRI",
        "Europe/Berlin",
        True,
        900,
    )

    scheduler.delete_schedule(Name=name)
    assert httpx.get(f"{sqs_base}/schedules/{name}").status_code == 404


@pytest.mark.parametrize(
    ("expression", "zone", "ours"),
    [
        ("rate(1 minute)", None, {"every_seconds": 60}),
        ("rate(2 hours)", None, {"every_seconds": 7200}),
        ("rate(1 day)", None, {"every_seconds": 86400}),
        ("at(2031-03-04T05:06:07)", "America/New_York", {"at": "2031-03-04T10:06:07Z"}),
        ("cron(0/15 8-17 ? * 2-6 *)", "Asia/Tokyo", {"cron": "0/15 8-17 * * 1-5", "timezone": "Asia/Tokyo"}),
        ("cron(0 12 1 JAN,JUL ? *)", None, {"cron": "0 12 1 JAN,JUL *", "timezone": "UTC"}),
        ("cron(0 0 ? * 1,7 *)", None, {"cron": "0 0 * * 0,6"}),
    ],
)
def test_each_expression_kind_both_ways(
    scheduler: Any,
    sqs_base: str,
    name: str,
    queue: str,
    expression: str,
    zone: str | None,
    ours: dict[str, Any],
) -> None:
    more = {"ScheduleExpressionTimezone": zone} if zone else {}
    create(scheduler, name, queue, expression, **more)
    got = scheduler.get_schedule(Name=name)
    assert got["ScheduleExpression"] == expression
    assert got.get("ScheduleExpressionTimezone") == zone
    rest = httpx.get(f"{sqs_base}/schedules/{name}").json()
    assert {k: rest[k] for k in ours} == ours
    scheduler.delete_schedule(Name=name)


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        ("every 5 minutes", "ScheduleExpression must be"),
        ("rate(5 seconds)", "ScheduleExpression must be"),
        ("cron(0 12 * * ?)", "6 fields"),
        ("cron(0 12 ? * * 2030)", "a year other than *"),
        ("cron(0 12 L * ? *)", "L (last)"),
        ("cron(0 12 ? * 6#3 *)", "# (nth weekday)"),
        ("cron(0 12 15W * ? *)", "W (weekday)"),
        ("cron(61 12 * * ? *)", "minute: 61"),
        ("at(2020-01-01T00:00:00)", "in the past"),
    ],
)
def test_an_expression_ours_cannot_keep_is_refused_naming_it(
    scheduler: Any, name: str, queue: str, expression: str, named: str
) -> None:
    with pytest.raises(ClientError) as e:
        create(scheduler, name, queue, expression)
    assert error_code(e) == "ValidationException"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert named in e.value.response["Error"]["Message"]


def test_an_unknown_time_zone_is_refused(scheduler: Any, name: str, queue: str) -> None:
    with pytest.raises(ClientError) as e:
        create(scheduler, name, queue, "cron(0 12 * * ? *)", ScheduleExpressionTimezone="Mars/Olympus")
    assert error_code(e) == "ValidationException"
    assert "ScheduleExpressionTimezone" in e.value.response["Error"]["Message"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("StartDate", datetime(2031, 1, 1, tzinfo=UTC)),
        ("EndDate", datetime(2031, 1, 1, tzinfo=UTC)),
        ("KmsKeyArn", "arn:aws:kms:us-east-1:000000000000:key/x"),
        ("ActionAfterCompletion", "DELETE"),
    ],
)
def test_what_would_change_the_firing_and_is_not_kept_is_refused(
    scheduler: Any, name: str, queue: str, field: str, value: object
) -> None:
    with pytest.raises(ClientError) as e:
        create(scheduler, name, queue, **{field: value})
    assert error_code(e) == "ValidationException"
    assert "not supported here" in e.value.response["Error"]["Message"]


def test_errors_as_aws_names_them(scheduler: Any, name: str, queue: str) -> None:
    with pytest.raises(ClientError) as e:
        create(scheduler, name, queue, GroupName="reports")
    assert error_code(e) == "ResourceNotFoundException"
    assert e.value.response["Error"]["Message"] == "Schedule group reports does not exist."
    with pytest.raises(ClientError) as e:
        scheduler.get_schedule(Name=name, GroupName="reports")
    assert error_code(e) == "ResourceNotFoundException"

    foreign = [
        "arn:aws:sqs:eu-west-1:000000000000:q",  # another region
        "arn:aws:sqs:us-east-1:123456789012:q",  # another account
        "arn:aws:lambda:us-east-1:000000000000:function:f",  # no queue
    ]
    for arn in foreign:
        with pytest.raises(ClientError) as e:
            create(scheduler, name, queue, Target={"Arn": arn, "RoleArn": "r", "Input": "x"})
        assert error_code(e) == "ValidationException"
        assert "Target.Arn" in e.value.response["Error"]["Message"]

    for call in (scheduler.get_schedule, scheduler.delete_schedule):
        with pytest.raises(ClientError) as e:
            call(Name=name)
        assert error_code(e) == "ResourceNotFoundException"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as e:
        scheduler.update_schedule(
            Name=name, ScheduleExpression="rate(1 hour)", Target=target(queue), FlexibleTimeWindow=OFF
        )
    assert error_code(e) == "ResourceNotFoundException"

    create(scheduler, name, queue, "rate(1 hour)")
    with pytest.raises(ClientError) as e:
        create(scheduler, name, queue, "rate(2 hours)")
    assert error_code(e) == "ConflictException"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    assert scheduler.get_schedule(Name=name)["ScheduleExpression"] == "rate(1 hour)"  # left as it was
    scheduler.delete_schedule(Name=name)


def test_a_create_retried_with_its_client_token_is_answered_as_made(
    scheduler: Any, name: str, queue: str
) -> None:
    arn = create(scheduler, name, queue, "rate(1 hour)", ClientToken="retry-1")
    assert create(scheduler, name, queue, "rate(1 hour)", ClientToken="retry-1") == arn
    with pytest.raises(ClientError) as e:
        create(scheduler, name, queue, "rate(1 hour)", ClientToken="another")
    assert error_code(e) == "ConflictException"
    answered: list[bytes] = []
    scheduler.meta.events.register(  # the body as sent: botocore's parse drops what its model lacks
        "after-call.scheduler.GetSchedule", lambda http_response, **_: answered.append(http_response.content)
    )
    scheduler.get_schedule(Name=name)
    assert b"ClientToken" not in answered[0]
    scheduler.delete_schedule(Name=name)


def test_a_fifo_target_needs_its_group_and_a_standard_one_takes_none(
    scheduler: Any, name: str, queue: str
) -> None:
    with pytest.raises(ClientError) as e:
        create(scheduler, name, queue + ".fifo")
    assert "MessageGroupId is required" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        create(scheduler, name, queue, Target=target(queue, SqsParameters={"MessageGroupId": "g"}))
    assert "FIFO queues only" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        create(scheduler, name, queue, FlexibleTimeWindow={"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 61})
    assert "at most 60" in e.value.response["Error"]["Message"]


def test_list_pages_filters_and_shows_the_rest_api_s_schedules(
    scheduler: Any, sqs_base: str, name: str, queue: str
) -> None:
    names = [f"{name}-{i}" for i in range(3)]
    for n in names:
        create(scheduler, n, queue, State="DISABLED" if n == names[1] else "ENABLED")
    made = httpx.put(
        f"{sqs_base}/schedules/{name}-rest",
        json={"queue": queue, "payload": {"n": 1}, "cron": "0 9 * * 1-5", "jitter_seconds": 90},
    )
    assert made.status_code == 201

    seen, token = [], None
    while True:
        page = scheduler.list_schedules(
            NamePrefix=name, MaxResults=2, **({"NextToken": token} if token else {})
        )
        assert len(page["Schedules"]) <= 2
        seen += page["Schedules"]
        token = page.get("NextToken")
        if token is None:
            break
    assert [s["Name"] for s in seen] == [*names, f"{name}-rest"]
    summary = seen[0]
    assert summary["Target"] == {"Arn": queue_arn(queue)}
    assert (summary["GroupName"], summary["State"]) == ("default", "ENABLED")
    assert summary["Arn"].endswith(f":schedule/default/{names[0]}")

    disabled = scheduler.list_schedules(NamePrefix=name, State="DISABLED")["Schedules"]
    assert [s["Name"] for s in disabled] == [names[1]]
    every = [s["Name"] for p in scheduler.get_paginator("list_schedules").paginate() for s in p["Schedules"]]
    assert set(names) <= set(every)

    # The REST API's schedule, in EventBridge Scheduler's shapes derived from it.
    got = scheduler.get_schedule(Name=f"{name}-rest")
    assert got["ScheduleExpression"] == "cron(0 9 ? * 2-6 *)"
    assert got["ScheduleExpressionTimezone"] == "UTC"
    assert got["Target"] == {"Arn": queue_arn(queue), "Input": '{"n":1}'}
    assert got["FlexibleTimeWindow"] == {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 2}
    for n in [*names, f"{name}-rest"]:
        scheduler.delete_schedule(Name=n)

    with pytest.raises(ClientError) as e:
        scheduler.list_schedules(GroupName="other")
    assert error_code(e) == "ResourceNotFoundException"
    for bad in ({"NextToken": "not-a-token"}, {"State": "PAUSED"}):
        with pytest.raises(ClientError) as e:
            scheduler.list_schedules(**bad)
        assert error_code(e) == "ValidationException"


def test_the_rest_api_keeps_its_routes_on_the_same_paths(
    scheduler: Any, sqs_base: str, name: str, queue: str
) -> None:
    create(scheduler, name, queue)
    listed = httpx.get(f"{sqs_base}/schedules", params={"limit": 1000}).json()
    assert name in [s["name"] for s in listed["schedules"]]  # our shape, not AWS's
    replaced = httpx.put(
        f"{sqs_base}/schedules/{name}", json={"queue": queue, "payload": "by REST", "every_seconds": 60}
    )
    assert replaced.status_code == 200
    got = scheduler.get_schedule(Name=name)
    assert (got["ScheduleExpression"], got["Target"]["Input"]) == ("rate(1 minute)", "by REST")
    assert httpx.delete(f"{sqs_base}/schedules/{name}").status_code == 204
    # Unsigned (or Bearer) requests never reach the door: the REST API's 404 envelope.
    assert httpx.get(f"{sqs_base}/schedules/{name}").json()["error"] == "ScheduleNotFound"


def test_a_firing_is_what_a_send_message_of_the_input_stores(
    scheduler: Any, sqs: Any, sqs_base: str, name: str, queue: str
) -> None:
    url = sqs.create_queue(QueueName=queue)["QueueUrl"]
    body = '{"job": "report", "at": "09:00"}  '  # exact text, not re-encoded JSON
    create(scheduler, name, queue, "rate(1 day)", Target=target(queue, body))
    # A firing now (the REST API's trigger pushes the item a slot would), without waiting a day.
    assert httpx.post(f"{sqs_base}/schedules/{name}/trigger").status_code == 200
    [message] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert message["Body"] == body
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    scheduler.delete_schedule(Name=name)


def test_an_at_schedule_fires_on_its_own_into_a_fifo_queue(
    scheduler: Any, sqs: Any, name: str, queue: str
) -> None:
    fifo = queue + ".fifo"
    url = sqs.create_queue(QueueName=fifo, Attributes={"FifoQueue": "true"})["QueueUrl"]
    # at() has whole seconds: eight seconds ahead, so that a machine busy with other tests does
    # not make it past by the time it arrives; the server's scheduler fires it within the wait.
    when = (datetime.now(UTC) + timedelta(seconds=8)).strftime("%Y-%m-%dT%H:%M:%S")
    given = target(fifo, "once", SqsParameters={"MessageGroupId": "reports"})
    create(scheduler, name, fifo, f"at({when})", Target=given)
    [message] = sqs.receive_message(
        QueueUrl=url, WaitTimeSeconds=20, MessageSystemAttributeNames=["MessageGroupId"]
    )["Messages"]
    assert message["Body"] == "once"
    assert message["Attributes"]["MessageGroupId"] == "reports"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    scheduler.delete_schedule(Name=name)


def test_too_large_an_input_or_body_is_refused_in_the_door_s_shape(
    scheduler: Any, name: str, queue: str
) -> None:
    with pytest.raises(ClientError) as e:
        create(scheduler, name, queue, Target=target(queue, "x" * (1024 * 1024 + 1)))
    assert error_code(e) == "ValidationException"
    assert "Target.Input" in e.value.response["Error"]["Message"]
    # Past the largest request read at all: the front door refuses it unread, as this door answers.
    with pytest.raises(ClientError) as e:
        create(scheduler, name, queue, Target=target(queue, "x" * (8 * 1024 * 1024)))
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 413
    assert e.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amzn-errortype"] == error_code(e)


def test_a_rest_api_schedule_s_group_is_its_message_group(scheduler: Any, sqs_base: str, name: str) -> None:
    fifo = f"{name}.fifo"
    body = {"queue": fifo, "payload": "in order", "at": "2031-01-01T00:00:00Z", "group": "g1"}
    assert httpx.put(f"{sqs_base}/schedules/{name}", json=body).status_code == 201
    got = scheduler.get_schedule(Name=name)
    group = {"MessageGroupId": "g1"}
    assert got["Target"] == {"Arn": queue_arn(fifo), "Input": "in order", "SqsParameters": group}
    assert got["ScheduleExpression"] == "at(2031-01-01T00:00:00)"
    scheduler.delete_schedule(Name=name)
