"""An MCP route's era mix (issue 21, point 3): hosts and servers per MCP revision as the flow's
handshakes report them, the requests the era bridge took, and whether the route still needs the
bridge; counted by the Recorder in prometheus_client's types too. No socket: an injected clock."""
from __future__ import annotations

import io
import json

from bridge.admin import prometheus_text
from bridge.console.feed import Feed
from bridge.console.status import era_readiness, route_status, table
from bridge.rules import parse_rules_text
from bridge.state.scope import Scope
from bridge.telemetry import Recorder
from tests.flows import make_flow
from tests.unit.console.test_timeline import T0, Clock
from tests.unit.test_admin import value

MODERN, LEGACY = "2026-07-28", "2025-11-25"
ENVELOPE = "io.modelcontextprotocol/"


def handshake(feed: Feed, era: str, name: str | None = "sdk", *, side: str = "host") -> None:
    """One handshake of ``name``'s connection (a host) or of the server ``name``."""
    feed.handshake({"route": "r", "protocol": "mcp", "side": side, "dialect": "standard", "client": name,
                    "version": "2.3", "capabilities": {}, "scope": Scope.connection("r", f"conn-{name}"), "era": era})


def verdict(feed: Feed, bridging: str | None, *, bridged: int = 0, window_s: float = 3600.0) -> dict:
    return era_readiness(feed.routes.get("r"), bridging=bridging, bridged=bridged, now=feed.clock(),
                         window_s=window_s)


def test_a_host_is_on_the_era_it_spoke_last_and_a_server_on_every_era_it_answered():
    feed = Feed(clock=Clock(T0))
    handshake(feed, MODERN, "prober")  # mcp 2.3.0 `auto`: server/discover first ...
    handshake(feed, LEGACY, "prober")  # ... then initialize, on the same connection
    handshake(feed, MODERN, "pinned")
    handshake(feed, LEGACY, "dual", side="peer")
    handshake(feed, MODERN, "dual", side="peer")
    stats = feed.routes["r"]
    assert [host.era for host in stats.seen("host", 0)] == [MODERN, LEGACY]
    assert stats.eras["host"][MODERN].count == 2 and stats.eras["host"][LEGACY].count == 1
    [server] = stats.seen("peer", 0)
    assert server.speaks(LEGACY, T0) and server.speaks(MODERN, T0) and not server.speaks(LEGACY, T0 + 1)


def test_a_bridged_route_needs_the_bridge_while_hosts_of_the_other_era_come_and_names_them():
    clock = Clock(T0)
    feed = Feed(clock=clock)
    assert verdict(feed, LEGACY) == {"needed": None, "text": "the era bridge saw no host in the last 1 h",
                                     "hosts": {LEGACY: 0, MODERN: 0}, "bridged_hosts": []}
    for name in ("claude-code", "zed", None):
        handshake(feed, MODERN, name)
    handshake(feed, LEGACY, "old-ide")
    handshake(feed, LEGACY, "harn", side="peer")
    seen = verdict(feed, LEGACY, bridged=12)
    assert seen["needed"] is True and seen["bridged_hosts"] == ["claude-code", "zed"]
    assert seen["text"] == ("still needs the era bridge — 3 hosts on 2026-07-28 (claude-code, zed; 1 without a "
                            "clientInfo name) talk to a 2025-11-25-only server through the bridge in the last 1 h; "
                            "12 requests bridged since the route started")
    assert seen["hosts"] == {LEGACY: 1, MODERN: 3}
    clock.now += 2 * 3600  # the modern hosts went; a 2025-11-25 host still comes
    handshake(feed, LEGACY, "old-ide")
    idle = verdict(feed, LEGACY, bridged=12)
    assert idle["needed"] is False and idle["text"].startswith(
        "the era bridge is idle — no host on 2026-07-28 in the last 1 h: 1 host, all on 2025-11-25, the server's era")
    assert verdict(feed, LEGACY, window_s=86400.0)["needed"] is True


