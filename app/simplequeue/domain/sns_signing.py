"""Amazon SNS message signatures: the string AWS signs, our key and certificate, and the check a
subscriber runs (AWS's "Verifying the signatures of Amazon SNS messages").

A subscriber fetches the certificate at the message's SigningCertURL and checks the Signature over
the string to sign with it: SignatureVersion 1 is SHA1withRSA, 2 is SHA256withRSA, both PKCS#1
v1.5. The key is RSA because every SNS verifier assumes it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Literal, TypeVar

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

SignatureVersion = Literal["1", "2"]

NOTIFICATION_KEYS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
"""Signed for a Notification, in this order; Subject only when the message has one."""

CONFIRMATION_KEYS = ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type")
"""Signed for a SubscriptionConfirmation or an UnsubscribeConfirmation, in this order."""

KEY_BITS = 2048
CERTIFICATE_YEARS = 10

V = TypeVar("V")


def _keys_for(message: Mapping[str, object]) -> tuple[str, ...]:
    kind = message.get("Type")
    if kind == "Notification":
        return NOTIFICATION_KEYS
    if kind in ("SubscriptionConfirmation", "UnsubscribeConfirmation"):
        return CONFIRMATION_KEYS
    raise ValueError(f"not an SNS message Type: {kind!r}")


def string_to_sign(message: Mapping[str, object]) -> bytes:
    """The bytes SNS signs: "Key\\nValue\\n" for each signed key of the message's Type, in AWS's
    order, UTF-8. Values are the decoded JSON strings (a newline in Message is one byte 0x0A).

    Raises ValueError for an unknown Type or a signed key that is missing or not a string. A Subject
    of None (JSON null, as some consumers write an absent one) counts as absent."""
    parts: list[str] = []
    for key in _keys_for(message):
        value = message.get(key)
        if key == "Subject" and value is None:
            continue
        if not isinstance(value, str):
            raise ValueError(f"SNS {message.get('Type')} needs {key} as a string, got {type(value).__name__}")
        parts.append(f"{key}\n{value}\n")
    return "".join(parts).encode("utf-8")


def _hash_for(version: object) -> hashes.HashAlgorithm:
    if version == "1":
        return hashes.SHA1()  # SignatureVersion 1 is SHA1withRSA by definition
    if version == "2":
        return hashes.SHA256()
    raise ValueError(f"SNS SignatureVersion must be '1' or '2', got {version!r}")


def _ten_years_after(start: datetime) -> datetime:
    try:
        return start.replace(year=start.year + CERTIFICATE_YEARS)
    except ValueError:  # 29 February, in a year that has none
        return start.replace(year=start.year + CERTIFICATE_YEARS, day=28)


def _self_signed(key: rsa.RSAPrivateKey, common_name: str, now: datetime) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    public = key.public_key()
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(_ten_years_after(now))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )


def _public_numbers_match(key: rsa.RSAPrivateKey, certificate: x509.Certificate) -> bool:
    public = certificate.public_key()
    return (
        isinstance(public, rsa.RSAPublicKey) and public.public_numbers() == key.public_key().public_numbers()
    )


class SigningKey:
    """An RSA private key and the certificate subscribers check its signatures with.

    Keep both PEMs: from_pem without a certificate makes a new one each time (a new serial and
    dates), so a subscriber that cached the old certificate by URL would see a different file."""

    __slots__ = ("_certificate", "_key")

    def __init__(self, key: rsa.RSAPrivateKey, certificate: x509.Certificate) -> None:
        if not _public_numbers_match(key, certificate):
            raise ValueError("the certificate does not hold this key's public half")
        self._key = key
        self._certificate = certificate

    @classmethod
    def generate(cls, common_name: str, *, now: datetime | None = None) -> SigningKey:
        """A new RSA 2048 key with a self-signed certificate for common_name, valid 10 years
        from `now` (aware UTC; the present by default)."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
        return cls(key, _self_signed(key, common_name, now or datetime.now(UTC)))

    @classmethod
    def from_pem(
        cls,
        key_pem: bytes,
        cert_pem: bytes | None,
        *,
        common_name: str = "simplequeue SNS",
        now: datetime | None = None,
    ) -> SigningKey:
        """The key from an unencrypted PEM (PKCS#8 or PKCS#1), with its certificate, or a new
        self-signed one (common_name, 10 years from `now`) when cert_pem is None."""
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError(f"SNS signatures need an RSA key, got {type(key).__name__}")
        if cert_pem is None:
            return cls(key, _self_signed(key, common_name, now or datetime.now(UTC)))
        return cls(key, x509.load_pem_x509_certificate(cert_pem))

    def private_pem(self) -> bytes:
        """The key as unencrypted PKCS#8 PEM: a secret, to be stored as one."""
        return self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def certificate_pem(self) -> bytes:
        """The certificate as PEM: public, served at the SigningCertURL."""
        return self._certificate.public_bytes(serialization.Encoding.PEM)

    @property
    def certificate(self) -> x509.Certificate:
        return self._certificate

    def fingerprint(self) -> str:
        """SHA-256 of the certificate's DER, hex: names the certificate without revealing the key
        (a stable file name for the SigningCertURL, say)."""
        return hashlib.sha256(self._certificate.public_bytes(serialization.Encoding.DER)).hexdigest()

    def sign(self, message: Mapping[str, object], version: SignatureVersion) -> str:
        """The base64 Signature of the message's string to sign, for SignatureVersion `version`."""
        algorithm = _hash_for(version)
        if message.get("Subject") == "":
            # Verifiers disagree on an empty Subject: some sign it ("Subject\n\n"), some skip
            # any false value. A message without one verifies everywhere.
            raise ValueError("an empty Subject cannot be signed portably: leave the key out")
        signature = self._key.sign(string_to_sign(message), padding.PKCS1v15(), algorithm)
        return base64.b64encode(signature).decode("ascii")

    def __repr__(self) -> str:
        names = self._certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        common_name = str(names[0].value) if names else "?"
        return f"SigningKey(cn={common_name!r}, certificate_sha256={self.fingerprint()[:16]}...)"

    __str__ = __repr__


