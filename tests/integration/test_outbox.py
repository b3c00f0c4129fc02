"""The outbox add-on with real processes (docs/outbox.md): `mcp`-SDK hosts and servers on both
sides of `reminder-bridge stdio`, and proxy restarts in the middle.

- Outbox → reminders: an SDK server exposes a NimbleBrain-style outbox over a SQLite table the
  test writes into; an SDK host listens for `notifications/reminder`.
- Reminders → outbox: a host that polls reads the proxy's own outbox in front of the bundled
  push-only legacy server.
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.peers import outbox_server as server
from tests.peers.mcp_host import Reminders
from tests.paths import ROOT

OUTBOX_SERVER = [sys.executable, "-m", "tests.peers.outbox_server"]
LEGACY_SERVER = [sys.executable, "-m", "bridge.examples.mcp_legacy_server"]


def proxied(rules: Path, *command: str, options: tuple[str, ...] = ()) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "bridge", "stdio", "--rules", str(rules),
                                                               *options, "--", *command], cwd=str(ROOT))


async def until(check, what: str, timeout: float = 10.0) -> None:
    """Wait for ``check()`` to hold (it reads state another process or task changes), up to ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def event(event_id: str, **shown) -> dict:
    out = {"eventId": event_id, "name": "domain.active", "timestamp": "2026-09-01T18:42:10Z", "data": {"n": event_id}}
    if shown:
        out["_meta"] = {"ai.nimblebrain/notification": shown}
    return out


def event_ids(received: list[dict]) -> list[str]:
    about = [r["_meta"]["reminder-bridge/event"] for r in received]
    return [a["event"]["eventId"] if "event" in a else "gap" for a in about]


def pull_rules(tmp_path: Path, store: bool = True) -> Path:
    rules = tmp_path / "rules.toml"
    rules.write_text('[routes.acme]\nprotocol = "mcp"\n[routes.acme.outbox]\nresource = "acme://notifications"\n'
                     + ('store = "proxy.sqlite3"\n' if store else "") + 'poll_floor_ms = 100\npoll_ceiling_ms = 300\n')
    return rules


async def test_outbox_events_arrive_once_each_across_a_proxy_restart_with_a_gap_reminder(tmp_path):
    db = str(tmp_path / "server.db")
    rules = pull_rules(tmp_path)
    server.connect(db).close()
    first = Reminders()
    async with Client(proxied(rules, *OUTBOX_SERVER, db), mode="legacy", extensions=[first]):
        await until(lambda: server.reads(db), "the bootstrap read")
        server.write_event(db, event("e1", subject="acme.test", level="attention", title="acme.test is active",
                                     body="DNS propagated.\x1b[2J"))
        server.write_raw(db, '{"eventId": "e2", "name": "no timestamp", "data": {}}')  # dropped alone
        server.write_event(db, event("e3"))
        await until(lambda: len(first.received) == 2, "two reminders")
    server.write_event(db, event("e4"))  # while the proxy is down
    second = Reminders()
    async with Client(proxied(rules, *OUTBOX_SERVER, db), mode="legacy", extensions=[second]):
        await until(lambda: len(second.received) == 1, "the event written during the restart")
        server.write_event(db, event("e5"))
        server.report_gap(db)  # the server's own cap dropped events before anyone read them
        await until(lambda: len(second.received) == 3, "the gap and e5")
        # Nothing arrives twice: once the proxy has read the outbox again after e5, a last event
        # written now arrives behind anything a repeated delivery would have sent.
        polled = len(server.reads(db))
        await until(lambda: len(server.reads(db)) > polled, "another read of the outbox after e5")
        server.write_event(db, event("e6"))
        await until(lambda: "e6" in event_ids(second.received), "the last event")
    one = first.received[0]
    assert one["body"] == "acme.test is active\nDNS propagated. [2J"
    assert one["tags"] == ["domain.active", "level:attention"] and one["dedupeKey"] == "domain.active:acme.test"
    assert one["_meta"]["reminder-bridge/event"]["event"]["data"] == {"n": "e1"}
    assert event_ids(first.received) == ["e1", "e3"]
    assert event_ids(second.received) == ["e4", "gap", "e5", "e6"]
    assert second.received[1]["body"].startswith("Some events from acme://notifications were missed")
    reads = server.reads(db)
    assert reads[0] == ("resources/read", None, 100, 86_400_000)  # the first read ever: start from now
    assert all(cursor is not None for _, cursor, _, _ in reads[1:])  # the restart resumed; no second bootstrap


