"""The SQS door fuzzed in-process, as schemathesis fuzzes the REST API: random requests in both
protocols, signed by a key of the app (so that they reach the parsers and the actions behind the
signature), and random signatures that are not. Whatever comes, the door answers in SQS's shapes:

- never a 5xx;
- the JSON protocol (X-Amz-Target): a JSON object, an error's with `__type` and `x-amzn-query-error`;
- the query protocol: XML that parses, an error's an `ErrorResponse` with a `Code`.

Hypothesis draws the requests from a fixed seed (derandomize), a bounded number per protocol
(SIMPLEQUEUE_SQS_FUZZ_EXAMPLES, 250 by default), so a run is the same every time and takes seconds.
On SQLite and a fresh PostgreSQL database.
"""

from __future__ import annotations

import base64
import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, urlencode

import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simplequeue.api.sqs.routes import ACTIONS
from simplequeue.api.sqs.sigv4 import scope_service
from simplequeue.settings import Settings

from tests.engines import postgres_database
from tests.http import app_client

KEY = ("AKIDFUZZADMIN000001", "fuzz-admin-secret-" + "f" * 32)
HOST = "sq"  # tests.http.app_client's
BASE = f"http://{HOST}"
ACCOUNT = "000000000000"
NAMESPACE = "{http://queue.amazonaws.com/doc/2012-11-05/}"
SNS_NAMESPACE = "{http://sns.amazonaws.com/doc/2010-03-31/}"
JSON_10 = "application/x-amz-json-1.0"
FORM = "application/x-www-form-urlencoded; charset=utf-8"
QUEUES = ["fuzz", "fuzz-dlq", "fuzz.fifo"]
EXAMPLES = int(
    os.environ.get("SIMPLEQUEUE_SQS_FUZZ_EXAMPLES", "250")
)  # per test and engine; more for a long run
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- the door, in-process -----------------------------------------------------------------------


