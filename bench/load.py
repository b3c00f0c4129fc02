"""A lean HTTP/1.1 keep-alive client for load: requests are prebuilt bytes, responses are cut
by Content-Length or chunked framing, nothing else is parsed.  On a 2-core machine every cycle
the client spends is taken from the proxy or the peer, so it must cost far less than either."""
from __future__ import annotations

import asyncio
import time


class Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future | None = None
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("connection closed"))
        if not self.closed.done():
            self.closed.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.waiter is not None and not self.waiter.done():
            response = cut(self.buffer)
            if response is not None:
                self.waiter.set_result(response)

    async def request(self, raw: bytes) -> tuple[int, bytes, bytes]:
        """(status, header block, body) of the answer to one prebuilt request."""
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(raw)
        return await self.waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def cut(buffer: bytearray) -> tuple[int, bytes, bytes] | None:
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buffer[:end])
    lower = head.lower()
    status = int(head[9:12])
    at = lower.find(b"\r\ncontent-length:")
    if at >= 0:
        stop = lower.find(b"\r\n", at + 2)
        length = int(head[at + 17:stop if stop > 0 else None])
        if len(buffer) < end + 4 + length:
            return None
        body = bytes(buffer[end + 4:end + 4 + length])
        del buffer[:end + 4 + length]
        return status, head, body
    if b"transfer-encoding: chunked" in lower:
        pos = end + 4
        body = bytearray()
        while True:
            line_end = buffer.find(b"\r\n", pos)
            if line_end < 0:
                return None
            size = int(bytes(buffer[pos:line_end]).split(b";")[0], 16)
            if len(buffer) < line_end + 2 + size + 2:
                return None
            body += buffer[line_end + 2:line_end + 2 + size]
            pos = line_end + 2 + size + 2
            if size == 0:
                del buffer[:pos]
                return status, head, bytes(body)
    if status in (202, 204, 304):
        del buffer[:end + 4]
        return status, head, b""
    raise ValueError("response with neither Content-Length nor chunked framing")


async def connect(port: int) -> Connection:
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(Connection, "127.0.0.1", port)
    return conn


def post(port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Content-Length: {len(body)}",
             *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def header(head: bytes, name: str) -> str | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name.lower().encode():
            return value.strip().decode()
    return None


async def closed_loop(port: int, make, clients: int, seconds: float, check=None) -> tuple[int, list[float]]:
    """``clients`` connections, each sending ``make(i)`` (prebuilt request bytes) as soon as its
    last answer arrived, for ``seconds``.  Returns (answers, latencies in µs)."""
    conns = [await connect(port) for _ in range(clients)]
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    count = 0

    async def run(conn: Connection, offset: int) -> None:
        nonlocal count
        i = offset
        while (start := time.perf_counter()) < deadline:
            status, _, body = await conn.request(make(i))
            latencies.append((time.perf_counter() - start) * 1e6)
            if check is not None:
                check(status, body)
            count += 1
            i += clients

    try:
        await asyncio.gather(*(run(conn, n) for n, conn in enumerate(conns)))
    finally:
        for conn in conns:
            conn.close()
    return count, latencies
