"""What the era-bridge tests check alike on every transport (issue 21 point 2): the tours an SDK
host makes of tests.peers.legacy_only_server's tools, resources and prompts through the bridge, in
either direction, and what the server's record must show. Each transport's test file keeps only
how the host is connected and what its transport adds (headers, sessions, streams)."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation

from tests.integration.test_console import wait_listening
from tests.peers.legacy_only_server import TOOLS
from tests.peers.processes import get_json, peer

MODERN, LEGACY = "2026-07-28", "2025-11-25"
BRIDGE = ["--host-era", MODERN, "--server-era", LEGACY]
REVERSE = ["--host-era", LEGACY, "--server-era", MODERN]
SUB_KEY = "io.modelcontextprotocol/subscriptionId"
NOTES_URI = "file:///notes.txt"
HANDSHAKE = ("initialize", "notifications/initialized", "ping", "logging/setLevel")


def running_peer(module: str):
    """A module-scoped fixture: the peer server ``module``, running for the module's tests."""
    @pytest.fixture(scope="module")
    def fixture():
        server = peer(module)
        yield server
        server.stop()
    return fixture


@pytest.fixture
def rules(tmp_path) -> Path:
    """The SDK gives a server's capabilities no slot for Harn's declaration: its reminders are taken
    without one."""
    path = tmp_path / "rules.toml"
    path.write_text('[defaults]\nrequire_declaration = false\n')
    return path


def received(seen: Path) -> list[dict]:
    """A stdio peer's own record: every message it read, in order."""
    return [json.loads(line) for line in seen.read_text().splitlines()]


async def seen(upstream) -> list[dict]:
    """An HTTP peer's `/seen`: every request that reached it (method, headers, body)."""
    return await get_json(upstream.port, "/seen")


def bodies(requests: list[dict]) -> list[dict]:
    """The JSON-RPC messages an HTTP peer was POSTed."""
    return [json.loads(r["body"]) for r in requests if r["method"] == "POST" and r["body"]]


async def refusal(params, mode: str = MODERN) -> MCPError:
    """The error a host's first request meets (the SDK raises it inside a task group)."""
    try:
        async with Client(params, mode=mode) as client:
            await client.list_tools()
    except BaseException as exc:  # noqa: BLE001 - unwrapped below
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        assert isinstance(exc, MCPError), exc
        return exc
    raise AssertionError("the host's request was answered")


# -- what the server received ----------------------------------------------------------------------

def assert_legacy_messages(got: list[dict]) -> None:
    """The server saw a 2025-11-25 client: the handshake first, once (the session is kept, not
    reopened); no probe, no ping, no 2026-07-28 key anywhere."""
    assert [m.get("method") for m in got[:2]] == ["initialize", "notifications/initialized"]
    assert got[0]["params"]["protocolVersion"] == LEGACY
    assert sum(m.get("method") == "initialize" for m in got) == 1
    assert "io.modelcontextprotocol/" not in json.dumps(got)
    assert not any(m.get("method") in ("server/discover", "ping") for m in got)


def assert_legacy_record(seen: Path) -> None:
    """A stdio peer's record shows a 2025-11-25 client (`assert_legacy_messages`)."""
    assert_legacy_messages(received(seen))


def assert_legacy_http(requests: list[dict]) -> None:
    """What HTTP adds for a 2025-11-25 server: no 2026-07-28 header or key, its session on every
    request after the first."""
    for r in requests:
        assert r["headers"].get("mcp-protocol-version") in (None, LEGACY), r
        assert "mcp-method" not in r["headers"] and "mcp-name" not in r["headers"]
        assert "io.modelcontextprotocol/" not in r["body"]
    assert all(r["headers"].get("mcp-session-id") for r in requests[1:])


def assert_modern_messages(got: list[dict]) -> None:
    """The server saw a 2026-07-28 client: discover first, no handshake, every request enveloped."""
    assert got[0]["method"] == "server/discover"
    assert_enveloped(got)


