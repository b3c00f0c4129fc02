"""SSE framing as the HTTP transport relays it: events are cut exactly, passed events keep their
bytes (ids, comments, retry hints), rewritten ones keep their fields; MCP 2026-07-28 mirrored
headers follow a rewritten body."""
from __future__ import annotations

from bridge.pipeline.commands import Send
from bridge.pipeline.mcp import McpFlow
from bridge.transports.http.relay import mirror_mcp_headers
from bridge.transports.sse import events, parse_event


async def chunks(*parts: bytes):
    for part in parts:
        yield part


async def collect(*parts: bytes):
    return [e async for e in events(chunks(*parts))]


async def test_events_are_cut_at_blank_lines_across_chunk_boundaries_and_line_endings():
    got = await collect(b": keep-alive\n\nid: 7\nevent: mess", b"age\ndata: {\"a\":1}\n\n",
                        b"retry: 100\r\ndata: x\r\n\r\ndata: tail")
    assert [e.raw for e in got] == [b": keep-alive\n\n", b'id: 7\nevent: message\ndata: {"a":1}\n\n',
                                    b"retry: 100\r\ndata: x\r\n\r\n", b"data: tail"]
    assert got[0].data is None  # a comment: passed as is, never handed to the pipeline
    assert got[1].data == b'{"a":1}' and got[1].fields == [(b"id", b"7"), (b"event", b"message")]


def test_multi_line_data_is_joined_and_rewritten_events_keep_their_fields():
    event = parse_event(b"id: 42\nevent: message\ndata: {\"a\":\ndata: 1}\n\n")
    assert event.data == b'{"a":\n1}'
    assert event.with_data(b'{"b":2}') == b'id: 42\nevent: message\ndata: {"b":2}\n\n'
    # an event the proxy inserts before the original must not reuse the original's id
    assert event.with_data(b'{"c":3}', keep_id=False) == b'event: message\ndata: {"c":3}\n\n'


def test_mirrored_mcp_headers_follow_a_rewritten_body():
    """The flow says which method and name a message it rewrote carries; the transport keeps the
    mirrored headers true without parsing the body again."""
    rewritten = Send("peer", b"{}", method="resources/read", name="file:///a")
    headers = {"Mcp-Method": "tools/call", "Mcp-Name": "old", "Accept": "application/json"}
    mirror_mcp_headers(headers, rewritten)
    assert headers == {"Mcp-Method": "resources/read", "Mcp-Name": "file:///a", "Accept": "application/json"}
    untouched = {"Accept": "application/json"}
    mirror_mcp_headers(untouched, rewritten)
    assert untouched == {"Accept": "application/json"}  # a 2025-11-25 request has no mirrored headers
    assert McpFlow().send("peer", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                   "params": {"name": "echo"}}) == Send(
        "peer", b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}', False, "tools/call", "echo")


# -- the splitter: exact at any chunking, linear, bounded --------------------------------------------
import time  # noqa: E402

import pytest  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402

from bridge.transports.sse import EventTooLarge, SseSplitter  # noqa: E402

LINE_ENDS = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def streams(draw) -> bytes:
    out = b""
    for _ in range(draw(st.integers(0, 6))):
        for _ in range(draw(st.integers(1, 3))):
            field = draw(st.sampled_from([b"data: ", b"data:", b"id: ", b"event: ", b": comment ", b"retry: "]))
            out += field + draw(st.binary(max_size=8).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")))
            out += draw(LINE_ENDS)
        out += draw(LINE_ENDS)
    return out


def split(stream: bytes, cuts: list[int], max_event: int | None = None) -> list[bytes]:
    splitter = SseSplitter(max_event)
    raws: list[bytes] = []
    last = 0
    for cut in sorted(set(c % (len(stream) + 1) for c in cuts)) + [len(stream)]:
        raws += [e.raw for e in splitter.feed(stream[last:cut])]
        last = cut
    return raws + [e.raw for e in splitter.close()]


@settings(max_examples=300, deadline=None)
@given(stream=streams(), cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_any_chunking_gives_the_same_events_and_every_byte_back(stream, cuts):
    whole = split(stream, [])
    assert split(stream, cuts) == whole
    assert b"".join(whole).strip() == stream.strip()  # nothing lost, nothing invented
    assert split(stream, list(range(len(stream) + 1))) == whole  # byte by byte


def test_an_event_over_the_limit_raises_instead_of_buffering():
    splitter = SseSplitter(max_event=1000)
    assert [e.data for e in splitter.feed(b"data: small\n\n")] == [b"small"]
    with pytest.raises(EventTooLarge) as raised:
        for _ in range(20):
            splitter.feed(b"data: " + b"x" * 100)
    assert raised.value.limit == 1000 and "max_event_bytes" in str(raised.value)


@pytest.mark.parametrize("per_chunk", [1, 64, 1024])
def test_splitting_cost_does_not_grow_with_the_square_of_the_event(per_chunk):
    """One 8 MiB event fed in 4 KiB chunks costs about what it costs fed whole; and 1, 64 or
    1,024 small events per chunk cost the same per event. (Quadratic splitting took seconds.)"""
    big = b"data: " + b"x" * (8 << 20) + b"\n\n"

    def cost(chunks: list[bytes]) -> float:
        splitter = SseSplitter()
        started = time.process_time()
        for chunk in chunks:
            splitter.feed(chunk)
        return time.process_time() - started

    whole = min(cost([big]) for _ in range(3))
    chunked = min(cost([big[i:i + 4096] for i in range(0, len(big), 4096)]) for _ in range(3))
    assert chunked < 20 * whole + 0.05, (chunked, whole)
    small = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress"}\n\n'
    chunk = small * per_chunk
    assert [len(SseSplitter().feed(chunk))] == [per_chunk]
