"""SNS message signatures (simplequeue.domain.sns_signing): the string to sign byte for byte, sign
and verify, and the same signatures checked by tools that are not ours (the openssl command line,
an SNS validator from PyPI)."""

from __future__ import annotations

import base64
import http.server
import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from simplequeue.domain.sns_signing import (
    CONFIRMATION_KEYS,
    NOTIFICATION_KEYS,
    SignatureVersion,
    SigningKey,
    sign_envelope,
    string_to_sign,
    verify,
)

TOPIC = "arn:aws:sns:us-east-1:000000000000:orders"
CERT_URL = "https://sns.example.test/SimpleNotificationService-test.pem"
SUBSCRIBE_URL = f"https://sq.example.test/?Action=ConfirmSubscription&TopicArn={TOPIC}&Token=2336"
VERSIONS: tuple[SignatureVersion, ...] = ("1", "2")


def notification(**changes: str) -> dict[str, str]:
    message = {
        "Type": "Notification",
        "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
        "TopicArn": TOPIC,
        "Subject": "Order placed",
        # A newline and non-ASCII: signed as their decoded UTF-8 bytes, not as JSON escapes.
        "Message": 'Grüße\n{"order": 7}',
        "Timestamp": "2026-11-28T12:00:00.000Z",
        "UnsubscribeURL": "https://sq.example.test/?Action=Unsubscribe&SubscriptionArn=" + TOPIC + ":1",
    }
    message.update(changes)
    return message


def confirmation(kind: str = "SubscriptionConfirmation") -> dict[str, str]:
    return {
        "Type": kind,
        "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
        "Token": "2336412f37fb687f5d51e6e2425dacbba6354994a2bc07deffa4466da3",
        "TopicArn": TOPIC,
        "Message": f"You have chosen to subscribe to the topic {TOPIC}.\nTo confirm, visit the SubscribeURL.",
        "SubscribeURL": SUBSCRIBE_URL,
        "Timestamp": "2026-11-28T12:00:01.000Z",
    }


def every_type() -> list[dict[str, str]]:
    return [notification(), confirmation(), confirmation("UnsubscribeConfirmation")]


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return SigningKey.generate("sns.simplequeue.test")


@pytest.fixture(scope="module")
def other_key() -> SigningKey:
    return SigningKey.generate("sns.simplequeue.test")


# The string to sign -------------------------------------------------------------------------------


def test_notification_string_to_sign_is_byte_exact() -> None:
    expected = (
        "Message\n"
        'Grüße\n{"order": 7}\n'
        "MessageId\n22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324\n"
        "Subject\nOrder placed\n"
        "Timestamp\n2026-11-28T12:00:00.000Z\n"
        "TopicArn\narn:aws:sns:us-east-1:000000000000:orders\n"
        "Type\nNotification\n"
    ).encode()
    assert string_to_sign(notification()) == expected
    assert "Grüße".encode() in expected  # UTF-8, two bytes for ü and ß each


def test_a_notification_without_subject_signs_no_subject_line() -> None:
    without = notification()
    del without["Subject"]
    assert string_to_sign(without) == (
        b"Message\nGr\xc3\xbc\xc3\x9fe\n" + b'{"order": 7}\n'
        b"MessageId\n22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324\n"
        b"Timestamp\n2026-11-28T12:00:00.000Z\n"
        b"TopicArn\narn:aws:sns:us-east-1:000000000000:orders\n"
        b"Type\nNotification\n"
    )
    assert string_to_sign(without) != string_to_sign(notification())
    # Some consumers write an absent Subject as JSON null: it is absent all the same.
    assert string_to_sign({**without, "Subject": None}) == string_to_sign(without)


@pytest.mark.parametrize("kind", ["SubscriptionConfirmation", "UnsubscribeConfirmation"])
def test_confirmation_string_to_sign_is_byte_exact(kind: str) -> None:
    expected = (
        "Message\nYou have chosen to subscribe to the topic arn:aws:sns:us-east-1:000000000000:orders."
        "\nTo confirm, visit the SubscribeURL.\n"
        "MessageId\n165545c9-2a5c-472c-8df2-7ff2be2b3b1b\n"
        "SubscribeURL\nhttps://sq.example.test/?Action=ConfirmSubscription"
        "&TopicArn=arn:aws:sns:us-east-1:000000000000:orders&Token=2336\n"
        "Timestamp\n2026-11-28T12:00:01.000Z\n"
        "Token\n2336412f37fb687f5d51e6e2425dacbba6354994a2bc07deffa4466da3\n"
        "TopicArn\narn:aws:sns:us-east-1:000000000000:orders\n"
        f"Type\n{kind}\n"
    )
    assert string_to_sign(confirmation(kind)) == expected.encode()


