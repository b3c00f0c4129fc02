"""`serve --upstream-command`: the real `mcp` SDK's Streamable HTTP client in front of a stdio MCP
server run by the proxy, one child per session (and shared), reminders translated on the way."""
from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import sys

import aiohttp
import pytest
from mcp import Client
from mcp.client.extension import NotificationBinding

from tests.peers.mcp_host import ReminderParams, Reminders
from tests.peers.processes import eventually, proxy

SERVER = [sys.executable, "-m", "tests.peers.stdio_session_server"]
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "Mcp-Protocol-Version": "2025-11-25"}


def serve(*flags: str):
    return proxy("--protocol", "mcp", *flags, "--upstream-command", "--", *SERVER)


@pytest.fixture
def bridge():
    running = serve()
    yield running
    running.stop()


@pytest.fixture
def shared():
    running = serve("--upstream-command-mode", "shared")
    yield running
    running.stop()


def url(running) -> str:
    return f"http://127.0.0.1:{running.port}/mcp"


def ended(pid: int, timeout: float = 15.0) -> bool:
    """Whether process ``pid`` (not ours) ends within ``timeout``: waited on through a pidfd."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


async def recall(client: Client) -> tuple[int, str]:
    result = await client.call_tool("recall", {"text": ""})
    pid, _, text = result.content[0].text.partition(" ")
    return int(pid), text


async def test_tools_and_a_legacy_reminder_reach_a_standard_host_translated(bridge):
    ext = Reminders()
    async with Client(url(bridge), mode="legacy", extensions=[ext]) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool("touch_file", {"path": "src/lib.rs"})
        echoed = await client.call_tool("echo", {"text": "sync"})
    assert names[:2] == ["touch_file", "echo"] and "recall" in names
    assert [x.text for x in result.content] == ["touched src/lib.rs"]
    assert [x.text for x in echoed.content] == ["sync"]
    assert [r["dedupeKey"] for r in ext.received] == ["file_changed:src/lib.rs"]
    assert ext.received[0]["body"] == "src/lib.rs changed externally; re-read it before editing."


class Awaited(Reminders):
    """Reminders, and an event set at the first one (waited on, never slept for)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = asyncio.Event()

    def notifications(self):
        async def on_reminder(params: ReminderParams) -> None:
            self.received.append(params.reminder)
            self.first.set()

        return [NotificationBinding(method="notifications/reminder", params_type=ReminderParams, handler=on_reminder)]


async def test_what_the_server_says_outside_any_call_reaches_the_host_on_its_get_stream(bridge):
    ext = Awaited()
    async with Client(url(bridge), mode="legacy", extensions=[ext]) as client:
        result = await client.call_tool("touch_after", {"text": "late.py"})
        await asyncio.wait_for(ext.first.wait(), 15)
    assert [x.text for x in result.content] == ["later"]
    assert [r["dedupeKey"] for r in ext.received] == ["file_changed:late.py"]


async def test_a_host_without_reminder_support_gets_the_fallback_in_the_tool_result(bridge):
    async with Client(url(bridge), mode="legacy") as client:
        result = await client.call_tool("touch_file", {"path": "a.py"})
        later = await client.call_tool("echo", {"text": "nothing pending"})
    texts = [x.text for x in result.content]
    assert texts[0] == "touched a.py"
    assert "<system-reminder" in texts[1] and "a.py changed externally" in texts[1]
    assert [x.text for x in later.content] == ["nothing pending"]


async def test_two_sessions_get_two_children_and_never_each_others_data(bridge):
    async def session(text: str) -> tuple[int, str]:
        async with Client(url(bridge), mode="legacy") as client:  # both use the same request ids
            await client.call_tool("remember", {"text": text})
            return await recall(client)

    (pid_a, text_a), (pid_b, text_b) = await asyncio.gather(session("alpha"), session("beta"))
    assert pid_a != pid_b
    assert (text_a, text_b) == ("alpha", "beta")


async def test_delete_reaps_the_sessions_child(bridge):
    async with Client(url(bridge), mode="legacy") as client:
        pid, _ = await recall(client)
        assert not ended(pid, timeout=0)
    assert ended(pid)  # the SDK's DELETE on leaving ended the session and its child


async def test_what_a_child_says_before_it_is_asked_reaches_the_host():
    running = proxy("--protocol", "mcp", "--upstream-command", "--", *SERVER, "--greet")
    logs = []

    async def on_log(params) -> None:
        logs.append((params.logger, params.data))

    try:
        async with Client(url(running), mode="legacy", logging_callback=on_log) as client:
            assert [x.text for x in (await client.call_tool("echo", {"text": "hi"})).content] == ["hi"]
    finally:
        running.stop()
    assert logs == [("greeter", "hello")]


async def test_the_child_limit_refuses_a_session_with_a_clear_error():
    running = serve("--max-children", "1")
    try:
        async with Client(url(running), mode="legacy") as client:
            await recall(client)
            async with aiohttp.ClientSession() as http:
                body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
                async with http.post(url(running), json=body, headers=HEADERS) as response:
                    assert response.status == 503
                    assert response.headers["Retry-After"] == "1"
                    answer = await response.json()
            assert answer["error"]["data"] == {"route": "default", "max_children": 1}
            assert "max_children" in answer["error"]["message"]
            await recall(client)  # the session that holds the child goes on
    finally:
        running.stop()


