"""Era bridging over stdio (issue 21, point 2), real processes: an `mcp` 2.3.0 SDK host on
2026-07-28 (probing `server/discover`, or pinned with no probe) in front of an SDK server that
speaks only 2025-11-25 (tests.peers.legacy_only_server), through
`reminder-bridge stdio --host-era 2026-07-28 --server-era 2025-11-25`.

What the server received is read back from its own record: the session the proxy opened for the
host (`initialize`, then `notifications/initialized`, before anything else), and never a 2026-07-28
`_meta` key."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path

import aiohttp
import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation

from tests.integration.test_console import wait_listening
from tests.peers.mcp_host import Changes, Reminders
from tests.peers.processes import free_port, get_json

MODERN, LEGACY = "2026-07-28", "2025-11-25"
BRIDGE = ["--host-era", MODERN, "--server-era", LEGACY]
SUB_KEY = "io.modelcontextprotocol/subscriptionId"


def server(seen: Path) -> list[str]:
    return [sys.executable, "-m", "tests.peers.legacy_only_server", str(seen)]


def proxied(seen: Path, *options: str, rules: Path | None = None) -> StdioServerParameters:
    extra = ["--rules", str(rules)] if rules is not None else []
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "bridge", "stdio", *extra, *options, "--", *server(seen)])


def received(seen: Path) -> list[dict]:
    return [json.loads(line) for line in seen.read_text().splitlines()]


@pytest.fixture
def rules(tmp_path) -> Path:
    """The SDK gives a server's capabilities no slot for Harn's declaration: its reminders are taken
    without one."""
    path = tmp_path / "rules.toml"
    path.write_text('[defaults]\nrequire_declaration = false\n')
    return path


async def refusal(params: StdioServerParameters, mode: str = MODERN) -> MCPError:
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


def assert_legacy_wire(seen: Path) -> None:
    """The server saw a 2025-11-25 client: the handshake first, no 2026-07-28 key anywhere."""
    got = received(seen)
    assert [m.get("method") for m in got[:2]] == ["initialize", "notifications/initialized"]
    assert got[0]["params"]["protocolVersion"] == LEGACY
    assert sum(m.get("method") == "initialize" for m in got) == 1  # the session is kept, not reopened
    assert "io.modelcontextprotocol/" not in json.dumps(got)
    assert not any(m.get("method") in ("server/discover", "ping") for m in got)


async def test_the_server_alone_refuses_a_2026_07_28_host(tmp_path):
    """Without the proxy, the pair cannot talk: the server is 2025-11-25 only."""
    seen = tmp_path / "seen.jsonl"
    direct = await refusal(StdioServerParameters(command=sys.executable, args=server(seen)[1:]))
    assert direct.error.code == -32602


async def test_discover_probe_is_answered_from_initialize(tmp_path, rules):
    seen = tmp_path / "seen.jsonl"
    async with Client(proxied(seen, *BRIDGE, rules=rules), mode="auto") as client:
        assert client.protocol_version == MODERN  # the probe succeeded: no fall back to initialize
        assert client.server_info is not None and client.server_info.name == "legacy-only"
        discovered = client.session.discover_result
        assert MODERN in discovered.supported_versions and discovered.ttl_ms == 0
        assert discovered.cache_scope == "private" and discovered.instructions.startswith("A server that never")
        tools = await client.list_tools()
        assert {t.name for t in tools.tools} == {"echo", "remind", "log", "touch", "ask", "confirm", "consult", "where"}
        result = await client.call_tool("echo", {"text": "hi"})
        assert [c.text for c in result.content] == ["hi"]
    assert_legacy_wire(seen)


async def test_tools_resources_prompts_with_a_pinned_host(tmp_path, rules):
    """`mode=2026-07-28` sends no discover: the first request opens the session."""
    seen = tmp_path / "seen.jsonl"
    async with Client(proxied(seen, *BRIDGE, rules=rules), mode=MODERN) as client:
        result = await client.call_tool("echo", {"text": "first"})
        resources = await client.list_resources()
        read = await client.read_resource("file:///notes.txt")
        prompts = await client.list_prompts()
        prompt = await client.get_prompt("greet", {"name": "Ada"})
    assert [c.text for c in result.content] == ["first"]
    assert [str(r.uri) for r in resources.resources] == ["file:///notes.txt"]
    assert read.contents[0].text == "remember the milk"
    assert [p.name for p in prompts.prompts] == ["greet"]
    assert "Hello, Ada!" in prompt.messages[0].content.text
    assert_legacy_wire(seen)
    initialize = received(seen)[0]["params"]
    assert initialize["clientInfo"]["name"] and "capabilities" in initialize


@pytest.mark.parametrize("mode", ["auto", MODERN])
async def test_a_legacy_reminder_reaches_the_standard_host_once(tmp_path, rules, mode):
    seen = tmp_path / "seen.jsonl"
    ext = Reminders()
    async with Client(proxied(seen, *BRIDGE, rules=rules), mode=mode, extensions=[ext]) as client:
        result = await client.call_tool("remind", {"path": "src/lib.rs"})
        await client.call_tool("echo", {"text": "sync"})  # what came before its answer has been dispatched
    assert [c.text for c in result.content] == ["touched src/lib.rs"]
    [reminder] = ext.received
    assert reminder["id"] == "r-src/lib.rs"
    assert reminder["body"] == "src/lib.rs changed externally; re-read it before editing."
    assert reminder["tags"] == ["workspace", "file_changed"]
    assert reminder["dedupeKey"] == "file_changed:src/lib.rs" and reminder["ttlTurns"] == 2
    assert_legacy_wire(seen)


async def test_log_lines_only_for_a_request_that_opted_in(tmp_path, rules):
    """2026-07-28 forbids unrequested log messages; a request's logLevel becomes logging/setLevel."""
    seen = tmp_path / "seen.jsonl"
    logs = []

    async def on_log(params):
        logs.append(params)

    async with Client(proxied(seen, *BRIDGE, rules=rules), mode=MODERN, logging_callback=on_log) as client:
        await client.call_tool("log", {"text": "unasked"})
    assert logs == []
    logs.clear()
    seen2 = tmp_path / "seen2.jsonl"
    async with Client(proxied(seen2, *BRIDGE, rules=rules), mode=MODERN, logging_callback=on_log,
                      log_level="info") as client:
        await client.call_tool("log", {"text": "asked"})
    assert [(log.logger, log.data) for log in logs] == [("legacy", "asked")]
    methods = [m.get("method") for m in received(seen2)]
    assert methods.index("logging/setLevel") < methods.index("tools/call")
    assert_legacy_wire(seen2)


