"""ACP through `reminder-bridge stdio`, real processes: a raw client (it must see every frame,
including the lifecycle updates the ACP SDK client would reject) in front of the Harn-like legacy
agent and of an agent built with the official SDK that has no reminder support."""
from __future__ import annotations

import json
import sys
import time

import pytest

from tests.peers.jsonrpc_pipe import JsonRpcPipe
from tests.peers.processes import wait_until

PROXY = [sys.executable, "-m", "bridge", "stdio"]
HARN_AGENT = [sys.executable, "-m", "bridge.examples.acp_harn_agent"]
SDK_AGENT = [sys.executable, "-m", "tests.peers.acp_sdk_agent"]
PROVIDER_AGENT = [sys.executable, "-m", "tests.peers.harn_provider_agent"]
STANDARD_CLIENT = {"protocolVersion": 1, "clientCapabilities": {"reminders": {"emit": True}},
                   "clientInfo": {"name": "test-client", "version": "1"}}


def updates(messages, kind):
    return [m["params"]["update"] for m in messages
            if m.get("method") == "session/update" and m["params"]["update"].get("sessionUpdate") == kind]


@pytest.fixture
def through_proxy():
    pipes = []

    def start(agent, *options):
        pipe = JsonRpcPipe(PROXY + list(options) + ["--"] + agent)
        pipes.append(pipe)
        return pipe

    yield start
    for pipe in pipes:
        if pipe.proc.poll() is None:
            pipe.close()


def test_standard_client_with_harn_agent_sees_every_lifecycle_event(through_proxy):
    acp = through_proxy(HARN_AGENT)
    init, _ = acp.request("initialize", STANDARD_CLIENT)
    caps = init["result"]["agentCapabilities"]
    assert caps["reminders"]["inject"] is True and "all" in caps["reminders"]["propagate"]
    assert "reminder_emitted" in caps["_meta"]["harn"]["sessionUpdateExtensions"]  # the agent's own keys stay
    session = acp.request("session/new", {"cwd": "/tmp", "mcpServers": []})[0]["result"]["sessionId"]

    first, _ = acp.request("session/inject_reminder", {"sessionId": session, "body": "Deps changed.",
                                                        "dedupeKey": "deps", "ttlTurns": 2})
    first_id = first["result"]["reminderId"]
    second, before = acp.request("session/inject_reminder", {"sessionId": session, "body": "Deps changed again.",
                                                             "dedupeKey": "deps", "ttlTurns": 2})
    second_id = second["result"]["reminderId"]
    assert second["result"]["dedupedCount"] == 1
    audit, _ = acp.request("session/inject_reminder", {"sessionId": session, "body": "For the audit log only.",
                                                       "mode": "audit_only"})
    # Harn dedupes silently; the proxy tells the standard client, before answering the inject.
    assert updates(before, "reminder_deduped") == [{
        "sessionUpdate": "reminder_deduped", "reminderId": second_id, "dedupeKey": "deps",
        "droppedReminderIds": [first_id], "_meta": {"reminder-bridge/synthesized": True}}]
    turn1, during1 = acp.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]})
    emitted = updates(during1, "reminder_emitted")
    assert [u["reminderId"] for u in emitted] == [second_id]
    assert emitted[0]["body"] == "Deps changed again." and "_meta" in emitted[0]
    assert "harn" not in emitted[0]["_meta"]  # translated, not decorated
    text = updates(during1, "agent_message_chunk")[0]["content"]["text"]
    assert "Deps changed again." in text and "Deps changed." not in text.replace("Deps changed again.", "")
    assert "audit log" not in text  # audit_only is never rendered
    assert turn1["result"]["stopReason"] == "end_turn"

    _, during2 = acp.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "more"}]})
    expired = updates(during2, "reminder_expired")
    assert expired == [{"sessionUpdate": "reminder_expired", "reminderId": second_id, "phase": "ttl_expired",
                        "expiredAtTurn": 2, "_meta": {"reminder-bridge/synthesized": True}}]
    _, during3 = acp.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "again"}]})
    assert updates(during3, "reminder_emitted") == []
    assert audit["result"]["reminderId"]
    assert acp.close() == 0


