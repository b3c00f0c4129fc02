"""The bundled legacy peers behave as documented, since the demo and the proxy tests rely on them.

The MCP server and the ACP agent run as real subprocesses (the way the proxy wraps them);
the A2A agent is exercised in-process because it has no transport of its own.
"""

import json
import queue
import subprocess
import sys
import threading

import pytest

from bridge.examples.a2a_legacy_agent import LegacyA2AAgent
from tests.paths import ROOT

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Peer:
    """A stdio peer subprocess; replies are read on a thread so a silent peer fails fast instead of hanging."""

    def __init__(self, module: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, msg: dict) -> None:
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def recv_raw(self) -> bytes:
        return self.lines.get(timeout=5)

    def recv(self) -> dict:
        return json.loads(self.recv_raw())

    def request(self, msg: dict) -> list[dict]:
        """Send a request; return everything the peer wrote up to and including its response."""
        self.send(msg)
        received = [self.recv()]
        while received[-1].get("id") != msg["id"] or "method" in received[-1]:
            received.append(self.recv())
        return received

    def close(self) -> int:
        self.proc.stdin.close()
        return self.proc.wait(timeout=5)


@pytest.fixture
def mcp():
    peer = Peer("bridge.examples.mcp_legacy_server")
    yield peer
    peer.proc.kill()
    peer.proc.wait()


@pytest.fixture
def acp():
    peer = Peer("bridge.examples.acp_harn_agent")
    yield peer
    peer.proc.kill()
    peer.proc.wait()


# --- MCP ---------------------------------------------------------------------------------


def test_mcp_initialize_declares_legacy_reminder_capability(mcp):
    mcp.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}})
    raw = mcp.recv_raw()
    assert raw.startswith(b'{"jsonrpc":"2.0","id":1,"result":{')  # compact, one line
    result = json.loads(raw)["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert result["serverInfo"] == {"name": "legacy-mcp-example", "version": "1.0.0"}
    assert result["capabilities"]["_meta"]["harn"]["reminders"] == {
        "emit": True,
        "propagate": ["all", "session", "none"],
        "roleHints": ["system", "developer"],
    }
    assert "resultType" not in result


def test_mcp_legacy_tools_call_sends_reminder_then_log_then_result(mcp):
    mcp.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    reminder, log, response = mcp.request(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "touch_file", "arguments": {"path": "src/lib.rs"}}}
    )
    body = "src/lib.rs changed externally; re-read it before editing."
    assert reminder["method"] == "notifications/message"
    params = reminder["params"]
    assert (params["level"], params["logger"], params["data"]) == ("info", "harn.reminder", body)
    envelope = params["_meta"]["harn"]["reminder"]
    assert envelope.pop("id")
    assert envelope == {
        "body": body, "tags": ["workspace", "file_changed"], "dedupeKey": "file_changed:src/lib.rs",
        "ttlTurns": 2, "preserveOnCompact": False, "propagate": "session", "roleHint": "system",
        "source": "stdlib_provider",
    }
    assert log == {"jsonrpc": "2.0", "method": "notifications/message",
                   "params": {"level": "info", "logger": "fs", "data": "touched src/lib.rs"}}
    assert response["result"] == {"content": [{"type": "text", "text": "touched src/lib.rs"}],
                                  "structuredContent": {"path": "src/lib.rs"}, "isError": False}


def test_mcp_modern_era(mcp):
    [discover] = mcp.request({"jsonrpc": "2.0", "id": "d", "method": "server/discover",
                              "params": {"_meta": MODERN_META}})
    result = discover["result"]
    assert (result["resultType"], result["supportedVersions"], result["ttlMs"], result["cacheScope"]) == (
        "complete", ["2026-07-28"], 0, "private")
    assert "reminders" in result["capabilities"]["_meta"]["harn"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "legacy-mcp-example"

    [listed] = mcp.request({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}})
    assert [tool["name"] for tool in listed["result"]["tools"]] == ["touch_file", "echo"]
    assert listed["result"]["tools"][0]["inputSchema"]["required"] == ["path"]
    assert (listed["result"]["resultType"], listed["result"]["ttlMs"], listed["result"]["cacheScope"]) == (
        "complete", 0, "private")

    reminder, log, response = mcp.request(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "touch_file", "arguments": {"path": "a.txt"}, "_meta": MODERN_META}}
    )
    assert reminder["params"]["logger"] == "harn.reminder"
    assert log["params"]["logger"] == "fs"
    assert response["result"]["resultType"] == "complete"