async def test_without_the_flags_the_pair_fails_as_it_does_direct(tmp_path):
    """`auto`: the proxy changes nothing, so a 2026-07-28 host meets the 2025-11-25 server's refusal."""
    seen = tmp_path / "seen.jsonl"
    direct = await refusal(StdioServerParameters(command=sys.executable, args=server(tmp_path / "d.jsonl")[1:]))
    through = await refusal(proxied(seen))
    assert (through.error.code, through.error.message) == (direct.error.code, direct.error.message)
    assert not any(m.get("method") == "initialize" for m in received(seen))


# -- 2025-11-25 host → 2026-07-28 server (tests.peers.modern_only_server) -------------------------

REVERSE = ["--host-era", LEGACY, "--server-era", MODERN]


def modern_server(seen: Path, *options: str, rules: Path | None = None) -> StdioServerParameters:
    extra = ["--rules", str(rules)] if rules is not None else []
    return StdioServerParameters(command=sys.executable, args=[
        "-m", "bridge", "stdio", *extra, *options, "--", sys.executable, "-m", "tests.peers.modern_only_server",
        str(seen)])


def assert_modern_wire(seen: Path) -> None:
    """The server saw a 2026-07-28 client: discover first, no handshake, every request enveloped."""
    got = received(seen)
    assert got[0]["method"] == "server/discover"
    assert not any(m.get("method") in ("initialize", "notifications/initialized", "ping", "logging/setLevel")
                   for m in got)
    for m in got:
        if "method" in m and "id" in m:
            meta = m["params"]["_meta"]
            assert meta["io.modelcontextprotocol/protocolVersion"] == MODERN
            assert meta["io.modelcontextprotocol/clientInfo"]["name"]
            assert "io.modelcontextprotocol/clientCapabilities" in meta


