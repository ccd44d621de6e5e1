"""A small HTTP/1.1 round-robin proxy on 127.0.0.1 that loses answers on purpose.

Each request a client sends is forwarded to the next backend in turn; a backend that refuses the
connection (killed, stopped, restarting) is skipped. Every forwarded request goes on a connection
of its own, closed after the answer (`Connection: close`), so a backend that dies mid-request only
fails that request: the client gets a 502, as from a real proxy, and the proxy never re-sends a
request itself (re-sending is the client's business, and what the tests look at).

Losing answers: for a seeded random fraction of the requests that `lossy` picks (pushes, say), the
proxy forwards the request, reads the whole answer, and then drops the client's connection (a
reset) without sending it. The backend did the work and the client never hears so: the client's
view of a network or a load balancer that loses an answer after the commit.

Only what httpx sends for these tests is understood: bodies framed by Content-Length (no chunked
requests). Everything is bounded: requests per connection, idle waits, backend answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MAX_HEAD_BYTES = 64 * 1024
MAX_REQUESTS_PER_CONNECTION = 100_000
CLIENT_IDLE_SECONDS = 60.0  # a keep-alive client connection idle this long is closed
CONNECT_SECONDS = 2.0
BAD_GATEWAY = (
    b"HTTP/1.1 502 Bad Gateway\r\ncontent-type: application/json\r\ncontent-length: 24\r\n\r\n"
    b'{"error": "BadGateway"}\n'
)
HOP_BY_HOP = (b"connection", b"keep-alive", b"proxy-connection", b"te", b"upgrade")


@dataclass
class ProxyStats:
    requests: int = 0  # read from clients
    forwarded: int = 0  # answered by a backend
    lost: int = 0  # of those, answers dropped on purpose
    bad_gateway: int = 0  # no backend answered (all refused, or the one chosen failed mid-request)
    refused: int = 0  # backends skipped because they refused the connection


def _headers(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    headers = []
    for line in lines:
        name, _, value = line.partition(b":")
        headers.append((name.strip().lower(), value.strip()))
    return headers


def _content_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name == b"content-length":
            return int(value)
    return None


class LossyProxy:
    """`async with LossyProxy(ports, lossy=..., loss=0.1, seed=1) as proxy:` serves on proxy.port."""

    def __init__(
        self,
        backends: Sequence[int],
        *,
        lossy: Callable[[str, str], bool],  # (method, path) -> may this request's answer be lost?
        loss: float,
        seed: int,
        backend_seconds: float = 20.0,  # keep it below the clients' timeout, so they hear the 502
    ) -> None:
        self.backends = list(backends)
        self.lossy = lossy
        self.loss = loss
        self.rng = random.Random(seed)
        self.backend_seconds = backend_seconds
        self.stats = ProxyStats()
        self.in_flight: dict[int, int] = {port: 0 for port in self.backends}  # requests in a backend's hands
        self.answered: dict[int, int] = {port: 0 for port in self.backends}  # whole answers, per backend
        self.failed: dict[int, int] = {port: 0 for port in self.backends}  # died with the request in hand
        self.port = 0
        self._turn = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> LossyProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=MAX_HEAD_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, grace: float = 30.0) -> None:
        """Stop listening; let requests under way finish (within grace), then drop what is left."""
        if self._server is None:
            return
        self._server.close()
        pending = set(self._handlers)
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace)
            for task in still:
                task.cancel()
            if still:
                await asyncio.wait(still, timeout=5)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 5)
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            for _ in range(MAX_REQUESTS_PER_CONNECTION):
                request = await self._read_request(reader)
                if request is None:
                    return  # the client closed its connection (or sent what we do not read)
                method, path, forward = request
                self.stats.requests += 1
                # Decided as the request arrives, from one seeded generator: the same fraction each run.
                lose = self.lossy(method, path) and self.rng.random() < self.loss
                answer = await self._forward(forward)
                if answer is None:
                    self.stats.bad_gateway += 1
                    writer.write(BAD_GATEWAY)
                    await writer.drain()
                    continue
                self.stats.forwarded += 1
                if lose:
                    self.stats.lost += 1
                    writer.transport.abort()  # the backend's work is done; its answer goes nowhere
                    return
                writer.write(answer)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            return
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _read_request(self, reader: asyncio.StreamReader) -> tuple[str, str, bytes] | None:
        """(method, path, the request to forward) or None when the client is gone or idle."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CLIENT_IDLE_SECONDS)
        except (TimeoutError, asyncio.IncompleteReadError):
            return None
        request_line, *lines = head[:-4].split(b"\r\n")
        method, target, _version = request_line.decode("latin-1").split(" ", 2)
        headers = _headers(lines)
        if any(name == b"transfer-encoding" for name, _ in headers):
            return None  # not needed by these tests: the connection is closed
        body = await reader.readexactly(_content_length(headers) or 0)
        kept = [line for line, (name, _) in zip(lines, headers, strict=True) if name not in HOP_BY_HOP]
        forward = b"\r\n".join([request_line, *kept, b"Connection: close", b"", b""]) + body
        return method, target.split("?", 1)[0], forward

    async def _forward(self, request: bytes) -> bytes | None:
        """The next backend's whole answer (made keep-alive again for the client), or None."""
        # Each backend at most once per request, from this request's turn on: with the shared turn
        # moved on by concurrent requests meanwhile, a request could be sent to the same dead
        # backend again and again, and answer 502 while live ones were left.
        first = self._turn
        self._turn += 1
        for offset in range(len(self.backends)):
            port = self.backends[(first + offset) % len(self.backends)]
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port), CONNECT_SECONDS
                )
            except (OSError, TimeoutError):
                self.stats.refused += 1
                continue  # dead or restarting: the next one
            self.in_flight[port] += 1
            try:
                writer.write(request)
                await writer.drain()
                # Connection: close: the backend closes after its answer, so EOF ends it.
                raw = await asyncio.wait_for(reader.read(), self.backend_seconds)
            except (OSError, TimeoutError):
                self.failed[port] += 1
                return None  # it failed with the request in hand: not re-sent here
            finally:
                self.in_flight[port] -= 1
                writer.close()
            answer = _relayable(raw)
            if answer is None:
                self.failed[port] += 1
            else:
                self.answered[port] += 1
            return answer
        return None


def _relayable(raw: bytes) -> bytes | None:
    """The answer without its Connection header, so that the client's connection stays open;
    None if it is cut short (the backend died while answering)."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return None
    status_line, *lines = head.split(b"\r\n")
    parts = status_line.split(b" ")
    if len(parts) < 2 or not parts[1].isdigit():
        return None
    headers = _headers(lines)
    length = _content_length(headers)
    chunked = any(name == b"transfer-encoding" for name, _ in headers)
    if length is not None and len(body) != length:
        return None
    if chunked and not body.endswith(b"0\r\n\r\n"):
        return None
    kept = [line for line, (name, _) in zip(lines, headers, strict=True) if name not in HOP_BY_HOP]
    if length is None and not chunked and int(parts[1]) not in (204, 304):
        kept.append(b"content-length: %d" % len(body))  # it was framed by the close
    return b"\r\n".join([status_line, *kept, b"", b""]) + body
