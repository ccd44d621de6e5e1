"""HTTP/S endpoints (service.endpoints): which URLs may be reached, and SNS's POST to a real local
server on 127.0.0.1 (plain HTTP and TLS). Host names resolve through a resolver the test gives, so
nothing leaves the machine; that a name is reached at all shows the connection used the checked
address, since the system resolver knows none of these names."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import socket
import ssl
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from uuid import UUID

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from simplequeue.domain.notifications import envelope, signed_fields
from simplequeue.domain.sns_signing import SigningKey, verify
from simplequeue.service.endpoints import (
    PIN_EXTENSION,
    EndpointRefused,
    EndpointRules,
    EndpointUnresolved,
    Outcome,
    Resolver,
    Verdict,
    endpoint_client,
    post_message,
)

TOPIC = "arn:aws:sns:us-east-1:000000000000:orders"
SUBSCRIPTION = TOPIC + ":3f2b2c1e-7d43-4c5e-9a59-1f0b7b0c9d10"
MESSAGE_ID = UUID("22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324")
PUBLIC = "93.184.215.14"
HUGE = 1 << 30


@dataclass
class Received:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


async def read_request(reader: asyncio.StreamReader) -> Received | None:
    """One HTTP/1.1 request off the connection (its body by Content-Length); None once the client
    has closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    first, *lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    method, target, _ = first.split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Received(method, target, headers, body)


@dataclass
class Endpoint:
    """A small HTTP/1.1 server: /status/<code> answers that code, /redirect a 302, /hang never
    answers (until the client hangs up), /huge starts a 1 GiB body."""

    received: list[Received] = field(default_factory=list)
    huge_sent: int = 0
    server_names: list[str | None] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await read_request(reader)
                if request is None:
                    return
                self.received.append(request)
                target = request.target
                if target == "/hang":
                    await reader.read()  # until the client gives up and closes
                    return
                if target == "/huge":
                    await self._huge(writer)
                    return
                if target.startswith(("/cut/", "/slow/")):
                    # A status line and a body shorter than announced: then hang up, or stall.
                    status = target.rsplit("/", 1)[1]
                    writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: 100\r\n\r\nok".encode())
                    await writer.drain()
                    if target.startswith("/slow/"):
                        await reader.read()
                    return
                if target == "/redirect":
                    writer.write(b"HTTP/1.1 302 Found\r\nLocation: /status/200\r\nContent-Length: 0\r\n\r\n")
                else:
                    status = int(target.removeprefix("/status/")) if target.startswith("/status/") else 200
                    writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: 2\r\n\r\nok".encode())
                await writer.drain()
        finally:
            writer.close()

    async def _huge(self, writer: asyncio.StreamWriter) -> None:
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Length: {HUGE}\r\n\r\n".encode())
        chunk = b"x" * 65536
        try:
            while self.huge_sent < HUGE:
                writer.write(chunk)
                await writer.drain()
                self.huge_sent += len(chunk)
        except ConnectionError:
            return


async def serve(endpoint: Endpoint, tls: ssl.SSLContext | None = None) -> asyncio.Server:
    server = await asyncio.start_server(endpoint.handle, "127.0.0.1", 0, ssl=tls)
    endpoint.port = server.sockets[0].getsockname()[1]
    return server


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    e = Endpoint()
    server = await serve(e)
    async with server:
        yield e
        server.close()


def resolver(table: dict[str, Sequence[str]]) -> Resolver:
    async def resolve(host: str, port: int) -> Sequence[str]:
        if host not in table:
            raise EndpointUnresolved("the endpoint's host does not resolve")
        return table[host]

    return resolve


