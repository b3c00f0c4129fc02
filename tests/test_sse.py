"""SSE framing as the HTTP transport relays it: events are cut exactly, passed events keep their
bytes (ids, comments, retry hints), rewritten ones keep their fields; MCP 2026-07-28 mirrored
headers follow a rewritten body."""
from __future__ import annotations

from bridge.transports.http import _mirror_mcp_headers
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
    headers = {"Mcp-Method": "tools/call", "Mcp-Name": "old", "Accept": "application/json"}
    _mirror_mcp_headers(headers, b'{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}')
    assert headers == {"Mcp-Method": "resources/read", "Mcp-Name": "file:///a", "Accept": "application/json"}
    untouched = {"Accept": "application/json"}
    _mirror_mcp_headers(untouched, b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}')
    assert untouched == {"Accept": "application/json"}  # a 2025-11-25 request has no mirrored headers
