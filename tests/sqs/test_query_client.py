"""The query protocol as a real client speaks it: boto3 1.28 / botocore 1.31.80 (the last SQS model
before the JSON protocol), in a venv of its own, runs tests/sqs/query_client.py against the door on
every engine, and tests/sqs/query_client_aws.py (issue 34's behaviours of Amazon SQS) in the same venv.
SIMPLEQUEUE_TEST_QUERY_PYTHON may name a python that has it; else the venv is built
once, as .venv-query-client-* in the project's root (skipped when it cannot be installed, failed
under CI)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.engines import REQUIRE_POSTGRES
from tests.installs import pip_venv

OLD_CLIENT = ["botocore==1.31.80", "boto3==1.28.80"]
MD5_ALL = "2a8c5d4c1c5e810eae3baa6c3dce8a99"
MD5_TRACE = "8d621390334ef2be21618cf47addd1b1"
SCRIPT = Path(__file__).with_name("query_client.py")


@pytest.fixture(scope="module")
def old_python() -> str:
    given = os.environ.get("SIMPLEQUEUE_TEST_QUERY_PYTHON")
    if given:
        return given
    python, problem = pip_venv("query-client", OLD_CLIENT)
    if problem:
        if REQUIRE_POSTGRES:  # under CI
            pytest.fail(problem)
        pytest.skip(problem)
    return str(python)


def test_boto3_1_28_speaks_the_query_protocol(old_python: str, sqs_base: str, name: str) -> None:
    ran = subprocess.run(
        [old_python, str(SCRIPT), sqs_base, name], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    out: dict[str, Any] = json.loads(ran.stdout)
    assert (out["botocore"], out["protocol"]) == ("1.31.80", "query")
    assert out["url"] == f"{sqs_base}/000000000000/{name}"
    # MD5OfMessageAttributes as moto 5.2.5's Message.attribute_md5 computes it (not our code).
    assert out["sent"] == {
        "MD5OfMessageBody": "5d41402abc4b2a76b9719d911017c592",
        "MD5OfMessageAttributes": MD5_ALL,
    }
    assert out["batch"] == {"ok": ["a"], "failed": [["b", "InvalidParameterValue"]], "md5": [MD5_TRACE]}
    assert out["bodies"] == ["a & <b>", "hello"]
    trace = {"DataType": "String", "StringValue": "a & <b> ✓"}
    assert out["received"] == {
        "hello": [
            {
                "trace": trace,
                "count": {"DataType": "Number.int", "StringValue": "42"},
                "blob": {"DataType": "Binary", "BinaryValue": "00ff3c"},
            },
            MD5_ALL,
        ],
        "a & <b>": [{"trace": trace}, MD5_TRACE],
    }
    assert out["counts"] == ["1", "1"]
    assert out["deleted"] == ["m0", "m1"]
    assert out["attributes"]["VisibilityTimeout"] == "40"
    assert out["attributes"]["ApproximateNumberOfMessagesNotVisible"] == "0"
    assert out["listed"] == [out["url"]]
    assert out["errors"] == {
        "GetQueueUrl": ["AWS.SimpleQueueService.NonExistentQueue", 400],
        "DeleteMessage": ["ReceiptHandleIsInvalid", 400],
        "SendMessage": ["InvalidParameterValue", 400],
        "AddPermission": ["InvalidParameterValue", 400],
    }


AWS_SCRIPT = Path(__file__).with_name("query_client_aws.py")


def test_boto3_1_28_sees_sqs_as_aws_answers(old_python: str, sqs_base: str, name: str) -> None:
    """Issue 34's behaviours through the real query-protocol client (tests/sqs/query_client_aws.py)."""
    ran = subprocess.run(
        [old_python, str(AWS_SCRIPT), sqs_base, name], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    out: dict[str, Any] = json.loads(ran.stdout)
    assert (out["botocore"], out["protocol"]) == ("1.31.80", "query")
    # FIFO: booleans in any case; a receive takes each group's run in order, one run after another;
    # its retry with the same ReceiveRequestAttemptId answers the same messages and handles.
    assert out["fifo_booleans"] == {"ContentBasedDeduplication": "true", "FifoQueue": "true"}
    assert out["fifo_bodies"] == ["a1", "a2", "b1", "b2"]
    assert out["fifo_group"] == ["g1", "g1", "g2", "g2"]
    assert out["fifo_retry_same"] is True
    assert out["fifo_numbers_rise_in_each_group"] is True
    assert out["fifo_nothing_while_held"] is True
    assert out["fifo_system"] == [
        "AWSTraceHeader",
        "ApproximateFirstReceiveTimestamp",
        "ApproximateReceiveCount",
        "MessageDeduplicationId",
        "MessageGroupId",
        "SenderId",
        "SentTimestamp",
        "SequenceNumber",
    ]
    assert out["fifo_trace"].startswith("Root=1-5759e988-")
    assert out["asked_sequence_only"] == ["SequenceNumber"]
    assert out["plain_has_no_attributes"] is True
    invalid = "InvalidParameterValue"
    assert out["fifo_errors"] == {
        "DelaySeconds": [
            invalid,
            "Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter that is "
            "not valid for this queue type.",
            400,
        ],
        "NoGroup": ["MissingParameter", "The request must contain the parameter MessageGroupId.", 400],
        "BatchNoGroup": [invalid, "The request must contain the parameter MessageGroupId.", 400],
        "NotFifo": [
            "InvalidAttributeValue",
            "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.",
            400,
        ],
    }
    # The attributes Terraform and the CDK set, kept and answered.
    assert out["standard_attributes"] == {
        "MessageRetentionPeriod": "1209600",
        "KmsMasterKeyId": "alias/aws/sqs",
        "KmsDataKeyReusePeriodSeconds": "600",
        "SqsManagedSseEnabled": "false",
        "FifoQueue": None,
        "DeduplicationScope": None,
    }
    assert out["sse"] == {"SqsManagedSseEnabled": "true"}
    assert out["high_throughput"] == {
        "DeduplicationScope": "messageGroup",
        "FifoThroughputLimit": "perMessageGroupId",
    }
    errors = out["attribute_errors"]
    assert errors["Retention"][0::2] == ["InvalidAttributeValue", 400]
    assert errors["Retention"][1].startswith("Invalid value for the parameter MessageRetentionPeriod.")
    assert errors["FifoOnly"] == [
        "InvalidAttributeName",
        "You can specify the DeduplicationScope only when FifoQueue is set to true.",
        400,
    ]
    assert errors["FifoName"][0::2] == [invalid, 400]
    # A bare queue name as QueueUrl; prefix.* as SQS reads it (AWS's MD5); names beyond ASCII.
    assert out["by_name"] == "855d2bf59043b81e76bc931e685a4f58"
    assert out["wildcard"] == [["Hello", "Help.Me"], "83fee93c1bcd8b9a5a923ffacdc636c7"]
    assert out["all_attributes"] == ["Hello", "Help.Me", "héllo"]
    assert out["standard_system"] == [
        "ApproximateFirstReceiveTimestamp",
        "ApproximateReceiveCount",
        "SenderId",
        "SentTimestamp",
    ]
    # Empty lists are left out of what botocore parses, as against SQS.
    assert out["empty"] == {
        "ReceiveMessage": [],
        "ListQueueTags": [],
        "ListQueues": [],
        "SendMessageBatch": ["Successful"],
    }
    assert out["policy"] == [["cross", "SQS:SendMessage"]]
    assert out["policy_after"] == []
    assert out["sts"] == ["000000000000", "arn:aws:iam::000000000000:root"]
    assert out["errors"] == {
        "MaxNumberOfMessages": [
            invalid,
            "Value 11 for parameter MaxNumberOfMessages is invalid. "
            "Reason: Must be between 1 and 10, if provided.",
            400,
        ],
        "WaitTimeSeconds": [
            invalid,
            "Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.",
            400,
        ],
        # botocore 1.31 sends an empty list as `Entries=`.
        "EmptyBatch": [
            "AWS.SimpleQueueService.EmptyBatchRequest",
            "There should be at least one DeleteMessageBatchRequestEntry in the request.",
            400,
        ],
        "EmptyNames": None,
        "ReceiptHandle": [
            "ReceiptHandleIsInvalid",
            'The input receipt handle "garbage" is not a valid receipt handle.',
            400,
        ],
        "NonExistentQueue": [
            "AWS.SimpleQueueService.NonExistentQueue",
            "The specified queue does not exist for this wsdl version.",
            400,
        ],
        "Label": [invalid, "Value nobody for parameter Label is invalid. Reason: can't find label.", 400],
        "Tags": [invalid, f"Too many tags added for queue {name}.", 400],
        "Delay": [
            invalid,
            "Value 901 for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900.",
            400,
        ],
    }
