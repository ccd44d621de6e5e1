"""SigV4 as the Amazon SQS door checks it, against requests signed by botocore's own signer (and one
captured off the wire): what passes, and each refusal with its AWS code. Time is injected: botocore
signs at a fixed moment and verify() is told what `now` is."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import boto3
import botocore.auth
import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from simplequeue.api.auth import ApiKey, Grant, Keyring, Role, SigV4Key
from simplequeue.api.sqs.sigv4 import SigV4Refusal, canonical_path, verify
from simplequeue.main import keyring_for
from simplequeue.settings import Settings

AKID = "AKIDEXAMPLE0000000001"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
NOW = datetime(2026, 11, 25, 12, 32, 44, tzinfo=UTC)
ENDPOINT = "http://127.0.0.1:5123"
QUEUE_URL = f"{ENDPOINT}/000000000000/my.queue-1"
SEND_BODY = (
    '{"QueueUrl": "http://127.0.0.1:5123/123456789012/demo", "MessageBody": "hello", '
    '"MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}}}'
)
JSON_HEADERS = {
    "X-Amz-Target": "AmazonSQS.SendMessage",
    "Content-Type": "application/x-amz-json-1.0",
    "x-amzn-query-mode": "true",
    "User-Agent": "Boto3/1.44.8 md/Botocore#1.44.8 ua/2.1 lang/python#3.11.7 Botocore/1.44.8",
}
FORM = "application/x-www-form-urlencoded; charset=utf-8"


def secrets_of(table: Mapping[str, str]) -> Callable[[str], str | None]:
    return table.get


SECRETS = secrets_of({AKID: SECRET})


@dataclass
class Wire:
    """A request as the service receives it: raw path and query, lower-cased header names."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def verify(
        self, now: datetime = NOW, secrets: Callable[[str], str | None] = SECRETS, **changes: Any
    ) -> str:
        fields = {**self.__dict__, **changes}
        return verify(
            fields["method"],
            fields["path"],
            fields["query"],
            fields["headers"],
            fields["body"],
            secrets,
            now,
        )

    def refused(self, code: str, now: datetime = NOW, **changes: Any) -> SigV4Refusal:
        with pytest.raises(SigV4Refusal) as refusal:
            self.verify(now, **changes)
        assert refusal.value.code == code, refusal.value.message
        assert refusal.value.status == (400 if code == "IncompleteSignature" else 403)
        assert "\n" not in refusal.value.message
        assert SECRET not in refusal.value.message
        return refusal.value

    def with_headers(self, **headers: str) -> dict[str, str]:
        return {**self.headers, **{name.replace("_", "-"): value for name, value in headers.items()}}


@pytest.fixture
def at_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's signers read the clock through botocore.auth.get_current_datetime (naive UTC)."""
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *a, **k: NOW.replace(tzinfo=None))


def on_the_wire(request: AWSRequest) -> Wire:
    prepared = request.prepare()
    url = urlsplit(prepared.url)
    headers = {name.lower(): value for name, value in prepared.headers.items()}
    headers.setdefault("host", url.netloc)  # as urllib3 sends it (these tests use non-default ports)
    body = prepared.body or b""
    return Wire(
        prepared.method, url.path, url.query, headers, body if isinstance(body, bytes) else body.encode()
    )


def signed(
    request: AWSRequest,
    *,
    akid: str = AKID,
    secret: str = SECRET,
    region: str = "us-east-1",
    service: str = "sqs",
) -> Wire:
    SigV4Auth(Credentials(akid, secret), service, region).add_auth(request)
    return on_the_wire(request)


def json_send(body: str = SEND_BODY) -> AWSRequest:
    return AWSRequest("POST", f"{ENDPOINT}/", headers=dict(JSON_HEADERS), data=body.encode())


def form_send(url: str = QUEUE_URL, **extra: str) -> AWSRequest:
    form = {"Action": "SendMessage", "Version": "2012-11-05", "QueueUrl": url, "MessageBody": "hé llo"}
    return AWSRequest("POST", url, headers={"Content-Type": FORM}, data={**form, **extra})


# ---------------------------------------------------------------- what passes


