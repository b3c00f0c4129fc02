"""Era bridging through `reminder-bridge serve --upstream-command -- CMD` (issue 21 point 2 with
issue 23's transport bridging), real processes: `mcp` 2.3.0 SDK Streamable HTTP hosts forced to one
era in front of an SDK stdio server that speaks only the other (tests.peers.legacy_only_server,
tests.peers.modern_only_server). The era bridge sits in front of each child's pipes
(`bridge.transports.http.children`); what reached the server is read back from its own record."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation

from tests.peers.mcp_host import Reminders
from tests.peers.processes import eventually, proxy

MODERN, LEGACY = "2026-07-28", "2025-11-25"
TOOLS = {"echo", "remind", "log", "touch", "ask", "nudge", "count", "hold", "confirm", "consult", "where"}


def route(tmp_path: Path, module: str, seen: Path, *keys: str) -> Path:
    """A rules file with one route whose stdio server is ``module`` (the SDK gives a server's
    capabilities no slot for Harn's declaration: its reminders are taken without one)."""
    rules = tmp_path / "rules.toml"
    rules.write_text("\n".join(["[defaults]", "require_declaration = false", "[routes.child]", 'protocol = "mcp"',
                                'path = "/mcp"', f"command = {json.dumps([sys.executable, '-m', module, str(seen)])}",
                                *keys, ""]))
    return rules


def legacy_route(tmp_path: Path, *flags: str):
    """2026-07-28 hosts → a 2025-11-25-only stdio server (the route's era keys)."""
    seen = tmp_path / "seen.jsonl"
    rules = route(tmp_path, "tests.peers.legacy_only_server", seen, f'host_era = "{MODERN}"',
                  f'server_era = "{LEGACY}"')
    return proxy("--rules", str(rules), *flags), seen


@pytest.fixture
def legacy_child(tmp_path):
    running, seen = legacy_route(tmp_path)
    yield running, seen
    running.stop()


@pytest.fixture
def modern_child(tmp_path):
    """2025-11-25 hosts → a 2026-07-28-only stdio server (the era flags)."""
    seen = tmp_path / "seen.jsonl"
    rules = route(tmp_path, "tests.peers.modern_only_server", seen)
    running = proxy("--rules", str(rules), "--host-era", LEGACY, "--server-era", MODERN)
    yield running, seen
    running.stop()


def url(running) -> str:
    return f"http://127.0.0.1:{running.port}/mcp"


def received(seen: Path) -> list[dict]:
    return [json.loads(line) for line in seen.read_text().splitlines()]


def assert_legacy_wire(seen: Path) -> None:
    """The child saw a 2025-11-25 client: the handshake first, once; no 2026-07-28 key anywhere."""
    got = received(seen)
    assert [m.get("method") for m in got[:2]] == ["initialize", "notifications/initialized"]
    assert got[0]["params"]["protocolVersion"] == LEGACY
    assert sum(m.get("method") == "initialize" for m in got) == 1
    assert "io.modelcontextprotocol/" not in json.dumps(got)
    assert not any(m.get("method") in ("server/discover", "ping") for m in got)


def assert_modern_wire(seen: Path) -> None:
    """The child saw a 2026-07-28 client: discover first, no handshake, every request enveloped."""
    got = received(seen)
    assert got[0]["method"] == "server/discover"
    assert not any(m.get("method") in ("initialize", "notifications/initialized", "ping", "logging/setLevel")
                   for m in got)
    for m in got:
        if "method" in m and "id" in m:
            meta = m["params"]["_meta"]
            assert meta["io.modelcontextprotocol/protocolVersion"] == MODERN
            assert meta["io.modelcontextprotocol/clientInfo"]["name"]


# -- 2026-07-28 host → 2025-11-25 stdio server -----------------------------------------------------

@pytest.mark.parametrize("mode", ["auto", MODERN])
async def test_a_2026_07_28_host_discovers_lists_and_calls_a_2025_11_25_child(legacy_child, mode):
    running, seen = legacy_child
    async with Client(url(running), mode=mode) as client:
        assert client.protocol_version == MODERN
        tools = await client.list_tools()
        echoed = await client.call_tool("echo", {"text": "hi"})
        read = await client.read_resource("file:///notes.txt")
        prompt = await client.get_prompt("greet", {"name": "Ada"})
        if mode == "auto":  # the probe was answered from the child's initialize
            assert client.server_info is not None and client.server_info.name == "legacy-only"
            discovered = client.session.discover_result
            assert MODERN in discovered.supported_versions and discovered.cache_scope == "private"
    assert {t.name for t in tools.tools} == TOOLS
    assert [c.text for c in echoed.content] == ["hi"]
    assert read.contents[0].text == "remember the milk"
    assert "Hello, Ada!" in prompt.messages[0].content.text
    assert_legacy_wire(seen)


async def test_a_legacy_reminder_reaches_the_2026_07_28_host_once(legacy_child):
    running, seen = legacy_child
    ext = Reminders()
    async with Client(url(running), mode=MODERN, extensions=[ext]) as client:
        result = await client.call_tool("remind", {"path": "src/lib.rs"})
        await client.call_tool("echo", {"text": "sync"})
    assert [c.text for c in result.content] == ["touched src/lib.rs"]
    [reminder] = ext.received
    assert (reminder["id"], reminder["tags"], reminder["dedupeKey"], reminder["ttlTurns"]) == (
        "r-src/lib.rs", ["workspace", "file_changed"], "file_changed:src/lib.rs", 2)
    assert reminder["body"] == "src/lib.rs changed externally; re-read it before editing."
    assert_legacy_wire(seen)


async def test_two_2026_07_28_hosts_share_the_one_2025_11_25_session(legacy_child):
    """Every 2026-07-28 request goes to the route's shared child: its session is opened once."""
    running, seen = legacy_child
    for text in ("one", "two"):
        async with Client(url(running), mode=MODERN) as client:
            result = await client.call_tool("echo", {"text": text})
        assert [c.text for c in result.content] == [text]
    assert_legacy_wire(seen)


async def test_each_client_capability_set_gets_a_2025_11_25_session_of_its_own(legacy_child):
    """One 2025-11-25 session holds one capability set and client info: a host with others gets a
    shared child (and session) of its own, never the other host's."""
    running, seen = legacy_child
    for name in ("zed", "claude-code", "zed"):
        async with Client(url(running), mode=MODERN, client_info=Implementation(name=name, version="1")) as client:
            result = await client.call_tool("echo", {"text": name})
        assert [c.text for c in result.content] == [name]
    opened = [m["params"]["clientInfo"]["name"] for m in received(seen) if m.get("method") == "initialize"]
    assert opened == ["zed", "claude-code"]


async def test_a_session_no_host_used_for_session_idle_ends(tmp_path):
    running, seen = legacy_route(tmp_path, "--session-idle", "1", "--log-level", "info")
    try:
        async with Client(url(running), mode=MODERN) as client:
            await client.call_tool("echo", {"text": "once"})

        async def stopped():
            return any("child_stopping" in line and "--session-idle" in line for line in running.stderr)

        await eventually(stopped, timeout=20)
        async with Client(url(running), mode=MODERN) as client:  # a new child, a new 2025-11-25 session
            await client.call_tool("echo", {"text": "again"})
        assert sum(m.get("method") == "initialize" for m in received(seen)) == 2
    finally:
        running.stop()


async def test_a_2025_11_25_host_is_refused_by_a_route_pinned_to_2026_07_28_hosts(legacy_child):
    running, seen = legacy_child
    with pytest.raises(BaseException) as raised:  # noqa: B017 - the SDK raises inside a task group
        async with Client(url(running), mode="legacy") as client:
            await client.list_tools()
    exc = raised.value
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    assert isinstance(exc, MCPError) and exc.error.code == -32601 and "host_era" in exc.error.message


# -- 2025-11-25 host → 2026-07-28 stdio server -----------------------------------------------------

@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # logging, on purpose
async def test_a_2025_11_25_host_initializes_lists_and_calls_a_2026_07_28_child(modern_child):
    running, seen = modern_child
    ext = Reminders()
    async with Client(url(running), mode="legacy", extensions=[ext]) as client:
        assert client.protocol_version == LEGACY
        assert client.server_info.name == "legacy-only"
        await client.session.send_ping()
        await client.set_logging_level("info")
        tools = await client.list_tools()
        echoed = await client.call_tool("echo", {"text": "hi"})
        reminded = await client.call_tool("remind", {"path": "b.py"})
        read = await client.read_resource("file:///notes.txt")
        prompts = await client.list_prompts()
        await client.call_tool("echo", {"text": "sync"})
    assert {t.name for t in tools.tools} == TOOLS
    assert [c.text for c in echoed.content] == ["hi"]
    assert [c.text for c in reminded.content] == ["touched b.py"]
    assert read.contents[0].text == "remember the milk"
    assert [p.name for p in prompts.prompts] == ["greet"]
    [reminder] = ext.received
    assert (reminder["id"], reminder["tags"], reminder["dedupeKey"], reminder["ttlTurns"]) == (
        "r-b.py", ["workspace", "file_changed"], "file_changed:b.py", 2)
    assert_modern_wire(seen)
    calls = [m for m in received(seen) if m.get("method") == "tools/call"]
    assert all(m["params"]["_meta"]["io.modelcontextprotocol/logLevel"] == "info" for m in calls)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # sampling, on purpose
async def test_a_2026_07_28_childs_input_required_becomes_a_sampling_request(modern_child):
    """The server answers `input_required`; the 2025-11-25 host is asked on its POST's stream,
    and its answer makes the retry."""
    running, seen = modern_child

    async def sample(context, params):
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="seven"),
                                         model="test-model")

    async with Client(url(running), mode="legacy", sampling_callback=sample) as client:
        result = await client.call_tool("consult", {"question": "how many?"})
    assert [c.text for c in result.content] == ["sampled: seven"]
    calls = [m for m in received(seen) if m.get("method") == "tools/call"]
    assert len(calls) == 2
    assert [r["content"]["text"] for r in calls[1]["params"]["inputResponses"].values()] == ["seven"]
    assert_modern_wire(seen)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # sampling, on purpose
