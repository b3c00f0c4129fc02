"""Era bridging through `reminder-bridge serve --upstream-command -- CMD` (issue 21 point 2 with
issue 23's transport bridging), real processes: `mcp` 2.3.0 SDK Streamable HTTP hosts forced to one
era in front of an SDK stdio server that speaks only the other (tests.peers.legacy_only_server,
tests.peers.modern_only_server). The era bridge sits in front of each child's pipes
(`bridge.transports.http.children`); what reached the server is read back from its own record."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import aiohttp
import pytest
from mcp import Client
from mcp.types import Implementation

from tests.integration.era_tours import (
    LEGACY, MODERN, REVERSE, assert_calls_asked_for_logs, assert_legacy_record, assert_modern_record,
    assert_retried_with_the_sample, assert_sampled_once, legacy_tour, listened, modern_reminder, modern_tour,
    received, refusal, sampler)
from tests.peers.legacy_only_server import TOOLS
from tests.peers.mcp_host import Reminders
from tests.peers.processes import eventually, proxy


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
    running = proxy("--rules", str(rules), *REVERSE)
    yield running, seen
    running.stop()


def url(running) -> str:
    return f"http://127.0.0.1:{running.port}/mcp"


# -- 2026-07-28 host → 2025-11-25 stdio server -----------------------------------------------------

@pytest.mark.parametrize("mode", ["auto", MODERN])
async def test_a_2026_07_28_host_discovers_lists_and_calls_a_2025_11_25_child(legacy_child, mode):
    running, seen = legacy_child
    async with Client(url(running), mode=mode) as client:
        await modern_tour(client, mode)
    assert_legacy_record(seen)


async def test_a_legacy_reminder_reaches_the_2026_07_28_host_once(legacy_child):
    running, seen = legacy_child
    ext = Reminders()
    async with Client(url(running), mode=MODERN, extensions=[ext]) as client:
        await modern_reminder(client, ext)
    assert_legacy_record(seen)


async def test_two_2026_07_28_hosts_share_the_one_2025_11_25_session(legacy_child):
    """Every 2026-07-28 request goes to the route's shared child: its session is opened once."""
    running, seen = legacy_child
    for text in ("one", "two"):
        async with Client(url(running), mode=MODERN) as client:
            result = await client.call_tool("echo", {"text": text})
        assert [c.text for c in result.content] == [text]
    assert_legacy_record(seen)


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
    exc = await refusal(url(running), mode="legacy")
    assert exc.error.code == -32601 and "host_era" in exc.error.message


# -- 2025-11-25 host → 2026-07-28 stdio server -----------------------------------------------------

@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # logging, on purpose
async def test_a_2025_11_25_host_initializes_lists_and_calls_a_2026_07_28_child(modern_child):
    running, seen = modern_child
    ext = Reminders()
    async with Client(url(running), mode="legacy", extensions=[ext]) as client:
        await legacy_tour(client, ext, TOOLS)
    assert_modern_record(seen)
    assert_calls_asked_for_logs(received(seen))


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # sampling, on purpose
async def test_a_2026_07_28_childs_input_required_becomes_a_sampling_request(modern_child):
    """The server answers `input_required`; the 2025-11-25 host is asked on its POST's stream,
    and its answer makes the retry."""
    running, seen = modern_child
    async with Client(url(running), mode="legacy", sampling_callback=sampler("seven")) as client:
        result = await client.call_tool("consult", {"question": "how many?"})
    assert [c.text for c in result.content] == ["sampled: seven"]
    assert_retried_with_the_sample(received(seen))
    assert_modern_record(seen)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # sampling, on purpose
async def test_a_2025_11_25_childs_sampling_request_crosses_as_input_required(legacy_child):
    """The child asks its client during a `tools/call`: the host's request is answered
    `input_required`, its retry (a request of its own) carries the answer to the child."""
    running, seen = legacy_child
    asked = []
    async with Client(url(running), mode=MODERN, sampling_callback=sampler("forty-two", asked)) as client:
        result = await client.call_tool("ask", {"question": "the answer?"})
    assert asked == ["the answer?"]
    assert [c.text for c in result.content] == ["sampled: forty-two"]
    assert_sampled_once(received(seen))
    assert_legacy_record(seen)


async def test_an_input_required_the_host_never_retries_is_given_up_at_the_routes_input_wait(tmp_path):
    """The route's `input_wait_s`: a 2026-07-28 host that takes its input_required answer and never
    retries leaves the child's sampling request answered -32001 naming why, its call cancelled."""
    seen = tmp_path / "seen.jsonl"
    rules = route(tmp_path, "tests.peers.legacy_only_server", seen, f'host_era = "{MODERN}"',
                  f'server_era = "{LEGACY}"', "input_wait_s = 0.5")
    running = proxy("--rules", str(rules))
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities":
            {"sampling": {}}, "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}
    try:
        async with aiohttp.ClientSession() as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "ask", "arguments": {"question": "q"}, "_meta": meta}}
            async with http.post(url(running), json=body, headers={
                    "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "ask",
                    "Accept": "application/json, text/event-stream"}) as r:
                text = await r.text()
            assert '"input_required"' in text

            async def told():
                got = received(seen)
                errors = [m for m in got if m.get("error", {}).get("code") == -32001]
                cancels = [m for m in got if m.get("method") == "notifications/cancelled"]
                return (errors, cancels) if errors and cancels else None

            [error], [cancel] = await eventually(told, timeout=20)
    finally:
        running.stop()
    assert f"the {MODERN} host did not answer sampling/createMessage" in error["error"]["message"]
    assert "within 0.5 s" in error["error"]["message"]
    [call] = [m for m in received(seen) if m.get("method") == "tools/call"]
    assert cancel["params"]["requestId"] == call["id"]


async def test_listen_streams_the_2025_11_25_childs_notifications(legacy_child):
    running, seen = legacy_child
    async with Client(url(running), mode=MODERN) as client:
        await listened(client)
    got = received(seen)
    assert [m["params"] for m in got if m.get("method") == "resources/subscribe"] == [{"uri": "file:///notes.txt"}]


    async def unsubscribed():  # the host closed its stream: the bridge unsubscribes once the proxy sees it
        return [m["params"] for m in received(seen) if m.get("method") == "resources/unsubscribe"]

    assert await eventually(unsubscribed) == [{"uri": "file:///notes.txt"}]
    assert_legacy_record(seen)


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