def test_a_request_captured_off_the_wire_passes() -> None:
    """boto3 1.44.8's SendMessage to moto, as /work/shared/sqs/wire-examples.txt shows it (its secret was
    "secret"): the bytes the SDK sent, not our reading of its signer."""
    body = SEND_BODY.encode()
    wire = Wire(
        "POST",
        "/",
        "",
        {
            "host": "127.0.0.1:5123",
            "x-amz-target": "AmazonSQS.SendMessage",
            "content-type": "application/x-amz-json-1.0",
            "x-amzn-query-mode": "true",
            "x-amz-date": "20261125T123244Z",
            "authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261125/us-east-1/sqs/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-date;x-amz-target;x-amzn-query-mode, "
            "Signature=bc9f33f80d1e6a8952c4cd5f4bc5c2c2992603782e7b085c012f14f21ef1677c",
            "content-length": str(len(body)),
        },
        body,
    )
    assert wire.verify(secrets=secrets_of({"AKIDEXAMPLE": "secret"})) == "AKIDEXAMPLE"
    wire.refused("SignatureDoesNotMatch", secrets=secrets_of({"AKIDEXAMPLE": "Secret"}))


def test_json_protocol_send_message(at_now: None) -> None:
    wire = signed(json_send())
    signed_headers = "SignedHeaders=content-type;host;x-amz-date;x-amz-target;x-amzn-query-mode,"
    assert signed_headers in wire.headers["authorization"]
    assert wire.verify() == AKID


def test_query_protocol_form_post_to_a_queue_url(at_now: None) -> None:
    wire = signed(form_send())
    assert wire.path == "/000000000000/my.queue-1"
    assert wire.body.startswith(b"Action=SendMessage&")
    assert wire.verify() == AKID


def test_the_region_comes_from_the_credential_scope(at_now: None) -> None:
    assert signed(json_send(), region="eu-west-3").verify() == AKID


def test_headers_outside_the_signature_may_change(at_now: None) -> None:
    wire = signed(json_send())
    changed = wire.with_headers(user_agent="something else", amz_sdk_request="attempt=2; max=3")
    assert wire.verify(headers=changed) == AKID


def test_signed_header_values_are_trimmed_and_their_spaces_collapsed(at_now: None) -> None:
    request = json_send()
    request.headers["X-Custom"] = "  a   b  c "
    wire = signed(request)
    assert wire.headers["x-custom"] == "  a   b  c "  # sent as it is; signed as "a b c"
    assert wire.verify() == AKID
    assert wire.verify(headers=wire.with_headers(x_custom="a b\t c")) == AKID
    wire.refused("SignatureDoesNotMatch", headers=wire.with_headers(x_custom="a bc"))


def test_non_ascii_header_values_as_latin_1_or_utf_8(at_now: None) -> None:
    """http.client sends a header's text as latin-1, other SDKs as UTF-8; the server reads bytes as
    latin-1. Either way the text the client signed is the one checked."""
    request = json_send()
    request.headers["X-Custom"] = "café"
    wire = signed(request)
    assert wire.verify(headers=wire.with_headers(x_custom="café")) == AKID
    as_utf8 = "café".encode().decode("latin-1")
    assert wire.verify(headers=wire.with_headers(x_custom=as_utf8)) == AKID


def test_a_path_that_is_no_text_is_refused_not_raised(at_now: None) -> None:
    signed(json_send()).refused("SignatureDoesNotMatch", path="/000000000000/\udcff\ud800")


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("/000000000000/my.queue-1", "/000000000000/my.queue-1"),
        ("/000000000000/my%20queue", "/000000000000/my%2520queue"),
        ("/000000000000/%C3%A9t%C3%A9", "/000000000000/%25C3%25A9t%25C3%25A9"),
        ("/000000000000/a:b@c(d)!", "/000000000000/a%3Ab%40c%28d%29%21"),
        ("", "/"),
        ("/a/./b/../c//d/", "/a/c/d/"),
    ],
)
def test_paths_are_encoded_as_botocore_encodes_them(url: str, canonical: str, at_now: None) -> None:
    wire = signed(form_send(url=f"{ENDPOINT}{url}"))
    assert canonical_path(wire.path) == canonical
    assert wire.verify() == AKID
    if url.startswith("/000000000000/"):
        wire.refused("SignatureDoesNotMatch", path="/000000000000/other")


QUERY = [("b", "x y"), ("a", "2"), ("a", "1"), ("u", "é ü"), ("plus", "1+1"), ("empty", ""), ("t", "~-_.*")]


