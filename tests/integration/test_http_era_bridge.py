"""Era bridging over Streamable HTTP (issue 21, point 2), real sockets: `mcp` 2.3.0 SDK hosts on
2026-07-28 in front of an SDK server that refuses anything of 2026-07-28
(tests.peers.legacy_only_http), through `reminder-bridge serve --host-era 2026-07-28
--server-era 2025-11-25`. The server's `/seen` says what reached it."""
from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import aiohttp
import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp_types import Implementation

from tests.integration.era_tours import (
    LEGACY, MODERN, SUB_KEY, assert_legacy_http, assert_log_level_set_first, assert_reminder, assert_sampled_once,
    bodies, eras_after, held_reminder, list_roots, listened, modern_tour, running_peer, sampler, seen,
    streamed_reminder)
from tests.peers.mcp_host import Reminders
from tests.peers.processes import eventually, free_port, peer, proxy

PROTOCOL = "io.modelcontextprotocol/protocolVersion"

upstream = running_peer("tests.peers.legacy_only_http")


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


def assert_legacy_wire(requests: list[dict]) -> None:
    """Nothing of 2026-07-28 reached the server, and its session was opened before anything else."""
    assert [m.get("method") for m in bodies(requests)[:2]] == ["initialize", "notifications/initialized"]
    assert_legacy_http(requests)


async def test_the_server_alone_refuses_a_2026_07_28_host(upstream):
    async with Client(f"http://127.0.0.1:{upstream.port}/mcp", mode="auto") as client:
        assert client.protocol_version == LEGACY  # the probe was refused: it fell back to initialize


async def test_discover_tools_resources_prompts_and_a_reminder(bridge, upstream):
    ext = Reminders()
    before = len(await seen(upstream))
    async with Client(url(bridge), mode="auto", extensions=[ext]) as client:
        await modern_tour(client, "auto")
        reminded = await client.call_tool("remind", {"path": "a.py"})
    assert [c.text for c in reminded.content] == ["touched a.py"]
    [reminder] = ext.received
    assert_reminder(reminder, "a.py")
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
    assert_log_level_set_first(bodies(requests))


async def test_progress_reaches_the_host_on_its_request_s_stream(bridge, upstream):
    """A 2026-07-28 SDK host's progressToken reaches the server; the server's notifications/progress,
    on the call's stream, reach the host's callback before the answer."""
    progress = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    before = len(await seen(upstream))
    async with Client(url(bridge), mode=MODERN, client_info=Implementation(name="counted", version="1")) as client:
        result = await client.call_tool("count", {"n": 3}, progress_callback=on_progress)
    assert [c.text for c in result.content] == ["counted 3"]
    assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    requests = (await seen(upstream))[before:]
    [call] = posted(requests, "tools/call")
    assert "progressToken" in call["params"]["_meta"]
    assert_legacy_wire(requests)


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
    eras = await eras_after(running, url(running), admin, (("alpha", MODERN), ("beta", "auto"), ("old-ide", "legacy")))
    assert (eras["host_era"], eras["server_era"]) == ("auto", LEGACY)
    assert {era: mix["hosts"] for era, mix in eras["hosts"].items()} == {LEGACY: 1, MODERN: 2}
    assert {era: mix["hosts"] for era, mix in eras["servers"].items()} == {LEGACY: 1, MODERN: 0}
    assert eras["bridged"] == [{"host_era": MODERN, "server_era": LEGACY, "requests": eras["bridged_requests"]}]
    assert eras["bridged_requests"] >= 4  # each modern host's handshake and call
    ready = eras["readiness"]
    assert ready["needed"] is True and ready["bridged_hosts"] == ["alpha", "beta"]
    assert ready["text"].startswith("still needs the era bridge — 2 hosts on 2026-07-28 (alpha, beta) talk to a "
                                    "2025-11-25-only server through the bridge since start-up; ")


# -- subscriptions/listen ↔ the session's GET stream and resources/subscribe ---------------------

def posted(requests: list[dict], method: str) -> list[dict]:
    return [json.loads(r["body"]) for r in requests if r["method"] == "POST" and f'"{method}"' in r["body"]
            and json.loads(r["body"]).get("method") == method]


