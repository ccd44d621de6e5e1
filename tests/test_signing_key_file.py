"""SIMPLEQUEUE_SNS_SIGNING_KEY_FILE: the operator's key signs topics' notifications, its certificate
is served at /sns/certificate.pem, and a file that holds no usable key stops the settings in one
line that never shows the key."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from simplequeue.domain.sns_signing import SigningKey, verify
from simplequeue.settings import Settings

from tests.engines import FakeClock
from tests.http import Client, app_client


@pytest.fixture(scope="module")
def operators_key() -> SigningKey:
    return SigningKey.generate("operator's key")


@pytest.fixture
async def keyed(tmp_path: Path, operators_key: SigningKey) -> AsyncIterator[Client]:
    key_file = tmp_path / "sns.pem"
    key_file.write_bytes(operators_key.private_pem() + operators_key.certificate_pem())
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'sq.db'}", sweep=False, sns_signing_key_file=key_file
    )
    async for client in app_client(settings, FakeClock()):
        yield client


async def test_the_operators_key_signs_and_its_certificate_is_served(
    keyed: Client, operators_key: SigningKey
) -> None:
    served = (await keyed.get("/sns/certificate.pem")).text.encode()
    assert served == operators_key.certificate_pem()
    assert (await keyed.put("/topics/keyed", json={})).status_code == 201
    assert (await keyed.put("/queues/keyed-q", json={})).status_code == 201
    assert (await keyed.post("/topics/keyed/subscriptions", json={"endpoint": "keyed-q"})).status_code == 201
    assert (await keyed.post("/topics/keyed/publish", json={"message": "hi"})).status_code == 200
    [item] = (await keyed.post("/pop", json={"queue": "keyed-q"})).json()["items"]
    assert verify(json.loads(item["payload"]), served)


def test_a_file_without_a_usable_key_is_named_in_one_line_without_the_key(tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    with pytest.raises(ValueError, match=r"sns_signing_key_file .*missing\.pem: No such file"):
        Settings(sns_signing_key_file=missing)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN PRIVATE KEY-----\nnot base64 at all\n-----END PRIVATE KEY-----\n")
    with pytest.raises(ValueError, match="not an unencrypted private key in PEM") as refused:
        Settings(sns_signing_key_file=garbage)
    assert "not base64" not in str(refused.value)
    elliptic = tmp_path / "ec.pem"
    elliptic.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    with pytest.raises(ValueError, match="RSA") as refused:
        Settings(sns_signing_key_file=elliptic)
    assert "BEGIN" not in str(refused.value)
