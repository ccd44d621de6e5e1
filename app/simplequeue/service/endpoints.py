"""Sending SNS messages to HTTP/S subscribers: which endpoints we may reach, and one POST as SNS
makes it (AWS's "HTTP/HTTPS headers" and "Fanout to HTTP/S endpoints" pages).

An endpoint's URL comes from whoever may subscribe, so reaching it is a server-side request made on
their behalf. EndpointRules decides where that may go (an allow-list from a setting), and checks the
addresses the host resolves to, not only its name: a public name can resolve to 127.0.0.1 or to a
cloud's metadata service. Cloud metadata and link-local addresses are refused whatever the list says.

The connection then goes to the address that was checked, never to a fresh resolution of the name
(DNS rebinding: a name that answers a public address to the check and 127.0.0.1 to the connect).
endpoint_client() builds an httpx client whose transport resolves nothing: its network backend
connects only to the address post_message pinned for the request's host and port, and refuses any
connection it was not given one for. The URL keeps its host name, so the Host header, TLS SNI and
certificate verification all name the host as usual; pooled connections are keyed by that name and
were each opened to an address checked for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ipaddress
import json
import socket
import ssl
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import httpcore
import httpx

from simplequeue.domain.delivery_policy import DEFAULT_CONTENT_TYPE
from simplequeue.domain.endpoint_hosts import HOST_NAME, AllowList, IPNetwork

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""(host, port) -> the IP addresses it resolves to, as text."""

USER_AGENT = "simplequeue SNS Agent (Amazon Simple Notification Service compatible)"
SCHEMES = {"http": 80, "https": 443}

ALWAYS_REFUSED: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "169.254.0.0/16",  # link-local: AWS, GCP, Azure, OpenStack metadata at 169.254.169.254
        "100.100.100.200/32",  # Alibaba Cloud's metadata
        "192.0.0.192/32",  # Oracle Cloud's (classic) metadata
        "fe80::/10",  # IPv6 link-local
        "fd00:ec2::/32",  # AWS's IPv6 metadata (fd00:ec2::254), DNS and time servers
    )
)
"""Never reachable, whatever the allow-list says: a subscriber must not read the host's credentials."""

SPECIAL: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "::1/128",
        "64:ff9b::/96",
        "64:ff9b:1::/48",
        "100::/64",
        "2001::/23",
        "2001:db8::/32",
        "2002::/16",
        "fc00::/7",
        "fec0::/10",
        "ff00::/8",
    )
)
"""Special-purpose blocks (IANA's registries): loopback, private, shared, documentation,
multicast, reserved, unspecified. An address in one is reachable only through a listed network
inside that block: 127.0.0.1/32 or 10.0.0.0/8 open theirs, 0.0.0.0/0 opens none of them."""