def sign_envelope(
    envelope: Mapping[str, V], key: SigningKey, version: SignatureVersion, signing_cert_url: str
) -> dict[str, V | str]:
    """A copy of the envelope (Type, MessageId, TopicArn, Message, Timestamp, ...) with
    SignatureVersion, Signature and SigningCertURL set. Other keys (UnsubscribeURL,
    MessageAttributes) are carried over unsigned, as SNS leaves them."""
    signature = key.sign(envelope, version)
    signed: dict[str, V | str] = dict(envelope)
    signed["SignatureVersion"] = version
    signed["Signature"] = signature
    signed["SigningCertURL"] = signing_cert_url
    return signed


def verify(message: Mapping[str, object], certificate_pem: bytes) -> bool:
    """Whether message's Signature, under its SignatureVersion, is the certificate key's signature
    of its string to sign: a subscriber's check once it holds the certificate.

    False for anything wrong in the message (unknown Type or version, a missing field, a Signature
    that is not base64 or does not match). The certificate is the caller's trusted one: checking
    where it came from (SigningCertURL) and its dates is theirs. Raises ValueError for a certificate
    that is not PEM or holds no RSA key."""
    certificate = x509.load_pem_x509_certificate(certificate_pem)
    public = certificate.public_key()
    if not isinstance(public, rsa.RSAPublicKey):
        raise ValueError(f"SNS certificates hold RSA keys, this one {type(public).__name__}")
    encoded = message.get("Signature")
    if not isinstance(encoded, str):
        return False
    try:
        algorithm = _hash_for(message.get("SignatureVersion"))
        data = string_to_sign(message)
        signature = base64.b64decode(encoded, validate=True)
    except (ValueError, binascii.Error):
        return False
    try:
        public.verify(signature, data, padding.PKCS1v15(), algorithm)
    except InvalidSignature:
        return False
    return True


__all__ = [
    "CONFIRMATION_KEYS",
    "NOTIFICATION_KEYS",
    "SignatureVersion",
    "SigningKey",
    "sign_envelope",
    "string_to_sign",
    "verify",
]


def key_from_file_text(text: bytes) -> SigningKey:
    """A key file's contents: an unencrypted RSA private key in PEM, optionally followed (or
    preceded) by its certificate in PEM. Raises ValueError with a line that names what is wrong,
    never the key."""
    marker = b"-----BEGIN CERTIFICATE-----"
    certificate: bytes | None = None
    if marker in text:
        start = text.index(marker)
        end = text.index(b"-----END CERTIFICATE-----", start) + len(b"-----END CERTIFICATE-----")
        certificate, text = text[start:end], text[:start] + text[end:]
    try:
        return SigningKey.from_pem(text, certificate)
    except (ValueError, TypeError) as exc:
        known = "RSA" in str(exc) or "match" in str(exc)
        raise ValueError(str(exc) if known else "not an unencrypted private key in PEM") from None
