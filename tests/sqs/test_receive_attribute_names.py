"""What a receive answers of a message's attributes, over both protocols, as Amazon SQS answers it:
MessageAttributeNames (All, `*`, `.*`, names, `prefix.*` as a regular expression reads it, names no
attribute may have), non-ASCII names, and the system attributes SequenceNumber and
ApproximateFirstReceiveTimestamp only when asked for. The MD5s are AWS's own, recorded in
LocalStack's AWS-validated snapshot of test_receive_message_message_attribute_names_filters
(localstack/localstack, tests/aws/services/sqs/test_sqs.snapshot.json), or moto 5.2.5's
Message.attribute_md5 (which answers AWS's for those): not computed by our code."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sqs.both_protocols import call
from tests.sqs.test_errors_as_aws import with_attributes
from tests.sqs.test_queue_attributes_as_aws import created

FILTERED = {
    "Help.Me": {"DataType": "String", "StringValue": "Me"},
    "Hello": {"DataType": "String", "StringValue": "There"},
    "General": {"DataType": "String", "StringValue": "Kenobi"},
}
# AWS's MD5OfMessageAttributes for each choice of FILTERED (the snapshot's).
MD5_ALL = "4c360f3fdafd970e05fae2f149d997f5"
MD5_HELLO_GENERAL = "fca026605781cb4126a1e9044df24232"
MD5_HELLO = "a311262e065454b75da111d535b8dacd"
MD5_HELLO_HELP_ME = "83fee93c1bcd8b9a5a923ffacdc636c7"


def receive(base: str, protocol: str, url: str, **params: Any) -> dict[str, Any]:
    answer = call(base, protocol, "ReceiveMessage", QueueUrl=url, VisibilityTimeout=0, **params)
    assert answer.status == 200, answer
    [message] = answer.result["Messages"]
    return message


@pytest.mark.parametrize(
    ("names", "md5"),
    [
        ([], None),
        (["All"], MD5_ALL),
        (["*"], MD5_ALL),
        ([".*"], MD5_ALL),
        (["Foo", "Help"], None),
        (["Hello", "General"], MD5_HELLO_GENERAL),
        (["Foo", "Hello"], MD5_HELLO),
        (["Hel.*"], MD5_HELLO_HELP_ME),  # Hello too: `.*` is a regular expression's, not a name part's
        (["AWS."], None),  # a name no attribute may have asks for nothing, and is no error
        (["..foo"], None),
    ],
)
def test_message_attribute_names_as_aws_filters_them(
    sqs_base: str, protocol: str, name: str, names: list[str], md5: str | None
) -> None:
    url = created(sqs_base, protocol, name)
    sent = call(
        sqs_base,
        protocol,
        "SendMessage",
        QueueUrl=url,
        MessageBody="msg",
        **with_attributes(protocol, FILTERED),
    )
    assert sent.result["MD5OfMessageAttributes"] == MD5_ALL
    message = receive(sqs_base, protocol, url, MessageAttributeNames=names)
    assert message.get("MD5OfMessageAttributes") == md5
    if protocol == "json" and md5 == MD5_HELLO_HELP_ME:
        assert set(message["MessageAttributes"]) == {"Hello", "Help.Me"}  # the MD5 says so on both


def test_names_beyond_ascii(sqs_base: str, protocol: str, name: str) -> None:
    """SQS takes letters of other scripts in a name; MD5s as moto's attribute_md5 computes them."""
    given = {
        "héllo": {"DataType": "String", "StringValue": "wörld"},
        "名前": {"DataType": "String", "StringValue": "値"},
        "Help.Me": {"DataType": "String", "StringValue": "Me"},
    }
    url = created(sqs_base, protocol, name)
    sent = call(
        sqs_base, protocol, "SendMessage", QueueUrl=url, MessageBody="msg", **with_attributes(protocol, given)
    )
    assert sent.status == 200, sent
    assert sent.result["MD5OfMessageAttributes"] == "a20fe5f555e776ae9643c869b427dac7"
    every = receive(sqs_base, protocol, url, MessageAttributeNames=["All"])
    assert every["MD5OfMessageAttributes"] == "a20fe5f555e776ae9643c869b427dac7"
    if protocol == "json":
        assert every["MessageAttributes"] == given
    one = receive(sqs_base, protocol, url, MessageAttributeNames=["héllo"])
    assert one["MD5OfMessageAttributes"] == "bf981c65691018f4c2d62782a79359ef"
    for refused in ("a b", "a,b", "a/b"):  # ASCII beyond letters, digits, _ - . is refused
        bad = {refused: {"DataType": "String", "StringValue": "x"}}
        answer = call(
            sqs_base, protocol, "SendMessage", QueueUrl=url, MessageBody="m", **with_attributes(protocol, bad)
        )
        assert (answer.status, answer.code) == (400, "InvalidParameterValue"), refused


def test_sequence_number_and_first_receive_only_when_asked(sqs_base: str, protocol: str, name: str) -> None:
    """A standard queue has no SequenceNumber (AWS's snapshot answers SenderId alone to SenderId and
    SequenceNumber); a FIFO queue's is answered only when asked, as is ApproximateFirstReceiveTimestamp."""
    standard = created(sqs_base, protocol, name)
    assert call(sqs_base, protocol, "SendMessage", QueueUrl=standard, MessageBody="msg").status == 200
    both = receive(sqs_base, protocol, standard, AttributeNames=["SenderId", "SequenceNumber"])
    assert set(both["Attributes"]) == {"SenderId"}
    first = receive(sqs_base, protocol, standard, AttributeNames=["ApproximateFirstReceiveTimestamp"])
    assert set(first["Attributes"]) == {"ApproximateFirstReceiveTimestamp"}
    assert "Attributes" not in receive(sqs_base, protocol, standard)
    every = receive(sqs_base, protocol, standard, AttributeNames=["All"])
    assert set(every["Attributes"]) == {
        "SenderId",
        "SentTimestamp",
        "ApproximateReceiveCount",
        "ApproximateFirstReceiveTimestamp",
    }
    fifo = created(sqs_base, protocol, f"{name}.fifo", FifoQueue="true")
    ids = {"MessageGroupId": "g", "MessageDeduplicationId": "d"}
    sent = call(sqs_base, protocol, "SendMessage", QueueUrl=fifo, MessageBody="msg", **ids)
    number = sent.result["SequenceNumber"]
    asked = receive(sqs_base, protocol, fifo, MessageSystemAttributeNames=["SequenceNumber"])
    assert asked["Attributes"] == {"SequenceNumber": number}
    assert "Attributes" not in receive(sqs_base, protocol, fifo)
    named = receive(sqs_base, protocol, fifo, AttributeNames=["SenderId"])
    assert set(named["Attributes"]) == {"SenderId"}
    every = receive(sqs_base, protocol, fifo, AttributeNames=["All"])
    assert set(every["Attributes"]) == {
        "SenderId",
        "SentTimestamp",
        "ApproximateReceiveCount",
        "ApproximateFirstReceiveTimestamp",
        "SequenceNumber",
        "MessageGroupId",
        "MessageDeduplicationId",
    }
    assert every["Attributes"]["SequenceNumber"] == number