LOCAL = resolver({"endpoint.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with endpoint_client() as c:
        yield c


def notification(key: SigningKey | None = None) -> dict[str, object]:
    signed = signed_fields(
        MESSAGE_ID, TOPIC, 'Grüße\n{"order": 7}', "Order placed", dt.datetime(2026, 11, 28, 12, tzinfo=dt.UTC)
    )
    key = key or SigningKey.generate("sns.test")
    return envelope(
        signed,
        signature_version="2",
        signature=key.sign(signed, "2"),
        signing_cert_url="https://sq.example.test/sns/certificate.pem",
        unsubscribe_url="https://sq.example.test/?Action=Unsubscribe&SubscriptionArn=" + SUBSCRIPTION,
        attributes={},
    )


async def send(
    client: httpx.AsyncClient,
    url: str,
    message: dict[str, object] | None = None,
    *,
    rules: EndpointRules | None = None,
    message_type: str = "Notification",
    raw: bool = False,
    **kwargs: object,
) -> Outcome:
    return await post_message(
        client,
        url,
        message or notification(),
        rules=rules or EndpointRules(["127.0.0.1/32"]),
        message_type=message_type,
        topic_arn=TOPIC,
        subscription_arn=SUBSCRIPTION,
        raw=raw,
        **kwargs,  # type: ignore[arg-type]
    )


# --- the POST ---


async def test_a_signed_notification_arrives_as_sns_sends_it(
    endpoint: Endpoint, client: httpx.AsyncClient
) -> None:
    key = SigningKey.generate("sns.test")
    message = notification(key)
    outcome = await send(client, f"http://127.0.0.1:{endpoint.port}/hook?x=1", message)
    assert outcome == Outcome(Verdict.DELIVERED, "HTTP 200", 200)
    [got] = endpoint.received
    assert (got.method, got.target) == ("POST", "/hook?x=1")
    assert got.headers["x-amz-sns-message-type"] == "Notification"
    assert got.headers["x-amz-sns-message-id"] == str(MESSAGE_ID)
    assert got.headers["x-amz-sns-topic-arn"] == TOPIC
    assert got.headers["x-amz-sns-subscription-arn"] == SUBSCRIPTION
    assert got.headers["content-type"] == "text/plain; charset=UTF-8"
    assert "simplequeue" in got.headers["user-agent"]
    assert "x-amz-sns-rawdelivery" not in got.headers
    body = json.loads(got.body.decode("utf-8"))
    assert body == message
    assert verify(body, key.certificate_pem())
    body["Message"] = "tampered"
    assert not verify(body, key.certificate_pem())


async def test_a_subscription_confirmation_names_no_subscription(
    endpoint: Endpoint, client: httpx.AsyncClient
) -> None:
    confirmation: dict[str, object] = {
        "Type": "SubscriptionConfirmation",
        "MessageId": str(MESSAGE_ID),
        "Token": "2336412f37fb",
        "TopicArn": TOPIC,
        "Message": "You have chosen to subscribe to the topic.",
        "SubscribeURL": "https://sq.example.test/?Action=ConfirmSubscription",
        "Timestamp": "2026-11-28T12:00:00.000Z",
    }
    outcome = await send(
        client, f"http://127.0.0.1:{endpoint.port}/", confirmation, message_type="SubscriptionConfirmation"
    )
    assert outcome.delivered
    [got] = endpoint.received
    assert got.headers["x-amz-sns-message-type"] == "SubscriptionConfirmation"
    assert "x-amz-sns-subscription-arn" not in got.headers


async def test_raw_delivery_posts_the_message_alone(endpoint: Endpoint, client: httpx.AsyncClient) -> None:
    outcome = await send(
        client, f"http://127.0.0.1:{endpoint.port}/", raw=True, content_type="application/json"
    )
    assert outcome.delivered
    [got] = endpoint.received
    assert got.body == 'Grüße\n{"order": 7}'.encode()
    assert got.headers["x-amz-sns-rawdelivery"] == "true"
    assert got.headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (200, Verdict.DELIVERED),
        (204, Verdict.DELIVERED),
        (500, Verdict.RETRY),
        (503, Verdict.RETRY),
        (429, Verdict.RETRY),
        (400, Verdict.FAILED),
        (403, Verdict.FAILED),
        (404, Verdict.FAILED),
    ],
)
async def test_status_codes(
    endpoint: Endpoint, client: httpx.AsyncClient, status: int, verdict: Verdict
) -> None:
    outcome = await send(client, f"http://127.0.0.1:{endpoint.port}/status/{status}")
    assert (outcome.verdict, outcome.status, outcome.reason) == (verdict, status, f"HTTP {status}")


async def test_a_redirect_is_not_followed(endpoint: Endpoint, client: httpx.AsyncClient) -> None:
    outcome = await send(client, f"http://127.0.0.1:{endpoint.port}/redirect")
    assert outcome == Outcome(Verdict.RETRY, "HTTP 302: a redirect, not followed", 302)
    assert [r.target for r in endpoint.received] == ["/redirect"]


