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
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from tests.integration import era_tours
from tests.integration.era_tours import (
    BRIDGE, LEGACY, MODERN, REVERSE, assert_calls_asked_for_logs, assert_legacy_record, assert_log_level_set_first,
    assert_modern_record, assert_one_listen_follows_the_subscriptions, assert_retried_with_the_sample,
    assert_sampled_once, held_reminder, legacy_tour, list_roots, listened, modern_reminder, modern_tour, received,
    refusal, sampler, status_of, streamed_reminder)
from tests.peers.legacy_only_server import TOOLS
from tests.peers.mcp_host import Changes, Reminders
from tests.peers.processes import free_port

rules = era_tours.rules  # the fixture


def server(seen: Path) -> list[str]:
    return [sys.executable, "-m", "tests.peers.legacy_only_server", str(seen)]


def proxied(seen: Path, *options: str, rules: Path | None = None) -> StdioServerParameters:
    extra = ["--rules", str(rules)] if rules is not None else []
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "bridge", "stdio", *extra, *options, "--", *server(seen)])


async def test_the_server_alone_refuses_a_2026_07_28_host(tmp_path):
    """Without the proxy, the pair cannot talk: the server is 2025-11-25 only."""
    seen = tmp_path / "seen.jsonl"
    direct = await refusal(StdioServerParameters(command=sys.executable, args=server(seen)[1:]))
    assert direct.error.code == -32602


async def test_discover_probe_is_answered_from_initialize(tmp_path, rules):
    seen = tmp_path / "seen.jsonl"
    async with Client(proxied(seen, *BRIDGE, rules=rules), mode="auto") as client:
        await modern_tour(client, "auto")
    assert_legacy_record(seen)


async def test_tools_resources_prompts_with_a_pinned_host(tmp_path, rules):
    """`mode=2026-07-28` sends no discover: the first request opens the session."""
    seen = tmp_path / "seen.jsonl"
    async with Client(proxied(seen, *BRIDGE, rules=rules), mode=MODERN) as client:
        await modern_tour(client, MODERN)
    assert_legacy_record(seen)
    initialize = received(seen)[0]["params"]
    assert initialize["clientInfo"]["name"] and "capabilities" in initialize


@pytest.mark.parametrize("mode", ["auto", MODERN])
async def test_a_legacy_reminder_reaches_the_standard_host_once(tmp_path, rules, mode):
    seen = tmp_path / "seen.jsonl"
    ext = Reminders()
    async with Client(proxied(seen, *BRIDGE, rules=rules), mode=mode, extensions=[ext]) as client:
        await modern_reminder(client, ext)
    assert_legacy_record(seen)


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
    assert_log_level_set_first(received(seen2))
    assert_legacy_record(seen2)


async def test_without_the_flags_the_pair_fails_as_it_does_direct(tmp_path):
    """`auto`: the proxy changes nothing, so a 2026-07-28 host meets the 2025-11-25 server's refusal."""
    seen = tmp_path / "seen.jsonl"
    direct = await refusal(StdioServerParameters(command=sys.executable, args=server(tmp_path / "d.jsonl")[1:]))
    through = await refusal(proxied(seen))
    assert (through.error.code, through.error.message) == (direct.error.code, direct.error.message)
    assert not any(m.get("method") == "initialize" for m in received(seen))


# -- 2025-11-25 host → 2026-07-28 server (tests.peers.modern_only_server) -------------------------

def modern_server(seen: Path, *options: str, rules: Path | None = None) -> StdioServerParameters:
    extra = ["--rules", str(rules)] if rules is not None else []
    return StdioServerParameters(command=sys.executable, args=[
        "-m", "bridge", "stdio", *extra, *options, "--", sys.executable, "-m", "tests.peers.modern_only_server",
        str(seen)])


