"""Era bridging through `reminder-bridge stdio --upstream URL` (issue 21 point 2 with issue 23's
transport bridging), real processes: an `mcp` 2.3.0 SDK stdio host forced to one era in front of an
SDK server over Streamable HTTP that speaks only the other (tests.peers.legacy_only_http,
tests.peers.modern_only_http). The same era bridge as `stdio -- CMD` decides every frame; the
remote adapter only POSTs. The server's `/seen` says what reached it."""
from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from tests.integration import era_tours
from tests.integration.era_tours import (
    BRIDGE, LEGACY, MODERN, REVERSE, assert_calls_asked_for_logs, assert_legacy_http, assert_legacy_messages,
    assert_log_level_set_first, assert_modern_http, assert_modern_messages, assert_retried_with_the_sample,
    assert_sampled_once, bodies, legacy_tour, modern_reminder, modern_tour, refusal, running_peer, sampler, seen,
    status_of)
from tests.peers.mcp_host import Reminders
from tests.peers.modern_only_http import MODERN_TOOLS
from tests.peers.processes import free_port

legacy_http = running_peer("tests.peers.legacy_only_http")
modern_http = running_peer("tests.peers.modern_only_http")
rules = era_tours.rules  # the fixture


def through(server, rules: Path, *options: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[
        "-m", "bridge", "stdio", "--upstream", f"http://127.0.0.1:{server.port}/mcp", "--rules", str(rules),
        *options])


async def seen_since(server, before: int) -> list[dict]:
    return (await seen(server))[before:]


async def count(server) -> int:
    return len(await seen(server))


def assert_legacy_wire(requests: list[dict]) -> None:
    assert_legacy_messages(bodies(requests))
    assert_legacy_http(requests)


def assert_modern_wire(requests: list[dict]) -> None:
    assert_modern_messages(bodies(requests))
    assert_modern_http(requests)


# -- 2026-07-28 host → 2025-11-25 server ----------------------------------------------------------

@pytest.mark.parametrize("server, mode", [("legacy_http", MODERN), ("modern_http", "legacy")])
async def test_without_the_flags_the_pair_fails_as_it_does_direct(request, rules, server, mode):
    """`auto`: a host pinned to the era the server does not speak meets the server's own refusal,
    through the proxy as direct."""
    upstream = request.getfixturevalue(server)
    direct = (await refusal(f"http://127.0.0.1:{upstream.port}/mcp", mode)).error
    assert direct.code == -32600
    through_it = (await refusal(through(upstream, rules), mode)).error
    assert (through_it.code, through_it.message) == (direct.code, direct.message)


@pytest.mark.parametrize("mode", ["auto", MODERN])
async def test_a_2026_07_28_host_discovers_lists_and_calls_a_2025_11_25_server(legacy_http, rules, mode):
    before = await count(legacy_http)
    async with Client(through(legacy_http, rules, *BRIDGE), mode=mode) as client:
        await modern_tour(client, mode)
    assert_legacy_wire(await seen_since(legacy_http, before))


async def test_a_legacy_reminder_reaches_the_2026_07_28_host_once(legacy_http, rules):
    ext = Reminders()
    before = await count(legacy_http)
    async with Client(through(legacy_http, rules, *BRIDGE), mode=MODERN, extensions=[ext]) as client:
        await modern_reminder(client, ext)
    assert_legacy_wire(await seen_since(legacy_http, before))


# -- 2025-11-25 host → 2026-07-28 server ----------------------------------------------------------

@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # logging, on purpose
async def test_a_2025_11_25_host_initializes_lists_and_calls_a_2026_07_28_server(modern_http, rules):
    ext = Reminders()
    before = await count(modern_http)
    async with Client(through(modern_http, rules, *REVERSE), mode="legacy", extensions=[ext]) as client:
        await legacy_tour(client, ext, MODERN_TOOLS)
    requests = await seen_since(modern_http, before)
    assert_modern_wire(requests)
    assert_calls_asked_for_logs(bodies(requests))


# -- server-to-client requests and notifications, over HTTP both ways ----------------------------