async def test_an_endpoint_that_never_answers_times_out_as_a_retry(
    endpoint: Endpoint, client: httpx.AsyncClient
) -> None:
    outcome = await send(client, f"http://127.0.0.1:{endpoint.port}/hang", timeout_seconds=0.5)
    assert outcome == Outcome(Verdict.RETRY, "the endpoint did not answer within 0.5 s")
    assert [r.target for r in endpoint.received] == ["/hang"]


async def test_a_huge_answer_is_read_only_up_to_the_cap(
    endpoint: Endpoint, client: httpx.AsyncClient
) -> None:
    outcome = await send(client, f"http://127.0.0.1:{endpoint.port}/huge", max_response_bytes=64 * 1024)
    assert outcome.delivered
    # The client hung up after the cap: the server got nowhere near the 1 GiB it announced (what
    # it managed to write is the cap plus what the sockets' buffers took).
    assert endpoint.huge_sent < 64 * 1024 * 1024


async def test_the_status_decides_even_when_the_answer_is_cut_short(
    endpoint: Endpoint, client: httpx.AsyncClient
) -> None:
    outcome = await send(client, f"http://127.0.0.1:{endpoint.port}/cut/200")
    assert outcome == Outcome(Verdict.DELIVERED, "HTTP 200", 200)
    outcome = await send(client, f"http://127.0.0.1:{endpoint.port}/cut/503")
    assert outcome == Outcome(Verdict.RETRY, "HTTP 503", 503)
    slow = await send(client, f"http://127.0.0.1:{endpoint.port}/slow/200", timeout_seconds=0.5)
    assert slow == Outcome(Verdict.DELIVERED, "HTTP 200", 200)


async def test_a_closed_port_is_a_retry(client: httpx.AsyncClient) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    outcome = await send(client, f"http://127.0.0.1:{port}/")
    assert outcome == Outcome(Verdict.RETRY, "could not connect to the endpoint")


async def test_reasons_name_neither_the_url_nor_the_message(client: httpx.AsyncClient) -> None:
    secret = "s3cret-token"
    message = notification()
    message["Message"] = secret
    for url in (f"http://10.0.0.1/?token={secret}", f"ftp://h/{secret}", f"http://{secret}.test/"):
        outcome = await send(client, url, message, rules=EndpointRules(["*"], resolver=resolver({})))
        assert secret not in outcome.reason
        assert "\n" not in outcome.reason


async def test_an_unresolvable_host_is_a_retry(client: httpx.AsyncClient) -> None:
    outcome = await send(client, "http://gone.test/", rules=EndpointRules(["*"], resolver=resolver({})))
    assert outcome == Outcome(Verdict.RETRY, "the endpoint's host does not resolve")


async def test_a_refused_endpoint_is_a_permanent_failure(client: httpx.AsyncClient) -> None:
    outcome = await send(
        client, "http://169.254.169.254/latest/meta-data/", rules=EndpointRules(["0.0.0.0/0"])
    )
    assert outcome.verdict is Verdict.FAILED
    assert outcome.reason == "the endpoint's host is a cloud metadata or link-local address"


# --- pinning ---


async def test_a_host_name_is_reached_at_the_address_that_was_checked(
    endpoint: Endpoint, client: httpx.AsyncClient
) -> None:
    rules = EndpointRules(["endpoint.test", "127.0.0.1/32"], resolver=LOCAL)
    outcome = await send(client, f"http://endpoint.test:{endpoint.port}/hook", rules=rules)
    assert outcome.delivered
    [got] = endpoint.received
    assert got.headers["host"] == f"endpoint.test:{endpoint.port}"


async def test_the_name_is_resolved_once_per_post_and_the_connection_uses_that_answer(
    endpoint: Endpoint, client: httpx.AsyncClient
) -> None:
    answers = iter([["127.0.0.1"], ["10.9.9.9"]])
    asked: list[str] = []

    async def rebinding(host: str, port: int) -> Sequence[str]:
        asked.append(host)
        return next(answers)

    rules = EndpointRules(["endpoint.test", "127.0.0.1/32"], resolver=rebinding)
    assert (await send(client, f"http://endpoint.test:{endpoint.port}/", rules=rules)).delivered
    assert asked == ["endpoint.test"]
    # The second resolution answers a private address: refused before anything is sent.
    outcome = await send(client, f"http://endpoint.test:{endpoint.port}/", rules=rules)
    assert outcome.verdict is Verdict.FAILED
    assert len(endpoint.received) == 1


