"""The artefacts, as a user gets them: `python -m build` makes a wheel and an sdist that `twine check
--strict` accepts, and the wheel alone, installed in a clean virtualenv outside the checkout (its
dependencies from the package index), migrates and serves: the HTTP API, the Amazon SQS and SNS
doors, the API's documentation pages and the dashboard, with the SQL, migrations and static files
all read from inside the installed package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import boto3
import httpx
import pytest

from tests.test_e2e import serving

ROOT = Path(__file__).resolve().parent.parent
CLEAN_ENV = {
    k: v for k, v in os.environ.items() if not k.startswith(("SIMPLEQUEUE_", "PYTHON", "VIRTUAL_ENV"))
}
"""What the installed service sees: nothing of this checkout, no virtualenv of the suite's."""

pytestmark = pytest.mark.e2e


def run(*command: str | Path, cwd: Path, timeout: float = 300, **env: str) -> str:
    done = subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        env={**CLEAN_ENV, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the clean virtualenv's bin folder, a working folder outside the checkout)."""
    dist = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--wheel", "--sdist", "--outdir", dist, ROOT, cwd=ROOT)
    venv = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", venv, cwd=venv)
    bin_ = venv / "bin"
    [wheel] = dist.glob("simplequeue-*.whl")
    run(bin_ / "pip", "install", "--quiet", wheel, cwd=venv)
    return bin_, dist


def test_twine_accepts_the_wheel_and_the_sdist(installed: tuple[Path, Path], tmp_path: Path) -> None:
    _, dist = installed
    # In a virtualenv of its own: twine's docutils and awscli's (in the suite's) cannot share one.
    checker = tmp_path / "twine"
    run(sys.executable, "-m", "venv", checker, cwd=tmp_path)
    run(checker / "bin" / "pip", "install", "--quiet", "twine>=5", cwd=tmp_path)
    files = sorted(dist.iterdir())
    assert sorted(f.suffix for f in files) == [".gz", ".whl"]
    out = run(checker / "bin" / "twine", "check", "--strict", *files, cwd=tmp_path)
    assert out.count("PASSED") == 2, out


def test_the_wheel_alone_migrates_and_serves_every_door(installed: tuple[Path, Path], tmp_path: Path) -> None:
    bin_, _ = installed
    located = run(bin_ / "python", "-c", "import simplequeue; print(simplequeue.__file__)", cwd=tmp_path)
    assert Path(located.strip()).is_relative_to(bin_.parent), located  # not this checkout's
    version = run(bin_ / "simplequeue", "--version", cwd=tmp_path).strip()
    database = f"sqlite:///{tmp_path / 'queue.db'}"
    assert "applied migrations" in run(
        bin_ / "simplequeue", "migrate", cwd=tmp_path, SIMPLEQUEUE_DATABASE_URL=database
    )
    with serving(
        database, migrate=False, command=[str(bin_ / "simplequeue")], base_env=CLEAN_ENV, cwd=tmp_path
    ) as base:
        ready = httpx.get(f"{base}/readyz", timeout=5)
        assert version.endswith(ready.json()["version"])
        with httpx.Client(base_url=base, timeout=10) as http:
            assert http.post("/push", json={"queue": "jobs", "payload": {"n": 1}}).status_code == 201
            [item] = http.post("/pop", json={"queue": "jobs"}).json()["items"]
            assert item["payload"] == {"n": 1}
            for page, kind in (
                ("/docs", "text/html"),
                ("/redoc", "text/html"),
                ("/ui/", "text/html"),
                ("/openapi.json", "application/json"),
            ):
                answer = http.get(page)
                assert answer.status_code == 200, page
                assert answer.headers["content-type"].startswith(kind), page
            assert http.get("/ui/app.js").status_code == 200
        aws = {
            "endpoint_url": base,
            "region_name": "us-east-1",
            "aws_access_key_id": "anything",
            "aws_secret_access_key": "anything",
        }
        sqs, sns = boto3.client("sqs", **aws), boto3.client("sns", **aws)
        url = sqs.create_queue(QueueName="mail")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        topic = sns.create_topic(Name="signups")["TopicArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
        sns.publish(TopicArn=topic, Message="welcome")
        [message] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
        assert message["Body"] == "welcome"
        assert httpx.get(f"{base}/sns/certificate.pem").text.startswith("-----BEGIN CERTIFICATE-----")


def test_without_its_extra_a_postgresql_url_is_refused_in_one_line(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    bin_, _ = installed
    done = subprocess.run(
        [bin_ / "simplequeue", "migrate"],
        cwd=tmp_path,
        env={**CLEAN_ENV, "SIMPLEQUEUE_DATABASE_URL": "postgresql://app@db.invalid:5432/queue"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    [line] = done.stderr.strip().splitlines()
    assert "pip install 'simplequeue[postgres]'" in line, line
