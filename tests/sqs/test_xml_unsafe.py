"""Items the query protocol's XML cannot carry (pushed through the REST API or SQL, which take any
JSON): a query-protocol receive always answers well-formed XML, hands out the other messages, and
moves the one it cannot carry to its dead letters with an error saying why; the JSON protocol
hands it out as it is. A non-string payload's body is its JSON text with such characters escaped,
on both protocols alike, so that nothing is lost."""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from typing import Any
from uuid import UUID

import httpx
import pytest

from tests.sqs.conftest import ACCOUNT, sqs_client

NS = {"sqs": "http://queue.amazonaws.com/doc/2012-11-05/"}
FORM = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
UNSAFE = ["a\x01b", "a\ufffeb", "\x1b[31mred"]


def push(base: str, queue: str, payload: Any, **fields: Any) -> UUID:
    answer = httpx.post(f"{base}/push", json={"queue": queue, "payload": payload, **fields}, timeout=30)
    assert answer.status_code == 201, answer.text
    return UUID(answer.json()["id"])


def receive(base: str, queue: str, extra: str = "") -> ET.Element:
    form = f"Action=ReceiveMessage&Version=2012-11-05&MaxNumberOfMessages=10{extra}"
    answer = httpx.post(f"{base}/{ACCOUNT}/{queue}", content=form.encode(), headers=FORM, timeout=30)
    assert answer.status_code == 200, answer.text
    return ET.fromstring(answer.content)  # raises when the XML is not well-formed


def bodies(received: ET.Element) -> list[str]:
    return [m.findtext("sqs:Body", namespaces=NS) or "" for m in received.iterfind(".//sqs:Message", NS)]


def item(base: str, item_id: UUID) -> dict[str, Any]:
    answer = httpx.get(f"{base}/items/{item_id}", timeout=30)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


@pytest.mark.parametrize("text", UNSAFE)
def test_a_query_receive_hands_out_the_rest_and_dead_letters_what_xml_cannot_carry(
    sqs_base: str, name: str, text: str
) -> None:
    before = push(sqs_base, name, "before")
    bad = push(sqs_base, name, text)
    after = push(sqs_base, name, "after")

    assert sorted(bodies(receive(sqs_base, name))) == ["after", "before"]

    dead = item(sqs_base, bad)
    assert dead["status"] == "dead"
    assert dead["payload"] == text  # kept as it was pushed: nothing lost
    assert "XML 1.0 cannot carry" in dead["errors"][-1]["error"]
    assert f"U+{ord(text[1] if text[0] == 'a' else text[0]):04X}" in dead["errors"][-1]["error"]
    listed = httpx.get(f"{sqs_base}/queues/{name}/dead", timeout=30).json()["items"]
    assert [d["id"] for d in listed] == [str(bad)]
    assert {item(sqs_base, i)["status"] for i in (before, after)} == {"leased"}
    assert bodies(receive(sqs_base, name)) == []


def test_the_json_protocol_hands_such_a_body_out_as_it_is(sqs_base: str, name: str) -> None:
    push(sqs_base, name, "a\x01b")
    sqs = sqs_client(sqs_base)
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in messages] == ["a\x01b"]
    assert messages[0]["MD5OfBody"] == hashlib.md5(b"a\x01b").hexdigest()


def test_a_json_payload_is_received_with_those_characters_escaped(sqs_base: str, name: str) -> None:
    payload = {"k": "x\ufffey\uffff", "n": ["\x01"]}
    push(sqs_base, name, payload)
    [text] = bodies(receive(sqs_base, name))
    assert text == '{"k":"x\\ufffey\\uffff","n":["\\u0001"]}'
    assert json.loads(text) == payload  # the same JSON value: nothing lost

    push(sqs_base, name, payload)
    sqs = sqs_client(sqs_base)
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    [message] = sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"]
    assert message["Body"] == text  # the same body (and MD5) whichever protocol receives it
    assert message["MD5OfBody"] == hashlib.md5(text.encode()).hexdigest()


def test_a_group_the_query_protocol_cannot_name_is_dead_lettered_when_asked_for(
    sqs_base: str, name: str
) -> None:
    good = push(sqs_base, name, "fine", group="g")
    bad = push(sqs_base, name, "grouped", group="g\x02")
    received = receive(sqs_base, name, "&AttributeName.1=All")
    assert bodies(received) == ["fine"]
    assert item(sqs_base, bad)["status"] == "dead"
    assert "MessageGroupId" in item(sqs_base, bad)["errors"][-1]["error"]
    assert item(sqs_base, good)["status"] == "leased"


def test_with_a_redrive_policy_it_moves_to_the_target_and_the_history_says_why(
    sqs_base: str, name: str
) -> None:
    sqs = sqs_client(sqs_base)
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    arn = f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}-dlq"
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 5})
    sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy})
    bad = push(sqs_base, name, "bell\x07")

    assert bodies(receive(sqs_base, name)) == []

    [moved] = sqs.receive_message(QueueUrl=dlq)["Messages"]  # the JSON protocol can carry it
    assert (moved["MessageId"], moved["Body"]) == (str(bad), "bell\x07")
    history = httpx.get(f"{sqs_base}/queues/{name}/history", params={"outcome": "dead"}, timeout=30)
    [record] = history.json()["items"]
    assert record["id"] == str(bad)
    assert "U+0007" in record["last_error"]