async def test_only_initialize_starts_a_session_and_an_unknown_session_is_not_found(bridge):
    async with aiohttp.ClientSession() as http:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        async with http.post(url(bridge), json=call, headers=HEADERS) as response:
            assert response.status == 400
            assert "initialize" in (await response.json())["error"]["message"]
        async with http.post(url(bridge), json=call, headers={**HEADERS, "Mcp-Session-Id": "made-up"}) as response:
            assert response.status == 404
            assert (await response.json())["error"]["code"] == -32001


async def test_a_child_that_dies_mid_call_answers_with_a_json_rpc_error(bridge):
    async with Client(url(bridge), mode="legacy") as client:
        pid, _ = await recall(client)
        with pytest.raises(Exception) as failed:
            await client.call_tool("crash", {"text": ""})
    assert "Connection closed" in str(failed.value) and "exited with code 3" in str(failed.value)
    assert ended(pid)


async def test_a_child_that_never_answers_gets_an_error_after_the_upstream_timeout():
    running = serve("--upstream-timeout", "1")
    try:
        async with Client(url(running), mode="legacy") as client:
            with pytest.raises(Exception) as failed:
                await client.call_tool("hang", {"text": ""})
            assert "took longer than 1 s to start answering" in str(failed.value)
            assert [x.text for x in (await client.call_tool("echo", {"text": "on"})).content] == ["on"]
    finally:
        running.stop()


async def test_shutdown_stops_every_child():
    running = serve()
    pids = []
    for _ in range(2):
        client = Client(url(running), mode="legacy")
        await client.__aenter__()
        pids.append((await recall(client))[0])
    running.proc.send_signal(signal.SIGTERM)
    assert running.proc.wait(20) == 0
    assert all(ended(pid) for pid in pids)


async def test_a_shared_child_serves_every_session_and_keeps_their_answers_apart(shared):
    async def session(text: str) -> tuple[int, list[str]]:
        async with Client(url(shared), mode="legacy") as client:  # the same request ids in both
            echoes = [x.text for _ in range(5) for x in (await client.call_tool("echo", {"text": text})).content]
            return (await recall(client))[0], echoes

    (pid_a, echo_a), (pid_b, echo_b) = await asyncio.gather(session("alpha"), session("beta"))
    assert pid_a == pid_b
    assert echo_a == ["alpha"] * 5 and echo_b == ["beta"] * 5


async def test_a_shared_childs_reminder_reaches_the_session_whose_call_it_came_in(shared):
    ext, plain = Reminders(), None
    async with Client(url(shared), mode="legacy", extensions=[ext]) as standard:
        async with Client(url(shared), mode="legacy") as without:
            await standard.call_tool("touch_file", {"path": "mine.py"})
            plain = await without.call_tool("touch_file", {"path": "theirs.py"})
    assert [r["dedupeKey"] for r in ext.received] == ["file_changed:mine.py"]
    texts = [x.text for x in plain.content]
    assert "theirs.py changed externally" in texts[1] and "mine.py" not in " ".join(texts)