def test_query_strings_with_repeats_spaces_and_unicode(at_now: None) -> None:
    request = AWSRequest("GET", f"{ENDPOINT}/", params=QUERY)
    wire = signed(request)
    assert "b=x+y" in wire.query  # as sent: a form's + for a space
    assert "a=2&a=1" in wire.query  # in the order given
    assert wire.verify() == AKID
    wire.refused("SignatureDoesNotMatch", query=wire.query.replace("a=2", "a=3"))
    wire.refused("SignatureDoesNotMatch", query=wire.query + "&extra=1")


def test_a_query_in_the_url_itself(at_now: None) -> None:
    wire = signed(AWSRequest("GET", f"{ENDPOINT}/?z=%2F&Action=ListQueues&a=%C3%A9%20x&a=0"))
    assert wire.verify() == AKID


def test_a_content_sha256_header_that_matches_the_body(at_now: None) -> None:
    request = json_send()
    request.headers["X-Amz-Content-SHA256"] = hashlib.sha256(SEND_BODY.encode()).hexdigest()
    assert signed(request).verify() == AKID


def test_a_date_header_instead_of_x_amz_date(at_now: None) -> None:
    request = json_send()
    request.headers["Date"] = "Thu, 01 Jan 1970 00:00:00 GMT"  # botocore replaces it with the signing time
    wire = signed(request)
    assert "x-amz-date" not in wire.headers
    assert wire.verify() == AKID
    wire.refused("RequestExpired", now=NOW + timedelta(minutes=16))


# ---------------------------------------------------------------- refusals


def test_a_flipped_byte_in_the_body(at_now: None) -> None:
    wire = signed(json_send())
    body = bytearray(wire.body)
    body[body.index(b"hello")] ^= 0x20  # hello -> Hello
    wire.refused("SignatureDoesNotMatch", body=bytes(body))


def test_a_changed_signed_header(at_now: None) -> None:
    wire = signed(json_send())
    wire.refused("SignatureDoesNotMatch", headers=wire.with_headers(x_amz_target="AmazonSQS.PurgeQueue"))
    wire.refused("SignatureDoesNotMatch", headers=wire.with_headers(host="127.0.0.1:5124"))
    missing = {name: value for name, value in wire.headers.items() if name != "content-type"}
    wire.refused("SignatureDoesNotMatch", headers=missing)


def test_another_method(at_now: None) -> None:
    signed(json_send()).refused("SignatureDoesNotMatch", method="PUT")


def test_a_wrong_secret(at_now: None) -> None:
    signed(json_send(), secret="not-the-secret-0000000000").refused("SignatureDoesNotMatch")


def test_another_service(at_now: None) -> None:
    refusal = signed(json_send(), service="sns").refused("SignatureDoesNotMatch")
    assert "'sqs'" in refusal.message


def test_a_content_sha256_header_that_is_not_the_body(at_now: None) -> None:
    request = json_send()
    request.headers["X-Amz-Content-SHA256"] = hashlib.sha256(b"another body").hexdigest()
    signed(request).refused("SignatureDoesNotMatch")
    unsigned = json_send()
    unsigned.headers["X-Amz-Content-SHA256"] = "UNSIGNED-PAYLOAD"
    refusal = signed(unsigned).refused("SignatureDoesNotMatch")
    assert "unsigned" in refusal.message


def test_an_unknown_access_key(at_now: None) -> None:
    refusal = signed(json_send(), akid="AKIDNOBODYKNOWS00001").refused("InvalidClientTokenId")
    assert "unknown access key" in refusal.message


@pytest.mark.parametrize("minutes", [-16, 16])
def test_more_than_15_minutes_away(minutes: int, at_now: None) -> None:
    wire = signed(json_send())
    wire.refused("RequestExpired", now=NOW + timedelta(minutes=minutes))
    assert wire.verify(now=NOW + timedelta(minutes=minutes) * 15 / 16) == AKID


def test_a_naive_now_is_utc(at_now: None) -> None:
    assert signed(json_send()).verify(now=NOW.replace(tzinfo=None)) == AKID


def test_no_authorization(at_now: None) -> None:
    wire = signed(json_send())
    headers = {name: value for name, value in wire.headers.items() if name != "authorization"}
    refusal = wire.refused("MissingAuthenticationToken", headers=headers)
    assert "Signature Version 4" in refusal.message
    wire.refused("MissingAuthenticationToken", headers={**headers, "authorization": "  "})


def _authorization(credential: str, signed_headers: str, signature: str) -> str:
    return f"AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders={signed_headers}, Signature={signature}"