async def test_reverse_the_server_alone_refuses_a_2025_11_25_host(tmp_path):
    direct = StdioServerParameters(command=sys.executable, args=["-m", "tests.peers.modern_only_server",
                                                                 str(tmp_path / "seen.jsonl")])
    assert (await refusal(direct, mode="legacy")).error.code == -32600


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # logging, on purpose
async def test_reverse_initialize_is_answered_from_discover(tmp_path, rules):
    seen = tmp_path / "seen.jsonl"
    ext = Reminders()
    async with Client(modern_server(seen, *REVERSE, rules=rules), mode="legacy", extensions=[ext]) as client:
        assert client.protocol_version == LEGACY
        assert client.server_info.name == "legacy-only"
        await client.session.send_ping()
        await client.set_logging_level("info")
        tools = await client.list_tools()
        reminded = await client.call_tool("remind", {"path": "b.py"})
        read = await client.read_resource("file:///notes.txt")
        prompts = await client.list_prompts()
        await client.call_tool("echo", {"text": "sync"})
    assert {t.name for t in tools.tools} == {"echo", "remind", "log", "touch", "ask", "confirm", "consult", "where"}
    assert [c.text for c in reminded.content] == ["touched b.py"]
    assert read.contents[0].text == "remember the milk"
    assert [p.name for p in prompts.prompts] == ["greet"]
    [reminder] = ext.received
    assert (reminder["id"], reminder["tags"], reminder["dedupeKey"], reminder["ttlTurns"]) == (
        "r-b.py", ["workspace", "file_changed"], "file_changed:b.py", 2)
    assert_modern_wire(seen)
    calls = [m for m in received(seen) if m.get("method") == "tools/call"]
    assert all(m["params"]["_meta"]["io.modelcontextprotocol/logLevel"] == "info" for m in calls)


async def test_server_era_alone_lets_a_host_of_that_era_through(tmp_path, rules):
    """`--server-era 2025-11-25` with the host's era left `auto`: a 2025-11-25 host is not bridged,
    its handshake reaches the server as it wrote it."""
    seen = tmp_path / "seen.jsonl"
    async with Client(proxied(seen, "--server-era", LEGACY, rules=rules), mode="legacy") as client:
        assert client.protocol_version == LEGACY
        result = await client.call_tool("echo", {"text": "plain"})
    assert [c.text for c in result.content] == ["plain"]
    got = received(seen)
    assert got[0]["method"] == "initialize" and isinstance(got[0]["id"], int)  # the host's own id: not the proxy's


# -- the era mix on the admin port (issue 21, point 3) -------------------------------------------

async def status_of(admin: int) -> dict:
    """The one route of the stdio proxy in `/api/status`, once its admin port answers."""
    await asyncio.get_running_loop().run_in_executor(None, wait_listening, admin)
    [route] = (await get_json(admin, "/api/status"))["routes"]
    return route