@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # sampling, on purpose
async def test_a_2025_11_25_servers_sampling_request_crosses_as_input_required(legacy_http, rules):
    """The server asks on the `tools/call` POST's stream; the host's request is answered
    `input_required`, its retry's answer is POSTed to the server, whose result answers the retry."""
    asked = []
    before = await count(legacy_http)
    async with Client(through(legacy_http, rules, *BRIDGE), mode=MODERN,
                      sampling_callback=sampler("forty-two", asked)) as client:
        result = await client.call_tool("ask", {"question": "the answer?"})
    assert asked == ["the answer?"]
    assert [c.text for c in result.content] == ["sampled: forty-two"]
    requests = await seen_since(legacy_http, before)
    assert_sampled_once(bodies(requests))
    assert_legacy_wire(requests)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # sampling, on purpose
async def test_a_2026_07_28_servers_input_required_becomes_a_sampling_request(modern_http, rules):
    before = await count(modern_http)
    async with Client(through(modern_http, rules, *REVERSE), mode="legacy",
                      sampling_callback=sampler("seven")) as client:
        result = await client.call_tool("consult", {"question": "how many?"})
    assert [c.text for c in result.content] == ["sampled: seven"]
    requests = await seen_since(modern_http, before)
    assert_retried_with_the_sample(bodies(requests))
    assert_modern_wire(requests)


async def test_listen_becomes_resources_subscribe_at_the_2025_11_25_server(legacy_http, rules):
    """The host's `listen()` is acknowledged by the bridge with what the server declared (the HTTP
    peer declares `listChanged`, so both are honoured), as `resources/subscribe` upstream, and `unsubscribe` once the host ends it. (The SDK server
    publishes its own updates to 2026-07-28 listen streams only; over stdio the peer sends them
    by hand: tests/integration/test_stdio_era_bridge.py.)"""
    before = await count(legacy_http)
    async with Client(through(legacy_http, rules, *BRIDGE), mode=MODERN) as client:
        async with client.listen(tools_list_changed=True, resource_subscriptions=["file:///notes.txt"]) as sub:
            assert sub.honored.tools_list_changed is True
            assert sub.honored.resource_subscriptions == ["file:///notes.txt"]
        await client.call_tool("echo", {"text": "after"})  # the cancel reached the proxy before this
    sent = bodies(await seen_since(legacy_http, before))
    for method in ("resources/subscribe", "resources/unsubscribe"):
        assert [m["params"] for m in sent if m.get("method") == method] == [{"uri": "file:///notes.txt"}]
    assert not any(m.get("method") == "subscriptions/listen" for m in sent)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # logging, on purpose
async def test_log_lines_only_for_a_request_that_opted_in(legacy_http, rules):
    """A 2026-07-28 request's `logLevel` becomes `logging/setLevel` upstream; without it, the
    2025-11-25 server's log line never reaches the host."""
    logs = []

    async def on_log(params):
        logs.append(params)

    async with Client(through(legacy_http, rules, *BRIDGE), mode=MODERN, logging_callback=on_log) as client:
        await client.call_tool("log", {"text": "unasked"})
    assert logs == []
    before = await count(legacy_http)
    async with Client(through(legacy_http, rules, *BRIDGE), mode=MODERN, logging_callback=on_log,
                      log_level="info") as client:
        await client.call_tool("log", {"text": "asked"})
    assert [(log.logger, log.data) for log in logs] == [("legacy", "asked")]
    requests = await seen_since(legacy_http, before)
    assert_log_level_set_first(bodies(requests))
    assert_legacy_wire(requests)


async def test_an_unreachable_server_answers_the_held_requests(rules):
    """The bridge's own `initialize` cannot be POSTed: the host's request that waited for it gets
    the upstream's error, never a hang."""
    dead = type("Dead", (), {"port": free_port()})()
    with anyio.fail_after(30):
        error = (await refusal(through(dead, rules, *BRIDGE), MODERN)).error
    code, message = error.code, error.message
    assert code == -32603 and "refused initialize" in message and "cannot connect" in message.lower()