@dataclass(frozen=True)
class Door:
    """The app in-process: its lifespan and an httpx client of it run in a thread of their own (an
    anyio portal), so that Hypothesis's synchronous tests call it."""

    portal: BlockingPortal
    client: httpx.AsyncClient

    def post(
        self, path: str, headers: Mapping[str, str | bytes], body: bytes, *, sign: bool = True
    ) -> httpx.Response:
        if sign:
            request = AWSRequest("POST", BASE + path, headers=dict(headers), data=body)
            SigV4Auth(Credentials(*KEY), "sqs", "us-east-1").add_auth(request)
            headers = dict(request.headers.items())
        # As bytes: httpx sends only ASCII text; any other is sent as its UTF-8, as SDKs send it.
        raw = [
            (k.encode(), v.encode("utf-8", "surrogatepass") if isinstance(v, str) else v)
            for k, v in headers.items()
        ]
        return self.portal.call(self._post, path, raw, body)

    async def _post(self, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> httpx.Response:
        return await self.client.post(path, headers=headers, content=body)


@contextmanager
def in_process(settings: Settings) -> Iterator[Door]:
    serving = asynccontextmanager(app_client)(settings, None)
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(serving) as client:
        yield Door(portal, client)


@contextmanager
def database(engine: str, folder: Path) -> Iterator[str]:
    if engine == "sqlite":
        yield f"sqlite:///{folder / 'fuzz.db'}"
    else:
        with postgres_database() as url:
            yield url


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def door(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    """The app with one admin key (its access key signs every fuzzed request), and queues to aim at:
    a standard queue with a dead-letter queue and a message in it, and a FIFO queue."""
    with database(request.param, tmp_path_factory.mktemp("sqs-fuzz")) as url:
        keys = [{"key": KEY[1], "role": "admin", "access_key_id": KEY[0]}]
        settings = Settings(database_url=url, api_keys=keys, sweep=False, max_request_bytes=1 << 20)
        with in_process(settings) as door:
            redrive = json.dumps({"deadLetterTargetArn": arn("fuzz-dlq"), "maxReceiveCount": 3})
            for name, attributes in [
                ("fuzz-dlq", {}),
                ("fuzz", {"RedrivePolicy": redrive}),
                ("fuzz.fifo", {"FifoQueue": "true", "ContentBasedDeduplication": "true"}),
            ]:
                answer = json_call(door, "CreateQueue", {"QueueName": name, "Attributes": attributes})
                assert answer.status_code == 200, answer.text
            sent = {"QueueUrl": url_of("fuzz"), "MessageBody": "a & <b> ✓\r\n"}
            assert json_call(door, "SendMessage", sent).status_code == 200
            yield door


def arn(name: str) -> str:
    return f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}"


def url_of(name: str) -> str:
    return f"{BASE}/{ACCOUNT}/{name}"


def json_call(door: Door, action: str, params: dict[str, Any]) -> httpx.Response:
    headers = {"X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": JSON_10}
    return door.post("/", headers, json.dumps(params).encode())


# --- what every answer must be --------------------------------------------------------------------


def assert_sqs_answer(answer: httpx.Response, *, json_wire: bool) -> None:
    assert answer.status_code < 500, answer.text[:500]
    if json_wire:
        assert answer.headers["content-type"] == JSON_10, answer.text[:500]
        body = answer.json()
        assert isinstance(body, dict)
        if answer.status_code >= 400:
            # SQS's own errors are in its namespace; the common ones (InvalidParameterValueException)
            # in AWS's.
            assert body["__type"].startswith(("com.amazonaws.sqs#", "com.amazon.coral.service#")), body
            assert isinstance(body["message"], str)
            assert answer.headers["x-amzn-query-error"].endswith((";Sender", ";Receiver"))
        return
    assert answer.headers["content-type"].startswith("text/xml"), answer.text[:500]
    try:
        root = ET.fromstring(answer.content)
    except ET.ParseError as exc:
        raise AssertionError(f"not well-formed XML ({exc}): {answer.text[:500]!r}") from None
    if answer.status_code >= 400:
        assert root.tag == f"{NAMESPACE}ErrorResponse", answer.text[:500]
        assert root.findtext(f"{NAMESPACE}Error/{NAMESPACE}Code")
    else:
        assert root.tag.endswith("Response"), answer.text[:500]


# --- what requests are made of --------------------------------------------------------------------
#
# Mostly requests an SDK could send, each value now and then replaced by anything at all, so that
# the fuzz reaches the actions (and their answers) as well as the parsers' refusals.


def mostly(good: st.SearchStrategy[Any], anything: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`good` about 9 times in 10, else `anything` (Hypothesis draws small integers more often)."""
    return st.integers(0, 9).flatmap(lambda n: good if n < 9 else anything)


# Texts: anything, including characters XML 1.0 cannot carry and lone surrogates (JSON escapes them).
texts = st.text(max_size=20) | st.sampled_from(["", " ", "0", "-1", "1e3", "All", "\x00", "\ud800", "\ufffe"])
numbers = st.integers(-(10**20), 10**20) | st.sampled_from([0, 1, 10, 20, 43200, 1209600])
scalars = st.none() | st.booleans() | numbers | st.floats() | texts
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
names = st.text("abcxyz-_.", min_size=1, max_size=8)
bodies = st.text(min_size=1, max_size=40)
queue_urls = mostly(
    st.sampled_from([url_of(q) for q in QUEUES]), st.sampled_from([url_of("gone"), f"{BASE}/1/x"]) | texts
)
arns = mostly(st.sampled_from([arn(q) for q in QUEUES]), st.sampled_from([arn("gone")]) | texts)
ATTRIBUTES: dict[str, st.SearchStrategy[Any]] = {
    "VisibilityTimeout": st.integers(0, 43200).map(str),
    "DelaySeconds": st.integers(0, 900).map(str),
    "MaximumMessageSize": st.integers(1024, 1 << 20).map(str),
    "MessageRetentionPeriod": st.integers(60, 1209600).map(str),
    "RedrivePolicy": st.builds(
        lambda q, n: json.dumps({"deadLetterTargetArn": arn(q), "maxReceiveCount": n}),
        st.sampled_from(QUEUES),
        st.integers(1, 5),
    ),
    "Policy": st.builds(lambda t: json.dumps({"Statement": t}, ensure_ascii=False), texts),
    "ContentBasedDeduplication": st.sampled_from(["true", "false"]),
    "KmsMasterKeyId": st.just("alias/aws/sqs"),
}
attributes = st.fixed_dictionaries({}, optional={k: mostly(v, texts) for k, v in ATTRIBUTES.items()})
attribute_names = st.lists(st.sampled_from(["All", "QueueArn", *ATTRIBUTES]) | texts, max_size=3)
message_attributes = st.dictionaries(
    mostly(names, texts),
    mostly(
        st.fixed_dictionaries({"DataType": st.just("String"), "StringValue": bodies})
        | st.fixed_dictionaries({"DataType": st.just("Number"), "StringValue": st.integers().map(str)})
        | st.fixed_dictionaries({"DataType": st.just("Binary"), "BinaryValue": st.just("AAE=")}),
        st.fixed_dictionaries(
            {},
            optional={
                "DataType": st.sampled_from(["String.x", "Number.int", "Binary", ""]) | json_values,
                "StringValue": json_values,
                "BinaryValue": st.sampled_from(["not base64", ""]) | json_values,
                "StringListValues": json_values,
            },
        )
        | json_values,
    ),
    max_size=3,
)
ids = mostly(st.sampled_from(["a", "b", "c", "a-b_1"]), st.sampled_from(["", "x" * 81]) | texts | json_values)
ENTRY: dict[str, st.SearchStrategy[Any]] = {
    "MessageBody": mostly(bodies, json_values),
    "ReceiptHandle": texts | json_values,
    "VisibilityTimeout": mostly(st.integers(0, 43200), json_values),
    "DelaySeconds": mostly(st.integers(0, 900), json_values),
    "MessageAttributes": message_attributes,
    "MessageGroupId": mostly(names, json_values),
    "MessageDeduplicationId": mostly(names, json_values),
}
entries = mostly(
    st.lists(st.fixed_dictionaries({"Id": ids}, optional=ENTRY), min_size=1, max_size=10),
    st.lists(st.fixed_dictionaries({}, optional={"Id": ids, **ENTRY}), max_size=11) | json_values,
)
tags = mostly(st.dictionaries(names, st.text("abc \t\x1f", max_size=5), max_size=3), json_values)
# A move task's handle is base64url of JSON: the JSON may be of any shape.
task_handles = st.builds(
    lambda fields: base64.urlsafe_b64encode(json.dumps(fields).encode()).decode(),
    mostly(
        st.fixed_dictionaries(
            {"taskId": mostly(st.uuids().map(str), json_values), "sourceArn": mostly(arns, json_values)}
        ),
        json_values,
    ),
)
PARAMS: dict[str, st.SearchStrategy[Any]] = {
    "QueueUrl": queue_urls,
    "QueueName": mostly(st.sampled_from([*QUEUES, "fuzz-new", "fuzz-new.fifo"]), texts),
    "QueueNamePrefix": mostly(st.just("fuzz"), texts),
    "QueueOwnerAWSAccountId": st.sampled_from([ACCOUNT, "1"]) | texts,
    "MessageBody": mostly(bodies, json_values),
    "ReceiptHandle": texts | json_values,
    "MaxNumberOfMessages": mostly(st.integers(1, 10), json_values),
    "MaxResults": mostly(st.integers(1, 10), json_values),
    "NextToken": texts | json_values,
    "VisibilityTimeout": mostly(st.integers(0, 43200), json_values),
    "DelaySeconds": mostly(st.integers(0, 900), json_values),
    "MessageGroupId": mostly(names, json_values),
    "MessageDeduplicationId": mostly(names, json_values),
    "ReceiveRequestAttemptId": texts,
    "Attributes": mostly(attributes, json_values),
    "AttributeNames": mostly(attribute_names, json_values),
    "MessageAttributeNames": st.lists(st.sampled_from(["All", ".*", "k", "a.*"]) | texts, max_size=3),
    "MessageSystemAttributeNames": st.lists(st.sampled_from(["All", "SenderId"]) | texts, max_size=3),
    "MessageAttributes": mostly(message_attributes, json_values),
    "MessageSystemAttributes": mostly(
        st.fixed_dictionaries(
            {"AWSTraceHeader": st.fixed_dictionaries({"DataType": st.just("String"), "StringValue": texts})}
        ),
        json_values,
    ),
    "Label": mostly(names, json_values),
    "AWSAccountIds": mostly(
        st.lists(st.sampled_from(["111122223333", ACCOUNT]) | texts, max_size=3), json_values
    ),
    "Actions": mostly(
        st.lists(st.sampled_from(["SendMessage", "ReceiveMessage", "*", "CreateQueue"]) | texts, max_size=8),
        json_values,
    ),
    "Entries": entries,
    "tags": tags,
    "Tags": tags,
    "TagKeys": mostly(st.lists(names, max_size=3), json_values),
    "SourceArn": arns,
    "DestinationArn": arns,
    "MaxNumberOfMessagesPerSecond": mostly(st.integers(1, 500), json_values),
    "TaskHandle": mostly(task_handles, texts | json_values),
}
VICTIMS = mostly(st.sampled_from([url_of("fuzz-new"), url_of("fuzz-new.fifo")]), texts)
ON_A_QUEUE = ["QueueUrl"]
WANTS: dict[str, tuple[list[str], list[str]]] = {
    # action: (parameters an SDK always sends, parameters it may send)
    "CreateQueue": (["QueueName"], ["Attributes", "tags"]),
    "GetQueueUrl": (["QueueName"], ["QueueOwnerAWSAccountId"]),
    "ListQueues": ([], ["QueueNamePrefix", "MaxResults", "NextToken"]),
    "GetQueueAttributes": (ON_A_QUEUE, ["AttributeNames"]),
    "SetQueueAttributes": ([*ON_A_QUEUE, "Attributes"], []),
    "DeleteQueue": (ON_A_QUEUE, []),
    "PurgeQueue": (ON_A_QUEUE, []),
    "ListDeadLetterSourceQueues": (ON_A_QUEUE, ["MaxResults", "NextToken"]),
    "TagQueue": ([*ON_A_QUEUE, "Tags"], []),
    "UntagQueue": ([*ON_A_QUEUE, "TagKeys"], []),
    "ListQueueTags": (ON_A_QUEUE, []),
    "SendMessage": (
        [*ON_A_QUEUE, "MessageBody"],
        [
            "DelaySeconds",
            "MessageAttributes",
            "MessageGroupId",
            "MessageDeduplicationId",
            "MessageSystemAttributes",
        ],
    ),
    "SendMessageBatch": ([*ON_A_QUEUE, "Entries"], []),
    "ReceiveMessage": (
        ON_A_QUEUE,
        [
            "MaxNumberOfMessages",
            "VisibilityTimeout",
            "AttributeNames",
            "MessageAttributeNames",
            "MessageSystemAttributeNames",
            "ReceiveRequestAttemptId",
        ],
    ),
    "DeleteMessage": ([*ON_A_QUEUE, "ReceiptHandle"], []),
    "DeleteMessageBatch": ([*ON_A_QUEUE, "Entries"], []),
    "ChangeMessageVisibility": ([*ON_A_QUEUE, "ReceiptHandle", "VisibilityTimeout"], []),
    "ChangeMessageVisibilityBatch": ([*ON_A_QUEUE, "Entries"], []),
    "StartMessageMoveTask": (["SourceArn"], ["DestinationArn", "MaxNumberOfMessagesPerSecond"]),
    "ListMessageMoveTasks": (["SourceArn"], ["MaxResults"]),
    "CancelMessageMoveTask": (["TaskHandle"], []),
    "AddPermission": ([*ON_A_QUEUE, "Label", "AWSAccountIds", "Actions"], []),
    "RemovePermission": ([*ON_A_QUEUE, "Label"], []),
    "GetCallerIdentity": ([], []),
}
assert set(WANTS) == set(ACTIONS)


def params_of(action: str) -> st.SearchStrategy[dict[str, Any]]:
    """An action's parameters, now and then one missing, or others (anything) beside them."""
    required, optional = WANTS.get(action, ([], []))
    # A queue the fuzz may delete is one it made: the queues it aims at stay for the next examples.
    given = PARAMS | {"QueueUrl": VICTIMS} if action == "DeleteQueue" else PARAMS
    wanted = st.fixed_dictionaries(
        {name: given[name] for name in required}, optional={name: given[name] for name in optional}
    )
    anything = st.fixed_dictionaries({}, optional=PARAMS) | st.dictionaries(texts, json_values, max_size=3)
    return mostly(wanted, anything)


# Header text an SDK can sign (botocore signs ASCII only); the unsigned requests below send any.
ascii_texts = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20)
actions = mostly(st.sampled_from(sorted(ACTIONS)), ascii_texts)
calls = actions.flatmap(lambda action: st.tuples(st.just(action), params_of(action)))

# A receive never waits: a WaitTimeSeconds the door would wait out is replaced by 0 (a long-poll of
# 20 s on an empty queue is what a receive is for, not a finding), and queues wait by default only
# if a fuzzed attribute said so, which ATTRIBUTES never does.
waits = st.sampled_from([0, -1, 21, "0", "x", None, 1.5])


# --- the JSON protocol ---------------------------------------------------------------------------

deep = st.integers(1, 4).map(lambda k: 10**k + 1)
odd_bodies = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=64).map(str.encode),
    deep.map(lambda n: b"[" * n + b"]" * n),
    deep.map(lambda n: b'{"QueueUrl":' * n + b"1" + b"}" * n),
    st.just(b'{"MaxNumberOfMessages": ' + b"9" * 5000 + b"}"),
    st.just(b'{"QueueName": "a\\ud800"}'),
    st.just(b'{"QueueUrl": NaN, "MaxResults": Infinity}'),
)