async def test_a_modern_server_with_the_events_extension_is_polled_with_events_poll(tmp_path):
    db = str(tmp_path / "server.db")
    rules = pull_rules(tmp_path, store=False)  # the store goes to --state-dir
    server.connect(db).close()
    host = Reminders()
    state = tmp_path / "state"
    async with Client(proxied(rules, *OUTBOX_SERVER, db, "--events", options=("--state-dir", str(state))),
                      mode="auto", extensions=[host]) as client:
        await until(lambda: server.reads(db), "the bootstrap poll")
        server.write_event(db, event("m1", title="mail from Ada"))
        # an ambient reminder reaches a 2026-07-28 host on a listen stream that opted in to reminders
        # (spec §3), which the SDK's `listen` cannot ask for: it rides a tool result instead
        deadline = asyncio.get_running_loop().time() + 10
        while not any("mail from Ada" in getattr(c, "text", "") for c in
                      (await client.call_tool("echo", {"text": "anything new?"})).content):
            assert asyncio.get_running_loop().time() < deadline, "timed out waiting for the event"
        assert client.protocol_version == "2026-07-28"
    assert host.received == []  # never pushed unasked
    assert {how for how, *_ in server.reads(db)} == {"events/poll"}
    assert (state / "outbox.sqlite3").is_file()


def serve_rules(tmp_path: Path) -> Path:
    rules = tmp_path / "serve.toml"
    rules.write_text('[routes.fs]\nprotocol = "mcp"\n[routes.fs.serve_outbox]\nresource = "bridge://reminders"\n'
                     'store = "served.sqlite3"\n')
    return rules


async def read(client: Client, query: str = "") -> dict:
    result = await client.read_resource("bridge://reminders" + query)
    return json.loads(result.contents[0].text)


async def test_a_polling_host_reads_every_reminder_once_in_order_across_a_proxy_restart(tmp_path):
    rules = serve_rules(tmp_path)
    async with Client(proxied(rules, *LEGACY_SERVER), mode="auto") as client:
        listed = await client.list_resources()
        assert [r.uri for r in listed.resources] == ["bridge://reminders"]
        boot = await read(client, "?maxEvents=10&maxAgeMs=60000")
        assert (boot["events"], boot["truncated"], boot["hasMore"]) == ([], False, False)
        for path in ("a.py", "b.py"):
            result = await client.call_tool("touch_file", {"path": path})
            assert [c.text for c in result.content] == [f"touched {path}"]  # not in tool results: in the outbox
        page = await read(client, f"?cursor={boot['cursor']}&maxEvents=1&maxAgeMs=60000")
        assert page["hasMore"]
        rest = await read(client, f"?cursor={page['cursor']}&maxEvents=10&maxAgeMs=60000")
    async with Client(proxied(rules, *LEGACY_SERVER), mode="legacy") as client:
        await client.call_tool("touch_file", {"path": "c.py"})
        after = await read(client, f"?cursor={rest['cursor']}&maxEvents=10&maxAgeMs=60000")
        empty = await read(client, f"?cursor={after['cursor']}&maxEvents=10&maxAgeMs=60000")
    seen = page["events"] + rest["events"] + after["events"]
    assert [e["data"]["reminder"]["dedupeKey"] for e in seen] == [
        "file_changed:a.py", "file_changed:b.py", "file_changed:c.py"]
    assert len({e["eventId"] for e in seen}) == 3
    assert seen[0]["_meta"]["ai.nimblebrain/notification"]["title"] == "a.py changed externally; re-read it before editing."
    assert empty["events"] == [] and not any(p["truncated"] for p in (page, rest, after, empty))