def test_a_route_without_a_bridge_relies_on_none():
    feed = Feed(clock=Clock(T0))
    assert verdict(feed, None)["text"] == "no era bridge on this route — no host seen in the last 1 h"
    handshake(feed, MODERN, "pinned")  # (a pinned 2026-07-28 host asks no discover: no server handshake)
    handshake(feed, LEGACY, "old-ide")
    assert verdict(feed, None) == {
        "needed": False, "hosts": {LEGACY: 1, MODERN: 1}, "bridged_hosts": [],
        "text": "no era bridge on this route — 2 hosts in the last 1 h (1 on 2025-11-25, 1 on 2026-07-28), each "
                "passed to the server in its own era"}


def flow_through(recorder: Recorder, rules: str):
    """A 2026-07-28 host's discover and its answer (the era bridge's, on a bridged route)."""
    settings = parse_rules_text(rules).defaults
    flow = make_flow("mcp", settings, recorder)
    meta = {f"{ENVELOPE}protocolVersion": MODERN, f"{ENVELOPE}clientCapabilities": {},
            f"{ENVELOPE}clientInfo": {"name": "claude-code", "version": "2"}}
    flow.from_host(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                               "params": {"_meta": meta}}).encode())
    flow.from_peer(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        "resultType": "complete", "supportedVersions": [MODERN], "capabilities": {},
        "_meta": {f"{ENVELOPE}serverInfo": {"name": "harn", "version": "1"}}}}).encode())
    return settings


def test_the_flow_reports_each_side_s_era_and_status_and_metrics_show_the_mix():
    """The server's era is the one the rules name when they do (the bridge below the flow answers in
    the host's); `/api/status` and `/metrics` show the mix, the status table names the route."""
    recorder = Recorder(route="fs", log=io.StringIO())
    feed = Feed(clock=Clock(T0))
    feed.attach([recorder])
    settings = flow_through(recorder, f'[defaults]\nhost_era = "{MODERN}"\nserver_era = "{LEGACY}"\n')
    recorder.bridged(MODERN, LEGACY)
    recorder.bridged(MODERN, LEGACY)
    recorder.status_source = lambda: {"transport": "stdio", "protocol": "mcp", "stage": "translate",
                                      "settings": settings, "sessions": 1}
    route = route_status(recorder, feed, now=T0, window_s=3600.0)
    eras = route["eras"]
    assert (eras["host_era"], eras["server_era"], eras["bridged_requests"]) == (MODERN, LEGACY, 2)
    assert eras["bridged"] == [{"host_era": MODERN, "server_era": LEGACY, "requests": 2}]
    assert eras["hosts"][MODERN]["hosts"] == 1 and eras["hosts"][LEGACY]["hosts"] == 0
    assert eras["servers"][LEGACY] == {"count": 1, "in_window": 1, "hosts": 1, "last_seen": T0}
    assert eras["servers"][MODERN]["hosts"] == 0
    assert [server.name for server in feed.routes["fs"].seen("peer", 0)] == ["harn"]  # discover's serverInfo
    assert eras["readiness"]["needed"] is True and "(claude-code)" in eras["readiness"]["text"]
    shown = table({"routes": [route], "time": T0, "since": T0, "window_s": 3600.0})
    assert "  fs: still needs the era bridge — 1 host on 2026-07-28 (claude-code)" in shown
    text = prometheus_text(recorder)
    assert value(text, "reminder_bridge_era_bridged_requests_total", route="fs", host_era=MODERN,
                 server_era=LEGACY) == 2
    assert value(text, "reminder_bridge_era_handshakes_total", protocol="mcp", route="fs", side="host",
                 era=MODERN) == 1
    assert value(text, "reminder_bridge_era_handshakes_total", protocol="mcp", route="fs", side="peer",
                 era=LEGACY) == 1
    other = Recorder(route="a2a", log=io.StringIO())
    other.status_source = lambda: {"protocol": "a2a"}
    assert route_status(other, feed, now=T0, window_s=3600.0)["eras"] is None  # MCP only


def test_an_unbridged_route_reports_the_server_in_the_host_s_era():
    recorder = Recorder(route="fs", log=io.StringIO())
    flow_through(recorder, "")
    text = prometheus_text(recorder)
    assert value(text, "reminder_bridge_era_handshakes_total", protocol="mcp", route="fs", side="peer",
                 era=MODERN) == 1