def test_the_signed_keys_are_awss_lists_in_order() -> None:
    assert NOTIFICATION_KEYS == ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
    assert CONFIRMATION_KEYS == (
        "Message",
        "MessageId",
        "SubscribeURL",
        "Timestamp",
        "Token",
        "TopicArn",
        "Type",
    )


def test_unsigned_keys_do_not_enter_the_string() -> None:
    plain = notification()
    dressed = {
        **plain,
        "UnsubscribeURL": "https://elsewhere.test/",
        "SignatureVersion": "2",
        "Signature": "AAAA",
        "SigningCertURL": CERT_URL,
        "MessageAttributes": {"color": {"Type": "String", "Value": "red"}},
    }
    assert string_to_sign(dressed) == string_to_sign(plain)


def test_an_unknown_type_or_a_missing_field_is_refused() -> None:
    with pytest.raises(ValueError, match="Type"):
        string_to_sign(notification(Type="Notice"))
    without_token = confirmation()
    del without_token["Token"]
    with pytest.raises(ValueError, match="Token"):
        string_to_sign(without_token)


# Sign and verify ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("message", every_type(), ids=lambda m: m["Type"])
def test_a_signed_envelope_verifies(
    key: SigningKey, message: dict[str, str], version: SignatureVersion
) -> None:
    signed = sign_envelope(message, key, version, CERT_URL)
    assert verify(signed, key.certificate_pem())
    # As a subscriber gets it: JSON text over HTTP, or inside an SQS body.
    assert verify(json.loads(json.dumps(signed)), key.certificate_pem())


@pytest.mark.parametrize("version", VERSIONS)
def test_a_notification_without_subject_verifies(key: SigningKey, version: SignatureVersion) -> None:
    message = notification()
    del message["Subject"]
    signed = sign_envelope(message, key, version, CERT_URL)
    assert verify(signed, key.certificate_pem())
    assert not verify({**signed, "Subject": "Order placed"}, key.certificate_pem())


def test_sign_envelope_adds_the_three_keys_and_leaves_its_argument(key: SigningKey) -> None:
    message = notification()
    before = dict(message)
    signed = sign_envelope(message, key, "2", CERT_URL)
    assert message == before
    assert signed == {
        **before,
        "SignatureVersion": "2",
        "Signature": signed["Signature"],
        "SigningCertURL": CERT_URL,
    }
    assert len(base64.b64decode(signed["Signature"], validate=True)) == 256  # RSA 2048


def test_sign_envelope_carries_nested_message_attributes(key: SigningKey) -> None:
    attributes = {"color": {"Type": "String", "Value": "red"}}
    envelope: dict[str, object] = {**notification(), "MessageAttributes": attributes}
    signed = sign_envelope(envelope, key, "1", CERT_URL)
    assert signed["MessageAttributes"] == attributes
    assert verify(signed, key.certificate_pem())


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("field", NOTIFICATION_KEYS)
def test_a_changed_signed_field_fails(key: SigningKey, field: str, version: SignatureVersion) -> None:
    signed = sign_envelope(notification(), key, version, CERT_URL)
    changed = {**signed, field: signed[field] + "x"}
    if field == "Type":
        changed[field] = "SubscriptionConfirmation"  # a real Type, so that only the signature can fail
        changed.update(SubscribeURL="https://sq.example.test/", Token="t")
    assert not verify(changed, key.certificate_pem())


@pytest.mark.parametrize("field", CONFIRMATION_KEYS)
def test_a_changed_confirmation_field_fails(key: SigningKey, field: str) -> None:
    signed = sign_envelope(confirmation(), key, "2", CERT_URL)
    changed = {**signed, field: "UnsubscribeConfirmation" if field == "Type" else signed[field] + "x"}
    assert not verify(changed, key.certificate_pem())


def test_a_changed_unsigned_field_still_verifies(key: SigningKey) -> None:
    # What SNS signs and what it does not: UnsubscribeURL and the cert URL are outside the signature.
    signed = sign_envelope(notification(), key, "2", CERT_URL)
    assert verify({**signed, "UnsubscribeURL": "https://elsewhere.test/"}, key.certificate_pem())


def test_another_keys_certificate_fails(key: SigningKey, other_key: SigningKey) -> None:
    signed = sign_envelope(notification(), key, "2", CERT_URL)
    assert verify(signed, key.certificate_pem())
    assert not verify(signed, other_key.certificate_pem())