@pytest.mark.parametrize("direction", ["modern host", "legacy host"])
async def test_the_console_shows_the_era_mix_and_names_the_hosts_that_need_the_bridge(tmp_path, rules, direction):
    """A real bridged proxy with an admin port: `/api/status` counts the SDK host on its era, the
    server on the one `--server-era` names, the requests bridged; its verdict names the host, and
    `/metrics` has the same counts."""
    admin = free_port()
    seen = tmp_path / "seen.jsonl"
    if direction == "modern host":
        host, server_era = MODERN, LEGACY
        params = proxied(seen, *BRIDGE, "--admin", f"127.0.0.1:{admin}", rules=rules)
    else:
        host, server_era = LEGACY, MODERN
        params = modern_server(seen, *REVERSE, "--admin", f"127.0.0.1:{admin}", rules=rules)
    async with Client(params, mode="auto" if host == MODERN else "legacy",
                      client_info=Implementation(name="migrating-ide", version="1")) as client:
        await client.call_tool("echo", {"text": "one"})
        await client.call_tool("echo", {"text": "two"})
        route = await status_of(admin)
        metrics = await metrics_text(admin)
    eras = route["eras"]
    assert (eras["host_era"], eras["server_era"]) == (host, server_era)
    assert eras["hosts"][host]["hosts"] == 1 and eras["hosts"][server_era]["hosts"] == 0
    assert eras["servers"][server_era]["hosts"] == 1 and eras["servers"][host]["hosts"] == 0
    [bridged] = eras["bridged"]
    assert (bridged["host_era"], bridged["server_era"]) == (host, server_era)
    assert bridged["requests"] == eras["bridged_requests"] >= 3  # the handshake and two calls
    ready = eras["readiness"]
    assert ready["needed"] is True and ready["bridged_hosts"] == ["migrating-ide"]
    assert ready["text"].startswith(f"still needs the era bridge — 1 host on {host} (migrating-ide) talks to a "
                                    f"{server_era}-only server through the bridge since start-up; ")
    assert (f'reminder_bridge_era_bridged_requests_total{{host_era="{host}",route="{route["name"]}",'
            f'server_era="{server_era}"}} {float(bridged["requests"])}') in metrics


async def metrics_text(admin: int) -> str:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{admin}/metrics") as r:
        return await r.text()


# -- subscriptions/listen ↔ the 2025-11-25 server's notifications and resources/subscribe ------------

async def test_listen_streams_list_changed_and_resource_updates(tmp_path, rules):
    """The SDK host's `listen()` is acknowledged with what the server honours; the server's
    notifications after a `touch` (ambient: after its answer) reach the stream, stamped."""
    seen = tmp_path / "seen.jsonl"
    events = []
    async with Client(proxied(seen, *BRIDGE, rules=rules), mode=MODERN) as client:
        async with client.listen(tools_list_changed=True, resource_subscriptions=["file:///notes.txt"]) as sub:
            assert sub.honored.tools_list_changed is True
            assert sub.honored.resource_subscriptions == ["file:///notes.txt"]
            await client.call_tool("touch", {"path": "a.py"})
            with anyio.fail_after(20):
                async for event in sub:
                    events.append(type(event).__name__)
                    if len(events) == 2:
                        break
        await client.call_tool("echo", {"text": "after"})  # the cancel reached the proxy before this
    assert sorted(events) == ["ResourceUpdated", "ToolsListChanged"]
    got = received(seen)
    assert [m["params"] for m in got if m.get("method") == "resources/subscribe"] == [{"uri": "file:///notes.txt"}]
    assert [m["params"] for m in got if m.get("method") == "resources/unsubscribe"] == [{"uri": "file:///notes.txt"}]
    assert not any(m.get("method") == "subscriptions/listen" for m in got)
    assert_legacy_wire(seen)