def assert_modern_record(seen: Path) -> None:
    """A stdio peer's record shows a 2026-07-28 client (`assert_modern_messages`)."""
    assert_modern_messages(received(seen))


def assert_enveloped(got: list[dict]) -> None:
    """No handshake, and every request with the 2026-07-28 envelope of the host it speaks for."""
    assert not any(m.get("method") in HANDSHAKE for m in got)
    for m in got:
        if "method" in m and "id" in m:
            meta = m["params"]["_meta"]
            assert meta["io.modelcontextprotocol/protocolVersion"] == MODERN
            assert meta["io.modelcontextprotocol/clientInfo"]["name"]
            assert "io.modelcontextprotocol/clientCapabilities" in meta


def assert_modern_http(requests: list[dict]) -> None:
    """What HTTP adds for a 2026-07-28 server: POSTs only, no session, each with the version in its
    headers, and each request its method and name as in its body."""
    assert requests
    for r in requests:
        assert r["method"] == "POST", r
        assert r["headers"]["mcp-protocol-version"] == MODERN and "mcp-session-id" not in r["headers"]
        msg = json.loads(r["body"])
        if "id" not in msg:
            continue
        assert r["headers"]["mcp-method"] == msg["method"]
        name = (msg.get("params") or {}).get({"tools/call": "name", "prompts/get": "name",
                                               "resources/read": "uri"}.get(msg["method"], ""))
        assert r["headers"].get("mcp-name") == name


def assert_calls_asked_for_logs(got: list[dict]) -> None:
    """The 2025-11-25 host's `logging/setLevel` rides every later `tools/call`'s envelope."""
    calls = [m for m in got if m.get("method") == "tools/call"]
    assert calls and all(m["params"]["_meta"]["io.modelcontextprotocol/logLevel"] == "info" for m in calls)


def assert_log_level_set_first(got: list[dict]) -> None:
    """A 2026-07-28 request's `logLevel` became `logging/setLevel` ahead of the call."""
    methods = [m.get("method") for m in got]
    assert methods.index("logging/setLevel") < methods.index("tools/call")


def assert_one_listen_follows_the_subscriptions(got: list[dict]) -> None:
    """A 2025-11-25 host's `resources/subscribe` and the list changes it expects unasked ride one
    `subscriptions/listen`, opened again when the URIs change."""
    listens = [m for m in got if m.get("method") == "subscriptions/listen"]
    assert [sorted(m["params"]["notifications"]) for m in listens] == [
        ["promptsListChanged", "resourcesListChanged", "toolsListChanged"],
        ["promptsListChanged", "resourceSubscriptions", "resourcesListChanged", "toolsListChanged"]]
    assert listens[1]["params"]["notifications"]["resourceSubscriptions"] == [NOTES_URI]
    assert not any(m.get("method") in ("resources/subscribe", "resources/unsubscribe") for m in got)


# -- the hosts' tours ------------------------------------------------------------------------------

def assert_reminder(reminder: dict, path: str) -> None:
    """The standard reminder tests.peers.legacy_only_server's `remind` or `touch` of ``path`` makes."""
    assert (reminder["id"], reminder["tags"], reminder["dedupeKey"], reminder["ttlTurns"]) == (
        f"r-{path}", ["workspace", "file_changed"], f"file_changed:{path}", 2)
    assert reminder["body"] == f"{path} changed externally; re-read it before editing."