def test_invalid_inject_is_answered_by_the_proxy_and_the_connection_survives(through_proxy):
    acp = through_proxy(HARN_AGENT)
    acp.request("initialize", STANDARD_CLIENT)
    session = acp.request("session/new", {"cwd": "/tmp", "mcpServers": []})[0]["result"]["sessionId"]
    bad, _ = acp.request("session/inject_reminder", {"sessionId": session, "body": "x", "ttlTurns": 2.0})
    assert bad["error"]["code"] == -32602
    assert bad["error"]["message"] == "invalid reminder: `params.ttlTurns` must be an integer >= 1 (got 2.0)"
    unknown, _ = acp.request("session/inject_reminder", {"sessionId": "nope", "body": "x"})
    assert unknown["error"]["code"] == -32004 and unknown["error"]["data"]["reason"] == "unknown_session"
    ok, _ = acp.request("session/inject_reminder", {"sessionId": session, "body": "fine"})
    assert "reminderId" in ok["result"]


def test_legacy_client_with_harn_agent_passes_byte_identical(through_proxy):
    acp = through_proxy(HARN_AGENT)
    acp.request("initialize", {"protocolVersion": 1, "clientCapabilities": {"_meta": {"harn": {}}}})
    session = acp.request("session/new", {"cwd": "/tmp", "mcpServers": []})[0]["result"]["sessionId"]
    raw = ('{"jsonrpc":"2.0","id":"r1","method":"session/remind","params":{"sessionId":"%s","body":"hi",'
           '"dedupe_key":"k","mode":"steer"}}' % session).encode()
    acp.send_raw(raw)
    reply = acp.next_frame()
    assert reply.startswith(b'{"jsonrpc":"2.0","id":"r1","result":{"reminderId":')
    _, during = acp.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]})
    emitted = updates(during, "reminder_emitted")
    assert emitted[0]["_meta"]["harn"]["reminder"]["body"] == "hi"  # legacy client keeps the legacy form


def test_legacy_client_injecting_into_standard_less_agent_is_held_and_rendered(through_proxy):
    acp = through_proxy(SDK_AGENT)
    init, _ = acp.request("initialize", STANDARD_CLIENT)
    assert init["result"]["agentCapabilities"]["reminders"]["inject"] is True  # what the proxy can honour
    session = acp.request("session/new", {"cwd": "/tmp", "mcpServers": []})[0]["result"]["sessionId"]
    a, _ = acp.request("session/inject_reminder", {"sessionId": session, "body": "Use <tabs> & spaces",
                                                   "dedupeKey": "style", "ttlTurns": 2})
    assert a["result"]["dedupedCount"] == 0
    b, lifecycle = acp.request("session/inject_reminder", {"sessionId": session, "body": "Use tabs",
                                                           "dedupeKey": "style", "ttlTurns": 2})
    assert b["result"]["dedupedCount"] == 1
    assert updates(lifecycle, "reminder_deduped")[0]["droppedReminderIds"] == [a["result"]["reminderId"]]
    acp.request("session/inject_reminder", {"sessionId": session, "body": "audit only", "mode": "audit_only"})

    _, turn1 = acp.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]})
    echoed = updates(turn1, "agent_message_chunk")[0]["content"]["text"]
    assert echoed.startswith('<system-reminder id="%s" source="host">Use tabs</system-reminder> || hello'
                             % b["result"]["reminderId"])
    assert "audit only" not in echoed
    emitted = updates(turn1, "reminder_emitted")
    assert [(u["reminderId"], u["firedAtTurn"]) for u in emitted] == [(b["result"]["reminderId"], 0)]

    _, turn2 = acp.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "again"}]})
    assert "Use tabs" in updates(turn2, "agent_message_chunk")[0]["content"]["text"]
    assert updates(turn2, "reminder_expired")[0]["reminderId"] == b["result"]["reminderId"]
    _, turn3 = acp.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "bye"}]})
    assert updates(turn3, "agent_message_chunk")[0]["content"]["text"] == "bye"
    assert acp.close() == 0