class RawHost:
    """A 2026-07-28 host written by hand over the proxy's stdio: the SDK's `listen()` has no way to
    ask for reminders (the filter key `reminders`, spec §3)."""

    CAPS = {"extensions": {"com.example/reminders": {}}}

    def __init__(self, process):
        self.process = process
        self.ids = iter(range(1, 1000))

    def meta(self) -> dict:
        return {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientInfo":
                {"name": "raw", "version": "1"}, "io.modelcontextprotocol/clientCapabilities": self.CAPS}

    async def send(self, method: str, msg_id=None, more: dict | None = None, **params) -> None:
        msg = {"jsonrpc": "2.0", "method": method, "params": {**params, "_meta": {**self.meta(), **(more or {})}}}
        if msg_id is not None:
            msg["id"] = msg_id
        self.process.stdin.write((json.dumps(msg) + "\n").encode())
        await self.process.stdin.drain()

    async def until(self, done) -> list[dict]:
        """What the proxy wrote, up to and with the first message ``done`` accepts."""
        got = []
        with anyio.fail_after(20):
            while not got or not done(got[-1]):
                got.append(json.loads(await self.process.stdout.readline()))
        return got

    async def call(self, name: str, **arguments) -> list[dict]:
        msg_id = next(self.ids)
        await self.send("tools/call", msg_id, name=name, arguments=arguments)
        return await self.until(lambda m: m.get("id") == msg_id)


@contextlib.asynccontextmanager
async def raw_host(tmp_path: Path, rules: Path):
    """The proxy in front of the 2025-11-25 server, with a hand-written host on its stdio."""
    seen = tmp_path / "seen.jsonl"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "stdio", "--rules", str(rules), *BRIDGE, "--", *server(seen),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        yield RawHost(process)
    finally:
        process.stdin.close()
        await process.wait()
    assert_legacy_wire(seen)


async def test_an_ambient_legacy_reminder_goes_on_the_listen_stream_that_opted_in(tmp_path, rules):
    async with raw_host(tmp_path, rules) as host:
        await streamed_reminder(host)


async def streamed_reminder(raw_host: RawHost) -> None:
    await raw_host.send("subscriptions/listen", "L", notifications={"reminders": True, "toolsListChanged": True})
    [ack] = await raw_host.until(lambda m: True)
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"toolsListChanged": True, "reminders": True}
    assert ack["params"]["_meta"] == {SUB_KEY: "L"}
    answered = await raw_host.call("touch", path="src/x.rs")
    # what the touch sent after its answer: the list change the stream asked for, and the reminder
    after = await raw_host.until(lambda m: m.get("method") == "notifications/reminder")
    assert answered[-1]["result"]["content"][0]["text"] == "touched src/x.rs"
    [changed] = [m for m in after if m.get("method") == "notifications/tools/list_changed"]
    assert changed["params"]["_meta"] == {SUB_KEY: "L"}
    reminder = after[-1]
    assert reminder["params"]["_meta"][SUB_KEY] == "L"
    assert reminder["params"]["reminder"]["id"] == "r-src/x.rs"
    assert reminder["params"]["reminder"]["dedupeKey"] == "file_changed:src/x.rs"
    assert reminder["params"]["reminder"]["ttlTurns"] == 2
    # nothing the stream did not ask for: no other list change, no resource update, no log line
    assert {m.get("method") for m in after} == {"notifications/tools/list_changed", "notifications/reminder"}