async def modern_tour(client: Client, mode: str) -> None:
    """A 2026-07-28 host (``mode`` auto: probing, else pinned) through the bridge to the 2025-11-25
    server: its tools, resources and prompts; a probe answered from the server's initialize."""
    assert client.protocol_version == MODERN  # the probe succeeded: no fall back to initialize
    tools = await client.list_tools()
    echoed = await client.call_tool("echo", {"text": "hi"})
    resources = await client.list_resources()
    read = await client.read_resource(NOTES_URI)
    prompts = await client.list_prompts()
    prompt = await client.get_prompt("greet", {"name": "Ada"})
    if mode == "auto":
        assert client.server_info is not None and client.server_info.name == "legacy-only"
        discovered = client.session.discover_result
        assert MODERN in discovered.supported_versions and discovered.ttl_ms == 0
        assert discovered.cache_scope == "private" and discovered.instructions.startswith("A server that never")
    assert {t.name for t in tools.tools} == TOOLS
    assert [c.text for c in echoed.content] == ["hi"]
    assert [str(r.uri) for r in resources.resources] == [NOTES_URI]
    assert read.contents[0].text == "remember the milk"
    assert [p.name for p in prompts.prompts] == ["greet"]
    assert "Hello, Ada!" in prompt.messages[0].content.text


async def modern_reminder(client: Client, ext) -> None:
    """A 2026-07-28 host's `remind`: the 2025-11-25 server's Harn reminder reaches it once."""
    result = await client.call_tool("remind", {"path": "src/lib.rs"})
    await client.call_tool("echo", {"text": "sync"})  # what came before its answer has been dispatched
    assert [c.text for c in result.content] == ["touched src/lib.rs"]
    [reminder] = ext.received
    assert_reminder(reminder, "src/lib.rs")


async def legacy_tour(client: Client, ext, tools: set[str]) -> None:
    """A 2025-11-25 host (its reminders taken by ``ext``) through the bridge to the 2026-07-28
    server, which lists ``tools``: ping and `logging/setLevel` answered by the bridge, its tools,
    resources, prompts and a reminder."""
    assert client.protocol_version == LEGACY
    assert client.server_info is not None and client.server_info.name == "legacy-only"
    assert client.instructions.startswith("A server that never")
    await client.send_ping()
    await client.set_logging_level("info")
    listed = await client.list_tools()
    echoed = await client.call_tool("echo", {"text": "hi"})
    reminded = await client.call_tool("remind", {"path": "b.py"})
    resources = await client.list_resources()
    read = await client.read_resource(NOTES_URI)
    prompts = await client.list_prompts()
    prompt = await client.get_prompt("greet", {"name": "Ada"})
    await client.call_tool("echo", {"text": "sync"})
    assert {t.name for t in listed.tools} == tools
    assert [c.text for c in echoed.content] == ["hi"]
    assert [c.text for c in reminded.content] == ["touched b.py"]
    assert [str(r.uri) for r in resources.resources] == [NOTES_URI]
    assert read.contents[0].text == "remember the milk"
    assert [p.name for p in prompts.prompts] == ["greet"]
    assert "Hello, Ada!" in prompt.messages[0].content.text
    [reminder] = ext.received
    assert_reminder(reminder, "b.py")


async def listened(client: Client) -> None:
    """A 2026-07-28 host's `listen()` is acknowledged with what the server honours; the server's
    notifications after a `touch` reach the stream."""
    events = []
    async with client.listen(tools_list_changed=True, resource_subscriptions=[NOTES_URI]) as sub:
        assert sub.honored.tools_list_changed is True
        assert sub.honored.resource_subscriptions == [NOTES_URI]
        await client.call_tool("touch", {"path": "a.py"})
        with anyio.fail_after(20):
            async for event in sub:
                events.append(type(event).__name__)
                if len(events) == 2:
                    break
    assert sorted(events) == ["ResourceUpdated", "ToolsListChanged"]


def sampler(text: str, asked: list[str] | None = None):
    """A host's sampling callback that answers ``text`` (and notes each question in ``asked``)."""
    async def sample(context, params):
        if asked is not None:
            asked.append(params.messages[0].content.text)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=text),
                                         model="test-model")
    return sample


async def list_roots(context) -> types.ListRootsResult:
    """A host's roots: one, `file:///work`."""
    return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])


