"""`serve`'s forwarding rules and session table, without sockets: which headers cross, which
origins pass, how upstream URLs are joined and shown, how sessions expire and are evicted."""
from __future__ import annotations

import base64

from bridge.pipeline.mcp import McpFlow
from bridge.telemetry import Recorder
from bridge.transports.forwarding import (
    Upstream, end_to_end, origin_allowed, redact, upstream_headers, with_own,
)
from bridge.transports.sessions import Session, SessionTable


def test_headers_named_in_connection_and_hop_by_hop_ones_never_cross():
    headers = {"Connection": "keep-alive, X-Hop ,x-other", "X-Hop": "1", "X-Other": "2", "Keep-Alive": "5",
               "Transfer-Encoding": "chunked", "X-End": "3", "Authorization": "Bearer t"}
    assert end_to_end(headers) == {"X-End": "3", "Authorization": "Bearer t"}
    assert end_to_end({"connection": "close", "X-End": "3"}) == {"X-End": "3"}
    assert end_to_end({"X-End": "3", "Connection": "X-END"}) == {}  # named before or after, any case


def test_the_upstream_gets_its_own_host_and_forwarded_headers_name_the_client_side():
    out = upstream_headers({"Host": "proxy:8080", "X-Forwarded-For": "10.0.0.1", "Accept-Encoding": "gzip",
                            "Origin": "http://localhost:3000", "Authorization": "Bearer client"},
                           client="10.0.0.2", host="proxy:8080", scheme="http",
                           own={"authorization": "Basic abc", "X-Tenant": "acme"})
    assert "Host" not in out and out["Accept-Encoding"] == "identity"
    assert out["X-Forwarded-For"] == "10.0.0.1, 10.0.0.2" and out["X-Forwarded-Host"] == "proxy:8080"
    assert out["Origin"] == "http://localhost:3000" and out["authorization"] == "Basic abc"
    assert "Authorization" not in out and out["X-Tenant"] == "acme"  # the route's own, in place of the client's
    ws = upstream_headers({"Sec-WebSocket-Key": "k", "Sec-WebSocket-Version": "13", "Upgrade": "websocket",
                           "X-Tenant": "t"}, client=None, host="p", scheme="http", websocket=True)
    assert ws == {"X-Tenant": "t", "X-Forwarded-Host": "p", "X-Forwarded-Proto": "http"}


def test_origins_pass_when_absent_listed_or_loopback():
    loopback = ["loopback"]
    assert origin_allowed(None, loopback)
    for origin in ("http://localhost:5173", "https://127.0.0.1", "http://[::1]:6274", "http://app.localhost"):
        assert origin_allowed(origin, loopback), origin
    for origin in ("http://evil.example", "null", "http://127.0.0.1.evil.example", "file://"):
        assert not origin_allowed(origin, loopback), origin
    assert origin_allowed("HTTPS://App.Example", ["https://app.example"])
    assert not origin_allowed("https://app.example:8443", ["https://app.example"])
    assert origin_allowed("http://anything", ["*"])


def test_upstream_urls_keep_their_query_and_credentials_stay_secret():
    up = Upstream("https://admin:p%40ss@api.example:8443/mcp?api_key=K3Y&v=2")
    assert up.url("", "") == "https://api.example:8443/mcp?api_key=K3Y&v=2"
    assert up.url("/tools", "session=1") == "https://api.example:8443/mcp/tools?api_key=K3Y&v=2&session=1"
    assert up.own == {"Authorization": "Basic " + base64.b64encode(b"admin:p@ss").decode()}
    assert up.shown == "https://***@api.example:8443/mcp?api_key=***&v=***"
    assert up.scrub("GET https://admin:p%40ss@api.example?api_key=K3Y failed, p@ss") == \
        "GET https://***:***@api.example?api_key=*** failed, ***"
    assert redact("http://host/p?flag&x=") == "http://host/p?flag&x=***"
    assert Upstream("http://[::1]:9000").url("/a", "") == "http://[::1]:9000/a"


def test_a_route_without_a_path_sends_every_path_unchanged_to_its_upstream_endpoint():
    endpoint = Upstream("http://host:3000/mcp?k=v", mounted=False)
    assert endpoint.url("/mcp", "") == "http://host:3000/mcp?k=v"  # the host posts where the URL says
    assert endpoint.url("/.well-known/oauth-protected-resource", "") == \
        "http://host:3000/.well-known/oauth-protected-resource?k=v"
    mounted = Upstream("http://host:3000/mcp")  # a route with a `path`: the path stands for the URL
    assert mounted.url("", "") == "http://host:3000/mcp" and mounted.url("/x", "") == "http://host:3000/mcp/x"


def test_a_routes_headers_replace_the_clients_and_their_values_are_secrets():
    up = Upstream("https://user:pw1@api.example/mcp", {"authorization": "Bearer tok-123", "X-Key": "k3y"})
    assert up.own == {"authorization": "Bearer tok-123", "X-Key": "k3y"}  # its header wins over the userinfo
    assert up.scrub("refused Bearer tok-123 (tok-123), key k3y") == "refused *** (***), key ***"
    assert with_own({"Authorization": "Bearer old", "X-Key": "kept?", "Accept": "a"}, {"X-Key": "new"},
                    former={"Authorization": "Bearer old"}) == {"Accept": "a", "X-Key": "new"}


def test_sessions_expire_after_idle_time_that_slides_and_evictions_are_counted():
    now = [0.0]
    ended: list[str] = []
    table = SessionTable(max_sessions=2, idle=10.0, ended=ended.append, clock=lambda: now[0])
    a, b, c = (Session(McpFlow(recorder=Recorder())) for _ in range(3))
    table.put("a", a)
    for _ in range(5):  # used every 6 s: never idle 10 s
        now[0] += 6
        assert table.get("a") is a
    now[0] += 11
    table.expire()
    assert table.get("a") is None and ended == ["expired"]
    table.put("a", a)
    table.put("b", b)
    table.get("a")  # a is now the more recently used
    table.put("c", c)
    assert table.get("b") is None and table.get("a") is a and ended == ["expired", "evicted"]
    table.close("c")
    assert ended == ["expired", "evicted", "closed"] and len(table) == 1


def test_a_session_keeps_at_most_its_limit_of_waiting_frames():
    session = Session(McpFlow(recorder=Recorder()), limit=3)
    session.hold([b"1", b"2"])
    session.hold([b"3", b"4"])
    assert session.take_waiting() == [b"2", b"3", b"4"] and session.dropped == 1
    assert session.pending_counts() == {"host": 0}