async def test_an_ambient_legacy_reminder_without_a_stream_is_held_for_the_tool_result(tmp_path, rules):
    """The stream takes log messages only: the log line the server sends after the reminder tells
    the host the reminder has come (and was held, since a request under way would have taken it)."""
    async with raw_host(tmp_path, rules) as host:
        await host.send("subscriptions/listen", "L", {"io.modelcontextprotocol/logLevel": "info"}, notifications={})
        [ack] = await host.until(lambda m: True)
        assert ack["params"] == {"notifications": {}, "_meta": {SUB_KEY: "L"}}
        await host.call("touch", path="src/y.rs")
        [log] = await host.until(lambda m: m.get("method") == "notifications/message")
        assert log["params"]["data"] == "ambient" and log["params"]["_meta"] == {SUB_KEY: "L"}
        sync = await host.call("echo", text="next")
    assert not any(m.get("method") == "notifications/reminder" for m in sync)
    texts = [c["text"] for c in sync[-1]["result"]["content"]]
    assert texts[0] == "next" and "src/y.rs changed externally" in texts[-1]


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # resources/subscribe, on purpose
async def test_reverse_subscribe_and_list_changed_ride_one_listen_upstream(tmp_path, rules):
    """A 2025-11-25 host's `resources/subscribe` and the list changes it expects unasked become one
    `subscriptions/listen` to the 2026-07-28 server, opened again when the URIs change."""
    seen = tmp_path / "seen.jsonl"
    changes = Changes()
    async with Client(modern_server(seen, *REVERSE, rules=rules), mode="legacy", message_handler=changes) as client:
        await changes.touched(client)
    assert changes.updates == ["file:///notes.txt"]
    got = received(seen)
    listens = [m for m in got if m.get("method") == "subscriptions/listen"]
    assert [sorted(m["params"]["notifications"]) for m in listens] == [
        ["promptsListChanged", "resourcesListChanged", "toolsListChanged"],
        ["promptsListChanged", "resourceSubscriptions", "resourcesListChanged", "toolsListChanged"]]
    assert listens[1]["params"]["notifications"]["resourceSubscriptions"] == ["file:///notes.txt"]
    cancelled = [m for m in got if m.get("method") == "notifications/cancelled"]
    assert [m["params"]["requestId"] for m in cancelled] == [listens[0]["id"]]
    assert not any(m.get("method") in ("resources/subscribe", "resources/unsubscribe") for m in got)
    assert_modern_wire(seen)


# -- server→client requests: the 2025-11-25 server's sampling request ↔ an input_required result ---

@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # sampling, on purpose
async def test_a_sampling_request_crosses_as_input_required_and_back(tmp_path, rules):
    """The server's `sampling/createMessage` answers the host's `tools/call` `input_required`; the
    SDK host samples and retries; its answer goes to the server, whose result answers the retry."""
    seen = tmp_path / "seen.jsonl"
    asked = []

    async def sample(context, params):
        asked.append(params.messages[0].content.text)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="forty-two"),
                                         model="test-model")

    async with Client(proxied(seen, *BRIDGE, rules=rules), mode=MODERN, sampling_callback=sample) as client:
        result = await client.call_tool("ask", {"question": "the answer?"})
    assert asked == ["the answer?"]
    assert [c.text for c in result.content] == ["sampled: forty-two"]
    got = received(seen)
    assert sum(m.get("method") == "tools/call" for m in got) == 1  # the retry never reached the server
    [answer] = [m for m in got if "result" in m and "model" in m["result"]]
    assert answer["result"]["content"]["text"] == "forty-two" and "resultType" not in answer["result"]
    assert_legacy_wire(seen)


async def test_a_sampling_request_to_a_host_without_the_capability_is_refused_naming_it(tmp_path, rules):
    seen = tmp_path / "seen.jsonl"
    async with Client(proxied(seen, *BRIDGE, rules=rules), mode=MODERN) as client:
        result = await client.call_tool("ask", {"question": "q"})
    [text] = [c.text for c in result.content]
    assert text.startswith("refused:") and "sampling/createMessage" in text and "capability sampling" in text
    assert MODERN in text and LEGACY in text
    assert_legacy_wire(seen)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # sampling, on purpose