def assert_sampled_once(got: list[dict]) -> None:
    """The 2025-11-25 server got one `tools/call` (the retry stayed at the bridge) and the host's
    sample as its request's answer, with no 2026-07-28 field."""
    assert sum(m.get("method") == "tools/call" for m in got) == 1
    [answer] = [m for m in got if "result" in m and "model" in m["result"]]
    assert answer["result"]["content"]["text"] == "forty-two" and "resultType" not in answer["result"]


def assert_retried_with_the_sample(got: list[dict]) -> None:
    """The 2026-07-28 server's `tools/call` answered `input_required`, then its retry with the
    host's answer."""
    calls = [m for m in got if m.get("method") == "tools/call"]
    assert len(calls) == 2
    assert [r["content"]["text"] for r in calls[1]["params"]["inputResponses"].values()] == ["seven"]


# -- a hand-written 2026-07-28 host's listen stream --------------------------------------------------

def assert_acknowledged(ack: dict, notifications: dict) -> None:
    """The bridge acknowledged listen `L` with ``notifications``."""
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"] == {"notifications": notifications, "_meta": {SUB_KEY: "L"}}


async def streamed_reminder(host, stream) -> None:
    """After ``host`` opened listen `L` asking for reminders and tool list changes (what comes on
    it read from ``stream``): a `touch` of src/x.rs is answered, then the stream carries the list
    change and the reminder, and nothing it did not ask for (no other list change, no resource
    update, no log line)."""
    [ack] = await stream.until(lambda m: True)
    assert_acknowledged(ack, {"toolsListChanged": True, "reminders": True})
    answered = await host.call("touch", path="src/x.rs")
    after = await stream.until(lambda m: m.get("method") == "notifications/reminder")
    assert answered[-1]["result"]["content"][0]["text"] == "touched src/x.rs"
    assert not any(m.get("method") == "notifications/reminder" for m in answered)
    [changed] = [m for m in after if m.get("method") == "notifications/tools/list_changed"]
    assert changed["params"]["_meta"] == {SUB_KEY: "L"}
    reminder = after[-1]
    assert reminder["params"]["_meta"][SUB_KEY] == "L"
    assert_reminder(reminder["params"]["reminder"], "src/x.rs")
    assert {m.get("method") for m in after} == {"notifications/tools/list_changed", "notifications/reminder"}


async def held_reminder(host, stream) -> None:
    """After ``host`` opened listen `L` for log lines only: the log line the server sends after a
    `touch`'s reminder comes on ``stream``; the reminder waits for the next tool result."""
    [ack] = await stream.until(lambda m: True)
    assert_acknowledged(ack, {})
    await host.call("touch", path="src/y.rs")
    [log] = await stream.until(lambda m: m.get("method") == "notifications/message")
    assert log["params"]["data"] == "ambient" and log["params"]["_meta"] == {SUB_KEY: "L"}
    sync = await host.call("echo", text="next")
    assert not any(m.get("method") == "notifications/reminder" for m in sync)
    texts = [c["text"] for c in sync[-1]["result"]["content"]]
    assert texts[0] == "next" and "src/y.rs changed externally" in texts[-1]


# -- the console ----------------------------------------------------------------------------------

async def status_of(admin: int) -> dict:
    """The one route of a stdio proxy in `/api/status`, once its admin port answers."""
    await asyncio.get_running_loop().run_in_executor(None, wait_listening, admin)
    [route] = (await get_json(admin, "/api/status"))["routes"]
    return route


async def eras_after(running, at: str, admin: int, hosts) -> dict:
    """The one route's era mix in `/api/status` once each (name, mode) of ``hosts`` made a call at
    ``at``; ``running`` is stopped after."""
    try:
        for name, mode in hosts:
            async with Client(at, mode=mode, client_info=Implementation(name=name, version="1")) as client:
                await client.call_tool("echo", {"text": name})
        [route] = (await get_json(admin, "/api/status"))["routes"]
    finally:
        running.stop()
    return route["eras"]
