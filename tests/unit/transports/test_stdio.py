"""`Framer`, the stdio transport's line cutter: whatever chunks a pipe delivers, whole lines come out
as they went in (one block per read, never split), a line over `max_line` fails only itself with its
first bytes reported, and what it holds for a line in progress never grows past `max_line`."""
from __future__ import annotations

import tracemalloc

import pytest

from bridge.transports.stdio import Framer


class Cut:
    """A framer and what it handed on: blocks of whole lines, and the heads of lines too long."""

    def __init__(self, max_line: int):
        self.blocks: list[bytes] = []
        self.oversize: list[bytes] = []
        self.framer = Framer(max_line, self.blocks.append, self.oversize.append)

    def feed(self, *chunks: bytes) -> "Cut":
        for chunk in chunks:
            self.framer.feed(chunk)
        return self

    @property
    def lines(self) -> list[bytes]:
        return b"".join(self.blocks).splitlines(keepends=True)


def test_whole_lines_of_one_read_go_on_as_one_block():
    cut = Cut(1000).feed(b'{"a":1}\n{"b":2}\n')
    assert cut.blocks == [b'{"a":1}\n{"b":2}\n'] and cut.oversize == []


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_lines_cut_anywhere_by_the_pipe_come_out_whole_and_in_order(size):
    stream = b"".join(b'{"n":%d,"pad":"%s"}\n' % (i, b"x" * i) for i in range(40))
    cut = Cut(1000).feed(*(stream[i:i + size] for i in range(0, len(stream), size)))
    assert b"".join(cut.blocks) == stream
    assert all(block.endswith(b"\n") for block in cut.blocks)  # never a part of a line


def test_bytes_pass_as_they_came():
    """The framer cuts, it does not read: CRLF, NUL, control characters and invalid UTF-8 are kept."""
    odd = b'{"a":"\x00\x1b[2J\xff\xfe"}\r\n\x85\n'
    assert b"".join(Cut(1000).feed(odd[:5], odd[5:]).blocks) == odd


def test_a_line_of_max_line_bytes_passes_and_one_byte_more_fails_alone():
    fits, over = b"a" * 100, b"b" * 101
    cut = Cut(100).feed(fits[:60], fits[60:] + b"\n", over[:60], over[60:] + b"\nnext\n")
    assert cut.lines == [fits + b"\n", b"next\n"]
    [head] = cut.oversize  # its first bytes, so a request can still be answered
    assert head and over.startswith(head)


def test_a_huge_line_is_dropped_as_it_arrives_and_the_next_line_goes_on():
    cut = Cut(1000)
    chunk = b"x" * 1000
    tracemalloc.start()
    try:
        cut.feed(b'{"jsonrpc":"2.0","id":9,"method":"m","params":"')
        for _ in range(2000):  # 2 MB with no newline: never held whole
            cut.feed(chunk)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak
    cut.feed(b'"}\n{"ok":1}\n')
    assert cut.lines == [b'{"ok":1}\n']
    [head] = cut.oversize
    assert head.startswith(b'{"jsonrpc":"2.0","id":9,') and len(head) <= 4096


def test_a_chunk_longer_than_max_line_is_cut_by_the_same_rule():
    cut = Cut(10).feed(b"short\n" + b"y" * 25 + b"\nend\n")
    assert cut.lines == [b"short\n", b"end\n"]
    [head] = cut.oversize
    assert head and set(head) == {ord("y")}


def test_at_the_end_a_last_line_without_newline_still_goes_on():
    cut = Cut(100).feed(b"one\ntw", b"o")
    assert cut.blocks == [b"one\n"]
    cut.framer.eof()
    assert cut.blocks == [b"one\n", b"two"]


def test_a_line_too_long_when_the_stream_ends_is_still_reported():
    cut = Cut(10).feed(b"z" * 15)
    cut.framer.eof()
    assert cut.blocks == [] and cut.oversize == [b"z" * 15]
    cut.framer.eof()  # nothing is reported twice
    assert cut.oversize == [b"z" * 15]
