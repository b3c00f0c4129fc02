"""A2A v1.0 through `reminder-bridge serve`: the official a2a-sdk client and server, with streaming."""
from __future__ import annotations

import json
import uuid

import aiohttp
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from tests.peers.processes import peer, proxy

HARN_REMINDER = {"id": "rem-1", "body": "Upstream PR landed; rebase first.", "tags": ["upstream"],
                 "dedupeKey": "upstream:pr-1", "ttlTurns": 2}


@pytest.fixture
def agent(request):
    running = peer("tests.peers.a2a_sdk_agent", request.param)
    yield running
    running.stop()


def bridge_for(agent, peer_dialect: str, host_dialect: str = "auto"):
    return proxy("--protocol", "a2a", "--upstream", f"http://127.0.0.1:{agent.port}",
                 "--peer-dialect", peer_dialect, "--host-dialect", host_dialect)


async def agent_stats(agent) -> dict:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{agent.port}/stats") as r:
            return await r.json()


async def rpc(port: int, method: str, params: dict, stream: bool = False) -> list[dict]:
    """A raw JSON-RPC caller that sees every frame, as the a2a-sdk client would hide some."""
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"http://127.0.0.1:{port}/a2a", json=body, headers={"A2A-Version": "1.0"}) as r:
            if not stream:
                return [await r.json()]
            return [json.loads(line[5:]) async for line in r.content if line.startswith(b"data:")]


def message(text: str, task_id: str | None = None, metadata: dict | None = None) -> dict:
    msg = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        msg["taskId"] = task_id
    if metadata:
        msg["metadata"] = metadata
    return msg


@pytest.mark.parametrize("agent", ["legacy"], indirect=True)
async def test_sdk_client_streams_through_the_proxy_and_never_bypasses_it(agent):
    bridge = bridge_for(agent, "legacy")
    try:
        client = await create_client(f"http://127.0.0.1:{bridge.port}", client_config=ClientConfig(streaming=True))
        async with client:
            events = []
            request = SendMessageRequest(message=Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER,
                                                         parts=[Part(text="hello through the proxy")]))
            async for event in client.send_message(request):
                events.append(MessageToDict(event))
        kinds = [next(iter(e), None) for e in events]
        assert kinds[0] == "task" and kinds[-1] == "statusUpdate"
        assert any(e.get("artifactUpdate", {}).get("artifact", {}).get("parts") == [{"text": "hello through the proxy"}]
                   for e in events)
        # the card named the proxy, so every request after it went through the proxy
        hosts = (await agent_stats(agent))["hosts"]
        assert set(hosts) == {f"127.0.0.1:{bridge.port}"}, hosts
        assert hosts[f"127.0.0.1:{bridge.port}"] >= 2
    finally:
        bridge.stop()


@pytest.mark.parametrize("agent", ["legacy"], indirect=True)
async def test_stream_decorations_become_reminder_update_frames_for_a_standard_caller(agent):
    bridge = bridge_for(agent, "legacy", "standard")
    try:
        frames = await rpc(bridge.port, "SendStreamingMessage", {"message": message("go")}, stream=True)
        kinds = [next(iter(f["result"])) for f in frames]
        assert "reminderUpdate" in kinds
        update = frames[kinds.index("reminderUpdate")]["result"]["reminderUpdate"]
        following = frames[kinds.index("reminderUpdate") + 1]["result"]["statusUpdate"]
        assert update["reminder"]["body"] == "Your last action exceeded the configured cost budget."
        assert update["taskId"] == following["taskId"]
        assert "harn" not in json.dumps(following)  # the decoration left the event it rode on
        assert all(f["id"] == frames[0]["id"] for f in frames)  # same JSON-RPC id on every frame
    finally:
        bridge.stop()