async def test_listen_streams_list_changed_and_resource_updates(bridge, upstream):
    """The SDK host's `listen()` is acknowledged with what the server honours; what the server
    sends on its GET stream after a `touch` reaches the stream, stamped; once the host ends the
    stream, the resource is unsubscribed upstream."""
    before = len(await seen(upstream))
    async with Client(url(bridge), mode=MODERN, client_info=Implementation(name="listener", version="1")) as client:
        await client.call_tool("echo", {"text": "open"})  # the session and its GET stream
        await listened(client)

        async def unsubscribed():
            return posted((await seen(upstream))[before:], "resources/unsubscribe")

        [gone] = await eventually(unsubscribed, timeout=20)
    requests = (await seen(upstream))[before:]
    assert [m["params"] for m in posted(requests, "resources/subscribe")] == [{"uri": "file:///notes.txt"}]
    assert gone["params"] == {"uri": "file:///notes.txt"}
    assert not posted(requests, "subscriptions/listen")
    assert_legacy_wire(requests)


class RawHost:
    """A 2026-07-28 host written by hand over HTTP: the SDK's `listen()` has no way to ask for
    reminders (the filter key `reminders`, spec §3). Each its own client info: its own session."""

    CAPS = {"extensions": {"com.example/reminders": {}}}

    def __init__(self, http: aiohttp.ClientSession, at: str, name: str):
        self.http, self.at, self.name = http, at, name
        self.ids = iter(range(1, 1000))

    def body(self, method: str, msg_id, more: dict | None = None, **params) -> dict:
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientInfo":
                {"name": self.name, "version": "1"}, "io.modelcontextprotocol/clientCapabilities": self.CAPS}
        return {"jsonrpc": "2.0", "id": msg_id, "method": method,
                "params": {**params, "_meta": {**meta, **(more or {})}}}

    def headers(self, method: str, name: str | None = None) -> dict:
        return {"MCP-Protocol-Version": MODERN, "Mcp-Method": method, **({"Mcp-Name": name} if name else {}),
                "Accept": "application/json, text/event-stream"}

    async def call(self, name: str, **arguments) -> list[dict]:
        """Every message of a `tools/call`'s answer stream (an answer alone comes as JSON)."""
        body = self.body("tools/call", next(self.ids), name=name, arguments=arguments)
        async with self.http.post(self.at, json=body, headers=self.headers("tools/call", name)) as r:
            if r.headers["Content-Type"].startswith("application/json"):
                return [await r.json()]
            return [m async for m in messages(r)]

    @contextlib.asynccontextmanager
    async def listen(self, msg_id, more: dict | None = None, **params):
        body = self.body("subscriptions/listen", msg_id, more, **params)
        async with self.http.post(self.at, json=body, headers=self.headers("subscriptions/listen")) as r:
            assert r.headers["Content-Type"].startswith("text/event-stream")
            yield Stream(messages(r))


class Stream:
    def __init__(self, source):
        self.source = source

    async def until(self, done) -> list[dict]:
        """What came, up to and with the first message ``done`` accepts."""
        got = []
        with anyio.fail_after(20):
            while not got or not done(got[-1]):
                got.append(await anext(self.source))
        return got


async def messages(response: aiohttp.ClientResponse):
    """The JSON-RPC messages of an answer as they come: an SSE stream's, or a JSON answer's one
    (what the proxy sends when nothing came before the answer)."""
    if response.content_type == "application/json":
        yield await response.json()
        return
    data = b""
    while line := await response.content.readline():
        if line.startswith(b"data:"):
            data += line[5:].strip()
        elif not line.strip() and data:
            yield json.loads(data)
            data = b""


@contextlib.asynccontextmanager
async def raw_host(bridge, upstream, name: str, first_call: bool = True):
    before = len(await seen(upstream))
    async with aiohttp.ClientSession() as http:
        host = RawHost(http, url(bridge), name)
        if first_call:
            await host.call("echo", text="open")  # the session and its GET stream
        yield host
    assert_legacy_wire((await seen(upstream))[before:])


