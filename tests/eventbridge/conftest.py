"""The EventBridge Scheduler door under test: `simplequeue serve` on loopback (the SQS tests' server,
one per engine and module), spoken to by unchanged boto3 `scheduler` and `sqs` clients."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import boto3
import pytest
from botocore.config import Config

from tests.sqs.conftest import ACCOUNT, DUMMY_CREDENTIALS, sqs_base, sqs_client

__all__ = ["sqs_base"]  # the fixture, served to this folder's tests

REGION = "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/scheduler"


def scheduler_client(base: str, **credentials: Any) -> Any:
    return boto3.client(
        "scheduler",
        endpoint_url=base,
        region_name=REGION,
        config=Config(retries={"max_attempts": 1}),
        **(credentials or DUMMY_CREDENTIALS),
    )


def queue_arn(queue: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{queue}"


def target(queue: str, body: str = "hello", **more: Any) -> dict[str, Any]:
    return {"Arn": queue_arn(queue), "RoleArn": ROLE, "Input": body, **more}


@pytest.fixture
def scheduler(sqs_base: str) -> Any:
    return scheduler_client(sqs_base)


@pytest.fixture
def sqs(sqs_base: str) -> Any:
    return sqs_client(sqs_base)


@pytest.fixture
def name() -> str:
    """A schedule name of this test's own."""
    return f"eb-{uuid4().hex[:12]}"


@pytest.fixture
def queue() -> str:
    return f"q-{uuid4().hex[:12]}"
