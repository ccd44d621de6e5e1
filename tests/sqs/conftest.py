"""The Amazon SQS door under test: `simplequeue serve` on loopback, one per engine and module, spoken to
by unchanged AWS clients (boto3 in the JSON protocol; forms like the query protocol's; aws-cli)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import boto3
import pytest
from botocore.config import Config

from tests.sqs.both_protocols import PROTOCOLS
from tests.test_e2e import serving

ACCOUNT = "000000000000"
DUMMY_CREDENTIALS = {"aws_access_key_id": "AKIDANYTHING", "aws_secret_access_key": "anything"}
SQS_ENGINES = ["sqlite", "postgresql"]


@pytest.fixture(scope="module", params=SQS_ENGINES)
def sqs_base(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a live service (no API keys) on each engine."""
    if request.param == "sqlite":
        url = f"sqlite:///{Path(tmp_path_factory.mktemp('sqs')) / 'sqs.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    # A quick sweep: a message received maxReceiveCount times reaches its dead-letter queue soon.
    env = {"SIMPLEQUEUE_WAIT_RECHECK_SECONDS": "0.2", "SIMPLEQUEUE_REAP_INTERVAL_SECONDS": "0.2"}
    with serving(url, env=env) as base:
        yield base


def sqs_client(base: str, **credentials: Any) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=base,
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}),
        **(credentials or DUMMY_CREDENTIALS),
    )


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    """Each of SQS's protocols (tests.sqs.both_protocols.call speaks either)."""
    value: str = request.param
    return value


@pytest.fixture
def sqs(sqs_base: str) -> Any:
    """boto3's SQS client (the JSON protocol), with any credentials."""
    return sqs_client(sqs_base)


@pytest.fixture
def name() -> str:
    """A queue name of this test's own."""
    return f"q-{uuid4().hex[:12]}"


@pytest.fixture
def url(sqs: Any, name: str) -> str:
    """A queue this test created through SQS."""
    queue_url: str = sqs.create_queue(QueueName=name)["QueueUrl"]
    return queue_url


def error_code(excinfo: pytest.ExceptionInfo[Any]) -> str:
    code: str = excinfo.value.response["Error"]["Code"]
    return code