def test_refused_declarations_stop_the_proxy_with_the_reason(tmp_path):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"_meta": {"ai.nimblebrain/host": {"notifications": {"resource": "ui://acme"}}}}))
    rules = tmp_path / "rules.toml"
    rules.write_text('[routes.acme]\nprotocol = "mcp"\n[routes.acme.outbox]\nmanifest = "manifest.json"\n'
                     '[routes.acme.serve_outbox]\nresource = "acme://reminders#top"\n')
    run = subprocess.run([sys.executable, "-m", "bridge", "stdio", "--rules", str(rules), "--", "true"],
                         capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert run.returncode == 2
    assert (f"{rules}:4: routes.acme.outbox.manifest: manifest '{manifest}': "
            '_meta["ai.nimblebrain/host"].notifications.resource uses the ui:// scheme, which hosts resolve themselves'
            ) in run.stderr
    assert f"{rules}:6: routes.acme.serve_outbox.resource: carries a fragment" in run.stderr


# -- the same on `serve`: a 2025-11-25 session over Streamable HTTP ---------------------------------
async def test_an_outbox_on_a_serve_route_runs_per_session_and_a_new_session_starts_from_now(tmp_path):
    """The add-on runs per MCP session on `serve` as it does per connection on stdio: the session's
    own polls carry its Mcp-Session-Id, events reach the session's stream, and a session that
    starts after a proxy restart has an outbox of its own, read from now: nothing of another
    session's (tests/fault/test_outbox_isolation.py resumes a session across restarts)."""
    from tests.peers.processes import free_port, proxy

    db = str(tmp_path / "server.db")
    server.connect(db).close()
    port = free_port()
    upstream = subprocess.Popen([*OUTBOX_SERVER, db, "--http", str(port)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=str(ROOT))
    rules = tmp_path / "serve.toml"
    rules.write_text(f'[routes.acme]\nprotocol = "mcp"\npath = "/"\nupstream = "http://127.0.0.1:{port}"\n'
                     '[routes.acme.outbox]\nresource = "acme://notifications"\nstore = "proxy.sqlite3"\n'
                     'poll_floor_ms = 100\npoll_ceiling_ms = 300\n')
    try:
        await until(lambda: _accepts(port), "the upstream to listen")
        bridge = proxy("--rules", str(rules))
        first = Reminders()
        try:
            async with Client(f"http://127.0.0.1:{bridge.port}/mcp", mode="legacy", extensions=[first]) as client:
                await until(lambda: server.reads(db), "the bootstrap read")
                server.write_event(db, event("s1"))
                server.write_event(db, event("s2"))
                await until(lambda: len(first.received) == 2, "two reminders")
                assert [c.text for c in (await client.call_tool("echo", {"text": "hi"})).content] == ["hi"]
        finally:
            bridge.stop()
        server.write_event(db, event("s3"))  # while the proxy is down, and no session is there
        bridge = proxy("--rules", str(rules))
        second = Reminders()
        try:
            async with Client(f"http://127.0.0.1:{bridge.port}/mcp", mode="legacy", extensions=[second]):
                await until(lambda: [c for _, c, _, _ in server.reads(db)].count(None) == 2, "its own bootstrap read")
                server.write_event(db, event("s4"))
                await until(lambda: "s4" in event_ids(second.received), "the event written once it was there")
        finally:
            bridge.stop()
        assert event_ids(first.received) == ["s1", "s2"]
        assert event_ids(second.received) == ["s4"]
    finally:
        upstream.terminate()
        upstream.wait(10)


def _accepts(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


# -- 2026-07-28 on `serve`: requests with no session, one identity ---------------------------------
@pytest.mark.parametrize("server_at", ["upstream", "command"])
async def test_a_2026_07_28_host_on_serve_gets_each_outbox_event_once_in_a_later_tool_result(tmp_path, server_at):
    """A 2026-07-28 request has no session and ends with its answer, often before the answer to an
    outbox poll it would have made: the identity's keeper polls instead, so the cursor is stored
    (each read goes on from the last) and an event reaches the host once, in a later tool result
    (the SDK's host cannot ask a listen stream for reminders), on a route of one era, in front of
    an HTTP server or a stdio `command`."""
    import anyio
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    from tests.peers.processes import peer, proxy

    db = str(tmp_path / "server.db")
    server.connect(db).close()
    upstream = None
    if server_at == "upstream":
        upstream = peer("tests.peers.era_outbox_server", db, "2026-07-28", "--http")
        where = f'upstream = "http://127.0.0.1:{upstream.port}/mcp"'
    else:
        where = f"command = {json.dumps([sys.executable, '-m', 'tests.peers.era_outbox_server', db, '2026-07-28'])}"
    rules = tmp_path / "serve.toml"
    rules.write_text(f'[routes.acme]\nprotocol = "mcp"\npath = "/mcp"\n{where}\n'
                     '[routes.acme.outbox]\nresource = "acme://notifications"\nstore = "proxy.sqlite3"\n'
                     'poll_floor_ms = 100\npoll_ceiling_ms = 300\nidentity = "header:authorization"\n')
    bridge = proxy("--rules", str(rules))
    http = create_mcp_http_client(headers={"Authorization": "Bearer ada"})
    try:
        async with Client(streamable_http_client(f"http://127.0.0.1:{bridge.port}/mcp", http_client=http),
                          mode="2026-07-28", extensions=[Reminders()]) as client:
            async def asking(found, text: str):
                with anyio.fail_after(20):
                    while not (got := found([c.text for c in (await client.call_tool("echo", {"text": text})).content])):
                        pass
                return got

            await asking(lambda _: any(cursor is not None for _, cursor, *_ in server.reads(db)), "the next read")
            server.write_event(db, event("m1", title="mail from Ada"))
            shown = await asking(lambda got: [t for t in got if "mail from Ada" in t], "new?")
            after = await asking(lambda got: got, "after")
        assert len(shown) == 1 and shown[0].startswith('<system-reminder id="')
        assert after == ["after"]  # once: not again in the next result
        cursors = [cursor for _, cursor, *_ in server.reads(db)]
        assert cursors[0] is None and None not in cursors[1:]  # one bootstrap: every later read from the stored cursor
    finally:
        bridge.stop()
        if upstream is not None:
            upstream.stop()