async def test_a_2025_11_25_childs_sampling_request_crosses_as_input_required(legacy_child):
    """The child asks its client during a `tools/call`: the host's request is answered
    `input_required`, its retry (a request of its own) carries the answer to the child."""
    running, seen = legacy_child
    asked = []

    async def sample(context, params):
        asked.append(params.messages[0].content.text)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="forty-two"),
                                         model="test-model")

    async with Client(url(running), mode=MODERN, sampling_callback=sample) as client:
        result = await client.call_tool("ask", {"question": "the answer?"})
    assert asked == ["the answer?"]
    assert [c.text for c in result.content] == ["sampled: forty-two"]
    assert sum(m.get("method") == "tools/call" for m in received(seen)) == 1
    assert_legacy_wire(seen)


async def test_listen_streams_the_2025_11_25_childs_notifications(legacy_child):
    running, seen = legacy_child
    events = []
    async with Client(url(running), mode=MODERN) as client:
        async with client.listen(tools_list_changed=True, resource_subscriptions=["file:///notes.txt"]) as sub:
            assert sub.honored.tools_list_changed is True
            assert sub.honored.resource_subscriptions == ["file:///notes.txt"]
            await client.call_tool("touch", {"path": "a.py"})
            with anyio.fail_after(20):
                async for event in sub:
                    events.append(type(event).__name__)
                    if len(events) == 2:
                        break
    assert sorted(events) == ["ResourceUpdated", "ToolsListChanged"]
    got = received(seen)
    assert [m["params"] for m in got if m.get("method") == "resources/subscribe"] == [{"uri": "file:///notes.txt"}]


    async def unsubscribed():  # the host closed its stream: the bridge unsubscribes once the proxy sees it
        return [m["params"] for m in received(seen) if m.get("method") == "resources/unsubscribe"]

    assert await eventually(unsubscribed) == [{"uri": "file:///notes.txt"}]
    assert_legacy_wire(seen)


async def test_server_era_alone_lets_a_host_of_that_era_through(tmp_path):
    """`server_era = "2025-11-25"` with `host_era` left `auto`: a 2025-11-25 host gets its own child
    as on any command route, its handshake passed as it wrote it; a 2026-07-28 host on the same
    route is bridged."""
    seen = tmp_path / "seen.jsonl"
    running = proxy("--rules", str(route(tmp_path, "tests.peers.legacy_only_server", seen, f'server_era = "{LEGACY}"')))
    try:
        async with Client(url(running), mode="legacy") as client:
            assert client.protocol_version == LEGACY
            plain = await client.call_tool("echo", {"text": "plain"})
        async with Client(url(running), mode=MODERN) as client:
            bridged = await client.call_tool("echo", {"text": "bridged"})
    finally:
        running.stop()
    assert [c.text for c in plain.content] == ["plain"] and [c.text for c in bridged.content] == ["bridged"]
    initializes = [m for m in received(seen) if m.get("method") == "initialize"]
    assert isinstance(initializes[0]["id"], int)  # the host's own
    assert str(initializes[1]["id"]).startswith("rb-era-")  # the bridge's, for the 2026-07-28 host