def test_mcp_echo_ping_errors_and_bad_lines(mcp):
    [echo] = mcp.request({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "echo", "arguments": {"text": "hi"}}})
    assert echo["result"]["content"] == [{"type": "text", "text": "hi"}]
    mcp.send_raw(b"this is not json\n")
    mcp.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}})
    [unknown] = mcp.request({"jsonrpc": "2.0", "id": 2, "method": "resources/list"})
    assert unknown["error"] == {"code": -32601, "message": "Method not found", "data": "resources/list"}
    assert mcp.request({"jsonrpc": "2.0", "id": 3, "method": "ping"}) == [{"jsonrpc": "2.0", "id": 3, "result": {}}]
    assert mcp.close() == 0
    assert b"non-JSON" in mcp.proc.stderr.read()


# --- ACP ---------------------------------------------------------------------------------


def new_session(acp) -> str:
    [response] = acp.request({"jsonrpc": "2.0", "id": "new", "method": "session/new",
                              "params": {"cwd": "/tmp", "mcpServers": []}})
    return response["result"]["sessionId"]


def remind(acp, msg_id, **params) -> dict:
    [response] = acp.request({"jsonrpc": "2.0", "id": msg_id, "method": "session/remind", "params": params})
    return response


def prompt(acp, session_id: str, text: str = "hi") -> tuple[list[dict], str, dict]:
    """Run one turn; return the reminder payloads emitted, the echoed text and the response."""
    *updates, response = acp.request({"jsonrpc": "2.0", "id": "p", "method": "session/prompt",
                                      "params": {"sessionId": session_id,
                                                 "prompt": [{"type": "text", "text": text}]}})
    kinds = [update["params"]["update"]["sessionUpdate"] for update in updates]
    assert kinds[-1] == "agent_message_chunk" and set(kinds[:-1]) <= {"reminder_emitted"}
    emitted = [update["params"]["update"]["_meta"]["harn"]["reminder"] for update in updates[:-1]]
    return emitted, updates[-1]["params"]["update"]["content"]["text"], response


def pending(acp, session_id: str) -> dict:
    [response] = acp.request({"jsonrpc": "2.0", "id": "q", "method": "_harn/pending",
                              "params": {"sessionId": session_id}})
    return response["result"]


def test_acp_initialize_advertises_reminder_emitted(acp):
    [response] = acp.request({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    caps = response["result"]["agentCapabilities"]
    assert response["result"]["protocolVersion"] == 1
    assert "reminder_emitted" in caps["_meta"]["harn"]["sessionUpdateExtensions"]
    assert response["result"]["agentInfo"] == {"name": "harn-like", "version": "0.8.163"}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"body": "x", "dedupeKey": "k", "ttlTurns": 2},
         "HARN-RMD-001: unknown reminder option(s): dedupeKey, ttlTurns"),
        ({"body": "x", "ttl_turns": 2.0}, "HARN-RMD-002: `ttl_turns` must be an integer"),
        ({"body": "x", "ttl_turns": 0}, "HARN-RMD-002: `ttl_turns` must be > 0"),
        ({"body": "  "}, "HARN-RMD-002: `body` must be a non-empty string"),
        ({"content": [{"type": "text", "text": "x"}]},
         "HARN-RMD-002: session/remind expects reminder `body`, not user-message `content`"),
        ({"body": "x", "source": "host"}, "HARN-RMD-002: `source` must be `bridge` when set"),
        ({"body": "x", "propagate": "everyone"}, "HARN-RMD-005: `propagate` must be one of all, session, or none"),
        ({"body": "x", "role_hint": "assistant"},
         "HARN-RMD-002: `role_hint` must be one of system, developer, user_block, or ephemeral_cache"),
        ({"reminder": {"body": "x", "roleHint": "system"}}, "HARN-RMD-001: unknown reminder option(s): roleHint"),
        ({"reminder": "x"}, "HARN-RMD-002: session/remind payload must be a reminder object"),
    ],
)
def test_acp_remind_validation(acp, params, message):
    session_id = new_session(acp)
    response = remind(acp, 1, sessionId=session_id, mode="finish_step", **params)
    assert response["error"] == {"code": -32602, "message": "session/remind: " + message}