@pytest.mark.parametrize("agent", ["standard"], indirect=True)
async def test_legacy_caller_metadata_reaches_a_standard_peer_as_inject_task_reminder(agent):
    bridge = bridge_for(agent, "standard", "legacy")
    try:
        first = await rpc(bridge.port, "SendMessage", {"message": message("start")})
        task_id = first[0]["result"]["task"]["id"]
        reply = await rpc(bridge.port, "SendMessage", {"message": message("continue", task_id),
                                                       "metadata": {"harn": {"reminder": HARN_REMINDER}}})
        assert reply[0]["result"]["task"]["id"] == task_id
        stats = await agent_stats(agent)
        assert stats["injects"] == [{"taskId": task_id, "reminder": {
            "id": "rem-1", "body": "Upstream PR landed; rebase first.", "tags": ["upstream"],
            "dedupeKey": "upstream:pr-1", "ttlTurns": 2}}]
        assert stats["reminders"] == []  # the message itself went on without the decoration
    finally:
        bridge.stop()


@pytest.mark.parametrize("agent", ["legacy"], indirect=True)
async def test_standard_inject_is_queued_and_attached_to_the_next_message_for_a_legacy_peer(agent):
    bridge = bridge_for(agent, "legacy", "standard")
    try:
        task_id = (await rpc(bridge.port, "SendMessage", {"message": message("start")}))[0]["result"]["task"]["id"]
        inject = {"taskId": task_id, "reminder": {"body": "Tests are red on main.", "dedupeKey": "ci",
                                                  "propagate": "REMINDER_PROPAGATION_SESSION"}}
        first = (await rpc(bridge.port, "InjectTaskReminder", inject))[0]["result"]
        second = (await rpc(bridge.port, "InjectTaskReminder", {**inject, "reminder": {
            **inject["reminder"], "body": "Tests are green again."}}))[0]["result"]
        assert first["dedupedCount"] == 0 and second["dedupedCount"] == 1 and second["acceptedAt"].endswith("Z")
        assert (await agent_stats(agent))["reminders"] == []  # queued, not yet sent
        await rpc(bridge.port, "SendMessage", {"message": message("next", task_id)})
        received = (await agent_stats(agent))["reminders"]
        assert [r["body"] for r in received] == ["Tests are green again."]
        assert received[0]["id"] == second["reminderId"]
        missing = await rpc(bridge.port, "InjectTaskReminder", {**inject, "taskId": "no-such-task"})
        assert missing[0]["error"]["code"] == -32001
        bad = await rpc(bridge.port, "InjectTaskReminder", {"taskId": task_id, "reminder": {"body": " "}})
        assert bad[0]["error"]["code"] == -32602 and "body" in bad[0]["error"]["message"]
    finally:
        bridge.stop()


@pytest.mark.parametrize("agent", ["none"], indirect=True)
async def test_standard_inject_reaches_a_none_peer_as_a_prepended_text_part(agent):
    bridge = bridge_for(agent, "none", "standard")
    try:
        task_id = (await rpc(bridge.port, "SendMessage", {"message": message("start")}))[0]["result"]["task"]["id"]
        result = (await rpc(bridge.port, "InjectTaskReminder", {"taskId": task_id, "reminder": {
            "body": "Prefer small commits.", "id": "r-42"}}))[0]["result"]
        assert result["reminderId"] == "r-42"
        await rpc(bridge.port, "SendMessage", {"message": message("next", task_id)})
        texts = (await agent_stats(agent))["texts"]
        assert texts[-1] == ['<system-reminder id="r-42" source="host">Prefer small commits.</system-reminder>', "next"]
    finally:
        bridge.stop()


@pytest.mark.parametrize("agent", ["none"], indirect=True)
async def test_agent_card_names_the_proxy_and_headers_pass(agent):
    bridge = bridge_for(agent, "none")
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{bridge.port}/.well-known/agent-card.json") as r:
                card = await r.json()
        assert [i["url"] for i in card["supportedInterfaces"]] == [f"http://127.0.0.1:{bridge.port}/a2a"]
        hosts = (await agent_stats(agent))["hosts"]
        assert set(hosts) == {f"127.0.0.1:{bridge.port}"}
    finally:
        bridge.stop()