@FUZZ
@given(
    call=calls,
    wait=waits,
    odd=mostly(st.none(), odd_bodies),
    target_prefix=mostly(st.just("AmazonSQS."), st.sampled_from(["", "Other.", "amazonsqs."])),
)
def test_the_json_protocol(
    door: Door, call: tuple[str, dict[str, Any]], wait: Any, odd: bytes | None, target_prefix: str
) -> None:
    action, params = call
    if action == "ReceiveMessage":
        params = {**params, "WaitTimeSeconds": wait}
    body = odd if odd is not None else json.dumps(params).encode()
    headers = {"X-Amz-Target": target_prefix + action, "Content-Type": JSON_10}
    assert_sqs_answer(door.post("/", headers, body), json_wire=True)


def test_a_json_body_nested_100_000_deep(door: Door) -> None:
    headers = {"X-Amz-Target": "AmazonSQS.ListQueues", "Content-Type": JSON_10}
    for body in [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000]:
        answer = door.post("/", headers, body)
        assert_sqs_answer(answer, json_wire=True)
        assert answer.json()["__type"] == "com.amazon.coral.service#InvalidParameterValueException"


def test_what_the_door_keeps_the_query_protocol_can_answer(door: Door) -> None:
    """A tag or an attribute is kept and answered as given: one holding a character XML cannot carry
    (U+001F is white space to a regular expression's \\s) would make every query-protocol answer
    of it not parse. Refused when given, in either protocol."""
    fuzz = url_of("fuzz")
    refused = [
        ("TagQueue", {"QueueUrl": fuzz, "Tags": {"k": "a\x1fb"}}),
        ("TagQueue", {"QueueUrl": fuzz, "Tags": {"k\x1c": "v"}}),
        ("SetQueueAttributes", {"QueueUrl": fuzz, "Attributes": {"Policy": '{"a": "\ufffe"}'}}),
        ("SetQueueAttributes", {"QueueUrl": fuzz, "Attributes": {"RedriveAllowPolicy": '{"\x7f\uffff": 1}'}}),
        ("CreateQueue", {"QueueName": "fuzz-kept", "tags": {"k": "\x1e"}}),
    ]
    for action, params in refused:
        answer = json_call(door, action, params)
        assert_sqs_answer(answer, json_wire=True)
        assert answer.status_code == 400, (action, params)
    form = f"Action=TagQueue&QueueUrl={fuzz}&Tag.1.Key=k&Tag.1.Value=%1F".encode()
    assert door.post("/", {"Content-Type": FORM}, form).status_code == 400
    for action in ["ListQueueTags", "GetQueueAttributes"]:
        form = f"Action={action}&QueueUrl={fuzz}&AttributeName.1=All".encode()
        answer = door.post("/", {"Content-Type": FORM}, form)
        assert_sqs_answer(answer, json_wire=False)
        assert answer.status_code == 200


