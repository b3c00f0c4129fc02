"""Era bridging over Streamable HTTP the other way (issue 21, point 2), real sockets: `mcp` 2.3.0 SDK
hosts forced to 2025-11-25 in front of an SDK server that takes nothing but 2026-07-28
(tests.peers.modern_only_http), through `reminder-bridge serve --host-era 2025-11-25 --server-era
2026-07-28`. The server's `/seen` says what reached it; what a raw host gets is checked against the
2025-11-25 schema."""
from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation

from tests.integration.era_tours import (
    LEGACY, MODERN, REVERSE, assert_calls_asked_for_logs, assert_enveloped, assert_modern_http,
    assert_modern_messages, assert_one_listen_follows_the_subscriptions, bodies, eras_after, legacy_tour, list_roots,
    refusal, running_peer, sampler, seen)
from tests.paths import SCHEMAS
from tests.peers.mcp_host import Changes, Reminders
from tests.peers.modern_only_http import MODERN_TOOLS
from tests.peers.processes import eventually, free_port, peer, proxy
from tests.unit.dialects.test_schemas import assert_valid, validator_for

LEGACY_MESSAGE = validator_for(json.loads((SCHEMAS / "mcp-2025-11-25.schema.json").read_text()), "JSONRPCMessage")
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # 2025-11-25 on purpose

upstream = running_peer("tests.peers.modern_only_http")


def rules_for(upstream, tmp: Path, more: str = "") -> Path:
    """The SDK gives a server's capabilities no slot for Harn's declaration: its reminders are taken
    without one."""
    rules = tmp / "rules.toml"
    rules.write_text('[defaults]\nrequire_declaration = false\n'
                     f'[routes.new]\nprotocol = "mcp"\nupstream = "http://127.0.0.1:{upstream.port}/mcp"\n{more}')
    return rules


@pytest.fixture(scope="module")
def bridge(upstream, tmp_path_factory):
    """The route at a `path` of its own (`/new`): the proxy's POSTs go to the upstream's URL."""
    running = proxy("--rules", str(rules_for(upstream, tmp_path_factory.mktemp("reverse"), 'path = "/new"\n')),
                    *REVERSE)
    running.path = "/new"
    yield running
    running.stop()


def url(running) -> str:
    return f"http://127.0.0.1:{running.port}{getattr(running, 'path', '/mcp')}"


def assert_modern_wire(requests: list[dict]) -> None:
    """The server saw a 2026-07-28 client only: every request enveloped, as HTTP carries it (the
    module's server is shared, so discover need not come first in a test's slice)."""
    assert_modern_http(requests)
    assert_enveloped(bodies(requests))
    for r in requests:  # notifications too: their method, and no name
        msg = json.loads(r["body"])
        assert r["headers"]["mcp-method"] == msg["method"]
        assert "id" in msg or "mcp-name" not in r["headers"]


async def test_the_server_alone_refuses_a_2025_11_25_host(upstream):
    error = await refusal(f"http://127.0.0.1:{upstream.port}/mcp", mode="legacy")
    assert "2026-07-28 only" in str(error)