def test_the_signature_version_chooses_the_hash(key: SigningKey) -> None:
    as_one = sign_envelope(notification(), key, "1", CERT_URL)
    as_two = sign_envelope(notification(), key, "2", CERT_URL)
    assert as_one["Signature"] != as_two["Signature"]
    assert not verify({**as_one, "SignatureVersion": "2"}, key.certificate_pem())
    assert not verify({**as_two, "SignatureVersion": "1"}, key.certificate_pem())


@pytest.mark.parametrize(
    "broken",
    [
        {"SignatureVersion": "3"},
        {"SignatureVersion": None},
        {"Signature": "not base64!"},
        {"Signature": None},
        {"Signature": ""},
        {"Type": "Notice"},
        {"MessageId": None},
    ],
    ids=repr,
)
def test_a_malformed_message_is_false_not_an_error(key: SigningKey, broken: dict[str, object]) -> None:
    signed: dict[str, object] = {**sign_envelope(notification(), key, "2", CERT_URL), **broken}
    for name, value in broken.items():
        if value is None:
            del signed[name]
    assert verify(signed, key.certificate_pem()) is False


def test_a_certificate_that_is_not_pem_is_an_error_not_false(key: SigningKey) -> None:
    # The certificate is the caller's configuration, not the message: a bad one must not pass as
    # "this message is forged".
    with pytest.raises(ValueError, match="PEM"):
        verify(sign_envelope(notification(), key, "2", CERT_URL), b"not a certificate")


def test_an_empty_subject_is_refused_not_signed_ambiguously(key: SigningKey) -> None:
    with pytest.raises(ValueError, match="Subject"):
        sign_envelope(notification(Subject=""), key, "2", CERT_URL)


def test_an_unknown_version_is_refused(key: SigningKey) -> None:
    with pytest.raises(ValueError, match="SignatureVersion"):
        key.sign(notification(), "3")  # type: ignore[arg-type]


# The key and its certificate ----------------------------------------------------------------------


def test_generate_makes_an_rsa_2048_key_and_a_ten_year_self_signed_certificate() -> None:
    now = datetime(2028, 2, 29, 9, 30, tzinfo=UTC)
    key = SigningKey.generate("sns.example.test", now=now)
    certificate = key.certificate
    public = certificate.public_key()
    assert isinstance(public, rsa.RSAPublicKey)
    assert public.key_size == 2048
    assert certificate.subject.rfc4514_string() == "CN=sns.example.test"
    assert certificate.issuer == certificate.subject
    certificate.verify_directly_issued_by(certificate)  # self-signed: raises if not
    assert certificate.not_valid_before_utc == now
    assert certificate.not_valid_after_utc == datetime(2038, 2, 28, 9, 30, tzinfo=UTC)


def test_pems_round_trip_to_the_same_signatures(key: SigningKey) -> None:
    again = SigningKey.from_pem(key.private_pem(), key.certificate_pem())
    assert again.certificate_pem() == key.certificate_pem()
    assert again.private_pem() == key.private_pem()
    # PKCS#1 v1.5 is deterministic: one key, one message, one signature.
    assert again.sign(notification(), "2") == key.sign(notification(), "2")
    assert key.private_pem().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert key.certificate_pem().startswith(b"-----BEGIN CERTIFICATE-----")


def test_from_pem_without_a_certificate_makes_one_for_the_key(key: SigningKey) -> None:
    now = datetime(2026, 11, 28, tzinfo=UTC)
    made = SigningKey.from_pem(key.private_pem(), None, common_name="sns.made.test", now=now)
    assert made.certificate.subject.rfc4514_string() == "CN=sns.made.test"
    assert made.certificate.not_valid_before_utc == now
    signed = sign_envelope(notification(), made, "2", CERT_URL)
    assert verify(signed, made.certificate_pem())
    assert verify(signed, key.certificate_pem())  # the same key under either certificate


def test_from_pem_refuses_a_certificate_of_another_key(key: SigningKey, other_key: SigningKey) -> None:
    with pytest.raises(ValueError, match="public half"):
        SigningKey.from_pem(key.private_pem(), other_key.certificate_pem())


def test_from_pem_refuses_a_key_that_is_not_rsa() -> None:
    ec_pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(ValueError, match="RSA"):
        SigningKey.from_pem(ec_pem, None)


def test_repr_and_str_reveal_no_key(key: SigningKey) -> None:
    numbers = rsa_private_numbers(key)
    secrets = [str(numbers.d), f"{numbers.d:x}", str(numbers.p), f"{numbers.q:x}"]
    pem_body = b"".join(key.private_pem().splitlines()[1:-1]).decode()
    secrets += [pem_body[i : i + 12] for i in range(0, len(pem_body) - 12, 12)]
    for shown in (repr(key), str(key), f"{key}", f"{[key]}"):
        assert "sns.simplequeue.test" in shown
        assert not [secret for secret in secrets if secret in shown]
        assert "PRIVATE" not in shown


