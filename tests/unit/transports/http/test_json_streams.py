"""`json_lines`: what a JSON answer with no Content-Length holds, line by line as it streams."""
from __future__ import annotations

import asyncio

import pytest

from bridge.transports.http.bodies import TooLarge
from bridge.transports.http.json_streams import json_lines


class Streamed:
    """An upstream answer whose body arrives in ``chunks`` (`aiohttp.ClientResponse.content`)."""

    def __init__(self, *chunks: bytes):
        self.content = self
        self.chunks = chunks

    async def iter_any(self):
        for chunk in self.chunks:
            yield chunk


def lines(*chunks: bytes, limit: int = 1 << 20) -> list[tuple[bytes, bool]]:
    async def read():
        return [found async for found in json_lines(Streamed(*chunks), limit)]

    return asyncio.run(read())


def test_each_whole_line_as_it_completes_and_the_tail_at_the_end():
    assert lines(b'{"a": 1}\n{"b"', b': 2}\n\n{"c": 3}') == [
        (b'{"a": 1}\n', True), (b'{"b": 2}\n', True), (b"\n", True), (b'{"c": 3}', False)]


def test_a_body_that_is_not_one_message_a_line_comes_whole():
    assert lines(b'{"a": 1}\n{\n  "b": 2\n', b"}\n") == [(b'{"a": 1}\n', True), (b'{\n  "b": 2\n}\n', False)]


def test_more_than_the_limit_held_at_once_is_too_large():
    with pytest.raises(TooLarge, match="max_response_bytes = 12"):
        lines(b'{"a": 1}\n', b'{"long": "line without its end"', limit=12)
