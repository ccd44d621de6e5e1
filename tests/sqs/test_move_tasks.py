"""SQS's message move tasks through the door with boto3 (the JSON protocol) and forms (the query
protocol), on every engine: StartMessageMoveTask moving a dead-letter queue's messages back to their
source or to a destination, ListMessageMoveTasks, CancelMessageMoveTask, and the errors SQS answers.

Every wait is for a condition, with a deadline; nothing here asserts how long anything took."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
from botocore.exceptions import ClientError
from simplequeue.domain import Draft, QueueSettings
from simplequeue.main import store_for
from simplequeue.service.local.moves import MoveTask, MoveTasks, Status
from simplequeue.service.queues import QueueService
from simplequeue.settings import Settings

from tests.engines import FakeClock
from tests.sqs.conftest import error_code, sqs_client
from tests.sqs.test_dead_letters import arn, policy, receive_once
from tests.test_e2e import serving

NS = {"sqs": "http://queue.amazonaws.com/doc/2012-11-05/"}
TEXT = {"DataType": "String", "StringValue": "a & <b> ✓"}
SLOW = 1  # messages per second: a task of many messages at this rate runs long after the test's calls


def until(done: Callable[[], Any], what: str, seconds: float = 30.0) -> Any:
    """done()'s first truthy answer, asked every 0.1 s until the deadline."""
    deadline = time.monotonic() + seconds
    while True:
        answer = done()
        if answer:
            return answer
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.1)


def latest(sqs: Any, dlq: str, status: str) -> dict[str, Any] | None:
    """The source's latest task, once its status is `status`."""
    [task] = sqs.list_message_move_tasks(SourceArn=arn(dlq))["Results"]
    return task if task["Status"] == status else None


def count(sqs: Any, url: str) -> tuple[int, int]:
    """(visible, not visible) messages of the queue."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(got[names[0]]), int(got[names[1]])


def drain(sqs: Any, url: str, expected: int) -> list[dict[str, Any]]:
    """Receive (and delete) the queue's `expected` messages."""
    messages: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while len(messages) < expected:
        assert time.monotonic() < deadline, f"{len(messages)} of {expected} messages received"
        got = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        for message in got:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        messages += got
    return messages


def dead_letter_pair(sqs: Any, name: str) -> tuple[str, str]:
    """(source URL, dead-letter queue URL): the source's RedrivePolicy names the other, after one
    receive."""
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    url = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy(f"{name}-dlq", 1)})["QueueUrl"]
    return url, dlq


def send(sqs: Any, url: str, bodies: list[str]) -> None:
    for start in range(0, len(bodies), 10):
        entries = [
            {"Id": str(k), "MessageBody": body, "MessageAttributes": {"trace": TEXT}}
            for k, body in enumerate(bodies[start : start + 10])
        ]
        assert not sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")


def test_a_task_moves_the_messages_back_to_their_source(sqs: Any, name: str) -> None:
    url, dlq = dead_letter_pair(sqs, name)
    # One message dies the way messages do (received maxReceiveCount times); four are sent to the
    # dead-letter queue itself.
    died = sqs.send_message(QueueUrl=url, MessageBody="died")
    message = receive_once(sqs, url)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    until(lambda: count(sqs, dlq) == (1, 0), "message in the dead-letter queue")
    send(sqs, dlq, [f"m{k}" for k in range(4)])

    handle = sqs.start_message_move_task(SourceArn=arn(f"{name}-dlq"), MaxNumberOfMessagesPerSecond=500)[
        "TaskHandle"
    ]

    task = until(lambda: latest(sqs, f"{name}-dlq", "COMPLETED"), "completed task")
    assert isinstance(handle, str)
    assert handle
    started = task.pop("StartedTimestamp")
    assert isinstance(started, int)
    assert abs(started / 1000 - time.time()) < 3600
    # No TaskHandle once it stopped running, no DestinationArn: none was given.
    assert task == {
        "Status": "COMPLETED",
        "SourceArn": arn(f"{name}-dlq"),
        "MaxNumberOfMessagesPerSecond": 500,
        "ApproximateNumberOfMessagesMoved": 5,
        "ApproximateNumberOfMessagesToMove": 5,
    }
    moved = drain(sqs, url, 5)
    assert sorted(m["Body"] for m in moved) == ["died", "m0", "m1", "m2", "m3"]
    assert all(m["Attributes"]["ApproximateReceiveCount"] == "1" for m in moved)
    assert [m["MessageAttributes"] for m in moved if m["Body"] != "died"] == [{"trace": TEXT}] * 4
    assert died["MessageId"] not in {m["MessageId"] for m in moved}  # a moved message is a new one
    assert count(sqs, dlq) == (0, 0)