GOOD_SCOPE = f"{AKID}/20261125/us-east-1/sqs/aws4_request"
GOOD_HEADERS = "content-type;host;x-amz-date;x-amz-target;x-amzn-query-mode"
SIG = "0" * 64


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer some-api-key-0000000000",
        f"AWS {AKID}:c2lnbmF0dXJl",  # Signature Version 2
        "AWS4-HMAC-SHA256",
        f"AWS4-HMAC-SHA256 Credential={GOOD_SCOPE}, SignedHeaders={GOOD_HEADERS}",
        f"AWS4-HMAC-SHA256 Credential={GOOD_SCOPE} SignedHeaders={GOOD_HEADERS} Signature={SIG}",
        _authorization(GOOD_SCOPE, GOOD_HEADERS, SIG) + f", Signature={SIG}",
        _authorization(f"{AKID}/20261125/us-east-1/sqs", GOOD_HEADERS, SIG),
        _authorization(f"{AKID}/2026-11-25/us-east-1/sqs/aws4_request", GOOD_HEADERS, SIG),
        _authorization(f"{AKID}//us-east-1/sqs/aws4_request", GOOD_HEADERS, SIG),
        _authorization(f"{AKID}/20261125/US EAST/sqs/aws4_request", GOOD_HEADERS, SIG),
        _authorization(GOOD_SCOPE, "Content-Type;Host", SIG),
        _authorization(GOOD_SCOPE, "host;host", SIG),
        _authorization(GOOD_SCOPE, "", SIG),
        _authorization(GOOD_SCOPE, GOOD_HEADERS, "abc"),
        _authorization(GOOD_SCOPE, GOOD_HEADERS, SIG.upper().replace("0", "A")),
    ],
)
def test_a_malformed_authorization(authorization: str, at_now: None) -> None:
    wire = signed(json_send())
    wire.refused("IncompleteSignature", headers=wire.with_headers(authorization=authorization))


@pytest.mark.parametrize(
    "date",
    [
        "2026-11-25T12:32:44Z",
        "20261125T123244",
        "20261325T123244Z",
        "",
        "\u0662\u0660\u0662\u0666\u0661\u0661\u0662\u0665T123244Z",
    ],
)
def test_a_malformed_x_amz_date(date: str, at_now: None) -> None:
    wire = signed(json_send())
    wire.refused("IncompleteSignature", headers=wire.with_headers(x_amz_date=date))


def test_no_date_at_all(at_now: None) -> None:
    wire = signed(json_send())
    headers = {name: value for name, value in wire.headers.items() if name != "x-amz-date"}
    wire.refused("IncompleteSignature", headers=headers)
    wire.refused("IncompleteSignature", headers={**headers, "date": "yesterday"})


def test_host_must_be_signed(at_now: None) -> None:
    wire = signed(json_send())
    authorization = wire.headers["authorization"].replace(";host;", ";")
    refusal = wire.refused("SignatureDoesNotMatch", headers=wire.with_headers(authorization=authorization))
    assert "host" in refusal.message


def test_the_date_must_be_signed(at_now: None) -> None:
    wire = signed(json_send())
    authorization = wire.headers["authorization"].replace(";x-amz-date;", ";")
    refusal = wire.refused("SignatureDoesNotMatch", headers=wire.with_headers(authorization=authorization))
    assert "x-amz-date" in refusal.message


def test_the_scope_date_must_be_the_request_date(at_now: None) -> None:
    wire = signed(json_send())
    authorization = wire.headers["authorization"].replace("/20261125/", "/20261124/")
    wire.refused("SignatureDoesNotMatch", headers=wire.with_headers(authorization=authorization))


# ---------------------------------------------------------------- dates at the ends of the calendar

FIRST = datetime(1, 1, 1, tzinfo=UTC)
LAST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def signing_at(monkeypatch: pytest.MonkeyPatch, moment: datetime) -> None:
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *a, **k: moment.replace(tzinfo=None))


@pytest.mark.parametrize(
    "date",
    [
        "Fri, 31 Dec 9999 23:59:59 -0100",  # year 10000 in UTC
        "Fri, 31 Dec 9999 23:00:00 -2359",
        "Fri, 31 Dec 99999 23:59:59 GMT",
        "Fri, 31 Dec 2026 23:59:59 +2400",
    ],
)
def test_a_date_header_past_the_calendar_is_refused(date: str, at_now: None) -> None:
    """Refused before the key is looked up, whoever the key: 400 IncompleteSignature, never an
    OverflowError in the conversion to UTC."""
    wire = signed(json_send())
    headers = {name: value for name, value in wire.headers.items() if name != "x-amz-date"}
    authorization = headers["authorization"].replace(";x-amz-date;", ";date;")
    headers |= {"date": date, "authorization": authorization}
    refusal = wire.refused("IncompleteSignature", headers=headers)
    assert "Date header" in refusal.message
    wire.refused("IncompleteSignature", headers=headers, secrets=secrets_of({}))


