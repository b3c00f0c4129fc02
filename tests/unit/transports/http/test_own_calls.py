"""What the proxy's own requests carry upstream over HTTP (bridge/transports/http/own_calls.py), no socket."""
from __future__ import annotations

from bridge.pipeline.commands import PEER, Call
from bridge.transports.http.own_calls import own_headers

HOST_REQUEST = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo",
                "Authorization": "Bearer t"}


def test_a_2026_07_28_call_mirrors_its_own_method_and_name_not_the_host_request_s():
    read = own_headers(HOST_REQUEST, Call(PEER, b"{}", "rb1", "resources/read", "acme://n?cursor=4"))
    assert read == {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read",
                    "Mcp-Name": "acme://n?cursor=4", "Authorization": "Bearer t"}
    poll = own_headers(HOST_REQUEST, Call(PEER, b"{}", "rb2", "events/list"))
    assert poll["Mcp-Method"] == "events/list" and "Mcp-Name" not in poll  # it names nothing
    assert HOST_REQUEST["Mcp-Method"] == "tools/call"  # the session's copy stays as the host sent it


def test_headers_of_a_2025_11_25_session_are_left_as_they_are():
    session = {"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": "s1"}
    assert own_headers(session, Call(PEER, b"{}", "rb3", "resources/read", "acme://n")) is session