@pytest.mark.parametrize("first_call", [True, False], ids=["after a call", "listen first"])
async def test_an_ambient_legacy_reminder_goes_on_the_listen_stream_that_opted_in(bridge, upstream, first_call):
    """(The listen may be the host's first request: it opens the session, and is acknowledged once
    the session's GET stream is open.)"""
    async with raw_host(bridge, upstream, f"raw-stream-{first_call}", first_call) as host:
        async with host.listen("L", notifications={"reminders": True, "toolsListChanged": True}) as stream:
            await streamed_reminder(host, stream)  # what the server sent on its GET stream


async def test_an_ambient_legacy_reminder_without_a_stream_is_held_for_the_tool_result(bridge, upstream):
    """The stream takes log messages only: the log line the server sends after the reminder on its
    GET stream tells the host the reminder has come; the next tool result carries it."""
    async with raw_host(bridge, upstream, "raw-held") as host:
        async with host.listen("L", {"io.modelcontextprotocol/logLevel": "info"}, notifications={}) as stream:
            await held_reminder(host, stream)


# -- server→client requests: the 2025-11-25 server's request ↔ an input_required result ------------

@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # sampling, on purpose
async def test_a_sampling_request_crosses_as_input_required_and_back(bridge, upstream):
    """The server's `sampling/createMessage` (on the call's own stream) answers the host's
    `tools/call` `input_required`; the SDK host samples and retries; its answer goes to the server,
    whose result (on the first call's stream) answers the retry."""
    asked = []
    before = len(await seen(upstream))
    async with Client(url(bridge), mode=MODERN, sampling_callback=sampler("forty-two", asked),
                      client_info=Implementation(name="sampler", version="1")) as client:
        result = await client.call_tool("ask", {"question": "the answer?"})
    assert asked == ["the answer?"]
    assert [c.text for c in result.content] == ["sampled: forty-two"]
    requests = (await seen(upstream))[before:]
    assert_sampled_once(bodies(requests))
    assert_legacy_wire(requests)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # sampling, on purpose
async def test_progress_while_a_question_waits_rides_the_retry_s_stream(bridge, upstream):
    """The server reports progress while its sampling request waits on the host (whose request's
    stream ended with the input_required answer) and once answered: both reach the SDK host's
    callback, on the retry's stream, under the retry's own progressToken."""
    progress = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    logged = len(bridge.stderr)
    async with Client(url(bridge), mode=MODERN, sampling_callback=sampler("yes"),
                      client_info=Implementation(name="ponderer", version="1")) as client:
        result = await client.call_tool("ponder", {"question": "well?"}, progress_callback=on_progress)
    assert [c.text for c in result.content] == ["pondered: yes"]
    assert progress == [(1, 2, "pondering"), (2, 2, "answered")]
    assert not [line for line in bridge.stderr[logged:] if "era_unrouted" in line or "era_notification_dropped" in line]


async def test_a_sampling_request_to_a_host_without_the_capability_is_refused_naming_it(bridge, upstream):
    before = len(await seen(upstream))
    async with Client(url(bridge), mode=MODERN, client_info=Implementation(name="unsampled", version="1")) as client:
        result = await client.call_tool("ask", {"question": "q"})
    [text] = [c.text for c in result.content]
    assert text.startswith("refused:") and "sampling/createMessage" in text and "capability sampling" in text
    assert MODERN in text and LEGACY in text
    assert_legacy_wire((await seen(upstream))[before:])


async def test_an_elicitation_crosses_as_input_required_and_back(bridge, upstream):
    asked = []

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    before = len(await seen(upstream))
    async with Client(url(bridge), mode=MODERN, elicitation_callback=elicit,
                      client_info=Implementation(name="elicited", version="1")) as client:
        result = await client.call_tool("confirm", {"question": "ship it?"})
    assert asked == ["ship it?"]
    assert [c.text for c in result.content] == ["accept: True"]
    requests = (await seen(upstream))[before:]
    [answer] = [json.loads(r["body"]) for r in requests if r["method"] == "POST" and '"action"' in r["body"]]
    assert answer["result"] == {"action": "accept", "content": {"ok": True}}
    assert_legacy_wire(requests)