def test_acp_remind_errors_on_sessions(acp):
    assert remind(acp, 1, body="x")["error"] == {"code": -32602, "message": "session/remind requires sessionId"}
    new_session(acp)
    assert remind(acp, 2, sessionId="nope", body="x")["error"] == {"code": -32004, "message": "Session not found: nope"}
    [response] = acp.request({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                              "params": {"sessionId": "nope", "prompt": []}})
    assert response["error"]["code"] == -32004


def test_acp_notification_never_gets_an_error(acp):
    session_id = new_session(acp)
    acp.send({"jsonrpc": "2.0", "method": "session/remind", "params": {"sessionId": session_id, "bodyText": "x"}})
    acp.send({"jsonrpc": "2.0", "method": "session/remind", "params": {"sessionId": "nope", "body": "x"}})
    acp.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
    acp.send({"jsonrpc": "2.0", "method": "_vendor/unknown"})
    acp.send_raw(b"{not json\n")
    # The next line on stdout is the answer to this request: nothing was written for the notifications.
    assert pending(acp, session_id) == {"pending": [], "audited": []}


def test_acp_missing_or_unknown_mode_is_audit_only(acp):
    session_id = new_session(acp)
    silent = remind(acp, 1, sessionId=session_id, body="never shown", id="r-missing")
    typo = remind(acp, 2, sessionId=session_id, body="never shown either", mode="wait_for_completion")
    assert silent["result"] == {"reminderId": "r-missing"}
    emitted, text, response = prompt(acp, session_id)
    assert emitted == [] and text == "echo: hi"
    assert response["result"] == {"stopReason": "end_turn"}
    assert pending(acp, session_id) == {"pending": [], "audited": ["r-missing", typo["result"]["reminderId"]]}


def test_acp_notification_remind_is_delivered_with_harn_shape(acp):
    session_id = new_session(acp)
    acp.send({"jsonrpc": "2.0", "method": "session/remind",
              "params": {"sessionId": session_id, "body": "  Re-read src/lib.rs.  ", "tags": ["workspace", "workspace"],
                         "role_hint": "developer", "mode": "interrupt", "_meta": {"harn": {"origin": "watcher"}}}})
    emitted, text, _ = prompt(acp, session_id)
    [payload] = emitted
    assert payload.pop("reminderId")
    assert payload == {"tags": ["workspace"], "body": "Re-read src/lib.rs.", "roleHint": "developer",
                       "renderedRole": "user", "source": "bridge", "ttlTurns": None}
    assert text == "echo: hi [reminders: Re-read src/lib.rs.]"


def test_acp_newer_reminder_replaces_older_with_same_dedupe_key(acp):
    session_id = new_session(acp)
    remind(acp, 1, sessionId=session_id, id="old", body="old news", dedupe_key="deps", mode="finish_step")
    remind(acp, 2, sessionId=session_id, id="new", body="new news", dedupe_key="deps", mode="steer")
    emitted, text, _ = prompt(acp, session_id)
    assert [payload["reminderId"] for payload in emitted] == ["new"]
    assert text == "echo: hi [reminders: new news]"
    remind(acp, 3, sessionId=session_id, reminder={"id": "newer", "body": "newest", "dedupe_key": "deps"},
           mode="interrupt_immediate")
    emitted, _, _ = prompt(acp, session_id)
    assert [payload["reminderId"] for payload in emitted] == ["newer"]


def test_acp_ttl_expires_after_n_turns(acp):
    session_id = new_session(acp)
    remind(acp, 1, sessionId=session_id, id="two", body="for two turns", ttl_turns=2, mode="finish_step")
    remind(acp, 2, sessionId=session_id, id="forever", body="until cleared", mode="finish_step")
    first, _, _ = prompt(acp, session_id)
    assert [(p["reminderId"], p["ttlTurns"]) for p in first] == [("two", 2), ("forever", None)]
    second, _, _ = prompt(acp, session_id)
    assert [(p["reminderId"], p["ttlTurns"]) for p in second] == [("two", 1), ("forever", None)]
    third, text, _ = prompt(acp, session_id)
    assert [p["reminderId"] for p in third] == ["forever"]
    assert text == "echo: hi [reminders: until cleared]"


