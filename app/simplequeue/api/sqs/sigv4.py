"""AWS Signature Version 4, as the Amazon SQS door checks it: who signed a request, or why not.

The canonical request is built as the SDKs build it for SQS (botocore's SigV4Auth is the reference):

- the path as sent on the wire (percent-encoded, i.e. ASGI's `raw_path`), dot segments and empty
  segments removed, then percent-encoded once more (everything but unreserved characters and `/`);
- the query's pairs, each name and value decoded (`+` is a space) and then percent-encoded per
  RFC 3986 (all but `A-Z a-z 0-9 - _ . ~`), sorted by name then value (a presigned URL's
  `X-Amz-Signature` left out);
- the signed headers only: lower-cased names, values trimmed with inner runs of whitespace collapsed;
  `host` must be among them;
- the payload's SHA-256 (`x-amz-content-sha256` when sent, which must then be the body's own).

The string to sign, the HMAC chain (date, the credential scope's region, `sqs`, `aws4_request`) and a
constant-time comparison follow. The request's time (`X-Amz-Date`, else `Date`) must lie within
15 minutes of `now`. Presigned URLs (`X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=...` in
the query) are accepted when they carry every parameter once and have not expired.

Standard library only; nothing here reads settings or logs. Refusals never carry the secret.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Literal
from urllib.parse import quote, unquote_plus

RefusalCode = Literal[
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "RequestExpired",
    "IncompleteSignature",
    "MissingAuthenticationToken",
]

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "sqs"
SERVICES = frozenset({SERVICE, "sts"})
"""The scopes a signature to the SQS door may name: SQS's, and STS's for GetCallerIdentity, which
tools ask first (the account of the signing key) on the same endpoint."""
SNS_SERVICES = frozenset({"sns"})
"""The scope a signature to the SNS door (simplequeue.api.sns, on the same port) names: each door
takes its own only, so a signature made for one service is never accepted by the other."""
SCHEDULER_SERVICES = frozenset({"scheduler"})
"""The scope a signature to the EventBridge Scheduler door (simplequeue.api.scheduler) names."""
TERMINATOR = "aws4_request"
MAX_SKEW = timedelta(minutes=15)
MAX_PRESIGNED_EXPIRES = 7 * 24 * 3600  # seconds, as AWS allows
TIMESTAMP_FORMAT = "%Y%m%dT%H%M%SZ"
UNRESERVED = "-_.~"  # with letters and digits, which quote() never encodes
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

_HEX64 = re.compile(r"[0-9a-f]{64}")
_TIMESTAMP = re.compile(r"[0-9]{8}T[0-9]{6}Z")
_EXPIRES = re.compile(r"[0-9]{1,7}")
_HEADER_NAME = re.compile(r"[a-z0-9!#$%&'*+.^_`|~-]+")
_REGION = re.compile(r"[a-z0-9-]{1,64}")
_PRESIGN_PARAMS = (
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
)

_STATUS: dict[str, int] = {"IncompleteSignature": 400}
_SCOPE_SERVICE = re.compile(r"Credential=[^/,\s]*/[^/,\s]*/[^/,\s]*/([^/,\s]*)/")

_SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided: "
    "check the secret access key and the signing method."
)


class SigV4Refusal(Exception):
    """Why a request is not accepted as signed. `code` is the AWS error code, `message` one line
    (never the secret), `status` the HTTP status to answer with (403, or 400 for a malformed
    signature)."""

    def __init__(self, code: RefusalCode, message: str) -> None:
        super().__init__(message)
        self.code: RefusalCode = code
        self.message = message
        self.status = _STATUS.get(code, 403)

    def __repr__(self) -> str:
        return f"SigV4Refusal({self.code!r}, {self.message!r})"


def verify(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    secrets: Callable[[str], str | None],
    now: datetime,
    services: frozenset[str] = SERVICES,
) -> str:
    """The access key id that signed this request; else SigV4Refusal.

    `path`: as sent, percent-encoded, without the query (ASGI's `scope["raw_path"]` decoded as
    ASCII). `query`: the raw query string, without `?` (`scope["query_string"]`). `headers`: names
    lower-cased, values as received (repeated headers joined with `,`). `secrets`: the secret of an
    access key id, None for an unknown one. `now`: the current time (aware; naive means UTC).
    `services`: the scopes taken (the SQS door's, or SNS_SERVICES).
    """
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    pairs = _query_pairs(query)
    presigned = any(name == "X-Amz-Algorithm" for name, _ in pairs)
    authorization = headers.get("authorization")
    if presigned and authorization is not None:
        raise SigV4Refusal(
            "IncompleteSignature", "send either an Authorization header or a presigned URL, not both"
        )
    if presigned:
        signed = _from_presigned_query(pairs, services)
    elif authorization is None or not authorization.strip():
        raise SigV4Refusal(
            "MissingAuthenticationToken",
            "the request must be signed with AWS Signature Version 4 (an Authorization header)",
        )
    else:
        signed = _from_authorization(authorization, headers, services)

    if "host" not in signed.headers:
        raise SigV4Refusal("SignatureDoesNotMatch", "the host header must be among the signed headers")
    if signed.timestamp[:8] != signed.scope_date:
        raise SigV4Refusal(
            "SignatureDoesNotMatch",
            f"the credential's date {signed.scope_date} is not the request's date {signed.timestamp[:8]}",
        )

    secret = secrets(signed.access_key_id)
    if secret is None:
        raise SigV4Refusal(
            "InvalidClientTokenId",
            "the security token included in the request is invalid (unknown access key)",
        )

    # Differences only, never a moment plus a span: any two datetimes subtract without overflow,
    # and a request of year 9999 plus its X-Amz-Expires would not.
    if signed.moment - now > MAX_SKEW:
        raise SigV4Refusal(
            "RequestExpired", f"the request's time {signed.timestamp} is more than 15 minutes ahead of ours"
        )
    window = timedelta(seconds=signed.expires) if signed.expires is not None else MAX_SKEW
    if now - signed.moment > window:
        raise SigV4Refusal("RequestExpired", f"the request's time {signed.timestamp} has expired")

    canonical = "\n".join(
        [
            method.upper(),
            canonical_path(path),
            canonical_query(pairs, presigned=presigned),
            *(f"{name}:{_header_value(headers.get(name, ''))}" for name in signed.headers),
            "",
            ";".join(signed.headers),
            _payload_hash(headers, body),
        ]
    )
    string_to_sign = "\n".join(
        [
            ALGORITHM,
            signed.timestamp,
            f"{signed.scope_date}/{signed.region}/{signed.service}/{TERMINATOR}",
            hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest(),
        ]
    )
    key = _signing_key(secret, signed.scope_date, signed.region, signed.service)
    expected = hmac.new(key, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signed.signature):
        raise SigV4Refusal("SignatureDoesNotMatch", _SIGNATURE_MISMATCH)
    return signed.access_key_id


def scope_service(headers: Mapping[str, str], query: str) -> str | None:
    """The service a request's signature is scoped to (its Credential's fourth part), unchecked;
    None for a request that carries no signature. `headers` lower-cased; `query` raw."""
    authorization = headers.get("authorization")
    if authorization is not None:
        match = _SCOPE_SERVICE.search(authorization)
        return match[1] if match else None
    for name, value in _query_pairs(query):
        if name == "X-Amz-Credential":
            parts = value.split("/")
            return parts[3] if len(parts) == 5 else None
    return None


def canonical_path(path: str) -> str:
    """The wire path, normalised (no `.`/`..`/empty segments) and percent-encoded once more, as
    botocore signs it for every service but S3."""
    segments: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if segments:
                segments.pop()
        elif segment and segment != ".":
            segments.append(segment)
    normalised = "/" + "/".join(segments)
    if segments and path.endswith("/"):
        normalised += "/"
    return quote(normalised, safe="/~", encoding="utf-8", errors="surrogatepass")


def canonical_query(pairs: list[tuple[str, str]], *, presigned: bool = False) -> str:
    """Decoded (name, value) pairs, encoded per RFC 3986 and sorted by name, then value; a presigned
    URL's X-Amz-Signature left out."""
    encoded = sorted(
        (_encode(name), _encode(value))
        for name, value in pairs
        if not (presigned and name == "X-Amz-Signature")
    )
    return "&".join(f"{name}={value}" for name, value in encoded)