async def test_roots_list_crosses_as_input_required(bridge, upstream):
    """The server's `roots/list`, asked through the SDK's resolver, reaches the host's callback."""
    before = len(await seen(upstream))
    async with Client(url(bridge), mode=MODERN, list_roots_callback=list_roots,
                      client_info=Implementation(name="rooted", version="1")) as client:
        result = await client.call_tool("where", {})
    assert [c.text for c in result.content] == ["file:///work"]
    assert_legacy_wire((await seen(upstream))[before:])


async def test_a_request_whose_answer_stream_ends_unanswered_gets_an_error(tmp_path):
    """Nothing hangs: a 2025-11-25 server whose answer stream ends without the result (and no
    other stream of the session can still bring it) leaves the host with a JSON-RPC error."""
    faulty = peer("tests.peers.faulty_http")
    rules = tmp_path / "rules.toml"
    rules.write_text(f'[routes.old]\nprotocol = "mcp"\nupstream = "http://127.0.0.1:{faulty.port}/mcp"\n'
                     f'server_era = "{LEGACY}"\n')
    running = proxy("--rules", str(rules))
    try:
        async with aiohttp.ClientSession() as http:
            host = RawHost(http, url(running), "unanswered")
            body = host.body("unanswered", 1)
            with anyio.fail_after(20):
                async with http.post(url(running), json=body, headers={**host.headers("unanswered"),
                                                                      "Accept": "application/json"}) as r:
                    answer = await r.json()
    finally:
        running.stop()
        faulty.stop()
    assert answer["id"] == 1 and answer["error"]["code"] == -32603
    assert "ended without an answer" in answer["error"]["message"]


async def test_alike_hosts_listen_streams_of_the_same_id_stay_apart(bridge, upstream):
    """Two hosts alike (one upstream session) both open `listen-1`, as SDK hosts do: a cancel one of
    them POSTs cannot be told to be its own, so it ends neither stream (a 2026-07-28 host ends one
    by closing it); once one host closes its stream, the other's alone goes on, taking reminders."""
    before = len(await seen(upstream))
    async with aiohttp.ClientSession() as http:
        one, two = RawHost(http, url(bridge), "alike-listen"), RawHost(http, url(bridge), "alike-listen")
        await one.call("echo", text="open")
        async with one.listen("listen-1", notifications={"reminders": True, "toolsListChanged": True}) as first:
            await first.until(lambda m: True)
            async with two.listen("listen-1", notifications={"reminders": True, "toolsListChanged": True,
                                                             "resourceSubscriptions": ["file:///notes.txt"]}) as second:
                await second.until(lambda m: True)
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": "listen-1", "_meta": one.body("x", 0)["params"]["_meta"]}}
                async with http.post(url(bridge), json=cancel, headers=one.headers("notifications/cancelled")) as r:
                    assert r.status == 202
                await one.call("touch", path="both.rs")
                [changed] = await first.until(lambda m: m.get("method") == "notifications/tools/list_changed")
                assert changed["params"]["_meta"] == {SUB_KEY: "listen-1"}
                got = await second.until(lambda m: m.get("method") == "notifications/reminder")
                assert any(m.get("method") == "notifications/tools/list_changed" for m in got)
                assert got[-1]["params"]["reminder"]["id"] == "r-both.rs"

            async def unsubscribed():  # the second stream's end reached the proxy
                return posted((await seen(upstream))[before:], "resources/unsubscribe")

            await eventually(unsubscribed, timeout=20)
            await one.call("touch", path="one.rs")
            got = await first.until(lambda m: m.get("method") == "notifications/reminder")
    assert got[-1]["params"]["reminder"]["id"] == "r-one.rs" and got[-1]["params"]["_meta"][SUB_KEY] == "listen-1"
    requests = (await seen(upstream))[before:]
    assert sum('"initialize"' in r["body"] for r in requests) == 1  # one session for both
    assert not posted(requests, "notifications/cancelled")
    assert_legacy_wire(requests)


