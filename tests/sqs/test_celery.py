"""Celery 5 over kombu's SQS transport, unchanged, against the SQS door on every engine.

The broker is `sqs://KEY:SECRET@127.0.0.1:PORT` (transport options: `is_secure` False, a region, a
queue name prefix of the test's own); kombu creates its queue (CreateQueue with `VisibilityTimeout`),
sends with SendMessage and receives with its own pycurl client (ReceiveMessage long-polls asking for
`ApproximateReceiveCount`, DeleteMessage). Celery's in-process worker (a thread, the solo pool) runs
what a producer sends, a task that retries once (self.retry) among them; the results come back through
the `cache+memory://` backend, which the worker thread and the test share. docs/sqs.md's Celery
example runs as written too: its tasks.py, its `celery worker` command as a process stopped here
(results in its `db+sqlite://` backend), and its producer. Without Celery or pycurl
(the dev extra's `celery[sqs]`) the tests are skipped, except under CI, where they fail.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from uuid import uuid4

import pytest

from tests.sqs.conftest import sqs_client

DOCS = Path(__file__).parent.parent.parent / "docs" / "sqs.md"

pytestmark = [
    pytest.mark.e2e,
    # kombu's pycurl client still calls what recent pycurl deprecates (IOCTLFUNCTION, socket_all).
    pytest.mark.filterwarnings("ignore::DeprecationWarning:kombu.asynchronous.http.curl"),
]

try:
    import pycurl  # noqa: F401  (kombu's SQS transport receives with it)
    from celery import Celery
    from celery.contrib.testing.worker import start_worker
except ImportError as missing:  # pragma: no cover - the dev extra installs celery[sqs]
    if os.environ.get("CI", "").lower() == "true":
        raise ImportError(f"CI needs celery[sqs] (the dev extra) for the Celery test: {missing}") from missing
    pytest.skip(f"celery[sqs] is not installed: {missing}", allow_module_level=True)


def celery_app(sqs_base: str, prefix: str) -> Celery:
    """A Celery app whose broker is the SQS door at sqs_base, as a user would configure it."""
    address = urlsplit(sqs_base)
    app = Celery(
        "sqs_door",
        broker=f"sqs://AKIDANYTHING:anything@{address.hostname}:{address.port}",
        backend="cache+memory://",
    )
    app.conf.update(
        broker_transport_options={
            "is_secure": False,  # the door speaks plain HTTP
            "region": "us-east-1",
            "queue_name_prefix": prefix,
            "visibility_timeout": 60,
            "wait_time_seconds": 1,  # short long-polls: the worker stops within a second
            "polling_interval": 0.1,
        },
        broker_connection_retry_on_startup=True,
        # Remote control and events need a fanout exchange, which kombu's SQS transport builds on
        # SNS: the worker runs without them, as Celery's SQS guide advises.
        worker_enable_remote_control=False,
        worker_send_task_events=False,
        task_default_queue="work",
    )
    return app


attempts: Counter[str] = Counter()


@pytest.fixture
def app(sqs_base: str) -> Iterator[tuple[Celery, str]]:
    prefix = f"celery-{uuid4().hex[:8]}-"
    app = celery_app(sqs_base, prefix)
    yield app, prefix
    app.close()


def test_a_worker_runs_what_a_producer_sends_and_a_retry(app: tuple[Celery, str], sqs_base: str) -> None:
    celery, prefix = app

    @celery.task(name="add", shared=False)
    def add(x: int, y: int) -> int:
        return x + y

    @celery.task(name="flaky", bind=True, max_retries=3, shared=False)
    def flaky(self: Any, key: str) -> str:
        attempts[key] += 1
        if attempts[key] == 1:
            raise self.retry(countdown=1)
        return f"{key} succeeded on try {self.request.retries + 1}"

    with start_worker(celery, perform_ping_check=False, shutdown_timeout=15):
        sums = [add.delay(i, i) for i in range(5)]
        key = uuid4().hex
        retried = flaky.delay(key)
        assert [r.get(timeout=20) for r in sums] == [0, 2, 4, 6, 8]
        assert retried.get(timeout=20) == f"{key} succeeded on try 2"
    assert attempts[key] == 2

    # Everything was deleted: nothing waits or is in flight in the queue kombu made.
    sqs = sqs_client(sqs_base)
    url = sqs.get_queue_url(QueueName=f"{prefix}work")["QueueUrl"]
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert counts["ApproximateNumberOfMessages"] == "0"
    assert counts["ApproximateNumberOfMessagesNotVisible"] == "0"
    assert counts["ApproximateNumberOfMessagesDelayed"] == "0"
    assert counts["VisibilityTimeout"] == "60"


def docs_celery_blocks() -> list[tuple[str, str]]:
    """The (language, code) blocks of docs/sqs.md's Celery section, in order."""
    page = DOCS.read_text(encoding="utf-8")
    section = page.split("\n## Celery\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```(\w+)\n(.*?)^```$", section, re.M | re.S)


def test_the_docs_celery_example_runs_as_written(sqs_base: str, tmp_path: Path) -> None:
    """docs/sqs.md's tasks.py, its worker command (a process, stopped here) and its producer."""
    blocks = docs_celery_blocks()
    assert [language for language, _ in blocks] == ["python", "sh", "python"]
    [(_, tasks), (_, worker_command), (_, producer)] = blocks
    address = sqs_base.removeprefix("http://")
    (tmp_path / "tasks.py").write_text(tasks.replace("127.0.0.1:8000", address), encoding="utf-8")
    (tmp_path / "producer.py").write_text(producer, encoding="utf-8")
    command = shlex.split(worker_command)
    assert command[0] == "celery"
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", *command[1:]], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        ran = subprocess.run(
            [sys.executable, "producer.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert ran.returncode == 0, f"{ran.stdout}\n{ran.stderr}\n{log.read_text()[-3000:]}"
        assert ran.stdout.splitlines() == ["5", "order 7 charged on try 2"]
    finally:
        worker.terminate()  # a warm shutdown: the worker ends its long-poll and exits
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    assert worker.returncode == 0, log.read_text()[-3000:]
    assert "charged on try 2" in log.read_text()  # the worker, not the producer, ran the tasks