async def test_initialize_tools_resources_prompts_and_a_reminder(bridge, upstream):
    ext = Reminders()
    before = len(await seen(upstream))
    async with Client(url(bridge), mode="legacy", extensions=[ext],
                      client_info=Implementation(name="old-ide", version="3")) as client:
        await legacy_tour(client, ext, MODERN_TOOLS)
    requests = (await seen(upstream))[before:]
    assert_modern_wire(requests)
    sent = bodies(requests)
    assert_modern_messages(sent)  # this host's own discover first
    assert sent[0]["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] == {"name": "old-ide", "version": "3"}
    assert_calls_asked_for_logs(sent)


async def test_progress_and_log_lines(bridge, upstream):
    progress, logs = [], []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async def on_log(params):
        logs.append((params.logger, params.data))

    before = len(await seen(upstream))
    async with Client(url(bridge), mode="legacy", logging_callback=on_log) as client:
        await client.set_logging_level("info")
        stepped = await client.call_tool("steps", {"count": 3}, progress_callback=on_progress)
        logged = await client.call_tool("log", {"text": "asked"})
    assert [c.text for c in stepped.content] == ["3 steps"]
    assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert [c.text for c in logged.content] == ["logged"] and logs == [("legacy", "asked")]
    assert_modern_wire((await seen(upstream))[before:])


async def test_list_changed_and_resource_updates_reach_the_get_stream(bridge, upstream):
    """The host's `resources/subscribe` and the list changes it expects unasked ride one
    `subscriptions/listen` upstream, opened again when the URIs change; what it carries comes on the
    host's GET stream."""
    changes = Changes()
    before = len(await seen(upstream))
    async with Client(url(bridge), mode="legacy", message_handler=changes) as client:
        await changes.touched(client)
    assert changes.updates == ["file:///notes.txt"]
    requests = (await seen(upstream))[before:]
    assert_modern_wire(requests)
    assert_one_listen_follows_the_subscriptions(bodies(requests))


async def test_an_input_required_result_becomes_a_sampling_request_and_roots(bridge, upstream):
    before = len(await seen(upstream))
    async with Client(url(bridge), mode="legacy", sampling_callback=sampler("seven"),
                      list_roots_callback=list_roots) as client:
        consulted = await client.call_tool("consult", {"question": "how many?"})
        where = await client.call_tool("where", {})
    assert [c.text for c in consulted.content] == ["sampled: seven"]
    assert [c.text for c in where.content] == ["file:///work"]
    requests = (await seen(upstream))[before:]
    assert_modern_wire(requests)
    calls = [json.loads(r["body"])["params"] for r in requests if r["headers"]["mcp-method"] == "tools/call"]
    assert len(calls) == 4  # each answered input_required, then its retry with the host's answer
    assert [r["content"]["text"] for r in calls[1]["inputResponses"].values()] == ["seven"]


async def test_an_elicitation_crosses_as_input_required_and_back(bridge):
    asked = []

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    async with Client(url(bridge), mode="legacy", elicitation_callback=elicit) as client:
        confirmed = await client.call_tool("approve", {})
    assert asked == ["Go ahead?"] and [c.text for c in confirmed.content] == ["approved: True"]


async def test_a_host_without_the_capability_gets_an_error_naming_it(bridge):
    """The host's capabilities ride every request's envelope, so the SDK server sees the missing
    `sampling` itself and answers with an error naming it (a server that asked regardless would
    get the proxy's own error, naming the method and both eras: tests/unit/pipeline/test_eras.py)."""
    async with Client(url(bridge), mode="legacy") as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("consult", {"question": "q"})
    assert "did not declare the sampling capability" in str(refused.value)


class RawHost:
    """A 2025-11-25 host written by hand (aiohttp): what the proxy writes it, checked against the
    2025-11-25 schema."""

    def __init__(self, http: aiohttp.ClientSession, endpoint: str):
        self.http, self.endpoint = http, endpoint
        self.session: str | None = None

    def headers(self) -> dict[str, str]:
        found = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": LEGACY}
        if self.session is not None:
            found["Mcp-Session-Id"] = self.session
        return found

    async def post(self, msg: dict) -> tuple[int, list[dict]]:
        async with self.http.post(self.endpoint, json=msg, headers=self.headers()) as r:
            body = await r.read()
            if "mcp-session-id" in {k.lower() for k in r.headers}:
                self.session = r.headers["Mcp-Session-Id"]
            if r.status == 202 or not body:
                return r.status, []
            if "event-stream" in r.headers["Content-Type"]:
                found = [json.loads(line[5:]) for line in body.split(b"\n") if line.startswith(b"data:")]
            else:
                found = [json.loads(body)]
        for message in found if r.status == 200 else ():  # (an HTTP refusal's error has no id to name)
            assert_valid(LEGACY_MESSAGE, message)
        return r.status, found

    @contextlib.asynccontextmanager
    async def stream(self):
        """The session's GET stream, open."""
        async with self.http.get(self.endpoint, headers=self.headers()) as stream:
            assert stream.headers["Content-Type"].startswith("text/event-stream")
            yield stream

    async def initialize(self, caps: dict | None = None) -> dict:
        _, [answer] = await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": caps or {}, "clientInfo": {"name": "raw", "version": "1"}}})
        assert (await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}))[0] == 202
        return answer


