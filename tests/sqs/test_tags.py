"""A queue's tags through the SQS door, on every engine: CreateQueue's tags, TagQueue, UntagQueue,
ListQueueTags, and SQS's limits (50 tags, key and value lengths, the reserved aws: prefix)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.sqs.conftest import error_code


def tags_of(sqs: Any, url: str) -> dict[str, str]:
    tags: dict[str, str] = sqs.list_queue_tags(QueueUrl=url).get("Tags", {})
    return tags


def test_tags_are_set_replaced_listed_and_removed(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=name, tags={"team": "payments", "env": "test"})["QueueUrl"]
    assert tags_of(sqs, url) == {"team": "payments", "env": "test"}
    sqs.tag_queue(QueueUrl=url, Tags={"team": "billing", "cost-centre": "42 / eu-west:1", "empty": ""})
    assert tags_of(sqs, url) == {
        "team": "billing",
        "env": "test",
        "cost-centre": "42 / eu-west:1",
        "empty": "",
    }
    sqs.untag_queue(QueueUrl=url, TagKeys=["env", "empty", "never-set"])
    assert tags_of(sqs, url) == {"team": "billing", "cost-centre": "42 / eu-west:1"}
    sqs.untag_queue(QueueUrl=url, TagKeys=["team", "cost-centre"])
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)


def test_fifty_tags_and_no_more(sqs: Any, url: str) -> None:
    sqs.tag_queue(QueueUrl=url, Tags={f"k{n}": "v" for n in range(49)})
    with pytest.raises(ClientError) as e:
        sqs.tag_queue(QueueUrl=url, Tags={"one": "v", "two": "v"})
    assert error_code(e) == "InvalidParameterValue"
    assert len(tags_of(sqs, url)) == 49  # the refused call added neither
    sqs.tag_queue(QueueUrl=url, Tags={"k0": "replaced", "fiftieth": "v"})
    assert len(tags_of(sqs, url)) == 50


@pytest.mark.parametrize(
    "tags",
    [{"": "v"}, {"k" * 129: "v"}, {"k": "v" * 257}, {"aws:owner": "me"}, {"bad|key": "v"}],
)
def test_tags_sqs_refuses_are_refused(sqs: Any, url: str, tags: dict[str, str]) -> None:
    with pytest.raises(ClientError) as e:
        sqs.tag_queue(QueueUrl=url, Tags=tags)
    assert error_code(e) == "InvalidParameterValue"
    assert tags_of(sqs, url) == {}


def test_a_create_with_bad_tags_makes_no_queue(sqs: Any, name: str) -> None:
    with pytest.raises(ClientError) as e:
        sqs.create_queue(QueueName=name, tags={"aws:x": "y"})
    assert error_code(e) == "InvalidParameterValue"
    with pytest.raises(ClientError) as e:
        sqs.get_queue_url(QueueName=name)
    assert error_code(e) == "AWS.SimpleQueueService.NonExistentQueue"


def test_tags_of_no_queue_and_empty_calls(sqs: Any, sqs_base: str, url: str) -> None:
    gone = url + "-gone"
    for call in (
        lambda: sqs.tag_queue(QueueUrl=gone, Tags={"a": "b"}),
        lambda: sqs.untag_queue(QueueUrl=gone, TagKeys=["a"]),
        lambda: sqs.list_queue_tags(QueueUrl=gone),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e) == "AWS.SimpleQueueService.NonExistentQueue"
    with pytest.raises(ClientError) as e:
        sqs.tag_queue(QueueUrl=url, Tags={})
    assert error_code(e) == "MissingParameter"


def test_tags_go_with_the_queue(sqs: Any, sqs_base: str, name: str) -> None:
    url = sqs.create_queue(QueueName=name, tags={"team": "payments"})["QueueUrl"]
    sqs.delete_queue(QueueUrl=url)
    httpx.put(f"{sqs_base}/queues/{name}", json={}).raise_for_status()  # SQS's CreateQueue waits 60 s

    assert tags_of(sqs, url) == {}