async def test_a_reminder_between_an_input_required_answer_and_its_retry_is_held_then_delivered(upstream, tmp_path):
    """The server's `nudge` asks its client, then sends a reminder on the call's stream while the
    question waits (the host has its `input_required` answer; no exchange of its own is open), and
    another once answered (on the retry's way): the first is held for the fallback and rides the
    retry's tool result, the second goes on the retry's stream. Neither is lost, each comes once."""
    rules = tmp_path / "rules.toml"
    rules.write_text('[defaults]\nrequire_declaration = false\n'
                     f'[routes.old]\nprotocol = "mcp"\nupstream = "http://127.0.0.1:{upstream.port}/mcp"\n')
    running = proxy("--rules", str(rules), "--host-era", MODERN, "--server-era", LEGACY, "--log-level", "info")
    try:
        async with aiohttp.ClientSession() as http:
            host = RawHost(http, url(running), "nudged")
            host.CAPS = {**RawHost.CAPS, "sampling": {}}
            arguments = {"question": "why?", "path": "n.rs"}
            body = host.body("tools/call", 1, name="nudge", arguments=arguments)
            async with http.post(host.at, json=body, headers=host.headers("tools/call", "nudge")) as r:
                [asked] = [m async for m in messages(r)]
            result = asked["result"]
            assert result["resultType"] == "input_required"
            [question] = result["inputRequests"].values()
            assert question["method"] == "sampling/createMessage"

            async def held():  # the proxy took the first reminder for the fallback (its log says so)
                return [line for line in running.stderr if "r-before/n.rs" in line and "queued" in line]

            await eventually(held, timeout=20)
            answer = {"role": "assistant", "content": {"type": "text", "text": "because"}, "model": "m"}
            retry = host.body("tools/call", 2, name="nudge", arguments=arguments,
                              inputResponses={"request": answer}, requestState=result["requestState"])
            async with http.post(host.at, json=retry, headers=host.headers("tools/call", "nudge")) as r:
                got = [m async for m in messages(r)]
    finally:
        running.stop()
    reminders = [m["params"]["reminder"]["id"] for m in got if m.get("method") == "notifications/reminder"]
    assert reminders == ["r-after/n.rs"]
    final = got[-1]
    assert final["id"] == 2 and final["result"]["resultType"] == "complete"
    texts = [c["text"] for c in final["result"]["content"]]
    assert texts[0] == "sampled: because"
    assert sum("before/n.rs changed externally" in t for t in texts) == 1
    assert not [line for line in running.stderr if "era_unrouted" in line]


async def test_an_input_required_the_host_never_retries_is_given_up_and_the_server_told_why(upstream, tmp_path):
    """A 2026-07-28 host that takes its `input_required` answer and never retries: after
    `--input-wait` the 2025-11-25 server's sampling request gets -32001 naming why, and the call it
    suspended is cancelled upstream; a retry after that gets -32602 naming requestState."""
    rules = tmp_path / "rules.toml"
    rules.write_text(f'[routes.old]\nprotocol = "mcp"\nupstream = "http://127.0.0.1:{upstream.port}/mcp"\n')
    running = proxy("--rules", str(rules), "--host-era", MODERN, "--server-era", LEGACY, "--input-wait", "0.5",
                    "--log-format", "json")
    try:
        async with aiohttp.ClientSession() as http:
            host = RawHost(http, url(running), "never-retries")
            host.CAPS = {**RawHost.CAPS, "sampling": {}}
            [asked] = await host.call("ask", question="q")
            assert asked["result"]["resultType"] == "input_required"

            async def given_up():
                return [json.loads(line) for line in running.stderr if '"era_input_given_up"' in line]

            [logged] = await eventually(given_up, timeout=20)
            assert logged["reason"] == "expired" and logged["method"] == "sampling/createMessage"

            async def told():  # the error and the cancel reached the server
                got = bodies(await seen(upstream))
                errors = [m for m in got if m.get("error", {}).get("code") == -32001]
                cancels = [m for m in got if m.get("method") == "notifications/cancelled"
                           and "did not answer" in m["params"].get("reason", "")]
                return (errors, cancels) if errors and cancels else None

            [error], [cancel] = await eventually(told, timeout=20)
            assert f"the {MODERN} host did not answer sampling/createMessage" in error["error"]["message"]
            assert "within 0.5 s" in error["error"]["message"]
            calls = [m for m in bodies(await seen(upstream)) if m.get("method") == "tools/call"
                     and m["params"]["name"] == "ask"]
            assert cancel["params"]["requestId"] == calls[-1]["id"]
            late = host.body("tools/call", 9, name="ask", arguments={"question": "q"},
                             requestState=asked["result"]["requestState"],
                             inputResponses={"request": {"role": "assistant", "model": "m",
                                                         "content": {"type": "text", "text": "late"}}})
            async with http.post(host.at, json=late, headers=host.headers("tools/call", "ask")) as r:
                refused = await r.json()
            assert refused["error"]["code"] == -32602 and refused["error"]["data"]["field"] == "requestState"
            assert len([m for m in bodies(await seen(upstream)) if m.get("method") == "tools/call"
                        and m["params"]["name"] == "ask"]) == len(calls)  # the late retry never reached it
    finally:
        running.stop()