# --- the query protocol --------------------------------------------------------------------------

FLAT_LISTS = {
    "AttributeNames": "AttributeName",
    "MessageAttributeNames": "MessageAttributeName",
    "MessageSystemAttributeNames": "MessageSystemAttributeName",
    "TagKeys": "TagKey",
    "AWSAccountIds": "AWSAccountId",
    "Actions": "ActionName",
}
FLAT_MAPS = {"Attributes": ("Attribute", "Name"), "Tags": ("Tag", "Key"), "tags": ("Tag", "Key")}
FLAT_ENTRIES = {
    "SendMessageBatch": "SendMessageBatchRequestEntry",
    "DeleteMessageBatch": "DeleteMessageBatchRequestEntry",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibilityBatchRequestEntry",
}


def flattened(action: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    """The JSON protocol's parameters as the query protocol's form (`Attribute.1.Name`, ...)."""
    form: list[tuple[str, str]] = []
    for key, value in params.items():
        if key in FLAT_LISTS and isinstance(value, list):
            form += [(f"{FLAT_LISTS[key]}.{n}", text_of(v)) for n, v in enumerate(value, 1)]
        elif key in FLAT_MAPS and isinstance(value, dict):
            prefix, name = FLAT_MAPS[key]
            for n, (k, v) in enumerate(value.items(), 1):
                form += [(f"{prefix}.{n}.{name}", k), (f"{prefix}.{n}.Value", text_of(v))]
        elif key == "MessageAttributes" and isinstance(value, dict):
            form += message_attribute_form("", value)
        elif key == "MessageSystemAttributes" and isinstance(value, dict):
            form += message_attribute_form("", value, "MessageSystemAttribute")
        elif key == "Entries" and isinstance(value, list):
            for n, entry in enumerate(value, 1):
                prefix = f"{FLAT_ENTRIES.get(action, 'Entry')}.{n}."
                for k, v in entry.items() if isinstance(entry, dict) else [("Id", entry)]:
                    if k == "MessageAttributes" and isinstance(v, dict):
                        form += message_attribute_form(prefix, v)
                    else:
                        form.append((prefix + k, text_of(v)))
        else:
            form.append((key, text_of(value)))
    return form


def message_attribute_form(
    prefix: str, attributes: dict[str, Any], member: str = "MessageAttribute"
) -> list[tuple[str, str]]:
    form: list[tuple[str, str]] = []
    for n, (name, value) in enumerate(attributes.items(), 1):
        form.append((f"{prefix}{member}.{n}.Name", name))
        for field, v in value.items() if isinstance(value, dict) else [("StringValue", value)]:
            form.append((f"{prefix}{member}.{n}.Value.{field}", text_of(v)))
    return form


def text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value).lower() if isinstance(value, bool) else json.dumps(value)