async def test_a_shared_child_answers_each_session_under_the_id_it_used(shared):
    """Two raw sessions send the very same request ids at once: each gets its own answers, with
    its id exactly as written."""
    async with aiohttp.ClientSession() as http:
        async def open_session() -> str:
            body = {"jsonrpc": "2.0", "id": "x", "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
            async with http.post(url(shared), json=body, headers=HEADERS) as response:
                assert response.status == 200
                return response.headers["Mcp-Session-Id"]

        async def call(session: str, text: str) -> bytes:
            body = (b'{"jsonrpc":"2.0","id":  7.0,"method":"tools/call",'
                    b'"params":{"name":"echo","arguments":{"text":"%s"}}}')
            async with http.post(url(shared), data=body % text.encode(),
                                 headers={**HEADERS, "Mcp-Session-Id": session}) as response:
                return await response.read()

        a, b = await asyncio.gather(open_session(), open_session())
        for i in range(5):  # both sessions' requests in flight at once, each session's one after another
            answers = await asyncio.gather(call(a, f"a-{i}"), call(b, f"b-{i}"))
            assert [json.loads(answer)["result"]["content"][0]["text"] for answer in answers] == [f"a-{i}", f"b-{i}"]
            assert all(answer.startswith(b'{"jsonrpc":"2.0","id":7.0,') for answer in answers)


async def test_a_rules_file_route_runs_its_command_behind_its_path(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text(f'[routes.files]\nprotocol = "mcp"\npath = "/files"\ncommand = {json.dumps(SERVER)}\n'
                     'command_mode = "shared"\nenv.ROUTE_SAYS = "hello"\n\n'
                     '[limits]\nmax_children = 1\n')
    running = proxy("--rules", str(rules))
    try:
        assert json.loads(running.announced)["routes"][0]["url"].endswith("/files")
        pids = []
        for _ in range(2):  # one shared child serves both sessions, within max_children = 1
            async with Client(f"http://127.0.0.1:{running.port}/files", mode="legacy") as client:
                pids.append((await recall(client))[0])
                said = await client.call_tool("getenv", {"text": "ROUTE_SAYS"})
        assert pids[0] == pids[1]
        assert [x.text for x in said.content] == ["hello"]  # the route's env, on top of the proxy's
    finally:
        running.stop()


async def test_a_2026_07_28_host_is_served_by_the_routes_shared_child_with_reminders(bridge):
    ext = Reminders()
    async with Client(url(bridge), mode="auto", extensions=[ext]) as client:
        result = await client.call_tool("touch_file", {"path": "b.py"})
        pids = {(await recall(client))[0] for _ in range(2)}
        assert client.protocol_version == "2026-07-28"
    assert [x.text for x in result.content] == ["touched b.py"]
    assert [r["dedupeKey"] for r in ext.received] == ["file_changed:b.py"]
    assert len(pids) == 1  # requests without a session share one child


async def test_an_idle_session_is_reaped_with_its_child():
    running = serve("--session-idle", "0.5")
    try:
        client = Client(url(running), mode="legacy")
        await client.__aenter__()
        pid, _ = await recall(client)
        assert ended(pid)  # no request for longer than --session-idle: the session and its child end
    finally:
        running.stop()


async def test_an_answer_over_the_line_limit_becomes_an_error_and_the_session_goes_on():
    running = serve("--max-response-bytes", "4096")
    try:
        async with Client(url(running), mode="legacy") as client:
            with pytest.raises(Exception) as failed:
                await client.call_tool("echo", {"text": "x" * 10_000})
            assert "line limit of 4096 bytes" in str(failed.value)
            assert [x.text for x in (await client.call_tool("echo", {"text": "short"})).content] == ["short"]
    finally:
        running.stop()


@pytest.mark.parametrize("argv, said", [
    (["--upstream-command", "--", "/nonexistent/server"], "cannot start '/nonexistent/server': no such program"),
    (["--workers", "2", "--upstream-command", "--", *SERVER], "a stdio server's sessions live in the process"),
    (["--protocol", "mcp", "--upstream", "http://127.0.0.1:9/mcp", "--", *SERVER], "unexpected arguments"),
    (["--upstream-command"], "--upstream-command runs the stdio server after `--`"),
])
def test_serve_refuses_what_it_cannot_run_at_start(argv, said):
    import subprocess

    done = subprocess.run([sys.executable, "-m", "bridge", "serve", "--listen", "127.0.0.1:0", *argv],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and said in done.stderr, done.stderr


async def test_a_reload_applies_new_rules_to_a_command_route_and_refuses_a_new_command(tmp_path):
    rules = tmp_path / "rules.toml"
    route = f'[routes.files]\nprotocol = "mcp"\npath = "/files"\ncommand = {json.dumps(SERVER)}\n'
    rules.write_text(route)
    running = proxy("--rules", str(rules), "--log-level", "info")

    def logged(event: str):
        async def lines() -> list[dict]:
            return [json.loads(line) for line in list(running.stderr) if f'"event": "{event}"' in line]
        return lines

    try:
        async with Client(f"http://127.0.0.1:{running.port}/files", mode="legacy") as client:
            pid, _ = await recall(client)
            rules.write_text(route + 'stage = "observe"\n')
            running.proc.send_signal(signal.SIGHUP)
            await eventually(logged("rules_reloaded"))
            rules.write_text(route.replace(json.dumps(SERVER), '["true"]'))
            running.proc.send_signal(signal.SIGHUP)
            refused = await eventually(logged("reload_refused"))
            assert refused[0]["field"] == "command"
            assert (await recall(client))[0] == pid  # the session and its child go on
    finally:
        running.stop()


async def test_a_2026_07_28_listen_stream_gets_the_ambient_reminder_stamped_for_it(bridge):
    from tests.integration.test_http_mcp_modern import STANDARD, Listen, acked, call, reminder

    async with aiohttp.ClientSession() as http:
        other = Listen(http, url(bridge), "sub-1", STANDARD, None, toolsListChanged=True)
        await other.wait(acked)
        opted = Listen(http, url(bridge), "sub-1", STANDARD, None, reminders=True)  # the same id, another request
        ack = await opted.wait(acked)
        try:
            [sent] = await call(http, url(bridge), 4, "tools/call", STANDARD, name="ping_listeners",
                                arguments={"text": "deploy.log"})
            got = await opted.wait(reminder)
        finally:
            for stream in (other, opted):
                await stream.close()
    assert ack["params"]["notifications"] == {"reminders": True}
    assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "sub-1"
    assert sent["result"]["content"][0]["text"].startswith("sent to ")
    assert got["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "sub-1"
    assert got["params"]["reminder"]["dedupeKey"] == "file_changed:deploy.log"
    assert other.reminders() == [] and opted.reminders() == [got]
