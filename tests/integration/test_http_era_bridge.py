"""Era bridging over Streamable HTTP (issue 21, point 2), real sockets: `mcp` 2.3.0 SDK hosts on
2026-07-28 in front of an SDK server that refuses anything of 2026-07-28
(tests.peers.legacy_only_http), through `reminder-bridge serve --host-era 2026-07-28
--server-era 2025-11-25`. The server's `/seen` says what reached it."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
from mcp import Client
from mcp_types import Implementation

from tests.peers.mcp_host import Reminders
from tests.peers.processes import eventually, free_port, get_json, peer, proxy

MODERN, LEGACY = "2026-07-28", "2025-11-25"
PROTOCOL = "io.modelcontextprotocol/protocolVersion"


@pytest.fixture(scope="module")
def upstream():
    server = peer("tests.peers.legacy_only_http")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def bridge(upstream, tmp_path_factory):
    rules = Path(tmp_path_factory.mktemp("eras")) / "rules.toml"
    rules.write_text('[defaults]\nrequire_declaration = false\n'
                     f'[routes.old]\nprotocol = "mcp"\nupstream = "http://127.0.0.1:{upstream.port}/mcp"\n')
    running = proxy("--rules", str(rules), "--host-era", MODERN, "--server-era", LEGACY)
    yield running
    running.stop()


def url(bridge) -> str:
    return f"http://127.0.0.1:{bridge.port}/mcp"


async def seen(upstream) -> list[dict]:
    return await get_json(upstream.port, "/seen")


def assert_legacy_wire(requests: list[dict]) -> None:
    """Nothing of 2026-07-28 reached the server, and its session was opened before anything else."""
    posts = [r for r in requests if r["method"] == "POST"]
    first = [json.loads(r["body"]).get("method") for r in posts[:2]]
    assert first == ["initialize", "notifications/initialized"]
    for r in requests:
        assert r["headers"].get("mcp-protocol-version") in (None, LEGACY), r
        assert "mcp-method" not in r["headers"] and "mcp-name" not in r["headers"]
        assert "io.modelcontextprotocol/" not in r["body"]
    assert all(r["headers"].get("mcp-session-id") for r in requests[1:])


async def test_the_server_alone_refuses_a_2026_07_28_host(upstream):
    async with Client(f"http://127.0.0.1:{upstream.port}/mcp", mode="auto") as client:
        assert client.protocol_version == LEGACY  # the probe was refused: it fell back to initialize


async def test_discover_tools_resources_prompts_and_a_reminder(bridge, upstream):
    ext = Reminders()
    before = len(await seen(upstream))
    async with Client(url(bridge), mode="auto", extensions=[ext]) as client:
        assert client.protocol_version == MODERN
        assert client.server_info is not None and client.server_info.name == "legacy-only"
        tools = await client.list_tools()
        echoed = await client.call_tool("echo", {"text": "hi"})
        reminded = await client.call_tool("remind", {"path": "a.py"})
        resources = await client.list_resources()
        read = await client.read_resource("file:///notes.txt")
        prompts = await client.list_prompts()
    assert {t.name for t in tools.tools} == {"echo", "remind", "log", "touch", "ask", "consult", "where"}
    assert [c.text for c in echoed.content] == ["hi"]
    assert [c.text for c in reminded.content] == ["touched a.py"]
    assert [str(r.uri) for r in resources.resources] == ["file:///notes.txt"]
    assert read.contents[0].text == "remember the milk"
    assert [p.name for p in prompts.prompts] == ["greet"]
    [reminder] = ext.received
    assert (reminder["id"], reminder["tags"], reminder["dedupeKey"], reminder["ttlTurns"]) == (
        "r-a.py", ["workspace", "file_changed"], "file_changed:a.py", 2)
    assert reminder["body"] == "a.py changed externally; re-read it before editing."
    requests = (await seen(upstream))[before:]
    assert_legacy_wire(requests)
    assert sum('"initialize"' in r["body"] for r in requests) == 1
    assert any(r["method"] == "GET" for r in requests)  # the session's GET stream is open


async def test_a_pinned_host_and_its_log_opt_in(bridge, upstream):
    """`mode=2026-07-28` sends no discover; its `logLevel` opt-in becomes `logging/setLevel`."""
    logs = []

    async def on_log(params):
        logs.append(params)

    before = len(await seen(upstream))
    async with Client(url(bridge), mode=MODERN, logging_callback=on_log, log_level="info",
                      client_info=Implementation(name="pinned", version="9")) as client:
        logged = await client.call_tool("log", {"text": "asked"})
        prompt = await client.get_prompt("greet", {"name": "Ada"})
    assert [c.text for c in logged.content] == ["logged"]
    assert "Hello, Ada!" in prompt.messages[0].content.text
    assert [(log.logger, log.data) for log in logs] == [("legacy", "asked")]
    requests = (await seen(upstream))[before:]
    assert_legacy_wire(requests)
    methods = [json.loads(r["body"]).get("method") for r in requests if r["method"] == "POST"]
    assert methods.index("logging/setLevel") < methods.index("tools/call")


async def test_hosts_with_other_client_info_get_sessions_of_their_own(bridge, upstream):
    """Two hosts at once, the same request ids, other client info: two upstream sessions, each
    answer to its own host."""
    before = len(await seen(upstream))

    async def host(name: str) -> list[str]:
        async with Client(url(bridge), mode=MODERN, client_info=Implementation(name=name, version="1")) as client:
            out = []
            for text in ("a", "b"):
                out += [c.text for c in (await client.call_tool("echo", {"text": name + text})).content]
            return out

    assert await asyncio.gather(host("one"), host("two")) == [["onea", "oneb"], ["twoa", "twob"]]
    requests = (await seen(upstream))[before:]
    opened = [json.loads(r["body"])["params"]["clientInfo"]["name"] for r in requests
              if r["method"] == "POST" and json.loads(r["body"]).get("method") == "initialize"]
    assert sorted(opened) == ["one", "two"]
    sessions = {r["headers"]["mcp-session-id"] for r in requests if "mcp-session-id" in r["headers"]}
    assert len(sessions) == 2


async def test_hosts_alike_share_one_session_and_keep_their_answers(bridge, upstream):
    """Two hosts with the same client info and the same request ids, at once: one upstream session,
    each host its own answers (the proxy's ids are unique in the session)."""
    before = len(await seen(upstream))

    async def host(word: str) -> list[str]:
        async with Client(url(bridge), mode=MODERN, client_info=Implementation(name="alike", version="1")) as client:
            calls = [client.call_tool("echo", {"text": f"{word}{n}"}) for n in range(3)]
            return [c.text for result in await asyncio.gather(*calls) for c in result.content]

    assert await asyncio.gather(host("x"), host("y")) == [["x0", "x1", "x2"], ["y0", "y1", "y2"]]
    requests = (await seen(upstream))[before:]
    initializes = [r for r in requests if r["method"] == "POST" and json.loads(r["body"]).get("method") == "initialize"]
    assert len(initializes) == 1
    ids = [json.loads(r["body"]).get("id") for r in requests if r["method"] == "POST"]
    called = [i for i in ids if i is not None and not str(i).startswith("rb-era-")]
    assert len(called) == len(set(called)) >= 6  # (the SDK lists the tools before its first call too)


async def test_an_idle_upstream_session_ends_and_the_next_request_opens_another(upstream, tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text(f'[routes.old]\nprotocol = "mcp"\nupstream = "http://127.0.0.1:{upstream.port}/mcp"\n'
                     'host_era = "2026-07-28"\nserver_era = "2025-11-25"\n')  # the keys, this time
    running = proxy("--rules", str(rules), "--session-idle", "1")
    try:
        before = len(await seen(upstream))
        async with Client(url(running), mode=MODERN) as client:
            await client.call_tool("echo", {"text": "once"})

        async def deleted():
            return [r for r in (await seen(upstream))[before:] if r["method"] == "DELETE"]

        [delete] = await eventually(deleted, timeout=20)
        async with Client(url(running), mode=MODERN) as client:
            await client.call_tool("echo", {"text": "again"})
        requests = (await seen(upstream))[before:]
        opened = [r for r in requests if r["method"] == "POST" and json.loads(r["body"]).get("method") == "initialize"]
        assert len(opened) == 2
        assert delete["headers"]["mcp-session-id"] != requests[-1]["headers"].get("mcp-session-id")
    finally:
        running.stop()


async def test_raw_hosts_get_json_or_each_message_as_an_event(bridge):
    """A host that takes only JSON gets the answer; one that takes SSE, the reminder then the answer."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"com.example/reminders": {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}

    def body(msg_id, path: str) -> dict:
        return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                "params": {"name": "remind", "arguments": {"path": path}, "_meta": meta}}

    sent = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "remind"}
    async with aiohttp.ClientSession() as http:
        async with http.post(url(bridge), json=body(7, "j.py"), headers={**sent, "Accept": "application/json"}) as r:
            assert r.headers["Content-Type"].startswith("application/json")
            answer = await r.json()
        async with http.post(url(bridge), json=body(8, "s.py"),
                             headers={**sent, "Accept": "application/json, text/event-stream"}) as r:
            assert r.headers["Content-Type"].startswith("text/event-stream")
            events = [json.loads(line[5:]) for line in (await r.read()).split(b"\n") if line.startswith(b"data:")]
    assert answer["id"] == 7 and answer["result"]["resultType"] == "complete"
    assert [e.get("method") for e in events] == ["notifications/reminder", None]
    assert events[0]["params"]["reminder"]["dedupeKey"] == "file_changed:s.py"
    assert events[1]["id"] == 8 and events[1]["result"]["content"][0]["text"] == "touched s.py"


async def test_what_a_2026_07_28_server_refuses_the_bridge_refuses_alike(bridge, upstream):
    """The bridge speaks 2026-07-28 for the server, so it refuses as such a server does (the
    conformance suite's `server-stateless`): an incomplete envelope 400/-32602, a header that is not
    the envelope's version 400/-32020, a version it does not speak 400/-32022, what 2026-07-28 removed
    and what the server does not know 404/-32601 (an answer alone goes as JSON, SSE or not); none of
    it reaches the server but the unknown method."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    sse = {"Accept": "application/json, text/event-stream"}

    async def post(http, method: str, params: dict, version: str = MODERN) -> tuple[int, dict]:
        async with http.post(url(bridge), json={"jsonrpc": "2.0", "id": 5, "method": method, "params": params},
                             headers={**sse, "MCP-Protocol-Version": version}) as r:
            assert r.headers["Content-Type"].startswith("application/json")
            return r.status, await r.json()

    before = len(await seen(upstream))
    async with aiohttp.ClientSession() as http:
        no_caps = {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}
        got = {"no _meta": await post(http, "server/discover", {}),
               "no capabilities": await post(http, "server/discover", no_caps),
               "mismatch": await post(http, "server/discover", {"_meta": {**meta, PROTOCOL: "v9"}}),
               "unsupported": await post(http, "server/discover", {"_meta": {**meta, PROTOCOL: "v9"}}, "v9")}
        for method in ("initialize", "ping", "logging/setLevel", "resources/subscribe", "unknown/method"):
            got[method] = await post(http, method, {"_meta": meta})
    codes = {why: (status, answer["id"], answer["error"]["code"]) for why, (status, answer) in got.items()}
    assert codes == {"no _meta": (400, 5, -32602), "no capabilities": (400, 5, -32602),
                     "mismatch": (400, 5, -32020), "unsupported": (400, 5, -32022), "initialize": (404, 5, -32601),
                     "ping": (404, 5, -32601), "logging/setLevel": (404, 5, -32601),
                     "resources/subscribe": (404, 5, -32601), "unknown/method": (404, 5, -32601)}
    assert got["unsupported"][1]["error"]["data"] == {"supported": [MODERN], "requested": "v9"}
    reached = [json.loads(r["body"]).get("method") for r in (await seen(upstream))[before:] if r["body"]]
    assert set(reached) <= {"initialize", "notifications/initialized", "unknown/method"}
    assert reached.count("initialize") <= 1  # the bridge's own, should this host's session be new


async def test_the_console_shows_a_mixed_fleet_and_names_the_hosts_that_need_the_bridge(upstream, tmp_path):
    """`server_era` alone, a fleet half migrated: two 2026-07-28 hosts bridged, a 2025-11-25 host
    through as it is. `/api/status` counts each host on its era, the server on 2025-11-25, the
    requests bridged, and names the two hosts that still need the bridge."""
    admin = free_port()
    rules = tmp_path / "rules.toml"
    rules.write_text('[defaults]\nrequire_declaration = false\n'
                     f'[routes.old]\nprotocol = "mcp"\nupstream = "http://127.0.0.1:{upstream.port}/mcp"\n'
                     f'server_era = "{LEGACY}"\n')
    running = proxy("--rules", str(rules), "--admin", f"127.0.0.1:{admin}")
    try:
        for name, mode in (("alpha", MODERN), ("beta", "auto"), ("old-ide", "legacy")):
            async with Client(url(running), mode=mode, client_info=Implementation(name=name, version="1")) as client:
                await client.call_tool("echo", {"text": name})
        [route] = (await get_json(admin, "/api/status"))["routes"]
    finally:
        running.stop()
    eras = route["eras"]
    assert (eras["host_era"], eras["server_era"]) == ("auto", LEGACY)
    assert {era: mix["hosts"] for era, mix in eras["hosts"].items()} == {LEGACY: 1, MODERN: 2}
    assert {era: mix["hosts"] for era, mix in eras["servers"].items()} == {LEGACY: 1, MODERN: 0}
    assert eras["bridged"] == [{"host_era": MODERN, "server_era": LEGACY, "requests": eras["bridged_requests"]}]
    assert eras["bridged_requests"] >= 4  # each modern host's handshake and call
    ready = eras["readiness"]
    assert ready["needed"] is True and ready["bridged_hosts"] == ["alpha", "beta"]
    assert ready["text"].startswith("still needs the era bridge — 2 hosts on 2026-07-28 (alpha, beta) talk to a "
                                    "2025-11-25-only server through the bridge since start-up; ")