async def test_a_host_that_leaves_a_call_cancels_its_own_upstream_request_only(bridge, upstream):
    """Closing a request's stream is a 2026-07-28 host's cancel: the proxy tells the 2025-11-25
    server `notifications/cancelled` for that host's request, not for the same id of a host alike."""
    before = len(await seen(upstream))
    async with aiohttp.ClientSession() as http:
        one, two = RawHost(http, url(bridge), "alike-leaving"), RawHost(http, url(bridge), "alike-leaving")
        for host in (one, two):
            host.CAPS = {}
        await one.call("echo", text="open")
        body = one.body("tools/call", 5, {"progressToken": "p"}, name="hold", arguments={})
        async with http.post(url(bridge), json=body, headers=one.headers("tools/call", "hold")) as left:
            await anext(messages(left))  # the server holds it
            async with http.post(url(bridge), json=two.body("tools/call", 5, {"progressToken": "p"}, name="hold",
                                                            arguments={}),
                                 headers=two.headers("tools/call", "hold")) as staying:
                await anext(messages(staying))
                calls = [m["id"] for m in posted((await seen(upstream))[before:], "tools/call")]
                left.close()  # the first host goes away

                async def cancelled():
                    return posted((await seen(upstream))[before:], "notifications/cancelled")

                [cancel] = await eventually(cancelled, timeout=20)
                assert cancel["params"]["requestId"] == calls[-2]  # the first host's call, never the second's
                assert [c for c in await cancelled()] == [cancel]
    assert_legacy_wire((await seen(upstream))[before:])


async def test_ever_new_client_info_opens_at_most_max_sessions_upstream(upstream, tmp_path):
    """Each new capability set or client info opens one more upstream 2025-11-25 session, and hosts
    choose what they send: the route holds at most `max_sessions`, the one idle longest ending (its
    DELETE upstream) to make room, rather than one more session per request a host varies."""
    rules = tmp_path / "rules.toml"
    rules.write_text('[defaults]\nrequire_declaration = false\n'
                     f'[routes.old]\nprotocol = "mcp"\nupstream = "http://127.0.0.1:{upstream.port}/mcp"\n')
    running = proxy("--rules", str(rules), "--host-era", MODERN, "--server-era", LEGACY, "--max-sessions", "2")
    try:
        before = len(await seen(upstream))
        async with aiohttp.ClientSession() as http:
            for n in range(5):
                [answer] = await RawHost(http, url(running), f"varied-{n}").call("echo", text="hi")
                assert answer["result"]["content"][0]["text"] == "hi"

        async def evicted():  # five sessions opened, two kept: three ended
            found = [r for r in (await seen(upstream))[before:] if r["method"] == "DELETE"]
            return found if len(found) >= 3 else None

        assert len(await eventually(evicted)) == 3
        requests = (await seen(upstream))[before:]
        opened = [r for r in requests if r["method"] == "POST" and json.loads(r["body"]).get("method") == "initialize"]
        assert len(opened) == 5
    finally:
        running.stop()
