"""AddPermission and RemovePermission on both protocols: statements of the queue's Policy as SQS
writes them, answered by GetQueueAttributes, with SQS's refusals."""

from __future__ import annotations

import json
from typing import Any

from tests.sqs.both_protocols import Answer, call
from tests.sqs.conftest import ACCOUNT


def add(base: str, protocol: str, url: str, label: str, accounts: list[str], actions: list[str]) -> Answer:
    if protocol == "json":
        return call(
            base,
            protocol,
            "AddPermission",
            QueueUrl=url,
            Label=label,
            AWSAccountIds=accounts,
            Actions=actions,
        )
    form = {f"AWSAccountId.{n}": a for n, a in enumerate(accounts, 1)}
    form |= {f"ActionName.{n}": a for n, a in enumerate(actions, 1)}
    return call(base, protocol, "AddPermission", QueueUrl=url, Label=label, **form)


def policy_of(base: str, protocol: str, url: str) -> Any:
    answer = call(base, protocol, "GetQueueAttributes", QueueUrl=url, AttributeNames=["Policy"])
    assert answer.status == 200, answer
    text = answer.result.get("Attributes", {}).get("Policy")
    return None if text is None else json.loads(text)


def test_permissions_are_statements_of_the_policy(sqs_base: str, protocol: str, name: str) -> None:
    url = call(sqs_base, protocol, "CreateQueue", QueueName=name).result["QueueUrl"]
    assert add(sqs_base, protocol, url, "send", ["111122223333"], ["SendMessage"]).status == 200
    assert (
        add(
            sqs_base,
            protocol,
            url,
            "read",
            ["111122223333", "444455556666"],
            ["ReceiveMessage", "DeleteMessage"],
        ).status
        == 200
    )
    policy = policy_of(sqs_base, protocol, url)
    arn = f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}"
    assert policy["Id"] == f"{arn}/SQSDefaultPolicy"
    assert policy["Statement"] == [
        {
            "Sid": "send",
            "Effect": "Allow",
            "Principal": {"AWS": "arn:aws:iam::111122223333:root"},
            "Action": "SQS:SendMessage",
            "Resource": arn,
        },
        {
            "Sid": "read",
            "Effect": "Allow",
            "Principal": {"AWS": ["arn:aws:iam::111122223333:root", "arn:aws:iam::444455556666:root"]},
            "Action": ["SQS:ReceiveMessage", "SQS:DeleteMessage"],
            "Resource": arn,
        },
    ]
    again = add(sqs_base, protocol, url, "send", ["111122223333"], ["SendMessage"])
    assert (again.status, again.code) == (400, "InvalidParameterValue")
    assert again.message.endswith("Reason: Already exists.")

    assert call(sqs_base, protocol, "RemovePermission", QueueUrl=url, Label="send").status == 200
    assert [s["Sid"] for s in policy_of(sqs_base, protocol, url)["Statement"]] == ["read"]
    assert call(sqs_base, protocol, "RemovePermission", QueueUrl=url, Label="read").status == 200
    assert policy_of(sqs_base, protocol, url) is None  # no statement left: no Policy, as SQS answers
    gone = call(sqs_base, protocol, "RemovePermission", QueueUrl=url, Label="read")
    assert (gone.status, gone.code) == (400, "InvalidParameterValue")
    assert gone.message.endswith("Reason: can't find label.")


def test_add_permission_refusals(sqs_base: str, protocol: str, name: str) -> None:
    url = call(sqs_base, protocol, "CreateQueue", QueueName=name).result["QueueUrl"]
    cases = [
        (["111122223333"], ["CreateQueue"], "InvalidParameterValue"),  # only the owner may
        (["111122223333"], ["SendMessage"] * 8, "OverLimit"),
        (["not-an-account"], ["SendMessage"], "InvalidParameterValue"),
        (["111122223333"], [], "MissingParameter"),
    ]
    for accounts, actions, code in cases:
        answer = add(sqs_base, protocol, url, "x", accounts, actions)
        assert answer.code == code, (accounts, actions, answer)
    assert policy_of(sqs_base, protocol, url) is None
