"""Protocol edges the proxy must not blur, with real processes and sockets (issue 19, 13–15):
an MCP GET goes upstream with its own headers (SSE resumption works through the proxy), an A2A
inject for a finished task is refused, and an ACP inject sent before the agent's `initialize`
answer waits for it."""
from __future__ import annotations

import json
import sys
import uuid

import aiohttp
import pytest

from tests.peers.jsonrpc_pipe import JsonRpcPipe
from tests.peers.processes import eventually, free_port, get_json, peer, proxy

pytestmark = pytest.mark.fault

MCP_VERSION = "2025-11-25"


def rpc_body(msg_id, method: str, **params) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


def sse_events(raw: bytes) -> list[tuple[str | None, dict | None]]:
    """(id, message) of each event of an SSE body (message None for an event with no data)."""
    out = []
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        fields = dict(line.split(b":", 1) for line in block.split(b"\n") if b":" in line and not line.startswith(b":"))
        if fields:
            data = fields.get(b"data", b"").strip()
            event_id = fields[b"id"].strip().decode() if b"id" in fields else None
            out.append((event_id, json.loads(data) if data else None))
    return out


# -- 13: each request forwards its own end-to-end headers ------------------------------------------
async def test_a_get_on_a_known_session_reaches_the_upstream_with_its_own_headers_and_resumes_the_stream():
    server = peer("tests.peers.resumable_mcp_server")
    bridge = proxy("--protocol", "mcp", "--upstream", f"http://127.0.0.1:{server.port}")
    base = f"http://127.0.0.1:{bridge.port}/mcp"
    post = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
            "MCP-Protocol-Version": MCP_VERSION, "X-Trace": "post-1"}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            async with http.post(base, json=rpc_body(1, "initialize", protocolVersion=MCP_VERSION, capabilities={},
                                                     clientInfo={"name": "resumer", "version": "1"}),
                                 headers=post) as r:
                session = r.headers["Mcp-Session-Id"]
                await r.read()
            post["Mcp-Session-Id"] = session
            async with http.post(base, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                                 headers=post) as r:
                assert r.status == 202
            # the server closes this call's stream before it answers: only a resumed stream gets the answer
            async with http.post(base, json=rpc_body(2, "tools/call", name="interrupted", arguments={"text": "hi"}),
                                 headers={**post, "X-Trace": "post-2"}) as r:
                cut = sse_events(await r.read())
            assert all(message is None or "id" not in message for _, message in cut), cut
            last_seen = [event_id for event_id, _ in cut if event_id][-1]

            async def answered():
                async with http.get(f"http://127.0.0.1:{server.port}/answered") as r:
                    return 2 in await r.json()

            await eventually(answered)
            resume = {"Accept": "text/event-stream", "Mcp-Session-Id": session, "MCP-Protocol-Version": MCP_VERSION,
                      "Last-Event-ID": last_seen, "X-Trace": "get-1"}
            async with http.get(base, headers=resume) as r:
                assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
                async with http.get(f"http://127.0.0.1:{server.port}/seen") as seen:
                    got = [s["headers"] for s in await seen.json() if s["method"] == "GET"][-1]
                assert (got.get("last-event-id"), got.get("x-trace"), got.get("accept")) == (
                    last_seen, "get-1", "text/event-stream"), got
                assert "content-type" not in got  # the POST's body headers stayed with the POST
                replayed: list[dict] = []
                buffer = b""
                async for chunk in r.content.iter_any():
                    buffer += chunk
                    replayed = [m for _, m in sse_events(buffer) if m is not None]
                    if any(m.get("id") == 2 for m in replayed):
                        break
        assert [m["params"]["data"] for m in replayed if m.get("method") == "notifications/message"][-1] == \
            "after the stream closed"
        answer = next(m for m in replayed if m.get("id") == 2)
        assert answer["result"]["content"] == [{"type": "text", "text": "hi"}]
    finally:
        bridge.stop()
        server.stop()