def test_a_task_moves_the_messages_to_the_destination_given(sqs: Any, name: str) -> None:
    url, dlq = dead_letter_pair(sqs, name)
    elsewhere = sqs.create_queue(QueueName=f"{name}-elsewhere")["QueueUrl"]
    send(sqs, dlq, [f"m{k}" for k in range(12)])

    sqs.start_message_move_task(SourceArn=arn(f"{name}-dlq"), DestinationArn=arn(f"{name}-elsewhere"))

    task = until(lambda: latest(sqs, f"{name}-dlq", "COMPLETED"), "completed task")
    assert (task["DestinationArn"], "MaxNumberOfMessagesPerSecond" in task) == (
        arn(f"{name}-elsewhere"),
        False,
    )
    assert (task["ApproximateNumberOfMessagesMoved"], task["ApproximateNumberOfMessagesToMove"]) == (12, 12)
    assert sorted(m["Body"] for m in drain(sqs, elsewhere, 12)) == sorted(f"m{k}" for k in range(12))
    assert count(sqs, url) == count(sqs, dlq) == (0, 0)


def test_one_active_task_per_source_cancel_and_list(sqs: Any, name: str) -> None:
    _, dlq = dead_letter_pair(sqs, name)
    destination = sqs.create_queue(QueueName=f"{name}-to")["QueueUrl"]
    send(sqs, dlq, [f"m{k}" for k in range(30)])
    source_arn, to = arn(f"{name}-dlq"), arn(f"{name}-to")
    handle = sqs.start_message_move_task(
        SourceArn=source_arn, DestinationArn=to, MaxNumberOfMessagesPerSecond=SLOW
    )["TaskHandle"]

    # 30 messages at one a second: it runs while the calls below are made.
    [running] = sqs.list_message_move_tasks(SourceArn=source_arn, MaxResults=10)["Results"]
    assert (running["Status"], running["TaskHandle"], running["ApproximateNumberOfMessagesToMove"]) == (
        "RUNNING",
        handle,
        30,
    )
    with pytest.raises(ClientError) as e:
        sqs.start_message_move_task(SourceArn=source_arn, DestinationArn=to)
    assert error_code(e) == "InvalidParameterValue"
    assert "Only one active task" in e.value.response["Error"]["Message"]

    moved_then = sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"]

    assert 0 <= moved_then < 30
    cancelled = until(lambda: latest(sqs, f"{name}-dlq", "CANCELLED"), "cancelled task")
    moved = cancelled["ApproximateNumberOfMessagesMoved"]
    assert moved_then <= moved < 30
    assert "TaskHandle" not in cancelled
    # Nothing lost, nothing twice: what moved is in the destination, the rest in the source.
    assert (count(sqs, destination), count(sqs, dlq)) == ((moved, 0), (30 - moved, 0))
    with pytest.raises(ClientError) as e:
        sqs.cancel_message_move_task(TaskHandle=handle)  # it no longer runs
    assert error_code(e) == "InvalidParameterValue"

    # Another task may start now; the list is newest first.
    sqs.start_message_move_task(SourceArn=source_arn, DestinationArn=to)
    done = until(lambda: latest(sqs, f"{name}-dlq", "COMPLETED"), "completed task")
    assert done["ApproximateNumberOfMessagesMoved"] == done["ApproximateNumberOfMessagesToMove"] == 30 - moved
    listed = sqs.list_message_move_tasks(SourceArn=source_arn, MaxResults=10)["Results"]
    assert [t["Status"] for t in listed] == ["COMPLETED", "CANCELLED"]
    assert count(sqs, destination) == (30, 0)