class EndpointRefused(Exception):
    """An endpoint this service will not send to; ``reason`` is one line naming no secret."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class EndpointUnresolved(EndpointRefused):
    """The host did not resolve: worth trying again later, unlike a refusal."""


@dataclass(frozen=True, slots=True)
class Destination:
    """A checked endpoint: its URL, and the address a connection to its host and port must use."""

    url: httpx.URL
    host: str
    port: int
    address: str


async def system_resolver(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as error:
        raise EndpointUnresolved("the endpoint's host does not resolve") from error
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 one carries to (mapped, 6to4, NAT64, Teredo): checked as well."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if address in ipaddress.ip_network("64:ff9b::/96"):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.teredo is not None:
        found.append(address.teredo[1])
    return found


class EndpointRules:
    """Where HTTP/S endpoints may point. Each entry of `allowed` is a host name ("hooks.example.com"),
    every name under a domain ("*.example.com"), any name ("*"), an IP address or a CIDR network
    ("203.0.113.0/24", "0.0.0.0/0", "::/0").

    A URL passes when: its scheme is http or https; it carries no user or password; its host is
    a listed name, or every address the host resolves to lies in a listed network; and no resolved
    address is refused: cloud metadata and link-local addresses always are, special-purpose ones
    (loopback, private, multicast, unspecified, reserved...) unless a listed network inside their
    block holds them."""

    def __init__(self, allowed: Sequence[str] | AllowList, *, resolver: Resolver | None = None) -> None:
        listed = allowed if isinstance(allowed, AllowList) else AllowList.parse(allowed)
        self._names = listed.names
        self._suffixes = listed.suffixes
        self._networks = listed.networks
        self._any_name = listed.any_name
        self._resolve: Resolver = resolver or system_resolver

    @classmethod
    def from_setting(cls, text: str, *, resolver: Resolver | None = None) -> EndpointRules:
        """Rules from one setting's value: entries separated by commas or white space."""
        return cls(AllowList.from_setting(text), resolver=resolver)

    def _name_listed(self, host: str) -> bool:
        return self._any_name or host in self._names or host.endswith(self._suffixes)

    def _in_listed_network(self, address: IPAddress) -> bool:
        return any(address in n for n in self._networks if n.version == address.version)

    def _opened(self, address: IPAddress) -> bool:
        """Whether a listed network opens this special-purpose address."""
        blocks = [b for b in SPECIAL if b.version == address.version and address in b]
        for n in self._networks:
            if n.version != address.version or address not in n:
                continue
            if blocks and any(n.subnet_of(b) for b in blocks):  # type: ignore[arg-type]
                return True
            if not blocks and n.prefixlen == n.max_prefixlen:
                return True
        return False

    def _refusal(self, address: IPAddress) -> str | None:
        """Why this address may not be reached, or None."""
        candidates = (address, *_embedded_ipv4(address))
        for candidate in candidates:
            if any(candidate in n for n in ALWAYS_REFUSED if n.version == candidate.version):
                return "the endpoint's host is a cloud metadata or link-local address"
        for candidate in candidates:
            special = (
                not candidate.is_global
                or candidate.is_multicast
                or candidate.is_reserved
                or candidate.is_unspecified
                or any(candidate in b for b in SPECIAL if b.version == candidate.version)
            )
            if special and not self._opened(candidate):
                return "the endpoint's host is a loopback, private or reserved address that is not allowed"
        return None

    @staticmethod
    def parse(url: str) -> tuple[httpx.URL, str, int]:
        """The URL, its host (lower case, IDNA) and port, or EndpointRefused for what it cannot be."""
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError, UnicodeError):
            raise EndpointRefused("the endpoint is not a valid URL") from None
        if parsed.scheme not in SCHEMES:
            raise EndpointRefused("the endpoint's scheme must be http or https")
        if parsed.userinfo:
            raise EndpointRefused("the endpoint's URL must not carry a user name or password")
        host = parsed.raw_host.decode("ascii").lower().rstrip(".")
        if not host:
            raise EndpointRefused("the endpoint's URL has no host")
        port = SCHEMES[parsed.scheme] if parsed.port is None else parsed.port
        if not 0 < port < 65536:
            raise EndpointRefused("the endpoint's port is not valid")
        return parsed, host, port

    async def destination(self, url: str) -> Destination:
        """The URL checked, with the address to connect to; EndpointRefused (EndpointUnresolved
        when the host does not resolve) otherwise. Resolves the host unless it is an address."""
        parsed, host, port = self.parse(url)
        try:
            literal: IPAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
            if not HOST_NAME.match(host):
                raise EndpointRefused("the endpoint's host is not a valid host name") from None
        if literal is not None:
            addresses: list[IPAddress] = [literal]
        else:
            try:
                addresses = [
                    ipaddress.ip_address(a.split("%", 1)[0]) for a in await self._resolve(host, port)
                ]
            except ValueError:
                raise EndpointUnresolved(
                    "the endpoint's host resolved to something that is no address"
                ) from None
            if not addresses:
                raise EndpointUnresolved("the endpoint's host does not resolve")
        listed = (literal is None and self._name_listed(host)) or all(
            self._in_listed_network(a) for a in addresses
        )
        if not listed:
            raise EndpointRefused("the endpoint's host is not allowed")
        for address in addresses:
            reason = self._refusal(address)
            if reason is not None:
                raise EndpointRefused(reason)
        return Destination(url=parsed, host=host, port=port, address=str(addresses[0]))

    async def check(self, url: str) -> None:
        """EndpointRefused unless `url` may be sent to (its host resolved and checked now)."""
        await self.destination(url)


