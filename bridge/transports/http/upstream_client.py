"""The host's requests to a plain-HTTP upstream, on a lean HTTP/1.1 client of our own.

Why not aiohttp's client here: under callgrind it is ~320k of the ~600k instructions a bare aiohttp
relay spends per proxied call (docs/decisions.md, "A lean upstream client"), more than all of the
proxy's own work. This client does what the relay needs and nothing else: keep-alive connections
pooled per upstream, a request written in one write, and answers framed by `Content-Length`, the
chunked coding or the connection's end, their bodies streamed with back-pressure. Anything it does
not speak (https, a proxy from the environment) stays on aiohttp: `wants_lean` says which.

Its errors are aiohttp's own types (`ServerDisconnectedError`, `ClientPayloadError`,
`ClientConnectionError`, `ClientOSError` for a refused connect, errno kept), so every caller's classifier
(`upstream_errors.cause`) reads them as it reads aiohttp's.
"""
from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Mapping
from urllib.parse import quote, urlsplit

import aiohttp
from aiohttp.http import SERVER_SOFTWARE
from multidict import CIMultiDict, CIMultiDictProxy

#: an answer's body buffered past this pauses reading from the upstream until the host takes it
HIGH_WATER = 1 << 17
#: the most header bytes an answer may have, all lines together
MAX_HEAD = 1 << 16
#: idle connections kept per upstream (more are closed when returned)
MAX_IDLE = 64
#: URLs whose parts are remembered (a route calls the same few endpoints over and over)
URLS_KEPT = 64
#: the request headers aiohttp adds when a client sends none: kept so an upstream sees what it saw before
DEFAULTS = (("accept", "Accept", "*/*"), ("user-agent", "User-Agent", SERVER_SOFTWARE))
#: what stays as it is in a URL's text; the rest is percent-encoded (aiohttp's server hands over a
#: decoded path: a space or line break in it must not reach the request line raw, as yarl ensured)
URL_SAFE = ":/?&=;@!$'()*+,%~[]"
HEX = frozenset(b"0123456789abcdefABCDEF")
#: the methods aiohttp sends without `Content-Length: 0` when they have no body (DELETE gets one)
BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "CONNECT", "TRACE"})


def wants_lean(url: str) -> bool:
    """True for the upstreams this client speaks to: plain HTTP (the sidecar's usual upstream)."""
    return url.startswith("http://")