# -- 14: an A2A inject for a finished task is refused ----------------------------------------------
A2A_HEADERS = {"A2A-Version": "1.0"}
INJECT = {"body": "main moved; rebase before pushing.", "dedupeKey": "main"}


def a2a_message(*texts: str, task_id: str | None = None) -> dict:
    msg = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": t} for t in texts]}
    if task_id:
        msg["taskId"] = task_id
    return msg


async def a2a(port: int, method: str, params: dict) -> dict:
    """One JSON-RPC call; a streamed answer gives its last event."""
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        async with http.post(f"http://127.0.0.1:{port}/a2a", json=body, headers=A2A_HEADERS) as r:
            if r.headers["Content-Type"].startswith("text/event-stream"):
                return [json.loads(line[5:]) async for line in r.content if line.startswith(b"data:")][-1]
            return await r.json()


def state_of(event: dict) -> str | None:
    return event.get("statusUpdate", {}).get("status", {}).get("state")


async def queued_for_tasks(admin: int) -> float:
    """The proxy's pending gauge for reminders waiting on their task's next message."""
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{admin}/metrics") as r:
            text = await r.text()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("reminder_bridge_pending_reminders{") and 'queue="task"' in line)


def a2a_bridge(agent, admin: int):
    return proxy("--protocol", "a2a", "--upstream", f"http://127.0.0.1:{agent.port}", "--peer-dialect", "legacy",
                 "--host-dialect", "standard", "--admin", f"127.0.0.1:{admin}")


def assert_refused_as_terminal(answer: dict, task_id: str, state: str) -> None:
    assert "error" in answer, f"accepted for a task in state {state}: {answer}"
    error = answer["error"]
    assert error["code"] == -32004, answer  # A2A's UnsupportedOperationError, as for a message to that task
    assert f"Task {task_id} is in terminal state: {state}" in error["message"]
    assert error["data"][0]["reason"] == "UNSUPPORTED_OPERATION"
    assert error["data"][0]["metadata"] == {"taskId": task_id, "state": state}


async def test_an_inject_for_a_task_in_any_terminal_state_is_refused_and_nothing_is_queued():
    agent = peer("tests.peers.a2a_sdk_agent", "legacy")
    admin = free_port()
    bridge = a2a_bridge(agent, admin)
    try:
        tasks = {}
        for ending, state in (("complete", "TASK_STATE_COMPLETED"), ("fail", "TASK_STATE_FAILED"),
                              ("reject", "TASK_STATE_REJECTED")):
            task = (await a2a(bridge.port, "SendMessage", {"message": a2a_message("go", ending)}))["result"]["task"]
            assert task["status"]["state"] == state
            tasks[state] = task["id"]
        open_task = (await a2a(bridge.port, "SendMessage", {"message": a2a_message("go")}))["result"]["task"]["id"]
        canceled = (await a2a(bridge.port, "CancelTask", {"id": open_task}))["result"]
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        tasks["TASK_STATE_CANCELED"] = open_task

        for state, task_id in tasks.items():
            answer = await a2a(bridge.port, "InjectTaskReminder", {"taskId": task_id, "reminder": INJECT})
            assert_refused_as_terminal(answer, task_id, state)
        assert await queued_for_tasks(admin) == 0

        # the gauge does count what an open task holds: the refusals above queued nothing
        still_open = (await a2a(bridge.port, "SendMessage", {"message": a2a_message("go")}))["result"]["task"]["id"]
        accepted = await a2a(bridge.port, "InjectTaskReminder", {"taskId": still_open, "reminder": INJECT})
        assert accepted["result"]["reminderId"]
        assert await queued_for_tasks(admin) == 1
        assert (await get_json(agent.port, "/stats"))["reminders"] == []  # nothing rode on any message yet
    finally:
        bridge.stop()
        agent.stop()