def test_a_task_whose_destination_is_deleted_fails(sqs: Any, name: str) -> None:
    _, dlq = dead_letter_pair(sqs, name)
    destination = sqs.create_queue(QueueName=f"{name}-to")["QueueUrl"]
    send(sqs, dlq, [f"m{k}" for k in range(20)])
    sqs.start_message_move_task(
        SourceArn=arn(f"{name}-dlq"), DestinationArn=arn(f"{name}-to"), MaxNumberOfMessagesPerSecond=SLOW
    )

    # Deleted between two batches (a batch a second): one that sent already, and the next.
    def moved() -> int:
        task = latest(sqs, f"{name}-dlq", "RUNNING")
        assert task is not None
        return int(task["ApproximateNumberOfMessagesMoved"])

    until(moved, "moved message")
    sqs.delete_queue(QueueUrl=destination)

    failed = until(lambda: latest(sqs, f"{name}-dlq", "FAILED"), "failed task")

    assert failed["FailureReason"] == "AWS.SimpleQueueService.NonExistentQueue"
    # The batch that could not move is back in the source at once; the queue was not made again.
    assert count(sqs, dlq) == (20 - failed["ApproximateNumberOfMessagesMoved"], 0)
    with pytest.raises(ClientError) as e:
        sqs.get_queue_url(QueueName=f"{name}-to")
    assert error_code(e) == "AWS.SimpleQueueService.NonExistentQueue"


def handle_of(task_id: str, source_arn: str) -> str:
    return base64.urlsafe_b64encode(
        json.dumps({"taskId": task_id, "sourceArn": source_arn}).encode()
    ).decode()


def test_the_errors_sqs_answers(sqs: Any, name: str) -> None:
    url, dlq = dead_letter_pair(sqs, name)
    dlq_arn = arn(f"{name}-dlq")

    def refused(call: Callable[..., Any], **given: Any) -> tuple[str, int, str]:
        with pytest.raises(ClientError) as e:
            call(**given)
        error = e.value.response
        return error_code(e), error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Message"]

    start, cancel, listing = (
        sqs.start_message_move_task,
        sqs.cancel_message_move_task,
        sqs.list_message_move_tasks,
    )
    not_a_dlq = refused(start, SourceArn=arn(name))
    assert not_a_dlq == (
        "InvalidParameterValue",
        400,
        "Source queue must be configured as a Dead Letter Queue.",
    )
    for rate in (0, 501, -1):
        code, status, message = refused(start, SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=rate)
        assert (code, status, "MaxNumberOfMessagesPerSecond" in message) == (
            "InvalidParameterValue",
            400,
            True,
        )
    assert refused(start, SourceArn=arn(f"{name}-gone")) == (
        "ResourceNotFoundException",
        404,
        "The resource that you specified for the SourceArn parameter doesn't exist.",
    )
    assert refused(start, SourceArn=dlq_arn, DestinationArn=arn(f"{name}-gone"))[:2] == (
        "ResourceNotFoundException",
        404,
    )
    assert refused(start, SourceArn=dlq_arn, DestinationArn=dlq_arn)[0] == "InvalidParameterValue"
    assert refused(start, SourceArn="not an arn")[0] == "ResourceNotFoundException"
    assert refused(listing, SourceArn=arn(f"{name}-gone"))[0] == "ResourceNotFoundException"
    assert refused(listing, SourceArn=dlq_arn, MaxResults=11)[0] == "InvalidParameterValue"

    assert refused(cancel, TaskHandle="not a handle") == (
        "InvalidParameterValue",
        400,
        "Value for parameter TaskHandle is invalid.",
    )
    assert refused(cancel, TaskHandle=handle_of(str(uuid4()), dlq_arn)) == (
        "ResourceNotFoundException",
        404,
        "Task does not exist.",
    )
    assert refused(cancel, TaskHandle=handle_of(str(uuid4()), arn(f"{name}-gone")))[:2] == (
        "ResourceNotFoundException",
        404,
    )
    for fields in ({"taskId": 5, "sourceArn": dlq_arn}, {"taskId": [], "sourceArn": dlq_arn}, [1], "x"):
        handle = base64.urlsafe_b64encode(json.dumps(fields).encode()).decode()  # once an AttributeError
        assert refused(cancel, TaskHandle=handle)[:2] == ("InvalidParameterValue", 400)

    # With two source queues, the way back is not known: a destination must be given.
    sqs.create_queue(QueueName=f"{name}-2", Attributes={"RedrivePolicy": policy(f"{name}-dlq", 1)})
    code, _, message = refused(start, SourceArn=dlq_arn)
    assert (code, "DestinationArn" in message) == ("InvalidParameterValue", True)
    assert sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"] == []
    assert count(sqs, url) == count(sqs, dlq) == (0, 0)