FLAT = [
    "Attribute.{i}.Name",
    "Attribute.{i}.Value",
    "AttributeName.{i}",
    "MessageAttribute.{i}.Value.DataType",
    "MessageAttribute.{i}.Value.StringListValue.{j}",
    "SendMessageBatchRequestEntry.{i}.Id",
    "SendMessageBatchRequestEntry.{i}.MessageAttribute.{j}.Name",
    "DeleteMessageBatchRequestEntry.{i}.ReceiptHandle",
    "ChangeMessageVisibilityBatchRequestEntry.{i}.VisibilityTimeout",
    "Tag.{i}.Key",
    "Tag.{i}.Value.{j}",
    "TagKey.{i}",
]
ARABIC_ONE = "\u0661"
indexes = st.sampled_from(["1", "2", "10", "0", "01", "", "a", "-1", "²", ARABIC_ONE, "9" * 20])
flat_keys = st.builds(lambda t, i, j: t.format(i=i, j=j), st.sampled_from(FLAT), indexes, indexes)
odd_keys = st.sampled_from(sorted(PARAMS)) | flat_keys | st.text(alphabet="ab1.²", max_size=12) | texts
odd_values = texts | queue_urls | arns | st.sampled_from(["String", "Number", "Binary", "1", "All"])
paths = mostly(
    st.sampled_from(["/", f"/{ACCOUNT}/fuzz"]), st.sampled_from([f"/{ACCOUNT}/gone", "/123456789012/x"])
)


