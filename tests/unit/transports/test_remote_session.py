"""What `stdio --upstream` keeps of its HTTP upstream: headers, the session, the transport, resumption."""
from __future__ import annotations

from bridge.transports.forwarding import Upstream
from bridge.transports.remote_session import (
    AUTO, LEGACY_SSE, STREAMABLE, RemoteSession, Resume, one_line,
)
from bridge.transports.sse import SseSplitter


def event(raw: bytes):
    return SseSplitter().feed(raw)[0]


def test_one_line_blanks_line_ends_and_keeps_the_object_otherwise():
    plain = b'{"a":1}'
    assert one_line(plain) is plain
    assert one_line(b'{\n  "a": "x\\ny",\r\n  "b": 2\n}') == b'{   "a": "x\\ny",    "b": 2 }'


def test_headers_carry_the_session_mirrored_headers_and_the_routes_own_in_place_of_any_other():
    remote = RemoteSession(Upstream("http://127.0.0.1:9/mcp", {"Authorization": "Bearer t0ken"}))
    assert remote.headers() == {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                                "Authorization": "Bearer t0ken"}
    remote.answered(200, {"Mcp-Session-Id": "s1"}, first=True)
    assert remote.transport == STREAMABLE and remote.listens
    got = remote.headers({"MCP-Protocol-Version": "2025-11-25", "authorization": "Bearer other"}, stream=True,
                         last_event_id="e7")
    assert got == {"Accept": "text/event-stream", "Mcp-Session-Id": "s1", "Last-Event-ID": "e7",
                   "MCP-Protocol-Version": "2025-11-25", "Authorization": "Bearer t0ken"}


def test_userinfo_becomes_basic_auth_and_the_url_keeps_its_query():
    remote = RemoteSession(Upstream("https://u:p%40ss@mcp.example/mcp?key=K"))
    assert remote.url == "https://mcp.example/mcp?key=K"
    assert remote.headers()["Authorization"] == "Basic dTpwQHNz"


def test_a_session_is_kept_only_from_a_success_and_ends():
    remote = RemoteSession(Upstream("http://h/mcp"))
    assert not remote.answered(500, {"Mcp-Session-Id": "bad"}, first=True)
    assert remote.session_id is None and not remote.listens  # sessionless: no GET stream to open
    remote.answered(200, {"Mcp-Session-Id": "s2"}, first=False)
    remote.ended()
    assert remote.session_id is None


def test_auto_falls_back_to_sse_when_the_first_post_is_refused_as_a_get_only_url():
    remote = RemoteSession(Upstream("http://h/events"))
    assert remote.transport == AUTO
    assert remote.answered(405, {}, first=True)
    assert remote.legacy and not remote.listens
    later = RemoteSession(Upstream("http://h/mcp"))
    later.answered(200, {}, first=True)
    assert not later.answered(404, {}, first=False) and later.transport == STREAMABLE  # only the first POST decides
    assert RemoteSession(Upstream("http://h/sse/")).transport == LEGACY_SSE  # the path says so at once
    assert RemoteSession(Upstream("http://h/sse"), STREAMABLE).transport == STREAMABLE  # unless told


def test_the_endpoint_event_names_where_to_post_on_the_same_origin_only():
    remote = RemoteSession(Upstream("http://h:8/sse", {"X-Key": "k"}))
    assert not remote.endpoint_from(event(b"event: message\ndata: {}\n\n"))
    assert not remote.endpoint_from(event(b"event: endpoint\ndata: http://elsewhere/messages\n\n"))
    assert remote.post_url() == "http://h:8/sse"
    assert remote.endpoint_from(event(b"event: endpoint\ndata: /messages/?session_id=ab\n\n"))
    assert remote.post_url() == "http://h:8/messages/?session_id=ab"
    remote.session_id = "never sent on the legacy transport"
    assert "Mcp-Session-Id" not in remote.headers()


def test_resume_follows_the_last_id_and_the_servers_retry():
    resume = Resume()
    assert resume.last_id is None and resume.retry_s == 1.0
    resume.saw(event(b"id: e1\nretry: 250\ndata: {}\n\n"))
    assert (resume.last_id, resume.retry_s) == ("e1", 0.25)
    resume.saw(event(b"retry: soon\ndata: {}\n\n"))
    assert (resume.last_id, resume.retry_s) == ("e1", 0.25)
    resume.saw(event(b"id\ndata: {}\n\n"))  # an empty id resets it
    assert resume.last_id is None


INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}'
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
LIST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'


def test_the_opening_is_the_first_message_and_the_notification_right_after_it():
    remote = RemoteSession(Upstream("http://h/mcp"))
    completes = [remote.posting(frame) for frame in (INIT, INITIALIZED, LIST,
                                                    b'{"jsonrpc":"2.0","method":"notifications/cancelled"}')]
    assert remote.opening == [INIT, INITIALIZED]
    assert completes == [False, True, False, False]  # `initialized` completes the handshake
    alone = RemoteSession(Upstream("http://h/mcp"))  # a host that sends no `initialized` before its requests
    for frame in (INIT, LIST, INITIALIZED):
        alone.posting(frame)
    assert alone.opening == [INIT]


def test_a_lost_session_is_opened_again_once_and_only_the_session_that_was_lost():
    remote = RemoteSession(Upstream("http://h/mcp"))
    assert not remote.lost("s1")  # nothing to open it with yet
    remote.posting(INIT)
    remote.answered(200, {"Mcp-Session-Id": "s1"}, first=True)
    assert not remote.lost(None)  # a request that carried no session: a 404 is the URL's
    assert remote.lost("s1") and remote.session_id is None  # the replayed initialize carries none
    assert not remote.lost("s1")  # a second request that met the same 404: already being opened again
    remote.answered(200, {"Mcp-Session-Id": "s2"}, first=False)
    assert remote.session_id == "s2" and not remote.lost("s1")
    legacy = RemoteSession(Upstream("http://h/sse"))
    legacy.posting(INIT)
    assert not legacy.lost("s1")  # a 2024-11-05 session is its stream: no session id to lose