async def test_the_one_listen_upstream_outlives_the_upstream_timeout(modern_http, rules):
    """A 2025-11-25 host's list changes ride the bridge's `subscriptions/listen` POST: its stream
    may say nothing for longer than `--upstream-timeout` (as the GET stream may) and still carry
    the server's next notification."""
    changed = anyio.Event()

    async def on_message(message) -> None:
        if getattr(getattr(message, "root", message), "method", None) == "notifications/tools/list_changed":
            changed.set()

    async with Client(through(modern_http, rules, *REVERSE, "--upstream-timeout", "1"), mode="legacy",
                      message_handler=on_message) as client:
        await client.list_tools()
        await anyio.sleep(1.5)  # the duration under test: the listen's stream idle past the timeout
        await client.call_tool("touch", {"path": "d.py"})
        with anyio.fail_after(20):
            await changed.wait()


async def test_a_2026_07_28_host_s_own_listen_outlives_the_upstream_timeout(modern_http, rules):
    """No bridge: a 2026-07-28 host's `listen()` reaches the server as it is, and the flow says its
    POST is a listen (the transport reads no frame to learn it): its stream idle past
    `--upstream-timeout` still carries the server's next list change."""
    async with Client(through(modern_http, rules, "--upstream-timeout", "1"), mode=MODERN) as client:
        async with client.listen(tools_list_changed=True) as sub:
            await anyio.sleep(1.5)  # the duration under test: the listen's stream idle past the timeout
            await client.call_tool("touch", {"path": "e.py"})
            with anyio.fail_after(20):
                async for event in sub:
                    if type(event).__name__ == "ToolsListChanged":
                        break


@pytest.mark.parametrize("direction", ["modern host", "legacy host"])
async def test_the_console_shows_the_era_mix_through_upstream(request, rules, direction):
    """`/api/status` of a bridged `stdio --upstream`: the host on its era, the server on the one
    `--server-era` names, the requests bridged, the verdict naming the host."""
    admin = free_port()
    host, server_era, upstream, eras = ((MODERN, LEGACY, "legacy_http", BRIDGE) if direction == "modern host"
                                        else (LEGACY, MODERN, "modern_http", REVERSE))
    params = through(request.getfixturevalue(upstream), rules, *eras, "--admin", f"127.0.0.1:{admin}")
    async with Client(params, mode="auto" if host == MODERN else "legacy",
                      client_info=Implementation(name="migrating-ide", version="1")) as client:
        await client.call_tool("echo", {"text": "one"})
        route = await status_of(admin)
    mix = route["eras"]
    assert (mix["host_era"], mix["server_era"]) == (host, server_era)
    assert mix["hosts"][host]["hosts"] == 1 and mix["servers"][server_era]["hosts"] == 1
    assert mix["bridged_requests"] >= 2  # the handshake and the call
    assert mix["readiness"]["needed"] is True and mix["readiness"]["bridged_hosts"] == ["migrating-ide"]


async def test_a_server_that_refuses_the_bridges_handshake_is_named_in_the_error(modern_http, rules):
    """`--server-era 2025-11-25` in front of a server that speaks only 2026-07-28 (a route that
    names the wrong era): the server's refusal of the bridge's `initialize` answers the host's
    request, with the server's own words, never a hang."""
    with anyio.fail_after(30):
        error = (await refusal(through(modern_http, rules, *BRIDGE), MODERN)).error
    code, message = error.code, error.message
    assert code == -32600 and "refused initialize" in message and "speaks 2026-07-28 only" in message


async def test_server_era_alone_lets_a_host_of_that_era_through(legacy_http, rules):
    """`--server-era 2025-11-25` with the host's era left `auto`: a 2025-11-25 host is not bridged,
    its own handshake reaches the server as it wrote it."""
    before = await count(legacy_http)
    async with Client(through(legacy_http, rules, "--server-era", LEGACY), mode="legacy") as client:
        assert client.protocol_version == LEGACY
        result = await client.call_tool("echo", {"text": "plain"})
    assert [c.text for c in result.content] == ["plain"]
    requests = await seen_since(legacy_http, before)
    assert isinstance(bodies(requests)[0]["id"], int)  # the host's own id: not the proxy's
    assert_legacy_wire(requests)