def test_acp_unknown_request_and_eof(acp):
    [response] = acp.request({"jsonrpc": "2.0", "id": 9, "method": "session/inject", "params": {}})
    assert response["error"] == {"code": -32601, "message": "Method not found", "data": {"method": "session/inject"}}
    assert acp.close() == 0


# --- A2A (in-process) --------------------------------------------------------------------


def send(agent: LegacyA2AAgent, method: str, params: dict, msg_id="req-1") -> list[dict]:
    return agent.handle({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})


def user_message(text: str, **fields) -> dict:
    return {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}], **fields}


def test_a2a_stream_frames_carry_the_budget_reminder():
    agent = LegacyA2AAgent()
    frames = send(agent, "SendStreamingMessage", {"message": user_message("hello")})
    assert all(frame["id"] == "req-1" and frame["jsonrpc"] == "2.0" for frame in frames)
    task, working, artifact, waiting = (frame["result"] for frame in frames)
    assert task["task"]["status"] == {"state": "TASK_STATE_SUBMITTED"}
    task_id, context_id = task["task"]["id"], task["task"]["contextId"]
    assert task_id == "task-1"
    reminder = working["statusUpdate"]["metadata"]["harn"]["reminder"]
    assert reminder.pop("id")
    assert reminder == {"body": "Your last action exceeded the configured cost budget.", "tags": ["budget"],
                        "dedupeKey": "budget", "ttlTurns": 1, "source": "coordinator-agent"}
    assert working["statusUpdate"]["status"] == {"state": "TASK_STATE_WORKING"}
    assert artifact["artifactUpdate"]["artifact"]["parts"] == [{"text": "echo: hello"}]
    assert waiting["statusUpdate"] == {"taskId": task_id, "contextId": context_id,
                                       "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}  # open for its next turn
    assert agent.received_reminders == {}


def test_a2a_send_message_records_reminders_from_both_places():
    agent = LegacyA2AAgent()
    one = {"id": "rem-1", "body": "Rebase first.", "dedupeKey": "upstream"}
    two = {"id": "rem-2", "body": "Mind the budget."}
    three = {"id": "rem-3", "body": "From the message."}
    params = {"message": user_message("go", taskId="task-9", contextId="ctx-1",
                                      metadata={"harn": {"reminder": three}}),
              "metadata": {"harn": {"reminders": [one, two]}}}
    [response] = send(agent, "message/send", params)
    task = response["result"]["task"]
    assert (task["id"], task["contextId"], task["status"]) == ("task-9", "ctx-1",
                                                               {"state": "TASK_STATE_INPUT_REQUIRED"})
    assert agent.received_reminders == {"task-9": [one, two, three]}

    [second] = send(agent, "SendMessage", {"message": user_message("again", taskId="task-9")})
    assert second["result"]["task"]["status"] == {"state": "TASK_STATE_COMPLETED"}  # its second turn ends it
    [got] = send(agent, "GetTask", {"id": "task-9"})
    assert [m["parts"][0]["text"] for m in got["result"]["history"]] == ["go", "again"]
    assert len(got["result"]["artifacts"]) == 2
    [late] = send(agent, "SendMessage", {"message": user_message("once more", taskId="task-9")})
    assert late["error"]["code"] == -32004 and "terminal state" in late["error"]["message"]


def test_a2a_errors():
    agent = LegacyA2AAgent()
    [missing] = send(agent, "GetTask", {"id": "nope"})
    assert (missing["error"]["code"], missing["error"]["message"]) == (-32001, "Task not found")
    [unknown] = send(agent, "InjectTaskReminder", {"taskId": "t"})
    assert unknown["error"]["code"] == -32601
    [bad] = send(agent, "SendMessage", {})
    assert bad["error"]["code"] == -32602


def test_a2a_agent_card_declares_legacy_capability():
    card = LegacyA2AAgent().agent_card("http://127.0.0.1:9999/a2a")
    assert card["supportedInterfaces"] == [
        {"url": "http://127.0.0.1:9999/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]
    assert card["capabilities"] == {
        "streaming": True,
        "_meta": {"harn": {"reminders": {"inject": True, "emit": True, "propagate": ["session", "none"],
                                         "roleHints": ["system", "developer"]}}},
    }