async def test_a_question_the_host_never_answers_is_withdrawn_and_its_call_told_why(upstream, tmp_path):
    """The 2026-07-28 server's `input_required` becomes a sampling request to the 2025-11-25 host,
    which never answers it: after `--input-wait` the bridge withdraws it (`notifications/cancelled`)
    and the host's `tools/call` gets -32001 naming why, on the call's own answer."""
    running = proxy("--rules", str(rules_for(upstream, tmp_path)), *REVERSE, "--input-wait", "0.5")
    try:
        async with aiohttp.ClientSession() as http:
            host = RawHost(http, url(running))
            await host.initialize({"sampling": {}})
            with anyio.fail_after(30):
                _, got = await host.post({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                          "params": {"name": "consult", "arguments": {"question": "q"}}})
    finally:
        running.stop()
    [question] = [m for m in got if m.get("method") == "sampling/createMessage"]
    [cancel] = [m for m in got if m.get("method") == "notifications/cancelled"]
    assert cancel["params"]["requestId"] == question["id"]
    answer = got[-1]
    assert answer["id"] == 7 and answer["error"]["code"] == -32001
    assert f"the {LEGACY} host did not answer sampling/createMessage" in answer["error"]["message"]
    assert "within 0.5 s" in answer["error"]["message"]