def rsa_private_numbers(key: SigningKey) -> rsa.RSAPrivateNumbers:
    loaded = serialization.load_pem_private_key(key.private_pem(), password=None)
    assert isinstance(loaded, rsa.RSAPrivateKey)
    return loaded.private_numbers()


# Checked by tools that are not ours ---------------------------------------------------------------

OPENSSL = shutil.which("openssl")
needs_openssl = pytest.mark.skipif(OPENSSL is None, reason="the openssl command line is not installed")
DIGEST = {"1": "-sha1", "2": "-sha256"}


def openssl(*args: str | Path) -> subprocess.CompletedProcess[str]:
    assert OPENSSL is not None
    return subprocess.run([OPENSSL, *map(str, args)], capture_output=True, text=True, timeout=60)


@needs_openssl
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("message", every_type(), ids=lambda m: m["Type"])
def test_openssl_verifies_our_signature(
    key: SigningKey, message: dict[str, str], version: SignatureVersion, tmp_path: Path
) -> None:
    signed = sign_envelope(message, key, version, CERT_URL)
    (tmp_path / "cert.pem").write_bytes(key.certificate_pem())
    (tmp_path / "data").write_bytes(string_to_sign(signed))
    (tmp_path / "sig").write_bytes(base64.b64decode(signed["Signature"]))
    public = openssl("x509", "-in", tmp_path / "cert.pem", "-pubkey", "-noout")
    assert public.returncode == 0, public.stderr
    (tmp_path / "pub.pem").write_text(public.stdout)

    def check() -> subprocess.CompletedProcess[str]:
        return openssl(
            "dgst", DIGEST[version], "-verify", tmp_path / "pub.pem", "-signature", tmp_path / "sig",
            tmp_path / "data",
        )  # fmt: skip

    good = check()
    assert (good.returncode, good.stdout.strip()) == (0, "Verified OK"), good.stderr
    (tmp_path / "data").write_bytes(string_to_sign({**signed, "Message": signed["Message"] + " "}))
    bad = check()
    assert (bad.returncode, bad.stdout.strip()) == (1, "Verification failure")


@needs_openssl
@pytest.mark.parametrize("version", VERSIONS)
def test_an_openssl_made_key_signs_as_openssl_does(version: SignatureVersion, tmp_path: Path) -> None:
    made = openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=sns.openssl.test", "-days", "2",
        "-keyout", tmp_path / "key.pem", "-out", tmp_path / "cert.pem",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    key = SigningKey.from_pem((tmp_path / "key.pem").read_bytes(), (tmp_path / "cert.pem").read_bytes())
    message = notification()
    (tmp_path / "data").write_bytes(string_to_sign(message))
    signing = openssl(
        "dgst", DIGEST[version], "-sign", tmp_path / "key.pem", "-out", tmp_path / "sig", tmp_path / "data"
    )
    assert signing.returncode == 0, signing.stderr
    theirs = base64.b64encode((tmp_path / "sig").read_bytes()).decode()
    assert key.sign(message, version) == theirs
    assert verify({**message, "SignatureVersion": version, "Signature": theirs}, key.certificate_pem())


class CertificateServer(http.server.BaseHTTPRequestHandler):
    """Serves one certificate, as SNS serves its own at the SigningCertURL."""

    body: ClassVar[bytes] = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-pem-file")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet


@pytest.fixture
def served_certificate(key: SigningKey) -> Iterator[str]:
    CertificateServer.body = key.certificate_pem()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CertificateServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/SimpleNotificationService-test.pem"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("message", every_type(), ids=lambda m: m["Type"])
def test_an_independent_sns_validator_accepts_our_messages(
    key: SigningKey, message: dict[str, str], served_certificate: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aws-sns-message-validator (PyPI) fetches the SigningCertURL and checks it against a pattern
    that defaults to AWS's hosts and may be set; it knows SignatureVersion 1 (SHA1) only."""
    validator_module = pytest.importorskip("sns_message_validator")
    for proxy in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    validator = validator_module.SNSMessageValidator(
        cert_url_regex="^" + re.escape(served_certificate.rsplit("/", 1)[0]) + "/",
    )
    signed = sign_envelope(message, key, "1", served_certificate)
    validator.validate_message(signed)  # raises if the signature does not hold
    tampered = {**signed, "Message": signed["Message"] + "!"}
    with pytest.raises(validator_module.SignatureVerificationFailureException):
        validator.validate_message(tampered)
    with pytest.raises(validator_module.InvalidCertURLException):
        validator_module.SNSMessageValidator().validate_message(signed)  # AWS's hosts by default