@FUZZ
@given(
    call=calls,
    wait=waits,
    extra=mostly(st.just([]), st.lists(st.tuples(odd_keys, odd_values), min_size=1, max_size=6)),
    dropped=mostly(st.just(0), st.integers(0, 5)),
    path=paths,
    in_url=mostly(st.just(False), st.just(True)),
    odd=mostly(st.none(), st.binary(max_size=64)),
)
def test_the_query_protocol(
    door: Door,
    call: tuple[str, dict[str, Any]],
    wait: Any,
    extra: list[tuple[str, str]],
    dropped: int,
    path: str,
    in_url: bool,
    odd: bytes | None,
) -> None:
    action, params = call
    form = [("Action", action), ("Version", "2012-11-05"), *flattened(action, params), *extra]
    del form[dropped : dropped + (dropped > 0)]  # now and then one parameter, the Action too, left out
    if action == "ReceiveMessage":
        form.append(("WaitTimeSeconds", text_of(wait)))
    # In a URL, a space as %20, as SDKs write (and sign) it; in a form, as +.
    encoded = urlencode(
        form, encoding="utf-8", errors="surrogatepass", quote_via=quote if in_url else quote_plus
    )
    body = odd if odd is not None else b"" if in_url else encoded.encode()
    if in_url and odd is None:
        path = f"{path}?{encoded}"
    assert_sqs_answer(door.post(path, {"Content-Type": FORM}, body), json_wire=False)