def test_a_date_header_of_the_first_years_has_four_digits(at_now: None) -> None:
    """Year 100 at +0100 is year 99 in UTC: its timestamp is 00991231T230000Z (strftime's %Y writes
    99), so the credential of that day matches it and the request is expired, as it is."""
    wire = signed(json_send())
    headers = {name: value for name, value in wire.headers.items() if name != "x-amz-date"}
    authorization = headers["authorization"].replace(";x-amz-date;", ";date;")
    headers |= {"date": "Fri, 01 Jan 0100 00:00:00 +0100", "authorization": authorization}
    headers["authorization"] = headers["authorization"].replace("/20261125/", "/00991231/")
    refusal = wire.refused("RequestExpired", headers=headers)
    assert "00991231T230000Z" in refusal.message


def test_signed_at_the_last_second_of_the_calendar(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request of 9999-12-31T23:59:59Z checked at that moment: its 15 minutes, or its presigned
    URL's 7 days, end past the calendar (an OverflowError, once). Checked in year 1: far ahead."""
    signing_at(monkeypatch, LAST)
    for wire in [signed(json_send()), presigned(expires=604800)]:
        assert wire.verify(now=LAST) == AKID
        refusal = wire.refused("RequestExpired", now=FIRST)
        assert "99991231T235959Z is more than 15 minutes ahead" in refusal.message


def test_dated_the_first_second_of_the_calendar(at_now: None) -> None:
    """00010101T000000Z (botocore cannot sign it: its strftime writes year 1 as "1"): checked in
    year 1 its time passes and its signature is what is wrong; checked later, it has expired."""
    wire = signed(json_send())
    authorization = wire.headers["authorization"].replace("/20261125/", "/00010101/")
    headers = wire.with_headers(x_amz_date="00010101T000000Z", authorization=authorization)
    wire.refused("SignatureDoesNotMatch", now=FIRST, headers=headers)
    refusal = wire.refused("RequestExpired", now=LAST, headers=headers)
    assert "00010101T000000Z has expired" in refusal.message
    query = presigned().query.replace("20261125", "00010101").replace("T123244Z", "T000000Z")
    wire.refused("SignatureDoesNotMatch", now=FIRST, query=query, headers=presigned().headers)
    wire.refused("RequestExpired", now=LAST, query=query, headers=presigned().headers)


def test_an_x_amz_expires_of_thousands_of_digits(at_now: None) -> None:
    """int() refuses a text of over 4,300 digits with a ValueError: never reached."""
    wire = presigned()
    for expires in ["9" * 5000, "0" * 5000 + "300", "1e3", "\u0663\u0660\u0660"]:
        query = wire.query.replace("X-Amz-Expires=300", f"X-Amz-Expires={expires}")
        wire.refused("MissingAuthenticationToken", query=query)


# ---------------------------------------------------------------- presigned URLs


def presigned(expires: int = 300, **params: str) -> Wire:
    request = AWSRequest(
        "GET", f"{ENDPOINT}/", params={"Action": "ListQueues", "Version": "2012-11-05", **params}
    )
    SigV4QueryAuth(Credentials(AKID, SECRET), "sqs", "us-east-1", expires=expires).add_auth(request)
    return on_the_wire(request)


def test_a_presigned_url(at_now: None) -> None:
    wire = presigned()
    assert "X-Amz-Signature=" in wire.query
    assert "authorization" not in wire.headers
    assert wire.verify() == AKID
    assert wire.verify(now=NOW + timedelta(seconds=300)) == AKID
    wire.refused("RequestExpired", now=NOW + timedelta(seconds=301))
    wire.refused("RequestExpired", now=NOW - timedelta(minutes=16))
    wire.refused("SignatureDoesNotMatch", query=wire.query.replace("ListQueues", "PurgeQueue"))
    wire.refused("SignatureDoesNotMatch", query=wire.query.replace("X-Amz-Expires=300", "X-Amz-Expires=3000"))


def test_a_presigned_url_with_unicode_parameters(at_now: None) -> None:
    assert presigned(QueueNamePrefix="é ü+").verify() == AKID


def test_presigned_urls_we_do_not_take(at_now: None) -> None:
    wire = presigned()
    for query in [
        wire.query.replace("AWS4-HMAC-SHA256", "AWS4-ECDSA-P256-SHA256"),
        wire.query.replace("X-Amz-Expires=300", "X-Amz-Expires=0"),
        wire.query.replace("X-Amz-Expires=300", "X-Amz-Expires=604801"),
        wire.query + "&X-Amz-Date=20261125T123244Z",
        "&".join(p for p in wire.query.split("&") if not p.startswith("X-Amz-SignedHeaders=")),
        "&".join(p for p in wire.query.split("&") if not p.startswith("X-Amz-Signature=")),
    ]:
        refusal = wire.refused("MissingAuthenticationToken", query=query)
        assert refusal.message.startswith("presigned URL not accepted: ")
    signed_too = wire.with_headers(authorization=_authorization(GOOD_SCOPE, GOOD_HEADERS, SIG))
    wire.refused("IncompleteSignature", headers=signed_too)


# ---------------------------------------------------------------- boto3 itself, over a socket


class _Recorder(BaseHTTPRequestHandler):
    """Answers every SQS JSON call with {} and keeps what came, as the service would read it."""

    seen: list[Wire]

    def do_POST(self) -> None:
        path, _, query = self.path.partition("?")
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.seen.append(Wire("POST", path, query, headers, body))
        target = self.headers.get("x-amz-target", "")
        answer = json.dumps({"QueueUrls": []} if target == "AmazonSQS.ListQueues" else {})
        self.send_response(200)
        self.send_header("content-type", "application/x-amz-json-1.0")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[Wire]]]:
    seen: list[Wire] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_boto3_over_a_socket(recorder: tuple[str, list[Wire]], at_now: None) -> None:
    endpoint, seen = recorder
    sqs = boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name="ap-southeast-2",
        aws_access_key_id=AKID,
        aws_secret_access_key=SECRET,
        config=Config(retries={"max_attempts": 1}),
    )
    sqs.list_queues(QueueNamePrefix="é ü")
    sqs.delete_message(QueueUrl=f"{endpoint}/000000000000/my.queue-1", ReceiptHandle="h")
    assert len(seen) == 2
    for wire in seen:
        assert wire.verify() == AKID
        assert wire.headers["authorization"].startswith(
            f"AWS4-HMAC-SHA256 Credential={AKID}/20261125/ap-southeast-2/"
        )
        wire.refused("SignatureDoesNotMatch", body=wire.body + b" ")