# The address a connection to (host, port) must go to, set for one request by PinnedTransport.
_PIN: contextvars.ContextVar[Destination | None] = contextvars.ContextVar("simplequeue_sns_pin", default=None)
PIN_EXTENSION = "simplequeue.destination"


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects only to the pinned address of the request being sent; never resolves a name."""

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        pin = _PIN.get()
        if pin is None or pin.host != host.lower().rstrip(".") or pin.port != port:
            raise httpcore.ConnectError("no checked address for this host and port")
        return await self._inner.connect_tcp(
            pin.address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("endpoints are reached over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextlib.contextmanager
def _httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as error:
        for core, mapped in _ERRORS:
            if isinstance(error, core):
                raise mapped(str(error)) from error
        raise


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        if hasattr(self._stream, "aclose"):
            with _httpx_errors():
                await self._stream.aclose()


class PinnedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends only requests carrying a Destination (the PIN_EXTENSION
    request extension), connecting to its checked address. HTTP/1.1, no proxy (an environment's
    proxy would reach the endpoint from elsewhere, unchecked)."""

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = 8,
        max_origins: int = 256,
    ) -> None:
        """max_connections: per origin (scheme, host, port). Each origin has a pool of its own:
        httpcore's pool checks each of its connections for every request it places, so one pool
        for every endpoint spent most of a busy deliverer's time on that."""
        self._ssl_context = ssl_context or httpx.create_ssl_context()
        self._max_connections = max_connections
        self._max_origins = max_origins
        self._pools: OrderedDict[tuple[bytes, bytes, int | None], httpcore.AsyncConnectionPool] = (
            OrderedDict()
        )
        self._closing: set[asyncio.Future[None]] = set()

    def _pool_for(self, origin: tuple[bytes, bytes, int | None]) -> httpcore.AsyncConnectionPool:
        pool = self._pools.get(origin)
        if pool is not None:
            self._pools.move_to_end(origin)
            return pool
        if len(self._pools) >= self._max_origins:
            # The origin used least recently: its idle connections close with it (a request still
            # on one fails and is retried: there is room for this many origins in use at once).
            _, oldest = self._pools.popitem(last=False)
            closing = asyncio.ensure_future(oldest.aclose())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        pool = httpcore.AsyncConnectionPool(
            ssl_context=self._ssl_context,
            max_connections=self._max_connections,
            max_keepalive_connections=self._max_connections,
            keepalive_expiry=30.0,
            network_backend=_PinnedBackend(),
        )
        self._pools[origin] = pool
        return pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        pin = request.extensions.get(PIN_EXTENSION)
        host = request.url.raw_host.decode("ascii").lower().rstrip(".")
        if not isinstance(pin, Destination) or pin.host != host:
            raise httpx.ConnectError(
                "the request carries no checked destination for its host", request=request
            )
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions={k: v for k, v in request.extensions.items() if k != PIN_EXTENSION},
        )
        token = _PIN.set(pin)
        try:
            with _httpx_errors():
                pool = self._pool_for((request.url.raw_scheme, request.url.raw_host, request.url.port))
                response = await pool.handle_async_request(core)
        finally:
            _PIN.reset(token)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), OrderedDict()
        await asyncio.gather(*(pool.aclose() for pool in pools), *self._closing, return_exceptions=True)


def endpoint_client(
    *, ssl_context: ssl.SSLContext | None = None, max_connections: int = 8
) -> httpx.AsyncClient:
    """The client post_message sends with: pinned connections, no proxies from the environment,
    no redirects, no cookies kept between endpoints' answers."""
    return httpx.AsyncClient(
        transport=PinnedTransport(ssl_context=ssl_context, max_connections=max_connections),
        trust_env=False,
        follow_redirects=False,
    )


