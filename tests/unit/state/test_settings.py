"""`StateSettings` (spec §12): which shared-state URLs and options are accepted, and the message
each refused one gets."""
from __future__ import annotations

import pytest

from bridge.state import StateSettings


@pytest.mark.parametrize("url", [None, "memory", "redis://redis:6379/0", "redis://:secret@10.0.0.5",
                                 "rediss://user:pw@cache.example:6380/3", "unix:///run/redis.sock?db=1"])
def test_state_settings_accept(url):
    settings = StateSettings(url=url)
    assert settings.shared == (url not in (None, "memory"))


@pytest.mark.parametrize(("fields", "message"), [
    ({"url": "http://redis:6379"}, "unknown scheme 'http'"),
    ({"url": "redis:6379"}, "redis://"),
    ({"url": "redis://redis:99999/0"}, "redis://"),
    ({"url": "redis://redis:6379/zero"}, "the database must be a number"),
    ({"url": "redis:///0"}, "no host"),
    ({"url": "unix://"}, "no socket path"),
    ({"on_unavailable": "maybe"}, "'open' or 'closed'"),
    ({"timeout_ms": 0}, "greater than or equal to 1"),
    ({"key_prefix": ""}, "at least 1 character"),
    ({"key_prefix": "a b"}, "spaces"),
    ({"urls": "redis://x"}, "Extra inputs are not permitted"),
])
def test_state_settings_refuse_with_a_clear_message(fields, message):
    with pytest.raises(ValueError, match=message):
        StateSettings(**fields)