def query(base: str, **form: str) -> ET.Element:
    answer = httpx.post(base + "/", data={**form, "Version": "2012-11-05"})
    assert answer.status_code == 200, answer.text
    return ET.fromstring(answer.content)


def test_the_query_protocol_answers(sqs: Any, sqs_base: str, name: str) -> None:
    _, dlq = dead_letter_pair(sqs, name)
    sqs.create_queue(QueueName=f"{name}-to")
    send(sqs, dlq, ["a", "b"])
    dlq_arn, to = arn(f"{name}-dlq"), arn(f"{name}-to")

    started = query(sqs_base, Action="StartMessageMoveTask", SourceArn=dlq_arn, DestinationArn=to)
    handle = started.findtext("sqs:StartMessageMoveTaskResult/sqs:TaskHandle", namespaces=NS)
    assert handle
    assert started.find("sqs:ResponseMetadata/sqs:RequestId", NS) is not None
    until(lambda: latest(sqs, f"{name}-dlq", "COMPLETED"), "completed task")

    listed = query(sqs_base, Action="ListMessageMoveTasks", SourceArn=dlq_arn, MaxResults="10")
    # The list is flattened: one ListMessageMoveTasksResultEntry per task, as SQS's query model names it.
    [entry] = listed.findall("sqs:ListMessageMoveTasksResult/sqs:ListMessageMoveTasksResultEntry", NS)
    fields = {child.tag.split("}")[1]: child.text for child in entry}
    assert int(fields.pop("StartedTimestamp") or "") > 0
    assert fields == {
        "Status": "COMPLETED",
        "SourceArn": dlq_arn,
        "DestinationArn": to,
        "ApproximateNumberOfMessagesMoved": "2",
        "ApproximateNumberOfMessagesToMove": "2",
    }

    answer = httpx.post(sqs_base + "/", data={"Action": "CancelMessageMoveTask", "TaskHandle": handle})
    error = ET.fromstring(answer.content)
    assert (answer.status_code, error.findtext("sqs:Error/sqs:Code", namespaces=NS)) == (
        400,
        "InvalidParameterValue",
    )

    # A task that runs (20 messages at one a second), cancelled.
    send(sqs, dlq, [f"m{k}" for k in range(20)])
    slow = query(
        sqs_base,
        Action="StartMessageMoveTask",
        SourceArn=dlq_arn,
        DestinationArn=to,
        MaxNumberOfMessagesPerSecond="1",
    )
    handle = slow.findtext("sqs:StartMessageMoveTaskResult/sqs:TaskHandle", namespaces=NS)
    assert handle
    cancelled = query(sqs_base, Action="CancelMessageMoveTask", TaskHandle=handle)
    moved = cancelled.findtext(
        "sqs:CancelMessageMoveTaskResult/sqs:ApproximateNumberOfMessagesMoved", namespaces=NS
    )
    assert moved is not None
    assert 0 <= int(moved) < 20


