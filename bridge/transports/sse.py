"""Server-sent events, one event at a time, keeping each event's raw bytes.

The proxy must relay SSE unbuffered and unchanged unless an event carries a message the pipeline
rewrites; so events are parsed just enough to hand their `data` to the pipeline and are written
back byte for byte when it passes them.

Splitting is linear in the bytes received: each byte is searched once (a boundary straddling two
chunks is found by starting the search a few bytes back), and consumed events leave the buffer
once per chunk, never once per event.  An event longer than ``max_event`` fails the stream with
`EventTooLarge` instead of growing the buffer without end.
"""
from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

#: A blank line after a line end, in any mix of the three line ends SSE allows (CRLF, LF, CR).
#: `\r` alone is a line end only when no `\n` follows, which a buffer ending in `\r` cannot tell yet.
_ANY_BLANK_LINE = re.compile(rb"(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r(?!\n))")


@dataclass
class Event:
    raw: bytes  # the event as received, including its blank-line terminator
    data: bytes | None  # the joined `data:` lines, or None for a comment / keep-alive block
    fields: list[tuple[bytes, bytes]]  # every other field (event, id, retry), in order

    def with_data(self, data: bytes, keep_id: bool = True) -> bytes:
        """This event with another payload; inserted events drop the `id` (it names the original)."""
        out = bytearray()
        for name, value in self.fields:
            if name == b"id" and not keep_id:
                continue
            out += name + b": " + value + b"\n" if value else name + b"\n"
        for line in data.split(b"\n"):
            out += b"data: " + line + b"\n"
        return bytes(out + b"\n")


def message_event(data: bytes) -> bytes:
    """One `event: message` carrying ``data`` (a JSON-RPC message the proxy adds to a stream)."""
    return b"event: message\ndata: " + data + b"\n\n"


class EventTooLarge(Exception):
    """An event grew past the stream's limit before its blank line came."""

    def __init__(self, limit: int):
        self.limit = limit
        super().__init__(f"a server-sent event larger than max_event_bytes = {limit}")


def parse_event(raw: bytes) -> Event:
    data_lines: list[bytes] = []
    fields: list[tuple[bytes, bytes]] = []
    for line in raw.splitlines():
        if not line or line.startswith(b":"):
            continue
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            data_lines.append(value)
        else:
            fields.append((name, value))
    data = None if not data_lines else data_lines[0] if len(data_lines) == 1 else b"\n".join(data_lines)
    return Event(raw, data, fields)


class SseSplitter:
    """Sans-I/O: bytes in, whole events out.

    Streams that use `\\n` alone (nearly all) are cut with one `bytes.find` per boundary; a `\\r`
    anywhere switches the stream to the general rule for the rest of its life.
    """

    def __init__(self, max_event: int | None = None):
        self.max_event = max_event
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already known to hold no boundary (less a margin)
        self._carriage = False  # a `\r` was seen: use the general line-end rule

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, chunk: bytes) -> list[Event]:
        if not self._carriage and b"\r" in chunk:
            self._carriage = True
            self._scanned = 0
        buffer = self._buffer
        if buffer:
            buffer += chunk
            data: bytes | bytearray = buffer
        else:
            data = chunk  # the usual case, whole events in one read: cut them from the chunk itself
            self._scanned = 0
        out: list[Event] = []
        start = 0
        while (end := self._boundary(data, start)) >= 0:
            raw = data[start:end]
            out.append(parse_event(raw if type(raw) is bytes else bytes(raw)))
            start = end
        if data is buffer:
            if start:
                del buffer[:start]
        elif start < len(data):
            buffer += memoryview(data)[start:]
        self._scanned = max(0, self._scanned - start)
        if self.max_event is not None and len(buffer) > self.max_event:
            raise EventTooLarge(self.max_event)
        return out

    def close(self) -> list[Event]:
        """The stream ended: a last event without its blank line still goes on."""
        rest = bytes(self._buffer)
        self._buffer.clear()
        self._scanned = 0
        return [parse_event(rest)] if rest.strip() else []

    def _boundary(self, data: bytes | bytearray, start: int) -> int:
        """The end (exclusive) of the first event at or after ``start``, or -1."""
        if not self._carriage:
            at = data.find(b"\n\n", max(start, self._scanned - 1))
            if at < 0:
                self._scanned = len(data)
                return -1
            return at + 2
        match = _ANY_BLANK_LINE.search(data, max(start, self._scanned - 3))
        if match is not None and match.end() == len(data) and data.endswith(b"\r"):
            match = None  # `\r` at the very end may be the first half of a `\r\n`: wait for the next byte
        if match is None:
            self._scanned = max(start, len(data) - 3)
            return -1
        return match.end()


async def events(chunks: AsyncIterator[bytes], max_event: int | None = None) -> AsyncIterator[Event]:
    """Split a byte stream into events at blank lines; raises `EventTooLarge` past ``max_event``."""
    splitter = SseSplitter(max_event)
    async for chunk in chunks:
        for event in splitter.feed(chunk):
            yield event
    for event in splitter.close():
        yield event