async def test_reverse_an_input_required_result_becomes_a_sampling_request(tmp_path, rules):
    seen = tmp_path / "seen.jsonl"

    async def sample(context, params):
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="seven"),
                                         model="test-model")

    async with Client(modern_server(seen, *REVERSE, rules=rules), mode="legacy", sampling_callback=sample) as client:
        result = await client.call_tool("consult", {"question": "how many?"})
    assert [c.text for c in result.content] == ["sampled: seven"]
    calls = [m for m in received(seen) if m.get("method") == "tools/call"]
    assert len(calls) == 2  # the first, answered input_required; the retry with the host's answer
    retry = calls[1]["params"]
    assert retry["inputResponses"] and [r["content"]["text"] for r in retry["inputResponses"].values()] == ["seven"]
    assert retry["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {"sampling": {}}
    assert_modern_wire(seen)


@pytest.mark.parametrize("direction", ["legacy server", "modern server"])
async def test_roots_list_crosses_both_ways(tmp_path, rules, direction):
    """`roots/list`: a 2025-11-25 server's request becomes input_required for a 2026-07-28 host, and
    a 2026-07-28 server's input_required a request to a 2025-11-25 host."""
    seen = tmp_path / "seen.jsonl"

    async def list_roots(context):
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    params, mode = ((proxied(seen, *BRIDGE, rules=rules), MODERN) if direction == "legacy server"
                    else (modern_server(seen, *REVERSE, rules=rules), "legacy"))
    async with Client(params, mode=mode, list_roots_callback=list_roots) as client:
        result = await client.call_tool("where", {})
    assert [c.text for c in result.content] == ["file:///work"]
    (assert_legacy_wire if direction == "legacy server" else assert_modern_wire)(seen)


# -- what waits for the upstream handshake is bounded (bridge.pipeline.eras HELD_MESSAGES, HELD_BYTES) --

#: the bound docs/rules.md promises, written out: raising the code's fails these tests
HELD_MESSAGES, HELD_BYTES, WAIT_FULL = 256, 4 << 20, -32000

@contextlib.asynccontextmanager
async def slow_initialize(tmp_path: Path, rules: Path):
    """The proxy in front of a server whose `initialize` answer waits for the test (its FIFO), with
    a hand-written host on its stdio; yields the host and what releases the answer."""
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "stdio", "--rules", str(rules), *BRIDGE, "--", sys.executable, "-m",
        "tests.peers.slow_initialize_server", str(fifo), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        limit=1 << 20)

    def release() -> None:
        with open(fifo, "w") as go:  # the server's open returns: it answers initialize
            go.write("go")

    try:
        yield RawHost(process), release
    finally:
        process.stdin.close()
        await process.wait()


async def flood(host: RawHost, count: int, text: str = "") -> None:
    for n in range(count):
        await host.send("tools/call", n, name="echo", arguments={"text": text})


def refusals(got: list[dict]) -> list[dict]:
    return [m for m in got if m.get("error", {}).get("code") == WAIT_FULL]


async def test_a_host_flooding_while_initialize_is_slow_is_told_why_past_the_bound(tmp_path, rules):
    """Requests past `HELD_MESSAGES` are answered at once with the error, while the server has not
    answered `initialize` (so nothing else could have answered them); those held go on after."""
    over = 40
    async with slow_initialize(tmp_path, rules) as (host, release):
        await flood(host, HELD_MESSAGES + over)
        refused = await host.until(lambda m: m.get("id") == HELD_MESSAGES + over - 1)
        assert len(refusals(refused)) == len(refused) == over  # before the release: errors only
        assert [m["id"] for m in refused] == list(range(HELD_MESSAGES, HELD_MESSAGES + over))
        assert "wait for the server's handshake" in refused[0]["error"]["message"]
        release()
        answered = await host.until(lambda m: m.get("id") == HELD_MESSAGES - 1)
    assert [m["id"] for m in answered] == list(range(HELD_MESSAGES))
    assert all(m["result"]["resultType"] == "complete" for m in answered)


async def test_the_wait_is_bounded_in_bytes_too(tmp_path, rules):
    """Big requests: what waits stays within `HELD_BYTES`; the rest is refused at once."""
    text = "x" * (1 << 20)
    count = HELD_BYTES // len(text) + 4
    async with slow_initialize(tmp_path, rules) as (host, release):
        await flood(host, count, text)
        refused = await host.until(lambda m: m.get("id") == count - 1)
        assert len(refusals(refused)) == len(refused)
        held = count - len(refused)
        assert 0 < held < HELD_BYTES // len(text) + 1
        release()
        answered = await host.until(lambda m: m.get("id") == held - 1)
    assert [m["result"]["content"][0]["text"] for m in answered] == [str(len(text))] * held