async def test_an_inject_for_a_working_task_is_accepted_and_rides_on_its_next_message():
    agent = peer("tests.peers.a2a_sdk_agent", "legacy")
    admin = free_port()
    bridge = a2a_bridge(agent, admin)
    try:
        body = {"jsonrpc": "2.0", "id": "s1", "method": "SendStreamingMessage",
                "params": {"message": a2a_message("hold")}}  # the agent keeps the task working until released
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            async with http.post(f"http://127.0.0.1:{bridge.port}/a2a", json=body, headers=A2A_HEADERS) as stream:
                task_id = None
                async for line in stream.content:
                    if line.startswith(b"data:"):
                        result = json.loads(line[5:])["result"]
                        task_id = task_id or result.get("task", {}).get("id")
                        if state_of(result) == "TASK_STATE_WORKING":
                            break
                task = (await a2a(bridge.port, "GetTask", {"id": task_id}))["result"]
                assert task["status"]["state"] == "TASK_STATE_WORKING"
                accepted = await a2a(bridge.port, "InjectTaskReminder", {"taskId": task_id, "reminder": INJECT})
                assert accepted["result"]["reminderId"] and accepted["result"]["dedupedCount"] == 0
                assert await queued_for_tasks(admin) == 1
                async with http.post(f"http://127.0.0.1:{agent.port}/release") as released:
                    assert released.status == 200
                rest = [json.loads(line[5:])["result"] async for line in stream.content if line.startswith(b"data:")]
        assert state_of(rest[-1]) == "TASK_STATE_INPUT_REQUIRED"
        await a2a(bridge.port, "SendMessage", {"message": a2a_message("next", task_id=task_id)})
        received = (await get_json(agent.port, "/stats"))["reminders"]
        assert [(r["body"], r["id"]) for r in received] == [(INJECT["body"], accepted["result"]["reminderId"])]
        assert await queued_for_tasks(admin) == 0
    finally:
        bridge.stop()
        agent.stop()


async def test_the_bundled_legacy_agent_takes_a_reminder_while_its_task_is_open_and_refuses_one_after():
    agent = peer("tests.peers.a2a_legacy_http")
    admin = free_port()
    bridge = a2a_bridge(agent, admin)
    try:
        first = await a2a(bridge.port, "SendStreamingMessage", {"message": a2a_message("Rebase on main.")})
        task_id = first["result"]["statusUpdate"]["taskId"]
        assert first["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        accepted = await a2a(bridge.port, "InjectTaskReminder", {"taskId": task_id, "reminder": INJECT})
        assert accepted["result"]["reminderId"]
        done = await a2a(bridge.port, "SendMessage", {"message": a2a_message("Push it.", task_id=task_id)})
        assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert [r["body"] for r in (await get_json(agent.port, "/stats"))["reminders"][task_id]] == [INJECT["body"]]

        late = await a2a(bridge.port, "InjectTaskReminder", {"taskId": task_id, "reminder": INJECT})
        assert_refused_as_terminal(late, task_id, "TASK_STATE_COMPLETED")
        assert await queued_for_tasks(admin) == 0
        again = await a2a(bridge.port, "SendMessage", {"message": a2a_message("Push again.", task_id=task_id)})
        assert again["error"]["code"] == -32004  # the agent itself takes no message for a completed task
        assert len((await get_json(agent.port, "/stats"))["reminders"][task_id]) == 1
    finally:
        bridge.stop()
        agent.stop()


# -- 15: an ACP inject sent before the agent's initialize answer waits for it ----------------------
STDIO = [sys.executable, "-m", "bridge", "stdio"]
LATE_AGENT = [sys.executable, "-m", "tests.peers.late_initialize_agent"]
STANDARD_CLIENT = {"protocolVersion": 1, "clientCapabilities": {"reminders": {"emit": True}},
                   "clientInfo": {"name": "eager-client", "version": "1"}}


def answers(pipe: JsonRpcPipe, ids: set) -> dict:
    """Read frames until every id in ``ids`` is answered; the answers by id, in arrival order."""
    got: dict = {}
    while not ids <= set(got):
        msg = json.loads(pipe.next_frame())
        if "method" not in msg and msg.get("id") in ids:
            got[msg["id"]] = msg
    return got


def inject_request(msg_id: int, body: str, **fields) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "session/inject_reminder",
            "params": {"sessionId": "sess-loaded", "body": body, **fields}}