class _Signed:
    """What the request claims: who, when, over which headers, and the signature."""

    __slots__ = (
        "access_key_id",
        "expires",
        "headers",
        "moment",
        "region",
        "scope_date",
        "service",
        "signature",
        "timestamp",
    )

    def __init__(
        self,
        credential: str,
        signed_headers: str,
        signature: str,
        moment: datetime,
        services: frozenset[str],
        expires: int | None = None,
    ) -> None:
        self.access_key_id, self.scope_date, self.region, self.service = _credential(credential, services)
        self.headers = _signed_headers(signed_headers)
        if not _HEX64.fullmatch(signature):
            raise SigV4Refusal("IncompleteSignature", "the Signature must be 64 lower-case hex digits")
        self.signature = signature
        self.moment = moment
        self.timestamp = _timestamp(moment)
        self.expires = expires


def _from_authorization(authorization: str, headers: Mapping[str, str], services: frozenset[str]) -> _Signed:
    scheme, _, rest = authorization.strip().partition(" ")
    if scheme != ALGORITHM:
        raise SigV4Refusal(
            "IncompleteSignature",
            f"unsupported authorization scheme {scheme[:32]!r}: sign with {ALGORITHM} (Signature Version 4)",
        )
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, eq, value = part.strip().partition("=")
        if not eq or not value or name in fields:
            raise SigV4Refusal(
                "IncompleteSignature",
                "the Authorization header must be "
                f"'{ALGORITHM} Credential=..., SignedHeaders=..., Signature=...', each once",
            )
        fields[name] = value
    missing = [name for name in ("Credential", "SignedHeaders", "Signature") if name not in fields]
    if missing:
        raise SigV4Refusal("IncompleteSignature", f"the Authorization header lacks {', '.join(missing)}")
    if "x-amz-date" in headers:
        moment = _from_timestamp(headers["x-amz-date"].strip())
        used = "x-amz-date"
        if moment is None:
            raise SigV4Refusal("IncompleteSignature", "X-Amz-Date must be like 20240101T000000Z (UTC)")
    elif "date" in headers:
        moment = _from_http_date(headers["date"])
        used = "date"
    else:
        raise SigV4Refusal("IncompleteSignature", "a signed request needs an X-Amz-Date or a Date header")
    signed = _Signed(fields["Credential"], fields["SignedHeaders"], fields["Signature"], moment, services)
    if used not in signed.headers:
        raise SigV4Refusal("SignatureDoesNotMatch", f"the {used} header must be among the signed headers")
    return signed