async def test_reverse_the_server_alone_refuses_a_2025_11_25_host(tmp_path):
    direct = StdioServerParameters(command=sys.executable, args=["-m", "tests.peers.modern_only_server",
                                                                 str(tmp_path / "seen.jsonl")])
    assert (await refusal(direct, mode="legacy")).error.code == -32600


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # logging, on purpose
async def test_reverse_initialize_is_answered_from_discover(tmp_path, rules):
    seen = tmp_path / "seen.jsonl"
    ext = Reminders()
    async with Client(modern_server(seen, *REVERSE, rules=rules), mode="legacy", extensions=[ext]) as client:
        await legacy_tour(client, ext, TOOLS)
    assert_modern_record(seen)
    assert_calls_asked_for_logs(received(seen))


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
    async with Client(proxied(seen, *BRIDGE, rules=rules), mode=MODERN) as client:
        await listened(client)
        await client.call_tool("echo", {"text": "after"})  # the cancel reached the proxy before this
    got = received(seen)
    assert [m["params"] for m in got if m.get("method") == "resources/subscribe"] == [{"uri": "file:///notes.txt"}]
    assert [m["params"] for m in got if m.get("method") == "resources/unsubscribe"] == [{"uri": "file:///notes.txt"}]
    assert not any(m.get("method") == "subscriptions/listen" for m in got)
    assert_legacy_record(seen)


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
        await self.write(msg)

    async def write(self, msg: dict) -> None:
        self.process.stdin.write((json.dumps(msg) + "\n").encode())
        await self.process.stdin.drain()

    async def logged(self, event: str) -> dict:
        """The first line the proxy logs (its stderr) of ``event``: the event itself, waited on."""
        with anyio.fail_after(20):
            while True:
                line = await self.process.stderr.readline()
                assert line, f"the proxy ended without logging {event}"
                with contextlib.suppress(ValueError):
                    record = json.loads(line)
                    if isinstance(record, dict) and record.get("event") == event:
                        return record

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
async def raw_host(tmp_path: Path, rules: Path, *options: str, era: list[str] = BRIDGE, peer: str = "legacy_only_server"):
    """The proxy in front of the 2025-11-25 server (``peer``), with a hand-written host on its stdio
    (its stderr read: `RawHost.logged`)."""
    seen = tmp_path / "seen.jsonl"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "stdio", "--rules", str(rules), *era, *options, "--", sys.executable, "-m",
        f"tests.peers.{peer}", str(seen), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        yield RawHost(process)
    finally:
        process.stdin.close()
        await process.wait()
    (assert_legacy_record if peer == "legacy_only_server" else assert_modern_record)(seen)


async def test_an_ambient_legacy_reminder_goes_on_the_listen_stream_that_opted_in(tmp_path, rules):
    """(What the touch sends after its answer comes on the proxy's stdout, as the stream's.)"""
    async with raw_host(tmp_path, rules) as host:
        await host.send("subscriptions/listen", "L", notifications={"reminders": True, "toolsListChanged": True})
        await streamed_reminder(host, host)


async def test_an_ambient_legacy_reminder_without_a_stream_is_held_for_the_tool_result(tmp_path, rules):
    """The stream takes log messages only: the log line the server sends after the reminder tells
    the host the reminder has come (and was held, since a request under way would have taken it)."""
    async with raw_host(tmp_path, rules) as host:
        await host.send("subscriptions/listen", "L", {"io.modelcontextprotocol/logLevel": "info"}, notifications={})
        await held_reminder(host, host)


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
    assert_one_listen_follows_the_subscriptions(got)
    [first] = [m for m in got if m.get("method") == "subscriptions/listen"][:1]
    cancelled = [m for m in got if m.get("method") == "notifications/cancelled"]
    assert [m["params"]["requestId"] for m in cancelled] == [first["id"]]
    assert_modern_record(seen)


# -- server→client requests: the 2025-11-25 server's sampling request ↔ an input_required result ---

@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # sampling, on purpose
async def test_a_sampling_request_crosses_as_input_required_and_back(tmp_path, rules):
    """The server's `sampling/createMessage` answers the host's `tools/call` `input_required`; the
    SDK host samples and retries; its answer goes to the server, whose result answers the retry."""
    seen = tmp_path / "seen.jsonl"
    asked = []
    async with Client(proxied(seen, *BRIDGE, rules=rules), mode=MODERN,
                      sampling_callback=sampler("forty-two", asked)) as client:
        result = await client.call_tool("ask", {"question": "the answer?"})
    assert asked == ["the answer?"]
    assert [c.text for c in result.content] == ["sampled: forty-two"]
    assert_sampled_once(received(seen))
    assert_legacy_record(seen)


async def test_a_sampling_request_to_a_host_without_the_capability_is_refused_naming_it(tmp_path, rules):
    seen = tmp_path / "seen.jsonl"
    async with Client(proxied(seen, *BRIDGE, rules=rules), mode=MODERN) as client:
        result = await client.call_tool("ask", {"question": "q"})
    [text] = [c.text for c in result.content]
    assert text.startswith("refused:") and "sampling/createMessage" in text and "capability sampling" in text
    assert MODERN in text and LEGACY in text
    assert_legacy_record(seen)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # sampling, on purpose
