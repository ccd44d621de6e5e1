"""What the Spark test modules share: one local Spark session for the whole run (local[2, 3]: two
cores, a task may fail twice; a session time zone that is not UTC, on purpose), and a live service
on SQLite and on PostgreSQL per module."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pyspark.sql import SparkSession
from simplequeue.spark import register

from tests.test_e2e import serving

_session: SparkSession | None = None


def shared_session(config: pytest.Config) -> SparkSession:
    """The run's Spark session, started by the first module that needs it and stopped when pytest
    ends: a JVM and its warm-up cost seconds each time, and no test changes the session's settings
    (each stream stops before its test ends)."""
    global _session
    if shutil.which("java") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs Java for the Spark tests")
        pytest.skip("no java")
    if _session is None:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        session = (
            SparkSession.builder.master("local[2, 3]")  # two cores, a task may fail twice
            .appName("simplequeue-tests")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.session.timeZone", "America/New_York")  # not UTC, on purpose
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        register(session)
        _session = session
        config.add_cleanup(_stop)
    return _session


def _stop() -> None:
    global _session
    if _session is not None:
        _session.stop()
        _session = None
        _end_the_jvm()


def _end_the_jvm() -> None:
    """A stopped session keeps PySpark's JVM until this process exits; end it now, as that exit
    would (the JVM leaves when its stdin closes), so that the run's last cleanup finds nothing."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    process = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if process is not None and process.stdin is not None:
        process.stdin.close()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> SparkSession:
    return shared_session(request.config)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def service(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('spark') / 'spark.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    with serving(url) as base:
        yield base


def items_of(base: str, queue: str) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    with httpx.Client(base_url=base, timeout=30) as http:
        while True:
            got = http.post("/pop", json={"queue": queue, "max_items": 100, "lease_seconds": 600}).json()[
                "items"
            ]
            if not got:
                return found
            found += got


def stats(base: str, queue: str) -> dict[str, Any]:
    with httpx.Client(base_url=base, timeout=30) as http:
        answer: dict[str, Any] = http.get(f"/queues/{queue}").json()
        return answer