# ---------------------------------------------------------------- the keyring


def test_the_keyring_finds_a_secret_by_access_key_id() -> None:
    grant = Grant(name="sender", role=Role.PRODUCER, queues=("jobs.*",))
    keyring = Keyring([ApiKey(SECRET, grant, access_key_id=AKID), ApiKey("bearer-only-key-000000001", grant)])
    found = keyring.sigv4(AKID)
    assert found == SigV4Key(SECRET, grant)
    secret, its_grant = found
    assert (secret, its_grant) == (SECRET, grant)
    assert SECRET not in repr(found)
    assert SECRET not in str(found)
    assert keyring.sigv4("AKIDNOBODYKNOWS00001") is None
    assert keyring.sigv4("bearer-only-key-000000001") is None
    assert keyring.grant_for(SECRET) == grant  # the secret is its bearer key too, as before


def test_an_access_key_id_is_given_once() -> None:
    grant = Grant(name="k", role=Role.ADMIN)
    with pytest.raises(ValueError, match="given twice"):
        Keyring([ApiKey("a" * 24, grant, access_key_id=AKID), ApiKey("b" * 24, grant, access_key_id=AKID)])


def test_keyring_for_carries_the_access_key_ids(at_now: None) -> None:
    settings = Settings(
        api_keys=[
            {"key": SECRET, "role": "producer", "access_key_id": AKID, "queues": ["jobs.*"]},
            {"key": "consumer-key-000000001", "role": "consumer"},
        ]
    )
    keyring = keyring_for(settings)
    found = keyring.sigv4(AKID)
    assert found is not None
    assert found.grant.role is Role.PRODUCER
    assert found.grant.queues == ("jobs.*",)

    def secret(akid: str) -> str | None:
        key = keyring.sigv4(akid)
        return key.secret if key else None

    assert signed(json_send()).verify(secrets=secret) == AKID