class Verdict(StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"
    """Worth another attempt under the delivery policy."""
    FAILED = "failed"
    """Permanent: retrying cannot help (SNS drops it, or sends it to the dead-letter queue)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Verdict
    reason: str
    """One line for logs and the dead-letter queue: never the message, the URL or a secret."""
    status: int | None = None

    @property
    def delivered(self) -> bool:
        return self.verdict is Verdict.DELIVERED


def _verdict_for(status: int) -> Verdict:
    # AWS's guide: an endpoint answering outside 200-4xx, or not within ~15 s, is retried; 4xx is
    # not, except 429 (throttled). A redirect is not followed, and counts as outside the range.
    if 200 <= status < 300:
        return Verdict.DELIVERED
    if 400 <= status < 500 and status != 429:
        return Verdict.FAILED
    return Verdict.RETRY


def _transport_reason(error: httpx.TransportError) -> str:
    if isinstance(error, httpx.ConnectError):
        return "could not connect to the endpoint"
    if isinstance(error, httpx.RemoteProtocolError):
        return "the endpoint's answer was not valid HTTP"
    if isinstance(error, httpx.ReadError | httpx.WriteError):
        return "the connection to the endpoint failed mid-request"
    return f"the request to the endpoint failed ({type(error).__name__})"


def message_body(message: Mapping[str, object], *, raw: bool) -> bytes:
    """What the POST carries: the JSON message, or with raw delivery its Message alone."""
    if raw:
        text = message.get("Message")
        if not isinstance(text, str):
            raise ValueError("raw delivery needs the message's Message as a string")
        return text.encode("utf-8")
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def message_headers(
    message: Mapping[str, object],
    *,
    message_type: str,
    topic_arn: str,
    subscription_arn: str | None,
    raw: bool,
    content_type: str = DEFAULT_CONTENT_TYPE,
) -> dict[str, str]:
    headers = {
        "x-amz-sns-message-type": message_type,
        "x-amz-sns-message-id": str(message.get("MessageId", "")),
        "x-amz-sns-topic-arn": topic_arn,
    }
    # A SubscriptionConfirmation goes out before there is a confirmed subscription to name.
    if subscription_arn is not None and message_type != "SubscriptionConfirmation":
        headers["x-amz-sns-subscription-arn"] = subscription_arn
    if raw:
        headers["x-amz-sns-rawdelivery"] = "true"
    headers["Content-Type"] = content_type
    headers["User-Agent"] = USER_AGENT
    return headers


async def post_message(
    client: httpx.AsyncClient,
    url: str,
    message: Mapping[str, object],
    *,
    rules: EndpointRules,
    message_type: str,
    topic_arn: str,
    subscription_arn: str | None,
    raw: bool,
    timeout_seconds: float = 15,
    max_response_bytes: int = 64 * 1024,
    content_type: str = DEFAULT_CONTENT_TYPE,
) -> Outcome:
    """POST one SNS message to an HTTP/S endpoint, as SNS does, and say how it went.

    `client` must come from endpoint_client() (TypeError otherwise: another client would resolve
    the host again). The whole attempt (resolving, connecting, sending, reading the answer) is bounded
    by timeout_seconds; at most max_response_bytes of the answer are read, and dropped."""
    if not isinstance(getattr(client, "_transport", None), PinnedTransport):
        raise TypeError("post_message sends with a client from endpoint_client() only")
    body = message_body(message, raw=raw)
    headers = message_headers(
        message,
        message_type=message_type,
        topic_arn=topic_arn,
        subscription_arn=subscription_arn,
        raw=raw,
        content_type=content_type,
    )
    response: httpx.Response | None = None
    try:
        async with asyncio.timeout(timeout_seconds):
            destination = await rules.destination(url)
            request = client.build_request(
                "POST",
                destination.url,
                content=body,
                headers=headers,
                timeout=httpx.Timeout(timeout_seconds),
                extensions={PIN_EXTENSION: destination},
            )
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                seen = 0
                async for chunk in response.aiter_raw():
                    seen += len(chunk)
                    if seen >= max_response_bytes:
                        break
            finally:
                await response.aclose()
    except EndpointUnresolved as error:
        return Outcome(Verdict.RETRY, error.reason)
    except EndpointRefused as error:
        return Outcome(Verdict.FAILED, error.reason)
    except (TimeoutError, httpx.TimeoutException):
        if response is None:
            return Outcome(Verdict.RETRY, f"the endpoint did not answer within {timeout_seconds:g} s")
    except httpx.TransportError as error:
        if response is None:
            return Outcome(Verdict.RETRY, _transport_reason(error))
    # Once the status line is in, it decides: an answer's body cut short or slow changes nothing.
    status = response.status_code
    verdict = _verdict_for(status)
    if verdict is Verdict.DELIVERED:
        reason = f"HTTP {status}"
    elif 300 <= status < 400:
        reason = f"HTTP {status}: a redirect, not followed"
    else:
        reason = f"HTTP {status}"
    return Outcome(verdict, reason, status)


__all__ = [
    "ALWAYS_REFUSED",
    "USER_AGENT",
    "Destination",
    "EndpointRefused",
    "EndpointRules",
    "EndpointUnresolved",
    "Outcome",
    "PinnedTransport",
    "Resolver",
    "Verdict",
    "endpoint_client",
    "message_body",
    "message_headers",
    "post_message",
    "system_resolver",
]
