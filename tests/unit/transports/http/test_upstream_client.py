"""`UpstreamPool`: the host's requests to a plain-HTTP upstream, against real sockets: an aiohttp
server for what servers commonly send, and raw asyncio servers for the framings and failures an
upstream may send (chunked, close-delimited, interim answers, cut-off and malformed answers)."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bridge.transports.http.upstream_client import HIGH_WATER, UpstreamPool, wants_lean


async def raw_server(answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]):
    """A TCP server that runs ``answer`` on each connection: its URL, its server, the connections seen."""
    seen: list[asyncio.StreamWriter] = []

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(writer)
        try:
            await answer(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
    return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp", server, seen


@asynccontextmanager
async def answered(answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]):
    """A raw server running ``answer`` and a pool toward it, both closed after: (URL, pool, connections seen)."""
    url, server, seen = await raw_server(answer)
    pool = UpstreamPool()
    try:
        yield url, pool, seen
    finally:
        pool.close()
        server.close()


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head, await reader.readexactly(length)


@pytest.fixture
async def aiohttp_server():
    """Starts an aiohttp app on a real loopback port (aiohttp's own test server), stopped after the test."""
    started: list[TestServer] = []

    async def start(app: web.Application) -> TestServer:
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        started.append(server)
        return server

    yield start
    for server in started:
        await server.close()


def answering(*answers: bytes, then_close: bool = False):
    """A connection handler that answers each request with the next of ``answers``."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for data in answers:
            await read_request(reader)
            writer.write(data)
            await writer.drain()
        if not then_close:
            await reader.read()  # until the client closes
    return answer


def recording(heads: list[bytes], reply: bytes):
    """A connection handler that keeps the head of each request it reads and answers it with ``reply``."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head, _ = await read_request(reader)
            except asyncio.IncompleteReadError:  # the client closed
                return
            heads.append(head)
            writer.write(reply)
            await writer.drain()
    return answer


async def test_json_answers_reuse_one_kept_connection_and_each_request_sends_its_own_headers(aiohttp_server):
    got: list[dict[str, str]] = []

    async def echo(request: web.Request) -> web.Response:
        got.append(dict(request.headers))
        return web.json_response({"id": len(got), "body": (await request.read()).decode()})

    app = web.Application()
    app.router.add_post("/mcp", echo)
    server = await aiohttp_server(app)
    pool = UpstreamPool()
    try:
        for i in range(3):
            async with await pool.request("POST", str(server.make_url("/mcp")), data=b'{"n":%d}' % i,
                                          headers={"Authorization": f"Bearer {i}", "Accept": "application/json"}) as answer:
                assert answer.status == 200 and answer.headers["content-type"].startswith("application/json")
                assert await answer.read() == b'{"id": %d, "body": "{\\"n\\":%d}"}' % (i + 1, i)
        assert len(pool._idle[("127.0.0.1", server.port)]) == 1  # one connection served all three
    finally:
        pool.close()
    assert [h["Authorization"] for h in got] == ["Bearer 0", "Bearer 1", "Bearer 2"]
    assert all(h["Host"] == f"127.0.0.1:{server.port}" and h["Content-Length"] == "7" for h in got)
    assert "User-Agent" in got[0] and got[0]["Accept"] == "application/json"


async def test_a_streamed_answer_arrives_as_it_is_sent_and_a_paused_connection_resumes(aiohttp_server):
    sent = asyncio.Event()
    go_on = asyncio.Event()

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: first\n\n")
        sent.set()
        await go_on.wait()
        await response.write(b"x" * (4 * HIGH_WATER))  # more than the buffer holds before pausing
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/mcp", stream)
    server = await aiohttp_server(app)
    pool = UpstreamPool()
    try:
        answer = await pool.request("POST", str(server.make_url("/mcp")), data=b"{}", headers={})
        async with answer:
            chunks = answer.content.iter_any()
            assert await chunks.__anext__() == b"data: first\n\n"  # before the stream ends
            go_on.set()
            rest = b"".join([chunk async for chunk in chunks])
        assert rest == b"x" * (4 * HIGH_WATER)
    finally:
        pool.close()


async def test_chunked_answers_with_extensions_and_trailers_and_the_connection_is_kept():
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
               b"4;ext=1\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\nX-Trailer: yes\r\n\r\n")
    async with answered(answering(chunked, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")) as (url, pool, seen):
        async with await pool.request("POST", url, data=b"{}", headers={}) as answer:
            assert answer.content_length is None and await answer.read() == b'{"a":1}'
        async with await pool.request("POST", url, data=b"{}", headers={}) as answer:
            assert answer.content_length == 2 and await answer.read() == b"{}"
        assert len(seen) == 1


async def test_an_answer_delimited_by_the_close_and_interim_answers_skipped():
    async with answered(answering(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"whole\":true}",
        then_close=True)) as (url, pool, seen):
        async with await pool.request("POST", url, data=b"{}", headers={}) as answer:
            assert answer.status == 200 and await answer.read() == b'{"whole":true}'
        assert not pool._idle.get(answer._connection._key)  # not kept: its end was the answer's


async def test_an_answer_cut_off_midway_is_a_payload_error_and_none_at_all_a_disconnect():
    url, server, _ = await raw_server(answering(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"par", then_close=True))
    pool = UpstreamPool()
    try:
        answer = await pool.request("POST", url, data=b"{}", headers={})
        with pytest.raises(aiohttp.ClientPayloadError):
            await answer.read()
        answer.release()
    finally:
        server.close()

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)

    url, server, _ = await raw_server(hang_up)
    try:
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await pool.request("POST", url, data=b"{}", headers={})
    finally:
        pool.close()
        server.close()


@pytest.mark.parametrize("answer", [b"SMTP ready\r\n\r\n", b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
                                    b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
                                    b"HTTP/1.1 2000 OK\r\n\r\n", "HTTP/1.1 ²00 OK\r\n\r\n".encode(),
                                    # ambiguous lengths: which one frames it is the classic of request smuggling
                                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}",
                                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
                                    "HTTP/1.1 200 OK\r\nContent-Length: ²\r\n\r\n".encode("latin-1")])