async def test_the_pinned_client_sends_nothing_without_a_checked_destination(
    endpoint: Endpoint, client: httpx.AsyncClient
) -> None:
    with pytest.raises(httpx.ConnectError):
        await client.post(f"http://127.0.0.1:{endpoint.port}/")
    rules = EndpointRules(["127.0.0.1/32"])
    elsewhere = await rules.destination(f"http://127.0.0.1:{endpoint.port}/")
    with pytest.raises(httpx.ConnectError):  # a destination for another host
        await client.post(f"http://endpoint.test:{endpoint.port}/", extensions={PIN_EXTENSION: elsewhere})
    assert endpoint.received == []


async def test_post_message_will_not_send_with_a_client_that_resolves_names() -> None:
    async with httpx.AsyncClient() as plain:
        with pytest.raises(TypeError, match="endpoint_client"):
            await send(plain, "http://127.0.0.1:9/")


def _certificate(name: str, directory: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a self-signed certificate for `name`, and a client context trusting it."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client


async def test_https_sends_the_name_for_sni_and_verifies_the_certificate_against_it(tmp_path: Path) -> None:
    server_context, client_context = _certificate("endpoint.test", tmp_path)
    e = Endpoint()

    def remember(sock: ssl.SSLObject, name: str | None, context: ssl.SSLContext) -> None:
        e.server_names.append(name)

    server_context.sni_callback = remember  # type: ignore[assignment]
    server = await serve(e, server_context)
    rules = EndpointRules(["*.test", "127.0.0.1/32"], resolver=LOCAL)
    async with server, endpoint_client(ssl_context=client_context) as c:
        outcome = await send(c, f"https://endpoint.test:{e.port}/hook", rules=rules)
        assert outcome.delivered
        assert e.server_names == ["endpoint.test"]
        assert e.received[0].headers["host"] == f"endpoint.test:{e.port}"
        # Same address, another name: the certificate does not name it, so nothing is sent.
        other = await send(c, f"https://other.test:{e.port}/hook", rules=rules)
        assert other == Outcome(Verdict.RETRY, "could not connect to the endpoint")
        assert len(e.received) == 1
        server.close()


# --- the rules ---


async def refusal(rules: EndpointRules, url: str) -> str:
    with pytest.raises(EndpointRefused) as caught:
        await rules.check(url)
    return caught.value.reason


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.1:8080/", ["127.0.0.1/32"]),
        ("http://127.0.0.1:8080/", ["127.0.0.1"]),
        ("http://127.0.0.1:8080/", ["127.0.0.0/8"]),
        ("http://[::1]:8080/", ["::1"]),
        ("http://10.1.2.3/", ["10.0.0.0/8"]),
        ("http://[fd12::1]/", ["fd12::/16"]),
    ],
)
async def test_special_addresses_need_their_network_listed(url: str, allowed: list[str]) -> None:
    await EndpointRules(allowed).check(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/",
        "http://[::1]:8080/",
        "http://0.0.0.0/",
        "http://[::]/",
        "http://10.1.2.3/",
        "http://192.168.1.1/",
        "http://100.64.0.1/",
        "http://224.0.0.1/",
        "http://[ff02::1]/",
        "http://[fc00::1]/",
        "http://240.0.0.1/",
        "http://[::ffff:127.0.0.1]/",
    ],
)
async def test_a_catch_all_network_opens_no_special_address(url: str) -> None:
    reason = await refusal(EndpointRules(["0.0.0.0/0", "::/0", "*"]), url)
    assert reason == "the endpoint's host is a loopback, private or reserved address that is not allowed"


@pytest.mark.parametrize("allowed", [["127.0.0.2/32"], ["*"], []])
async def test_loopback_is_not_allowed_unless_listed(allowed: list[str]) -> None:
    assert (
        await refusal(EndpointRules(allowed), "http://127.0.0.1:8080/")
        == "the endpoint's host is not allowed"
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://169.254.170.2/v2/credentials",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://100.100.100.200/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[fe80::1]/",
    ],
)
@pytest.mark.parametrize(
    "allowed",
    [["0.0.0.0/0", "::/0"], ["169.254.0.0/16", "fd00::/8", "fe80::/10", "100.64.0.0/10", "::/0"]],
)
async def test_metadata_and_link_local_are_refused_whatever_is_allowed(url: str, allowed: list[str]) -> None:
    reason = await refusal(EndpointRules(allowed), url)
    assert reason == "the endpoint's host is a cloud metadata or link-local address"


