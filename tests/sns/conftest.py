"""The Amazon SNS door under test: `simplequeue serve` on loopback (the SQS tests' server, one per
engine and module), spoken to by unchanged boto3 `sns` and `sqs` clients."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import boto3
import pytest
from botocore.config import Config

from tests.sqs.conftest import DUMMY_CREDENTIALS, sqs_base, sqs_client

__all__ = ["sqs_base"]  # the fixture, served to this folder's tests

ACCOUNT = "000000000000"


def sns_client(base: str, **credentials: Any) -> Any:
    return boto3.client(
        "sns",
        endpoint_url=base,
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}),
        **(credentials or DUMMY_CREDENTIALS),
    )


@pytest.fixture
def sns(sqs_base: str) -> Any:
    return sns_client(sqs_base)


@pytest.fixture
def sqs(sqs_base: str) -> Any:
    return sqs_client(sqs_base)


@pytest.fixture
def name() -> str:
    """A name of this test's own."""
    return f"t-{uuid4().hex[:12]}"


def topic_arn(name: str) -> str:
    return f"arn:aws:sns:us-east-1:{ACCOUNT}:{name}"


def queue_arn(name: str) -> str:
    return f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}"


def error_of(excinfo: pytest.ExceptionInfo[Any]) -> tuple[str, int]:
    """(Code, HTTP status) of a refused call."""
    response = excinfo.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]