def test_sdk_agent_with_bodies_escaped(through_proxy):
    acp = through_proxy(SDK_AGENT)
    acp.request("initialize", STANDARD_CLIENT)
    session = acp.request("session/new", {"cwd": "/tmp", "mcpServers": []})[0]["result"]["sessionId"]
    acp.request("session/inject_reminder", {"sessionId": session, "body": "a <b> & </system-reminder>"})
    _, turn = acp.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "x"}]})
    text = updates(turn, "agent_message_chunk")[0]["content"]["text"]
    assert "a &lt;b&gt; &amp; &lt;/system-reminder&gt;</system-reminder>" in text


async def test_sdk_client_without_reminder_support_never_sees_reminder_updates(caplog):
    """The official ACP SDK client logs an ERROR for every unknown `sessionUpdate`; toward a client
    that declared no reminder support the proxy drops reminder updates, so it sees only its own kinds."""
    import logging
    import os

    from acp import PROTOCOL_VERSION, Client, text_block
    from acp.schema import ClientCapabilities, Implementation
    from acp.stdio import spawn_agent_process

    class RecordingClient(Client):
        def __init__(self):
            self.updates = []

        async def session_update(self, session_id, update, **kw):
            self.updates.append(update.session_update)

        async def request_permission(self, *a, **kw):
            raise NotImplementedError

    client = RecordingClient()
    caplog.set_level(logging.ERROR)
    async with spawn_agent_process(client, *PROXY, "--", *PROVIDER_AGENT, env=dict(os.environ),
                                   transport_kwargs={"stderr": None}) as (conn, _):
        await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities(),
                              client_info=Implementation(name="sdk-client", version="1"))
        session = await conn.new_session(cwd="/tmp", mcp_servers=[])
        response = await conn.prompt(session_id=session.session_id, prompt=[text_block("hello")])
    assert response.stop_reason == "end_turn"
    assert client.updates == ["agent_message_chunk"]  # the agent's reminder_emitted was dropped
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_standard_client_gets_provider_reminders_it_never_injected(through_proxy):
    acp = through_proxy(PROVIDER_AGENT)
    acp.request("initialize", STANDARD_CLIENT)
    session = acp.request("session/new", {"cwd": "/tmp", "mcpServers": []})[0]["result"]["sessionId"]
    _, turn = acp.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]})
    assert updates(turn, "reminder_emitted") == [{
        "sessionUpdate": "reminder_emitted", "reminderId": "provider-1",
        "body": "Context is 80% full; summarise before reading more files.", "tags": ["token_pressure"],
        "source": "provider",
        "_meta": {"reminder-bridge/original": {"roleHint": "developer", "renderedRole": "user"}}}]


COALESCE = '[defaults.budget]\nrate = 60\nburst = 1\nkey = "server"\nover = "coalesce"\n'


def test_a_stdio_acp_session_releases_held_injects_when_tokens_return(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text(COALESCE)
    acp = JsonRpcPipe([sys.executable, "-m", "bridge", "stdio", "--rules", str(rules), "--log-level", "info", "--",
                       sys.executable, "-m", "bridge.examples.acp_harn_agent"])

    def injected() -> list[dict]:  # what the proxy sent the agent, from its decision log
        lines = [json.loads(line) for line in bytes(acp.stderr).decode().splitlines() if line.startswith("{")]
        return [line for line in lines if line["event"] == "rewritten" and line.get("method") == "session/inject_reminder"]

    try:
        acp.request("initialize", {"protocolVersion": 1, "clientCapabilities": {"reminders": {"emit": True}},
                                   "clientInfo": {"name": "t", "version": "1"}})
        session = acp.request("session/new", {"cwd": "/tmp", "mcpServers": []})[0]["result"]["sessionId"]
        started = time.monotonic()
        for n in range(3):  # notifications: one goes now, two are held by the budget
            acp.send({"jsonrpc": "2.0", "method": "session/inject_reminder", "params": {
                "sessionId": session, "body": f"note {n}", "dedupeKey": f"k{n}", "mode": "finish_step"}})
        wait_until(lambda: len(injected()) >= 3, timeout=30)  # a hang guard: the refill takes 2 s
        # the refill is the behaviour, and a lower bound load cannot break (it only adds time): two
        # tokens at one a second, so not before they came back
        assert time.monotonic() - started >= 1.5
        assert acp.request("session/prompt", {"sessionId": session, "prompt": []})[0]["result"]  # the link is fine
    finally:
        acp.close()