class Body:
    """An answer's body as it arrives: what aiohttp's `StreamReader` offers the relay (`read_nowait`,
    `iter_any`), over a buffer bounded by pausing the connection."""

    def __init__(self, connection: UpstreamConnection):
        self._connection = connection
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._waiter: asyncio.Future[None] | None = None
        self.done = False
        self.error: BaseException | None = None

    def feed(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        if self._size > HIGH_WATER:
            self._connection.pause()
        self._wake()

    def end(self, error: BaseException | None = None) -> None:
        self.done, self.error = True, error
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def read_nowait(self) -> bytes:
        """What has arrived and not been taken (b"" if nothing)."""
        if not self._chunks:
            if self.error is not None:
                raise self.error
            return b""
        data = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks.clear()
        self._size = 0
        self._connection.resume()
        return data

    def is_eof(self) -> bool:
        return self.done and not self._chunks

    async def iter_any(self) -> AsyncIterator[bytes]:
        while True:
            data = self.read_nowait()
            if data:
                yield data
            elif self.done:
                return
            else:
                self._waiter = asyncio.get_running_loop().create_future()
                await self._waiter
                self._waiter = None


class UpstreamResponse:
    """One answer: status and headers at once, the body as it comes (`content`), and its connection
    back to the pool once the body was read to its end (closed otherwise)."""

    def __init__(self, connection: UpstreamConnection, url: str, status: int, headers: CIMultiDict[str],
                 content_length: int | None, body: Body):
        self._connection = connection
        self.url = url
        self.status = status
        self.headers = CIMultiDictProxy(headers)
        self.content_length = content_length
        self.content = body
        self._released = False

    async def read(self) -> bytes:
        chunks = [chunk async for chunk in self.content.iter_any()]
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def release(self) -> None:
        """Once only (aiohttp's may be called again): a connection pooled twice would carry two
        requests at once."""
        if not self._released:
            self._released = True
            self._connection.finished(self.content.is_eof())

    async def __aenter__(self) -> UpstreamResponse:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.release()


class UpstreamConnection(asyncio.Protocol):
    """One keep-alive connection: parses the answer to the request in flight as bytes arrive."""

    def __init__(self, pool: UpstreamPool, key: tuple[str, int]):
        self._pool, self._key = pool, key
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = True
        self._head = bytearray()
        self._answer: asyncio.Future[tuple[int, CIMultiDict[str], int | None]] | None = None
        self._no_body = False
        self.body: Body | None = None
        self._left = 0  # body bytes still to come (length framing), or of the chunk being read (chunked)
        self._framing = ""  # "length" | "chunked" | "close" while a body is read
        self._chunk_state = "size"  # chunked: "size" (a size line next) | "data" | "crlf" | "trailer"
        self._pending = b""  # chunked: a size or trailer line not yet whole
        self._paused = False

    # -- the request -----------------------------------------------------------------------------
    def send(self, head: bytes, body: bytes | None, no_body: bool) -> asyncio.Future:
        assert self.transport is not None
        self._answer = asyncio.get_running_loop().create_future()
        self._no_body = no_body
        self._head.clear()
        self.body = None
        self.transport.write(head + body if body else head)
        return self._answer

    def finished(self, read_whole: bool) -> None:
        """The caller is done with the answer: the connection goes back to the pool when it is whole
        and idle, else it closes (an answer half read cannot be skipped on a kept connection)."""
        if read_whole and self.reusable and not self.closed and self._framing == "":
            self._pool.give_back(self._key, self)
        else:
            self.close()

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None and not self.closed:
            self.transport.close()

    def pause(self) -> None:
        if not self._paused and self.transport is not None and not self.closed:
            self._paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self.transport.resume_reading()

    # -- asyncio.Protocol --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed, self.reusable = True, False
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(aiohttp.ServerDisconnectedError())
        elif self.body is not None and not self.body.done:
            if self._framing == "close" and exc is None:  # a reset is no end: the body may be cut
                self.body.end()
            else:
                self.body.end(aiohttp.ClientPayloadError("Response payload is not completed"))
            self._framing = ""

    def data_received(self, data: bytes) -> None:
        if self._framing:
            self._body_bytes(data)
        elif self._answer is not None and not self._answer.done():
            self._head += data
            self._parse_head()
        else:  # bytes nobody asked for: the connection cannot be trusted with another request
            self.close()

    def _parse_head(self) -> None:
        while True:
            end = self._head.find(b"\r\n\r\n")
            if end < 0 or end > MAX_HEAD:
                if len(self._head) > MAX_HEAD:
                    self._fail(f"the upstream's answer headers are over {MAX_HEAD} bytes")
                return
            # as aiohttp reads them: UTF-8 values reach the host as they came, other bytes survive
            lines = bytes(self._head[:end]).decode("utf-8", "surrogateescape").split("\r\n")
            rest = bytes(self._head[end + 4:])
            version, _, status_text = lines[0].partition(" ")
            code = status_text[:3]
            if not version.startswith("HTTP/1.") or not (code.isascii() and code.isdigit()) or status_text[3:4].strip():
                return self._fail(f"not an HTTP/1.1 answer: {lines[0][:80]!r}")
            status = int(code)
            headers: CIMultiDict[str] = CIMultiDict()
            for line in lines[1:]:
                name, colon, value = line.partition(":")
                if not colon or not name or name != name.strip():
                    return self._fail(f"a malformed header line: {line[:80]!r}")
                headers.add(name, value.strip())
            if 100 <= status < 200:  # 100 Continue, 103 Early Hints: the answer is still to come
                self._head = bytearray(rest)
                continue
            self._start_body(version, status, headers, rest)
            return

    def _start_body(self, version: str, status: int, headers: CIMultiDict[str], rest: bytes) -> None:
        connection = headers.get("connection", "").lower()
        if version == "HTTP/1.0" and "keep-alive" not in connection or "close" in connection:
            self.reusable = False
        length: int | None = None
        if self._no_body or status in (204, 304):
            self._framing = ""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            if "content-length" in headers:  # which one frames it is the classic of request smuggling
                return self._fail("both Content-Length and Transfer-Encoding: chunked")
            self._framing, self._chunk_state, self._pending = "chunked", "size", b""
        elif (declared := headers.get("content-length")) is not None:
            if not (declared.isascii() and declared.isdigit()) or len(headers.getall("content-length")) > 1:
                return self._fail(f"a malformed Content-Length: {declared[:40]!r}")
            length = self._left = int(declared)
            self._framing = "length" if length else ""
        else:
            self._framing, self.reusable = "close", False
        self.body = Body(self)
        assert self._answer is not None
        self._answer.set_result((status, headers, length))
        if not self._framing:
            self.body.end()
            if rest:
                self.close()
        elif rest:
            self._body_bytes(rest)

    def _fail(self, why: str) -> None:
        self.close()
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(aiohttp.ClientConnectionError(f"the upstream's answer is malformed: {why}"))

    def _body_bytes(self, data: bytes) -> None:
        body = self.body
        assert body is not None
        if self._framing == "close":
            body.feed(data)
        elif self._framing == "length":
            if len(data) > self._left:  # more than the answer: nothing may follow it unasked
                data, self.reusable = data[:self._left], False
            self._left -= len(data)
            body.feed(data)
            if not self._left:
                self._framing = ""
                body.end()
        else:
            self._chunked(data)

    def _chunked(self, data: bytes) -> None:
        """One read of a chunked body, walked by offset (slicing the rest for each chunk would make
        a read of many small chunks quadratic); its data fed to the body at once."""
        body = self.body
        assert body is not None
        if self._pending:
            data, self._pending = self._pending + data, b""
        pieces: list[bytes] = []
        at, size = 0, len(data)
        while at < size:
            if self._chunk_state == "data":
                take = min(self._left, size - at)
                pieces.append(data[at:at + take])
                at += take
                self._left -= take
                if not self._left:
                    self._chunk_state = "crlf"
                continue
            line_end = data.find(b"\r\n", at)
            if line_end < 0:
                self._pending = data[at:]
                if len(self._pending) > MAX_HEAD:
                    return self._payload_error("a chunk header over the limit")
                break
            line, at = data[at:line_end], line_end + 2
            if self._chunk_state == "crlf":
                if line:
                    return self._payload_error("a chunk not followed by CRLF")
                self._chunk_state = "size"
            elif self._chunk_state == "size":
                digits = line.split(b";", 1)[0].strip()
                if not digits or not HEX.issuperset(digits):  # int() would take "-1", "0x1", "1_0"
                    return self._payload_error(f"a malformed chunk size {digits[:20]!r}")
                self._left = int(digits, 16)
                self._chunk_state = "data" if self._left else "trailer"
            elif not line:  # the empty line after the trailers: the body is whole
                self._framing = ""
                if at < size:
                    self.reusable = False
                break
        if pieces:
            body.feed(pieces[0] if len(pieces) == 1 else b"".join(pieces))
        if not self._framing:
            body.end()

    def _payload_error(self, why: str) -> None:
        self._framing = ""
        self.close()
        assert self.body is not None
        self.body.end(aiohttp.ClientPayloadError(f"the upstream's chunked answer is malformed: {why}"))


class UpstreamPool:
    """Keep-alive connections per upstream (host, port), and the request that uses one."""

    def __init__(self, connect_timeout: float = 10.0):
        self.connect_timeout = connect_timeout
        self._idle: dict[tuple[str, int], list[UpstreamConnection]] = {}
        self._urls: dict[str, tuple[tuple[str, int], str, str]] = {}
        self._closed = False

    def _parts(self, url: str) -> tuple[tuple[str, int], str, str]:
        """((host, port), Host header, request target) of ``url``."""
        parts = self._urls.get(url)
        if parts is None:
            split = urlsplit(quote(url, safe=URL_SAFE))
            host = split.hostname or ""
            port = split.port or 80
            target = (split.path or "/") + (f"?{split.query}" if split.query else "")
            netloc = f"[{host}]" if ":" in host else host
            parts = ((host, port), netloc if port == 80 else f"{netloc}:{port}", target)
            if len(self._urls) >= URLS_KEPT:
                self._urls.clear()
            self._urls[url] = parts
        return parts

    async def request(self, method: str, url: str, *, data: bytes | None = None,
                      headers: Mapping[str, str]) -> UpstreamResponse:
        """``method`` ``url`` with exactly ``headers`` (and `Host`, `Content-Length`): the answer once its headers came."""
        key, host_header, target = self._parts(url)
        lines = [f"{method} {target} HTTP/1.1\r\nHost: {host_header}\r\n"]
        missing = {low for low, _, _ in DEFAULTS}
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise aiohttp.ClientError(f"the header {name[:40]!r} has a line break in it")
            missing.discard(name.lower())
            lines.append(f"{name}: {value}\r\n")
        lines += [f"{proper}: {value}\r\n" for low, proper, value in DEFAULTS if low in missing]
        if data is not None or method not in BODYLESS:
            lines.append(f"Content-Length: {len(data) if data else 0}\r\n")
        head = "".join(lines).encode("utf-8", "surrogateescape") + b"\r\n"  # the host's bytes, as they came
        connection = await self._connection(key)
        try:
            status, answer_headers, length = await connection.send(head, data, method == "HEAD")
        except BaseException:
            connection.close()  # cancelled or failed before the answer: never reused half way
            raise
        assert connection.body is not None
        return UpstreamResponse(connection, url, status, answer_headers, length, connection.body)

    async def _connection(self, key: tuple[str, int]) -> UpstreamConnection:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if not connection.closed and connection.transport is not None and not connection.transport.is_closing():
                return connection
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, connection = await loop.create_connection(lambda: UpstreamConnection(self, key), *key)
        except TimeoutError:
            raise
        except OSError as exc:  # refused, unreachable, no such host: aiohttp's type for it, errno kept
            raise aiohttp.ClientOSError(exc.errno, exc.strerror or str(exc)) from exc
        return connection

    def give_back(self, key: tuple[str, int], connection: UpstreamConnection) -> None:
        idle = self._idle.setdefault(key, [])
        if self._closed or len(idle) >= MAX_IDLE:
            connection.close()
        else:
            idle.append(connection)

    def close(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()