async def test_a_name_resolving_to_metadata_is_refused() -> None:
    rules = EndpointRules(["*"], resolver=resolver({"innocent.test": ["169.254.169.254"]}))
    assert await refusal(rules, "http://innocent.test/") == (
        "the endpoint's host is a cloud metadata or link-local address"
    )


async def test_a_name_resolving_to_a_private_address_needs_its_network() -> None:
    table = resolver({"internal.test": ["10.1.2.3"]})
    assert await refusal(EndpointRules(["internal.test"], resolver=table), "http://internal.test/") == (
        "the endpoint's host is a loopback, private or reserved address that is not allowed"
    )
    await EndpointRules(["internal.test", "10.0.0.0/8"], resolver=table).check("http://internal.test/")
    await EndpointRules(["10.1.2.0/24"], resolver=table).check("http://internal.test/")


async def test_every_resolved_address_must_pass() -> None:
    table = resolver({"mixed.test": [PUBLIC, "127.0.0.1"]})
    assert await refusal(EndpointRules(["*"], resolver=table), "http://mixed.test/") == (
        "the endpoint's host is a loopback, private or reserved address that is not allowed"
    )


async def test_names_listed_exactly_or_under_a_domain() -> None:
    table = resolver(
        {n: [PUBLIC] for n in ("hooks.example.com", "example.com", "a.b.example.com", "evil.com")}
    )
    rules = EndpointRules(["*.example.com", "EVIL.com."], resolver=table)
    await rules.check("https://hooks.example.com/sns")
    await rules.check("https://a.b.example.com/sns")
    await rules.check("http://evil.com./")
    assert await refusal(rules, "https://example.com/") == "the endpoint's host is not allowed"
    assert await refusal(rules, f"https://{PUBLIC}/") == "the endpoint's host is not allowed"
    await EndpointRules(["0.0.0.0/0"], resolver=table).check("https://example.com/")
    await EndpointRules(["93.184.215.0/24"]).check(f"http://{PUBLIC}:8080/")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("file:///etc/passwd", "the endpoint's scheme must be http or https"),
        ("ftp://example.com/", "the endpoint's scheme must be http or https"),
        ("gopher://127.0.0.1:6379/", "the endpoint's scheme must be http or https"),
        ("http://user:pass@example.com/", "the endpoint's URL must not carry a user name or password"),
        ("http://user@example.com/", "the endpoint's URL must not carry a user name or password"),
        ("http:///nohost", "the endpoint's URL has no host"),
        ("http://%31%32%37.0.0.1/", "the endpoint's host is not a valid host name"),
        ("not a url at all", "the endpoint's scheme must be http or https"),
        ("http://example.com:0/", "the endpoint's port is not valid"),
    ],
)
async def test_urls_refused_before_any_lookup(url: str, reason: str) -> None:
    async def never(host: str, port: int) -> Sequence[str]:
        raise AssertionError("resolved")

    assert await refusal(EndpointRules(["*", "0.0.0.0/0"], resolver=never), url) == reason


async def test_an_unresolvable_name_is_unresolved_not_refused() -> None:
    with pytest.raises(EndpointUnresolved):
        await EndpointRules(["*"], resolver=resolver({})).check("http://gone.test/")


async def test_the_destination_pins_the_first_checked_address() -> None:
    table = resolver({"two.test": [PUBLIC, "93.184.215.15"]})
    d = await EndpointRules(["two.test"], resolver=table).destination("https://Two.TEST/x")
    assert (d.host, d.port, d.address) == ("two.test", 443, PUBLIC)
    assert ipaddress.ip_address(d.address).is_global


@pytest.mark.parametrize("entry", ["10.0.0.1/8", "300.1.1.1", "::g", "bad host!", "*.", "a..b"])
def test_malformed_rules_are_refused_when_made(entry: str) -> None:
    with pytest.raises(ValueError, match="not a"):
        EndpointRules([entry])


async def test_rules_from_a_setting() -> None:
    rules = EndpointRules.from_setting(" hooks.example.com, 10.0.0.0/8\n127.0.0.1 ", resolver=resolver({}))
    await rules.check("http://10.1.1.1/")
    await rules.check("http://127.0.0.1/")
    assert (
        await refusal(EndpointRules.from_setting(""), "http://127.0.0.1/")
        == "the endpoint's host is not allowed"
    )
