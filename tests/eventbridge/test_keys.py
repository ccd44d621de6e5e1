"""The EventBridge Scheduler door with API keys (SQLite: no engine is what is tested): a key with an
access_key_id signs for `scheduler` as it signs for SQS; the signature is checked, then the key's
role and queues as the REST schedule routes check them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.eventbridge.conftest import scheduler_client, target
from tests.sqs.conftest import error_code
from tests.test_e2e import serving

ADMIN = ("AKIDEBADMIN00000001", "admin-secret-" + "a" * 32)
JOBS_ADMIN = ("AKIDEBJOBSADMIN0001", "jobs-admin-secret-" + "j" * 32)
PRODUCER = ("AKIDEBPRODUCER00001", "producer-secret-" + "p" * 32)
KEYS = [
    {"key": ADMIN[1], "role": "admin", "access_key_id": ADMIN[0]},
    {"key": JOBS_ADMIN[1], "role": "admin", "queues": ["jobs-*"], "access_key_id": JOBS_ADMIN[0]},
    {"key": PRODUCER[1], "role": "producer", "access_key_id": PRODUCER[0]},
]
OFF = {"Mode": "OFF"}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = Path(tmp_path_factory.mktemp("eb-keys")) / "keys.db"
    with serving(f"sqlite:///{db}", env={"SIMPLEQUEUE_API_KEYS": json.dumps(KEYS)}) as base:
        yield base


def client(base: str, key: tuple[str, str]) -> Any:
    return scheduler_client(base, aws_access_key_id=key[0], aws_secret_access_key=key[1])


def create(scheduler: Any, name: str, queue: str) -> None:
    scheduler.create_schedule(
        Name=name, ScheduleExpression="rate(1 hour)", Target=target(queue), FlexibleTimeWindow=OFF
    )


def test_a_good_signature_is_the_key_s_role(keyed: str) -> None:
    admin = client(keyed, ADMIN)
    create(admin, "signed", "reports")
    assert admin.get_schedule(Name="signed")["Target"]["Input"] == "hello"
    # The REST API on the same path, with the same key as a Bearer key.
    rest = httpx.get(f"{keyed}/schedules/signed", headers={"Authorization": f"Bearer {ADMIN[1]}"})
    assert rest.json()["queue"] == "reports"
    admin.delete_schedule(Name="signed")


def test_a_bad_signature_is_refused(keyed: str) -> None:
    with pytest.raises(ClientError) as e:
        client(keyed, (ADMIN[0], "not-the-secret")).list_schedules()
    assert error_code(e) == "InvalidSignatureException"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError) as e:
        create(client(keyed, (ADMIN[0], "not-the-secret")), "forged", "reports")
    assert error_code(e) == "InvalidSignatureException"
    assert (
        httpx.get(f"{keyed}/schedules/forged", headers={"Authorization": f"Bearer {ADMIN[1]}"}).status_code
        == 404
    )


def test_an_unknown_key_is_refused(keyed: str) -> None:
    with pytest.raises(ClientError) as e:
        client(keyed, ("AKIDNOBODY000000000", "whatever")).get_schedule(Name="x")
    assert error_code(e) == "UnrecognizedClientException"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_an_unsigned_request_is_the_rest_api_s_and_needs_a_key(keyed: str) -> None:
    answer = httpx.get(f"{keyed}/schedules")
    assert answer.status_code == 401
    assert answer.json()["error"] == "Unauthorized"


def test_who_may_follows_the_rest_schedule_routes(keyed: str) -> None:
    with pytest.raises(ClientError) as e:
        create(client(keyed, PRODUCER), "by-producer", "jobs-mail")
    assert error_code(e) == "AccessDeniedException"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError) as e:
        client(keyed, PRODUCER).list_schedules()
    assert error_code(e) == "AccessDeniedException"

    jobs_admin = client(keyed, JOBS_ADMIN)
    with pytest.raises(ClientError) as e:
        create(jobs_admin, "not-covered", "reports")
    assert error_code(e) == "AccessDeniedException"
    create(client(keyed, ADMIN), "others", "reports")
    create(jobs_admin, "covered", "jobs-mail")
    assert [s["Name"] for s in jobs_admin.list_schedules()["Schedules"]] == ["covered"]
    for call in (jobs_admin.get_schedule, jobs_admin.delete_schedule):
        with pytest.raises(ClientError) as e:
            call(Name="others")
        assert error_code(e) == "AccessDeniedException"
    jobs_admin.delete_schedule(Name="covered")
    client(keyed, ADMIN).delete_schedule(Name="others")