async def test_reverse_an_input_required_result_becomes_a_sampling_request(tmp_path, rules):
    seen = tmp_path / "seen.jsonl"
    async with Client(modern_server(seen, *REVERSE, rules=rules), mode="legacy",
                      sampling_callback=sampler("seven")) as client:
        result = await client.call_tool("consult", {"question": "how many?"})
    assert [c.text for c in result.content] == ["sampled: seven"]
    assert_retried_with_the_sample(received(seen))
    retry = [m for m in received(seen) if m.get("method") == "tools/call"][1]["params"]
    assert retry["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {"sampling": {}}
    assert_modern_record(seen)


async def test_an_input_required_the_host_never_retries_is_given_up_and_the_server_told_why(tmp_path, rules):
    """A 2026-07-28 host that gets `input_required` and never retries: after `--input-wait` the
    server's sampling request gets the error that names why, the call it suspended is cancelled
    upstream, a retry after that is refused naming requestState, and the session goes on."""
    async with raw_host(tmp_path, rules, "--input-wait", "0.5", "--log-format", "json") as host:
        host.CAPS = {**RawHost.CAPS, "sampling": {}}
        [suspended] = await host.call("ask", question="q")
        assert suspended["result"]["resultType"] == "input_required"
        logged = await host.logged("era_input_given_up")
        assert logged["reason"] == "expired" and logged["method"] == "sampling/createMessage"
        await host.send("tools/call", 50, name="ask", requestState=suspended["result"]["requestState"],
                        inputResponses={"request": {"role": "assistant", "model": "m",
                                                    "content": {"type": "text", "text": "late"}}})
        [late] = await host.until(lambda m: m.get("id") == 50)
        assert late["error"]["code"] == -32602 and late["error"]["data"]["field"] == "requestState"
        echoed = await host.call("echo", text="still here")  # (the server read all before it: its record has it)
        assert echoed[-1]["result"]["content"][0]["text"] == "still here"
    got = received(tmp_path / "seen.jsonl")
    [sampling] = [m for m in got if m.get("error", {}).get("code") == -32001]
    assert f"the {MODERN} host did not answer sampling/createMessage" in sampling["error"]["message"]
    assert "within 0.5 s" in sampling["error"]["message"]
    [call] = [m for m in got if m.get("method") == "tools/call" and m["params"]["name"] == "ask"]
    cancels = [m for m in got if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == [call["id"]]
    assert not any(m.get("params", {}).get("name") == "ask" and m["id"] != call["id"] for m in got
                   if m.get("method") == "tools/call")  # the late retry never reached the server


async def test_a_host_that_never_retries_cannot_make_the_bridge_hold_more_than_the_bound(tmp_path, rules):
    """A hostile 2026-07-28 host leaves every call it made suspended: the bridge holds at most
    `INPUT_WAITS` of the server's sampling requests; the one past it is refused to the server at
    once, naming the bound, and its tool call answers the host."""
    waits = 256
    async with raw_host(tmp_path, rules) as host:
        host.CAPS = {**RawHost.CAPS, "sampling": {}}
        await host.call("echo", text="open")  # the session is open: nothing waits for its handshake
        for n in range(100, waits + 101):
            await host.send("tools/call", n, name="ask", arguments={"question": f"q{n}"})
        got = await host.until(lambda m: "content" in m.get("result", {}))
        suspended = [m for m in got if m.get("result", {}).get("resultType") == "input_required"]
        assert len(suspended) == waits
        [text] = [c["text"] for c in got[-1]["result"]["content"]]
        assert text.startswith("refused:") and f"{waits} requests of the server" in text
        assert "the most the era bridge holds" in text


async def test_reverse_a_question_the_host_never_answers_is_withdrawn_and_its_call_told_why(tmp_path, rules):
    """A 2025-11-25 host that never answers the sampling request the bridge made of it (for the
    2026-07-28 server's `input_required`): after `--input-wait` the bridge withdraws it
    (`notifications/cancelled`) and the host's `tools/call` gets the error that names why."""
    async with raw_host(tmp_path, rules, "--input-wait", "0.5", era=REVERSE, peer="modern_only_server") as host:
        await host.write({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {"sampling": {}}, "clientInfo": {"name": "raw", "version": "1"}}})
        await host.until(lambda m: m.get("id") == 1)
        await host.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await host.write({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                          "params": {"name": "consult", "arguments": {"question": "how many?"}}})
        got = await host.until(lambda m: m.get("id") == 2)
    [question] = [m for m in got if m.get("method") == "sampling/createMessage"]
    [cancel] = [m for m in got if m.get("method") == "notifications/cancelled"]
    assert cancel["params"]["requestId"] == question["id"]
    error = got[-1]["error"]
    assert error["code"] == -32001 and f"the {LEGACY} host did not answer sampling/createMessage" in error["message"]
    assert "within 0.5 s" in error["message"] and error["data"]["serverEra"] == MODERN


@pytest.mark.parametrize("direction", ["legacy server", "modern server"])
async def test_roots_list_crosses_both_ways(tmp_path, rules, direction):
    """`roots/list`: a 2025-11-25 server's request becomes input_required for a 2026-07-28 host, and
    a 2026-07-28 server's input_required a request to a 2025-11-25 host."""
    seen = tmp_path / "seen.jsonl"
    params, mode = ((proxied(seen, *BRIDGE, rules=rules), MODERN) if direction == "legacy server"
                    else (modern_server(seen, *REVERSE, rules=rules), "legacy"))
    async with Client(params, mode=mode, list_roots_callback=list_roots) as client:
        result = await client.call_tool("where", {})
    assert [c.text for c in result.content] == ["file:///work"]
    (assert_legacy_record if direction == "legacy server" else assert_modern_record)(seen)


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