def _from_presigned_query(pairs: list[tuple[str, str]], services: frozenset[str]) -> _Signed:
    params: dict[str, str] = {}
    for name, value in pairs:
        if name.startswith("X-Amz-"):
            if name in params:
                raise _not_presignable(f"{name} is given twice")
            params[name] = value
    if params["X-Amz-Algorithm"] != ALGORITHM:
        raise _not_presignable(f"X-Amz-Algorithm must be {ALGORITHM}")
    missing = [name for name in _PRESIGN_PARAMS if name not in params]
    if missing:
        raise _not_presignable(f"it lacks {', '.join(missing)}")
    moment = _from_timestamp(params["X-Amz-Date"])
    if moment is None:
        raise _not_presignable("X-Amz-Date must be like 20240101T000000Z (UTC)")
    expires = params["X-Amz-Expires"]
    # At most 7 digits before int(): int() refuses texts of over 4,300 digits with a ValueError.
    if not _EXPIRES.fullmatch(expires) or not 1 <= int(expires) <= MAX_PRESIGNED_EXPIRES:
        raise _not_presignable(f"X-Amz-Expires must be 1 to {MAX_PRESIGNED_EXPIRES} seconds")
    return _Signed(
        params["X-Amz-Credential"],
        params["X-Amz-SignedHeaders"],
        params["X-Amz-Signature"],
        moment,
        services,
        expires=int(expires),
    )


def _not_presignable(why: str) -> SigV4Refusal:
    return SigV4Refusal(
        "MissingAuthenticationToken",
        f"presigned URL not accepted: {why}; or sign the request with an Authorization header",
    )