@pytest.mark.parametrize(
    "form",
    [
        # "²": a digit to str.isdigit(), not to int()
        f"Action=SendMessageBatch&QueueUrl={url_of('fuzz')}&SendMessageBatchRequestEntry.%C2%B2.Id=a",
        "Action=ListQueues&" + "." * 50_000 + "=x",
        "Action=ListQueues&" + "a." * 25_000 + "=x",
        "Action=ListQueues&" + "&".join(f"p{n}=x" for n in range(5_000)),
        "Action=ListQueues&Attribute.1=x&Attribute.1.Name=y",
        "Action=ListQueues&AttributeName." + "9" * 5000 + "=All",
        "Action=ReceiveMessage&QueueUrl=%1F",  # quoted in the error's message
    ],
    ids=[
        "superscript-index",
        "dots",
        "deep-key",
        "many-parameters",
        "whole-and-parts",
        "huge-index",
        "unprintable-quoted",
    ],
)
def test_query_forms_that_cannot_be_read(door: Door, form: str) -> None:
    answer = door.post("/", {"Content-Type": FORM}, form.encode())
    assert_sqs_answer(answer, json_wire=False)
    assert 400 <= answer.status_code < 500


# --- signatures that are not -----------------------------------------------------------------------

TODAY = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")  # a time the door takes as now
STAMPS = [TODAY, "20261125T123244Z", "99991231T235959Z", "00010101T000000Z"]
HTTP_DATES = [
    "Fri, 31 Dec 9999 23:59:59 -0100",
    "Mon, 01 Jan 0001 00:00:00 +0100",
    "Fri, 01 Jan 0100 00:00:00 +0100",
    "Fri, 31 Dec 2026 23:59:59 +2400",
    "Wed, 25 Nov 2026 12:32:44 GMT",
]
stamps = mostly(st.sampled_from(STAMPS), texts)
dates = mostly(st.sampled_from(HTTP_DATES), texts)