# --- the task itself, in this process, with the clock in the test's hands ------------------------


@pytest.fixture
async def service(database_url: str, clock: FakeClock) -> AsyncIterator[QueueService]:
    settings = Settings(database_url=database_url, db_timeout_seconds=5, sweep=False)
    service = QueueService(store_for(settings, clock), clock)
    await service.start(migrate=True)
    yield service
    await service.stop()


async def queues_with(service: QueueService, messages: int) -> tuple[str, str]:
    """(source, destination): the source holds `messages` messages m0, m1, ..."""
    source, destination = f"t-{uuid4().hex[:12]}-dlq", f"t-{uuid4().hex[:12]}-to"
    await service.put_queue(destination, QueueSettings())
    await service.push_batch(source, [Draft(payload=f"m{k}") for k in range(messages)])
    return source, destination


async def bodies(service: QueueService, queue: str) -> list[str]:
    items = await service.pop(queue, max_items=100, wait_seconds=0.0, lease_seconds=30)
    return sorted(item.payload for item in items)


async def test_a_task_keeps_to_its_rate_by_the_redrives_rule(service: QueueService, clock: FakeClock) -> None:
    source, destination = await queues_with(service, 10)
    waits: list[float] = []

    async def pause(task: MoveTask, seconds: float) -> None:
        waits.append(seconds)
        clock.advance(seconds)

    moves = MoveTasks(service, clock, pause)
    task = moves.start(source, destination, destination, 4, 10)
    assert task.runner is not None
    await task.runner

    assert (task.status, task.moved) == (Status.COMPLETED, 10)
    # The k-th message moves k / 4 seconds after the start: the first at once, then one every 0.25 s.
    assert waits == [0.25] * 9
    assert await bodies(service, destination) == sorted(f"m{k}" for k in range(10))
    assert await bodies(service, source) == []


async def test_a_cancelled_task_stops_before_its_next_batch(service: QueueService, clock: FakeClock) -> None:
    source, destination = await queues_with(service, 10)
    pauses = 0

    async def pause(task: MoveTask, seconds: float) -> None:
        nonlocal pauses
        pauses += 1
        if pauses == 3:
            moves.cancel(task)
            assert task.status is Status.CANCELLING
        clock.advance(seconds)

    moves = MoveTasks(service, clock, pause)
    task = moves.start(source, destination, destination, 1, 10)
    assert task.runner is not None
    await task.runner

    assert (task.status, task.moved) == (Status.CANCELLED, 3)
    assert await bodies(service, destination) == ["m0", "m1", "m2"]
    assert len(await bodies(service, source)) == 7
    assert moves.active(source) is None
    assert moves.listed(source, 10) == [task]


async def test_shutdown_stops_a_running_task(service: QueueService, clock: FakeClock) -> None:
    source, destination = await queues_with(service, 5)

    paused = asyncio.Event()

    async def until_stopped(task: MoveTask, seconds: float) -> None:
        paused.set()
        await task.stop.wait()

    moves = MoveTasks(service, clock, until_stopped)
    task = moves.start(source, destination, destination, 1, 5)
    # The first message moves at once; the second waits for a clock that stands still.
    await asyncio.wait_for(paused.wait(), 30)

    await moves.close()

    assert task.runner is not None
    assert task.runner.done()
    assert (task.status, task.moved) == (Status.CANCELLED, 1)


# --- who may -------------------------------------------------------------------------------------