def _credential(credential: str, services: frozenset[str]) -> tuple[str, str, str, str]:
    parts = credential.split("/")
    if len(parts) != 5 or not all(parts):
        raise SigV4Refusal(
            "IncompleteSignature",
            f"the Credential must be <access key id>/<date>/<region>/{SERVICE}/{TERMINATOR}",
        )
    access_key_id, date, region, service, terminator = parts
    if not (len(date) == 8 and date.isascii() and date.isdigit()):
        raise SigV4Refusal("IncompleteSignature", "the Credential's date must be like 20240101")
    if not _REGION.fullmatch(region):
        raise SigV4Refusal("IncompleteSignature", "the Credential's region is not a region name")
    if service not in services:
        expected = SERVICE if SERVICE in services else min(services)
        raise SigV4Refusal(
            "SignatureDoesNotMatch", f"the Credential must be scoped to the service {expected!r}"
        )
    if terminator != TERMINATOR:
        raise SigV4Refusal("SignatureDoesNotMatch", f"the Credential must end with {TERMINATOR!r}")
    return access_key_id, date, region, service


def _signed_headers(listed: str) -> tuple[str, ...]:
    names = listed.split(";")
    if not all(_HEADER_NAME.fullmatch(name) for name in names) or len(set(names)) != len(names):
        raise SigV4Refusal(
            "IncompleteSignature", "SignedHeaders must be distinct lower-case header names joined by ';'"
        )
    return tuple(sorted(names))


def _query_pairs(query: str) -> list[tuple[str, str]]:
    # `+` is a space, as in a form (botocore signs a space as %20 but sends it as +); bytes that are
    # not UTF-8 survive the round trip through str as surrogates.
    pairs = []
    for pair in query.split("&"):
        if pair:
            name, _, value = pair.partition("=")
            pairs.append((_decode(name), _decode(value)))
    return pairs


def _decode(text: str) -> str:
    return unquote_plus(text, encoding="utf-8", errors="surrogateescape")


def _encode(text: str) -> str:
    return quote(text, safe=UNRESERVED, encoding="utf-8", errors="surrogateescape")


def _header_value(value: str) -> str:
    # A server decodes header bytes as latin-1; the client signed the text those bytes are in UTF-8.
    with contextlib.suppress(UnicodeError):
        value = value.encode("latin-1").decode("utf-8")
    return " ".join(value.split())


def _payload_hash(headers: Mapping[str, str], body: bytes) -> str:
    actual = hashlib.sha256(body).hexdigest()
    declared = headers.get("x-amz-content-sha256")
    if declared is None:
        return actual
    if declared.strip().lower() != actual:
        raise SigV4Refusal(
            "SignatureDoesNotMatch",
            "x-amz-content-sha256 must be the SHA-256 of the body (unsigned payloads are not accepted)",
        )
    return declared.strip()


def _signing_key(secret: str, date: str, region: str, service: str = SERVICE) -> bytes:
    key = _hmac(f"AWS4{secret}".encode(), date)
    for part in (region, service, TERMINATOR):
        key = _hmac(key, part)
    return key


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).digest()


def _from_timestamp(timestamp: str) -> datetime | None:
    """The moment of an ISO 8601 basic UTC timestamp (X-Amz-Date), None if it names none."""
    if _TIMESTAMP.fullmatch(timestamp):
        with contextlib.suppress(ValueError):
            return datetime.strptime(timestamp, TIMESTAMP_FORMAT).replace(tzinfo=UTC)
    return None


def _from_http_date(value: str) -> datetime:
    """The moment of a Date header, in UTC. One that names no moment of years 1 to 9999 in UTC (year
    9999 in a zone west of UTC is already year 10000) is no date a request may carry."""
    try:
        moment = parsedate_to_datetime(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)
    except (TypeError, ValueError, OverflowError):
        raise SigV4Refusal(
            "IncompleteSignature", "the Date header is not an HTTP date of the years 0001 to 9999 in UTC"
        ) from None


def _timestamp(moment: datetime) -> str:
    # Not strftime: its %Y writes year 1 as "1" on glibc, and a timestamp has four digits of year.
    return f"{moment.year:04d}{moment:%m%dT%H%M%S}Z"
