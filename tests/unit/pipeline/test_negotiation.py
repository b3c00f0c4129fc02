"""The four stages (spec §7) behave the same way on MCP, ACP and A2A, because each is one rule in
`bridge/pipeline/negotiation.py`: `observe` leaves every byte as it came, `dual` writes the
standard form and keeps the legacy decoration, `translate` and `enforce` write the standard form
only, and `enforce` refuses legacy reminders from the host side with one error."""
from __future__ import annotations

import io
import json

import pytest

from bridge.pipeline.commands import HOST, PEER, Forward, Reply, writes
from tests.flows import make_flow
from bridge.pipeline.negotiation import ENFORCE_CODE, STAGES
from bridge.rules import parse_rules_text
from bridge.telemetry import Recorder

REMINDER = {"id": "r1", "body": "Rebase first.", "dedupeKey": "rebase"}


def frame(obj) -> bytes:
    return json.dumps(obj).encode()


def flow(protocol: str, stage: str):
    settings = parse_rules_text(f'[defaults]\nstage = "{stage}"\n').defaults
    extra = {"peer_declared": True} if protocol == "mcp" else {}
    return make_flow(protocol, settings, Recorder(route="r", log=io.StringIO()), host_dialect="standard",
                     peer_dialect="legacy", **extra)


# A legacy reminder from the peer side, toward a standard host: (frame, has the standard form,
# has the legacy decoration) per protocol.
def peer_side(protocol: str) -> tuple[bytes, object, object]:
    if protocol == "mcp":
        msg = {"jsonrpc": "2.0", "method": "notifications/message", "params": {
            "level": "info", "logger": "harn.reminder", "data": REMINDER["body"],
            "_meta": {"harn": {"reminder": REMINDER}}}}
        standard = lambda out: any(m.get("method") == "notifications/reminder" for m in out)  # noqa: E731
        legacy = lambda out: any("harn" in json.dumps(m.get("params", {}).get("_meta", {})) for m in out)  # noqa: E731
        return frame(msg), standard, legacy
    if protocol == "acp":
        harn = {"reminderId": "r1", "body": REMINDER["body"], "tags": [], "roleHint": "system", "source": "bridge",
                "ttlTurns": None, "renderedRole": "system"}
        msg = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
            "sessionUpdate": "reminder_emitted", "_meta": {"harn": {"reminder": harn}}}}}
        standard = lambda out: any(m["params"]["update"].get("body") == REMINDER["body"] for m in out)  # noqa: E731
        legacy = lambda out: any("harn" in m["params"]["update"].get("_meta", {}) for m in out)  # noqa: E731
        return frame(msg), standard, legacy
    event = {"jsonrpc": "2.0", "id": "s1", "result": {"statusUpdate": {
        "taskId": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"},
        "metadata": {"harn": {"reminder": REMINDER}}}}}
    standard = lambda out: any("reminderUpdate" in m.get("result", {}) for m in out)  # noqa: E731
    legacy = lambda out: any("harn" in json.dumps(m.get("result", {}).get("statusUpdate", {})) for m in out)  # noqa: E731
    return frame(event), standard, legacy


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("protocol", ["mcp", "acp", "a2a"])
def test_a_legacy_reminder_toward_a_standard_host_meets_each_stage_alike(protocol, stage):
    data, standard, legacy = peer_side(protocol)
    out = flow(protocol, stage).from_peer(data)
    if stage == "observe":
        assert out == [Forward(HOST, data)] and out[0].data is data  # counted and traced, never touched
        return
    messages = [json.loads(c.data) for c in writes(out) if c.to == HOST]
    assert standard(messages), messages
    assert legacy(messages) is (stage == "dual"), messages


# Legacy reminder input from the host side (MCP hosts send no reminders).
def host_side(protocol: str) -> tuple[bytes, str]:
    if protocol == "acp":
        return frame({"jsonrpc": "2.0", "id": 5, "method": "session/remind", "params": {
            "sessionId": "s", "body": "x", "mode": "finish_step"}}), "session/inject_reminder"
    return frame({"jsonrpc": "2.0", "id": 5, "method": "SendMessage", "params": {"message": {
        "messageId": "m", "role": "ROLE_USER", "taskId": "t1", "parts": [{"text": "hi"}],
        "metadata": {"harn": {"reminder": {"id": "r", "body": "x"}}}}}}), "InjectTaskReminder"


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("protocol", ["acp", "a2a"])
def test_legacy_input_from_the_host_is_refused_only_at_enforce_with_one_error(protocol, stage):
    data, standard_method = host_side(protocol)
    f = flow(protocol, stage)
    f.host.configured, f.peer.configured = "legacy", "standard"
    out = f.from_host(data)
    replies = [c for c in out if isinstance(c, Reply)]
    if stage != "enforce":
        assert not replies and any(c.to == PEER for c in writes(out))
        return
    [reply] = replies
    error = json.loads(reply.data)["error"]
    assert reply.to == HOST and reply.request_id == 5
    assert error["code"] == ENFORCE_CODE and f"send {standard_method}" in error["message"]
    assert error["data"] == {"stage": "enforce", "standardMethod": standard_method}
