"""The console's host counting (bridge/console/feed.py), driven by an injected clock: a host is
counted once however many requests it makes, and the table stays bounded however many hosts
arrive."""
from __future__ import annotations

from bridge.console.feed import MAX_HOSTS, Feed
from bridge.console.status import readiness
from bridge.state.scope import Scope
from tests.unit.console.test_timeline import T0, Clock

CAPS = {"experimental": {"reminders": {}}}


def handshake(feed: Feed, scope, *, name="sdk", version="2.3", caps=CAPS, dialect="standard", side="host") -> None:
    feed.handshake({"route": "r", "protocol": "mcp", "side": side, "dialect": dialect, "client": name,
                    "version": version, "capabilities": caps, "scope": scope})


def hosts(feed: Feed, cutoff: float = 0.0) -> int:
    return len(feed.routes["r"].seen("host", cutoff))


def test_one_stateless_client_is_one_host_however_many_requests_it_makes():
    feed = Feed(clock=Clock(T0))
    for _ in range(6):  # 2026-07-28: every request carries the envelope, each its own request scope
        handshake(feed, Scope.request("r"))
    assert hosts(feed) == 1 and feed.routes["r"].dialects["host"]["standard"].count == 6
    verdict = readiness(feed.routes["r"], protocol="mcp", stage="translate", now=T0, window_s=3600)
    assert verdict["hosts"] == {"standard": 1, "legacy": 0, "none": 0}
    assert verdict["host_handshakes"]["standard"] == 6
    assert "1 host (1 standard)" in verdict["text"]
    # what else tells hosts apart: version, capabilities, and a scope that outlives a request
    handshake(feed, Scope.request("r"), version="2.4")
    handshake(feed, Scope.request("r"), caps={"experimental": {"reminders": {}}, "sampling": {}})
    handshake(feed, Scope.identity("r", "header:authorization", "Bearer alice"))
    handshake(feed, Scope.identity("r", "header:authorization", "Bearer alice"))
    handshake(feed, Scope.identity("r", "header:authorization", "Bearer bob"))
    handshake(feed, Scope.connection("r"))
    assert hosts(feed) == 6


def test_hosts_are_bounded_and_a_count_that_lost_some_says_at_least():
    clock = Clock(T0)
    feed = Feed(clock=clock)
    for n in range(MAX_HOSTS + 10):
        clock.now = T0 + n
        handshake(feed, Scope.request("r"), name=f"host-{n}", caps=[[[[n]]]])
    assert len(feed.routes["r"].hosts["host"]) == MAX_HOSTS
    wide = readiness(feed.routes["r"], protocol="mcp", stage="translate", now=clock.now, window_s=86400)
    assert wide["hosts_complete"] is False and f"at least {MAX_HOSTS} hosts" in wide["text"]
    narrow = readiness(feed.routes["r"], protocol="mcp", stage="translate", now=clock.now, window_s=100)
    assert narrow["hosts_complete"] is True and "101 hosts" in narrow["text"]


def test_capabilities_no_json_can_encode_still_count_the_handshake():
    feed = Feed(clock=Clock(T0))
    deep: list = []
    node = deep
    for _ in range(100_000):  # deeper than the encoder recurses
        node.append([])
        node = node[0]
    handshake(feed, Scope.request("r"), caps=deep)
    handshake(feed, Scope.request("r"), caps={"odd": {1, 2}})  # default=str: a set is still read
    assert hosts(feed) == 2


def test_a_window_that_reaches_back_before_start_up_says_since_start_up():
    """A proxy up for a minute has not seen 24 h: the verdict says what it did see, and since when."""
    clock = Clock(T0 + 60)
    feed = Feed(clock=Clock(T0))  # the statistics began at T0
    handshake(feed, Scope.request("r"))

    def verdict(window_s: float) -> dict:
        return readiness(feed.routes["r"], protocol="mcp", stage="translate", now=clock.now, window_s=window_s,
                         started=feed.started)

    young = verdict(86400)
    assert young["text"] == ("ready for enforce: yes — no legacy host since start-up: 1 host (1 standard), "
                             "no legacy reminder from the host side")
    assert young["since"] == T0
    handshake(feed, Scope.request("r"), name="old-ide", dialect="legacy")
    assert verdict(86400)["text"] == "ready for enforce: no — 1 legacy host seen since start-up (old-ide)"
    clock.now = T0 + 7200  # up for two hours: a one-hour window is whole again
    whole = verdict(3600)
    assert whole["text"] == ("ready for enforce: yes — nothing seen in the last 1 h: no host and no reminder from the "
                             "host side")
    assert whole["since"] == clock.now - 3600