async def test_a_malformed_answer_is_a_connection_error_that_says_so(answer):
    async with answered(answering(answer)) as (url, pool, _):
        with pytest.raises(aiohttp.ClientConnectionError, match="malformed"):
            await pool.request("POST", url, data=b"{}", headers={})


# a size must be hex digits: int() takes "-1" (which looped forever feeding b"", until out of memory), "+1", "0x1", "1_0"
@pytest.mark.parametrize("size", [b"zz", b"-1", b"+1", b"0x1", b"1_0", b" "])
async def test_a_malformed_chunk_ends_the_body_with_a_payload_error(size):
    async with answered(answering(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + size + b"\r\n" + b"x" * 16 + b"\r\n0\r\n\r\n")) as (url, pool, _):
        answer = await pool.request("POST", url, data=b"{}", headers={})
        with pytest.raises(aiohttp.ClientPayloadError, match="chunk size"):
            await answer.read()
        answer.release()


async def test_a_header_with_a_line_break_is_refused_before_anything_is_sent():
    async with answered(answering()) as (url, pool, seen):
        with pytest.raises(aiohttp.ClientError, match="line break"):
            await pool.request("POST", url, data=b"{}", headers={"X-Evil": "a\r\nInjected: yes"})
        assert seen == []


async def test_a_kept_connection_the_upstream_closed_is_not_used_again():
    async with answered(answering(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", then_close=True)) as (url, pool, seen):
        async with await pool.request("POST", url, data=b"{}", headers={}) as answer:
            assert await answer.read() == b"{}"
        key = answer._connection._key
        while not answer._connection.closed:  # the upstream's close reaches the idle connection
            await asyncio.sleep(0)
        async with await pool.request("POST", url, data=b"{}", headers={}) as again:
            assert await again.read() == b"{}"
        assert len(seen) == 2 and pool._idle[key] == [again._connection]


async def test_a_refused_connect_is_the_os_error_the_classifier_names():
    url, server, _ = await raw_server(answering())
    server.close()
    await server.wait_closed()
    with pytest.raises(OSError) as raised:
        await UpstreamPool().request("POST", url, data=b"{}", headers={})
    assert raised.value.errno is not None


def test_only_plain_http_upstreams_take_it():
    assert wants_lean("http://127.0.0.1:8080/mcp")
    assert not wants_lean("https://example.com/mcp") and not wants_lean("ws://127.0.0.1/")


async def test_the_request_target_is_percent_encoded_so_a_host_path_cannot_inject_a_line():
    """aiohttp hands the proxy a decoded path (`%0d%0a` is a line break by then); the target sent
    upstream is encoded again, as aiohttp's client (yarl) did, not written raw into the request line."""
    heads: list[bytes] = []
    async with answered(recording(heads, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")) as (url, pool, _):
        async with await pool.request("POST", url + "/a b\r\nX-Injected: yes\r\n\r\nGET /é", data=b"{}",
                                      headers={}) as reply:
            assert await reply.read() == b"{}"
    request_line, *header_lines = heads[0].split(b"\r\n")
    assert request_line == b"POST /mcp/a%20b%0D%0AX-Injected:%20yes%0D%0A%0D%0AGET%20/%C3%A9 HTTP/1.1"
    assert not any(line.lower().startswith(b"x-injected") for line in header_lines)


def chunked_in_one_write(pieces: int) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1\r\nx\r\n" * pieces + b"0\r\n\r\n")


async def test_many_small_chunks_in_one_read_take_linear_time():
    """An upstream that flushes tiny chunks faster than the proxy reads them: ~40k chunks arrive in
    each 256 KiB read. Parsing must not copy the rest of the read for each chunk (quadratic)."""
    pieces = 1 << 19  # 3 MiB of 1-byte chunks
    async with answered(answering(chunked_in_one_write(pieces))) as (url, pool, _):
        async with asyncio.timeout(10):  # linear: well under a second; quadratic: minutes
            async with await pool.request("POST", url, data=b"{}", headers={}) as reply:
                assert await reply.read() == b"x" * pieces


async def test_header_values_beyond_ascii_cross_as_aiohttp_reads_and_writes_them():
    """UTF-8 answer headers read as aiohttp reads them (not as latin-1, which the host would get
    double-encoded); request header bytes that are not UTF-8 go upstream as the host sent them."""
    heads: list[bytes] = []
    async with answered(recording(heads, "HTTP/1.1 200 OK\r\nX-Name: café\r\nContent-Length: 2\r\n\r\n{}".encode())) as (url, pool, _):
        sent = b"caf\xe9".decode("utf-8", "surrogateescape")  # what aiohttp's server makes of a latin-1 byte
        async with await pool.request("POST", url, data=b"{}", headers={"X-Sent": sent}) as reply:
            assert reply.headers["X-Name"] == "café"
            assert await reply.read() == b"{}"
    assert b"\r\nX-Sent: caf\xe9\r\n" in heads[0]


async def test_a_close_delimited_answer_cut_by_a_reset_is_a_payload_error_not_a_whole_body():
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"par")
        await writer.drain()
        await reader.readexactly(1)  # the client never sends it: it reads the head, then waits for us
    async with answered(reset) as (url, pool, seen):
        answer = await pool.request("POST", url, data=b"{}", headers={})
        assert answer.content.read_nowait() in (b"", b'{"par')
        sock = seen[0].get_extra_info("socket")
        import socket
        import struct
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
        seen[0].transport.abort()
        with pytest.raises(aiohttp.ClientPayloadError):
            await answer.read()
        answer.release()


async def test_releasing_twice_keeps_the_connection_once():
    """aiohttp's `release` may be called again (a caller's own, then `async with`'s): a connection
    pooled twice would carry two requests at once, their answers crossed."""
    async with answered(answering(*[b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"] * 3)) as (url, pool, _):
        async with await pool.request("POST", url, data=b"{}", headers={}) as reply:
            assert await reply.read() == b"{}"
            reply.release()
        assert len(pool._idle[reply._connection._key]) == 1


async def test_the_user_agent_is_aiohttps_own():
    heads: list[bytes] = []
    async with answered(recording(heads, b"HTTP/1.1 204 No Content\r\n\r\n")) as (url, pool, _):
        async with await pool.request("GET", url, headers={}) as reply:
            assert reply.status == 204 and await reply.read() == b""
    from aiohttp.http import SERVER_SOFTWARE
    assert f"\r\nUser-Agent: {SERVER_SOFTWARE}\r\n".encode() in heads[0]
    assert b"content-length" not in heads[0].lower()  # a GET with no body says nothing of one


@pytest.mark.parametrize(("method", "length"), [("DELETE", b"0"), ("POST", b"0"), ("OPTIONS", None), ("HEAD", None)])
async def test_a_request_without_a_body_says_content_length_0_where_aiohttp_said_it(method, length):
    """aiohttp says `Content-Length: 0` for every method but GET, HEAD, OPTIONS, CONNECT and TRACE
    (an MCP session's DELETE among them): an upstream that saw it before sees it still. A HEAD's
    answer has no body whatever its `Content-Length`, and its connection is kept."""
    heads: list[bytes] = []
    async with answered(recording(heads, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                                                   % (100 if method == "HEAD" else 0))) as (url, pool, seen):
        for _ in range(2):
            async with await pool.request(method, url, headers={}) as reply:
                assert reply.status == 200 and await reply.read() == b""
        assert len(seen) == 1
    said = [line.split(b":")[1].strip() for line in heads[0].split(b"\r\n") if line.lower().startswith(b"content-length")]
    assert said == ([length] if length else [])
