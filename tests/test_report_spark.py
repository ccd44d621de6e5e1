"""The report groups errors in Spark with the same patterns as shaping.normalise_error: Java's
regexp_replace and Python's re give the same text for each message."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pip install 'simplequeue[spark]'")

from pyspark.sql import SparkSession
from simplequeue.reports.history import normalised_error
from simplequeue.reports.shaping import normalise_error

from tests.sparking import shared_session


@pytest.fixture(scope="module")
def session(request: pytest.FixtureRequest) -> SparkSession:
    return shared_session(request.config)


MESSAGES = [
    "mailbox full: alice@example.com",
    "mailbox full: bob.smith+tag@mail.example.co.uk",
    "order 3f2a9c1e-1b2c-4d5e-8f90-1234567890ab not found",
    "segfault at 0x7ffde3a1 in worker 12",
    "trace 5f3a9b2c77e1deadbeef failed",
    "HTTP 503 after 12.5 s",
    "v2 api deadbeef",
    "smtp timeout",
    None,
]


def test_spark_and_python_group_errors_alike(session: SparkSession) -> None:
    frame = session.createDataFrame([(m,) for m in MESSAGES], "last_error string")
    grouped = [r["error"] for r in frame.select(normalised_error("last_error").alias("error")).collect()]
    assert grouped == [normalise_error(m) for m in MESSAGES]