def test_an_inject_sent_before_the_agents_initialize_answer_waits_and_is_then_translated():
    acp = JsonRpcPipe(STDIO + ["--"] + LATE_AGENT)
    try:
        acp.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": STANDARD_CLIENT})
        acp.send(inject_request(2, "CI is red on main.", dedupeKey="ci", ttlTurns=2))  # no mode: finish_step
        acp.send({"jsonrpc": "2.0", "method": "_test/answer_initialize"})
        got = answers(acp, {1, 2})
        assert "error" not in got[2], got[2]  # sent on untranslated, the Harn agent would answer -32601
        assert list(got) == [1, 2]  # the client learns the agent before its inject's answer
        assert got[1]["result"]["agentCapabilities"]["reminders"]["inject"] is True  # a legacy agent, advertised
        reminder_id = got[2]["result"]["reminderId"]
        turn, during = acp.request("session/prompt", {"sessionId": "sess-loaded",
                                                      "prompt": [{"type": "text", "text": "go"}]})
        emitted = [m["params"]["update"] for m in during if m.get("method") == "session/update"
                   and m["params"]["update"]["sessionUpdate"] == "reminder_emitted"]
        assert [(u["reminderId"], u["body"]) for u in emitted] == [(reminder_id, "CI is red on main.")]
        text = next(m["params"]["update"]["content"]["text"] for m in during if m.get("method") == "session/update"
                    and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        assert "CI is red on main." in text  # delivered with an explicit mode: Harn shows it to the model
        assert turn["result"]["stopReason"] == "end_turn"
    finally:
        assert acp.close() == 0


def test_injects_over_the_waiting_bound_get_a_clear_error_and_the_connection_goes_on(tmp_path):
    rules = tmp_path / "rules.toml"
    # a whole reminder may be large here (max_reminder_bytes), so only the waiting queue's own byte bound refuses
    rules.write_text('[routes.agent]\nprotocol = "acp"\n[routes.agent.trust]\nmax_pending_per_session = 3\n'
                     'max_reminder_bytes = 1000000\n')
    acp = JsonRpcPipe(STDIO + ["--rules", str(rules), "--"] + LATE_AGENT)
    try:
        acp.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": STANDARD_CLIENT})
        big = {"_meta": {"com.example/blob": "x" * 400_000}}  # waiting injects are bounded in bytes too
        acp.send(inject_request(10, "first", **big))
        acp.send(inject_request(11, "second", **big))
        acp.send(inject_request(12, "third", **big))  # 1.2 MB waiting: over the byte bound
        acp.send(inject_request(13, "small"))
        acp.send(inject_request(14, "one too many"))  # three wait already: over the count bound
        refused = answers(acp, {12, 14})
        assert refused[12]["error"]["code"] == -32000 and refused[12]["error"]["data"]["limit"] == "waiting_bytes"
        assert "has not answered initialize yet" in refused[12]["error"]["message"]
        assert refused[14]["error"]["data"] == {"limit": "max_pending_per_session", "value": 3,
                                                "reason": "agent_not_initialized"}
        acp.send({"jsonrpc": "2.0", "method": "_test/answer_initialize"})
        released = answers(acp, {1, 10, 11, 13})
        assert list(released) == [1, 10, 11, 13]
        assert all("result" in released[i] for i in (10, 11, 13)), released
        after, _ = acp.request("session/inject_reminder", {"sessionId": "sess-loaded", "body": "later"})
        assert after["result"]["reminderId"]  # the agent is known now: no waiting, the connection is fine
    finally:
        assert acp.close() == 0