async def test_a_raw_host_gets_a_session_and_2025_11_25_messages(bridge, upstream):
    before = len(await seen(upstream))
    async with aiohttp.ClientSession() as http:
        host = RawHost(http, url(bridge))
        answer = await host.initialize({"extensions": {"com.example/reminders": {}}})
        assert host.session
        assert answer["result"]["protocolVersion"] == LEGACY
        assert answer["result"]["serverInfo"]["name"] == "legacy-only"
        _, listed = await host.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        _, pinged = await host.post({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        _, called = await host.post({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                     "params": {"name": "remind", "arguments": {"path": "r.py"}}})
    assert {t["name"] for t in listed[-1]["result"]["tools"]} == MODERN_TOOLS
    assert pinged == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
    assert called[-1]["id"] == 3 and called[-1]["result"]["content"][0]["text"] == "touched r.py"
    assert_modern_wire((await seen(upstream))[before:])


async def test_a_raw_host_gets_what_its_get_stream_carries_and_cacheable_results(bridge):
    """The list changes and the resource update after a `touch` come on the host's GET stream, each
    a valid 2025-11-25 message; the results 2026-07-28 lets a client cache keep their fields."""
    async with aiohttp.ClientSession() as http:
        host = RawHost(http, url(bridge))
        await host.initialize()
        _, subscribed = await host.post({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
                                         "params": {"uri": "file:///notes.txt"}})
        assert subscribed == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
        _, [read] = await host.post({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
                                     "params": {"uri": "file:///notes.txt"}})
        _, [prompt] = await host.post({"jsonrpc": "2.0", "id": 3, "method": "prompts/get",
                                       "params": {"name": "greet", "arguments": {"name": "Bo"}}})
        async with host.stream() as stream:
            await host.post({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                             "params": {"name": "touch", "arguments": {"path": "g.py"}}})
            got: list[dict] = []
            with anyio.fail_after(20):
                async for line in stream.content:
                    if line.startswith(b"data:"):
                        got.append(json.loads(line[5:]))
                        assert_valid(LEGACY_MESSAGE, got[-1])
                    if {"notifications/tools/list_changed", "notifications/resources/updated"} <= {
                            m.get("method") for m in got}:
                        break
    assert read["result"]["contents"][0]["text"] == "remember the milk"
    assert read["result"]["resultType"] == "complete" and "ttlMs" in read["result"]  # (2025-11-25 allows them)
    assert "Hello, Bo!" in prompt["result"]["messages"][0]["content"]["text"]
    [update] = [m for m in got if m.get("method") == "notifications/resources/updated"]
    assert update["params"]["uri"] == "file:///notes.txt"


async def test_hosts_at_once_keep_their_own_sessions_and_answers(bridge):
    """Two hosts, the same request ids, their calls interleaved: each gets its own answers."""
    async with Client(url(bridge), mode="legacy") as one, Client(url(bridge), mode="legacy") as two:
        asked = [(one, "a"), (two, "b"), (one, "c"), (two, "d")]
        answers = await asyncio.gather(*(host.call_tool("echo", {"text": text}) for host, text in asked))
    assert [answer.content[0].text for answer in answers] == ["a", "b", "c", "d"]


async def test_delete_ends_the_session_and_its_listen(bridge, upstream):
    async with aiohttp.ClientSession() as http:
        host = RawHost(http, url(bridge))
        await host.initialize()
        async with host.stream() as stream:
            async with http.delete(url(bridge), headers=host.headers()) as r:
                assert r.status == 200
            assert await stream.read() is not None  # the GET stream ended with the session
        status, [gone] = await host.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert status == 404 and gone["error"]["code"] == -32001


async def test_an_idle_session_expires(upstream, tmp_path):
    running = proxy("--rules", str(rules_for(upstream, tmp_path, f'host_era = "{LEGACY}"\nserver_era = "{MODERN}"\n')),
                    "--session-idle", "1")
    try:
        async with aiohttp.ClientSession() as http:
            host = RawHost(http, url(running))
            await host.initialize()

            async def expired():
                status, _ = await host.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
                return status == 404

            await eventually(expired, timeout=20, every=1.5)
    finally:
        running.stop()


@pytest.mark.parametrize("version", [LEGACY, "2099-01-01"])
async def test_a_request_that_is_neither_in_a_session_nor_an_initialize_gets_what_it_gets_direct(bridge, upstream,
                                                                                             version):
    """The bridge takes a 2025-11-25 host's session and its `initialize`; anything else goes to the
    server as it came (an era the bridge does not speak, a request that skipped the handshake)."""
    msg = {"jsonrpc": "2.0", "id": 301, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": version}
    answers = []
    async with aiohttp.ClientSession() as http:
        for endpoint in (f"http://127.0.0.1:{upstream.port}/mcp", url(bridge)):
            async with http.post(endpoint, json=msg, headers=headers) as r:
                answers.append((r.status, await r.json()))
    assert answers[0] == answers[1] and answers[0][0] == 400


@pytest.mark.parametrize("flags", [["--server-era", MODERN], REVERSE])
async def test_a_2026_07_28_host_passes_through(upstream, tmp_path, flags):
    """A 2026-07-28 host speaks the server's era: it is not bridged, its requests reach the server
    as it wrote them."""
    running = proxy("--rules", str(rules_for(upstream, tmp_path)), *flags)
    try:
        before = len(await seen(upstream))
        async with Client(url(running), mode=MODERN) as client:
            result = await client.call_tool("echo", {"text": "plain"})
        assert [c.text for c in result.content] == ["plain"]
        requests = (await seen(upstream))[before:]
        assert_modern_wire(requests)
        ids = [json.loads(r["body"]).get("id") for r in requests]
        assert not any(str(i).startswith("rb-era-") for i in ids)
    finally:
        running.stop()


async def test_an_ambient_reminder_crosses_once_on_the_get_stream(tmp_path):
    """A 2026-07-28 server that declares reminders (Harn's, tests.peers.modern_harn_server) gets
    `reminders: true` in the bridge's listen; what it sends there reaches the 2025-11-25 host's GET
    stream once, as a standard reminder."""
    harn = peer("tests.peers.modern_harn_server")
    running = proxy("--rules", str(rules_for(harn, tmp_path)), *REVERSE)
    ext = Reminders()
    try:
        async with Client(url(running), mode="legacy", extensions=[ext]) as client:
            async def sent():  # once the bridge's listen is open at the server
                result = await client.call_tool("ping_listeners", {"body": "the build is red"})
                return result.content[0].text.startswith("sent to")

            await eventually(sent, timeout=20, every=0.2)

            async def arrived():
                return ext.received

            [reminder] = await eventually(arrived, timeout=20)
            await client.call_tool("touch_file", {"path": "x.py"})  # a request's own reminder, on its stream
        assert (reminder["id"], reminder["body"], reminder["tags"], reminder["dedupeKey"], reminder["ttlTurns"]) == (
            "amb-the build is red", "the build is red", ["ambient"], "amb:the build is red", 1)
        assert [r["id"] for r in ext.received] == ["amb-the build is red", "touch-x.py"]
        async with Client(f"http://127.0.0.1:{harn.port}/mcp", mode=MODERN) as direct:
            async def unheard():  # the host's DELETE ended its session, and the listen upstream with it
                result = await direct.call_tool("ping_listeners", {"body": "anyone?"})
                return result.content[0].text == "nobody listens"

            await eventually(unheard, timeout=20, every=0.2)
    finally:
        running.stop()
        harn.stop()


async def test_the_console_shows_the_bridged_hosts(upstream, tmp_path):
    admin = free_port()
    running = proxy("--rules", str(rules_for(upstream, tmp_path, f'server_era = "{MODERN}"\n')),
                    "--admin", f"127.0.0.1:{admin}")
    eras = await eras_after(running, url(running), admin, (("old-ide", "legacy"), ("new-ide", MODERN)))
    hosts = {era: mix["hosts"] for era, mix in eras["hosts"].items()}
    servers = {era: mix["hosts"] for era, mix in eras["servers"].items()}
    assert (eras["host_era"], eras["server_era"], hosts, servers) == (
        "auto", MODERN, {LEGACY: 1, MODERN: 1}, {LEGACY: 0, MODERN: 1})
    [bridged] = eras["bridged"]  # the old host's handshake and call; the new one passed through
    assert (bridged["host_era"], bridged["server_era"]) == (LEGACY, MODERN)
    assert bridged["requests"] == eras["bridged_requests"] >= 2
    assert eras["readiness"]["needed"] is True and eras["readiness"]["bridged_hosts"] == ["old-ide"]
    assert eras["readiness"]["text"].startswith(
        "still needs the era bridge — 1 host on 2025-11-25 (old-ide) talks to a 2026-07-28-only server through the "
        "bridge since start-up; ")


async def test_shutdown_ends_the_sessions_and_their_streams(upstream, tmp_path):
    """SIGTERM while a host's GET stream and the listen upstream are open: serve exits 0 at once,
    its sessions ended (they hold no request in flight for the shutdown grace to wait on)."""
    running = proxy("--rules", str(rules_for(upstream, tmp_path)), *REVERSE)
    try:
        async with aiohttp.ClientSession() as http:
            host = RawHost(http, url(running))
            await host.initialize()
            async with host.stream():
                running.proc.terminate()
                assert await asyncio.get_running_loop().run_in_executor(None, running.proc.wait, 5) == 0
    finally:
        running.stop()


def test_serve_refuses_more_than_one_worker_for_the_reverse_bridge():
    """The proxy's sessions toward 2025-11-25 hosts live in one process (as a stdio server's do)."""
    done = subprocess.run([sys.executable, "-m", "bridge", "serve", "--listen", "127.0.0.1:0", "--workers", "2",
                           "--protocol", "mcp", "--upstream", "http://127.0.0.1:9/mcp", "--server-era", MODERN],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "bridged to a 2026-07-28 server lives in the process" in done.stderr, done.stderr


async def test_a_reload_that_moves_the_era_bridge_is_refused_and_the_session_goes_on(upstream, tmp_path):
    rules = rules_for(upstream, tmp_path, f'server_era = "{MODERN}"\n')
    running = proxy("--rules", str(rules))
    try:
        async with Client(url(running), mode="legacy") as client:
            await client.call_tool("echo", {"text": "before"})
            rules.write_text(rules.read_text().replace(f'server_era = "{MODERN}"', 'server_era = "auto"'))
            running.proc.send_signal(signal.SIGHUP)

            async def refused():
                return [json.loads(line) for line in list(running.stderr) if '"event": "reload_refused"' in line]

            [line] = await eventually(refused, timeout=20)
            assert line["field"] == "server_era"
            assert [c.text for c in (await client.call_tool("echo", {"text": "after"})).content] == ["after"]
    finally:
        running.stop()