ADMIN = ("AKIDMOVEADMIN000001", "admin-secret-" + "a" * 32)
JOBS_ADMIN = ("AKIDMOVEJOBSADMIN01", "jobs-admin-secret-" + "j" * 32)
CONSUMER = ("AKIDMOVECONSUMER001", "consumer-secret-" + "c" * 32)
KEYS = [
    {"key": ADMIN[1], "role": "admin", "access_key_id": ADMIN[0]},
    {"key": JOBS_ADMIN[1], "role": "admin", "queues": ["jobs-*"], "access_key_id": JOBS_ADMIN[0]},
    {"key": CONSUMER[1], "role": "consumer", "access_key_id": CONSUMER[0]},
]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = Path(tmp_path_factory.mktemp("sqs-move-keys")) / "keys.db"
    with serving(f"sqlite:///{db}", env={"SIMPLEQUEUE_API_KEYS": json.dumps(KEYS)}) as base:
        yield base


def test_only_an_admin_of_both_queues_may_move(keyed: str) -> None:
    admin, jobs_admin, consumer = (
        sqs_client(keyed, aws_access_key_id=k[0], aws_secret_access_key=k[1])
        for k in (ADMIN, JOBS_ADMIN, CONSUMER)
    )
    admin.create_queue(QueueName="jobs-dlq")
    admin.create_queue(QueueName="jobs-main", Attributes={"RedrivePolicy": policy("jobs-dlq", 1)})
    admin.create_queue(QueueName="other")

    for call in (
        lambda: consumer.start_message_move_task(SourceArn=arn("jobs-dlq")),
        lambda: consumer.list_message_move_tasks(SourceArn=arn("jobs-dlq")),
        lambda: jobs_admin.start_message_move_task(SourceArn=arn("jobs-dlq"), DestinationArn=arn("other")),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e) == "AccessDenied"
    assert jobs_admin.list_message_move_tasks(SourceArn=arn("jobs-dlq"))["Results"] == []

    handle = jobs_admin.start_message_move_task(SourceArn=arn("jobs-dlq"))["TaskHandle"]
    with pytest.raises(ClientError) as e:
        consumer.cancel_message_move_task(TaskHandle=handle)
    assert error_code(e) == "AccessDenied"


def test_a_queue_outside_the_key_s_reach_is_access_denied_whether_it_exists_or_not(keyed: str) -> None:
    """No existence oracle: as every other action, the move tasks ask the key before they look for
    the queue. Inside the key's reach, a queue that does not exist is ResourceNotFoundException."""
    admin, jobs_admin = (
        sqs_client(keyed, aws_access_key_id=k[0], aws_secret_access_key=k[1]) for k in (ADMIN, JOBS_ADMIN)
    )
    admin.create_queue(QueueName="hidden-dlq")
    admin.create_queue(QueueName="hidden-main", Attributes={"RedrivePolicy": policy("hidden-dlq", 1)})
    admin.create_queue(QueueName="jobs-oracle-dlq")
    admin.create_queue(QueueName="jobs-oracle", Attributes={"RedrivePolicy": policy("jobs-oracle-dlq", 1)})

    def code_of(call: Callable[..., Any], **given: Any) -> str:
        with pytest.raises(ClientError) as e:
            call(**given)
        return error_code(e)

    for hidden in ("hidden-dlq", "hidden-nowhere"):
        assert code_of(jobs_admin.start_message_move_task, SourceArn=arn(hidden)) == "AccessDenied"
        assert code_of(jobs_admin.list_message_move_tasks, SourceArn=arn(hidden)) == "AccessDenied"
        handle = handle_of(str(uuid4()), arn(hidden))
        assert code_of(jobs_admin.cancel_message_move_task, TaskHandle=handle) == "AccessDenied"
        destination = {"SourceArn": arn("jobs-oracle-dlq"), "DestinationArn": arn(hidden)}
        assert code_of(jobs_admin.start_message_move_task, **destination) == "AccessDenied"
    missing = arn("jobs-nowhere")
    assert code_of(jobs_admin.start_message_move_task, SourceArn=missing) == "ResourceNotFoundException"
    assert code_of(jobs_admin.list_message_move_tasks, SourceArn=missing) == "ResourceNotFoundException"
    assert jobs_admin.list_message_move_tasks(SourceArn=arn("jobs-oracle-dlq"))["Results"] == []
