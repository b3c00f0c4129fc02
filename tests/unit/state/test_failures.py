"""The one classifier of shared-state errors (`bridge.state.failures`): by type, never by message.

The exceptions are redis-py's own, built as its parser builds them from a reply: the error code
(`OOM`, `READONLY`, ...) is taken off the text, which is why a message check never matched."""
from __future__ import annotations

import asyncio

import pytest
from redis._parsers.base import BaseParser
from redis import exceptions

from bridge.state.failures import CAUSES, MalformedAnswer, cause, describe


@pytest.mark.parametrize("reply, label", [
    ("OOM command not allowed when used memory > 'maxmemory'.", "oom"),
    ("READONLY You can't write against a read only replica.", "readonly"),
    ("NOPERM User gw has no permissions to run the 'time' command", "noperm"),
    ("ERR The user executing the script can't run this command or subcommand script: abc", "error"),
    ("LOADING Redis is loading the dataset in memory", "loading"),
    ("NOSCRIPT No matching script.", "noscript"),
    ("WRONGPASS invalid username-password pair or user is disabled.", "auth"),
    ("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", "error"),
    ("WRONGTYPE Operation against a key holding the wrong kind of value", "error"),
])
def test_every_error_reply_is_unavailable_with_a_cause_by_its_type(reply, label):
    assert cause(BaseParser.parse_error(reply)) == label


@pytest.mark.parametrize("code", ["OOM", "READONLY", "NOPERM"])
def test_redis_py_takes_the_code_off_the_message_so_only_the_type_tells(code):
    exc = BaseParser.parse_error(f"{code} refused")
    assert str(exc) == "refused" and type(exc) is not exceptions.ResponseError


@pytest.mark.parametrize("exc, label", [
    (exceptions.ConnectionError("Error 111 connecting"), "connection"),
    (exceptions.TimeoutError("Timeout reading"), "timeout"),
    (asyncio.TimeoutError(), "timeout"),
    (ConnectionResetError(104, "reset"), "connection"),
    (exceptions.InvalidResponse("Protocol error"), "malformed"),
    (MalformedAnswer("CHARGE answered str"), "malformed"),
])
def test_transport_failures_and_unreadable_answers_are_unavailable(exc, label):
    assert cause(exc) == label and label in CAUSES


@pytest.mark.parametrize("exc", [KeyError("x"), TypeError("bug"), exceptions.DataError("Invalid input of type")])
def test_a_bug_in_the_proxy_is_not_mistaken_for_an_outage(exc):
    assert cause(exc) is None


def test_describe_is_short_and_escapes_control_characters():
    text = describe(exceptions.ResponseError("bad \x1b[2J" + "x" * 500))
    assert text.startswith("ResponseError: bad \\x1b[2J") and len(text) <= 210 and "\x1b" not in text


def test_describe_escapes_every_unprintable_character_and_names_a_bare_exception():
    text = describe(ConnectionError("reset \u202eevil\u2028line\x85 \ud800"))
    assert text == "ConnectionError: reset \\u202eevil\\u2028line\\x85 \\ud800"
    assert describe(TimeoutError()) == "TimeoutError"