def credential(stamp: str) -> st.SearchStrategy[str]:
    """A credential scope, mostly of the request's own date (else the date is what is refused)."""
    return mostly(
        st.builds(
            "{}/{}/us-east-1/{}/aws4_request".format,
            st.sampled_from([KEY[0], "AKIDMADEUP0000000001"]),
            mostly(st.just(stamp[:8]), st.sampled_from(["99991231", "00010101", "2026-11-25"])),
            mostly(st.just("sqs"), st.just("sns")),
        ),
        texts,
    )


def authorization(stamp: str) -> st.SearchStrategy[str]:
    return mostly(
        st.builds(
            "AWS4-HMAC-SHA256 Credential={}, SignedHeaders={}, Signature={}".format,
            credential(stamp),
            mostly(
                st.sampled_from(["host;x-amz-date", "date;host"]), st.sampled_from(["host", "Host;X", ""])
            ),
            mostly(st.just("0" * 64), texts),
        ),
        texts,
    )


def presigned(stamp: str) -> st.SearchStrategy[dict[str, str]]:
    return st.fixed_dictionaries(
        {
            "X-Amz-Algorithm": mostly(st.just("AWS4-HMAC-SHA256"), texts),
            "X-Amz-Credential": credential(stamp),
            "X-Amz-Date": mostly(st.just(stamp), stamps),
            "X-Amz-SignedHeaders": mostly(st.just("host"), texts),
            "X-Amz-Signature": mostly(st.just("0" * 64), texts),
        },
        optional={
            "X-Amz-Expires": mostly(st.sampled_from(["300", "604800"]), st.sampled_from(["0", "9" * 5000]))
        },
    )


@st.composite
def not_signed_by_a_key(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, str] | None]:
    """The headers (Authorization, X-Amz-Date, Date, ...) and presigned query of a request whose
    signature no key made: made up, of an unknown key, malformed, expired, or of another day."""
    stamp = draw(stamps)
    headers: dict[str, str] = {}
    if draw(mostly(st.just(True), st.just(False))):
        headers["Authorization"] = draw(authorization(stamp))
    if draw(mostly(st.just(True), st.just(False))):
        headers["X-Amz-Date"] = stamp
    else:
        headers["Date"] = draw(dates)
    if draw(st.booleans()):
        headers["X-Amz-Content-SHA256"] = draw(mostly(st.just("0" * 64), texts))
    query = draw(presigned(stamp)) if draw(st.integers(0, 4)) == 4 else None
    return headers, query


@FUZZ
@given(json_wire=st.booleans(), request=not_signed_by_a_key())
def test_requests_not_signed_by_a_key(
    door: Door, json_wire: bool, request: tuple[dict[str, str], dict[str, str] | None]
) -> None:
    given_headers, query = request
    headers: dict[str, str | bytes] = {"Content-Type": JSON_10 if json_wire else FORM}
    if json_wire:
        headers["X-Amz-Target"] = "AmazonSQS.ListQueues"
    # As bytes: any text, as UTF-8 (surrogates too), whatever HTTP clients allow.
    headers |= {name: value.encode("utf-8", "surrogatepass") for name, value in given_headers.items()}
    path = "/?" + urlencode(query, errors="surrogatepass") if query else "/"
    body = b"{}" if json_wire else b"Action=ListQueues"
    answer = door.post(path, headers, body, sign=False)
    if not json_wire and _scope(headers, path) == "sns":
        # Signed, it claims, for SNS: the SNS door's refusal (simplequeue.api.aws's dispatch).
        root = ET.fromstring(answer.content)
        assert root.tag == f"{SNS_NAMESPACE}ErrorResponse", answer.text[:500]
        assert root.findtext(f"{SNS_NAMESPACE}Error/{SNS_NAMESPACE}Code")
    else:
        assert_sqs_answer(answer, json_wire=json_wire)
    assert answer.status_code in (400, 403), answer.text[:500]


def _scope(headers: Mapping[str, str | bytes], path: str) -> str | None:
    """The scope the door reads, from the headers as the server decodes them (latin-1)."""
    seen = {
        name.lower(): (value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")).decode(
            "latin-1"
        )
        for name, value in headers.items()
    }
    return scope_service(seen, path.partition("?")[2])
