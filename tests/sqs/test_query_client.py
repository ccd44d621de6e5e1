"""The query protocol as a real client speaks it: boto3 1.28 / botocore 1.31.80 (the last SQS model
before the JSON protocol), in a venv of its own, runs tests/sqs/query_client.py against the door on
every engine. SIMPLEQUEUE_TEST_QUERY_PYTHON may name a python that has it; else the venv is built
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
