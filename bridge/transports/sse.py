"""Server-sent events, one event at a time, keeping each event's raw bytes.

The proxy must relay SSE unbuffered and unchanged unless an event carries a message the pipeline
rewrites; so events are parsed just enough to hand their `data` to the pipeline and are written
back byte for byte when it passes them.
"""
from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass


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
    return Event(raw, b"\n".join(data_lines) if data_lines else None, fields)


async def events(chunks: AsyncIterator[bytes]) -> AsyncIterator[Event]:
    """Split a byte stream into events at blank lines (`\\n\\n`, `\\r\\n\\r\\n` or `\\r\\r`)."""
    buffer = b""
    async for chunk in chunks:
        buffer += chunk
        while True:
            end, size = _boundary(buffer)
            if end < 0:
                break
            raw, buffer = buffer[:end + size], buffer[end + size:]
            yield parse_event(raw)
    if buffer.strip():
        yield parse_event(buffer)


def _boundary(buffer: bytes) -> tuple[int, int]:
    best, size = -1, 0
    for sep in (b"\n\n", b"\r\n\r\n", b"\r\r"):
        at = buffer.find(sep)
        if at >= 0 and (best < 0 or at < best):
            best, size = at, len(sep)
    return best, size
