"""ACP pipeline rules that need no socket (spec §4), fed frame by frame into the sans-I/O flow:
dialect learning, capability advertisement, inject in both directions and its answer, agent
errors, the proxy-held lifecycle for agents without support, lifecycle updates synthesized for
standard clients of Harn agents, client `none`, and what passes untouched."""
from __future__ import annotations

import io
import json

from bridge.pipeline.commands import HOST, PEER, Forward, Reply, Send, writes
from tests.flows import make_flow
from bridge.rules import parse_rules_text
from bridge.telemetry import Recorder

STANDARD_CLIENT = {"reminders": {"emit": True}}
LEGACY_CLIENT = {"_meta": {"harn": {"acp": True}}}
HARN_AGENT = {"loadSession": False, "_meta": {"harn": {"sessionUpdateExtensions": ["reminder_emitted"],
                                                        "other": 1}}}
NONE_AGENT = {"loadSession": False}


def frame(obj) -> bytes:
    return json.dumps(obj).encode()


def decoded(commands) -> list[tuple[str, dict]]:
    return [(c.to, json.loads(c.data)) for c in writes(commands)]


def acp(client_caps=STANDARD_CLIENT, agent_caps=HARN_AGENT, rules: str = "", **kwargs):
    settings = parse_rules_text(rules).defaults if rules else None
    flow = make_flow("acp", settings, Recorder(route="r", log=io.StringIO()), **kwargs)
    flow.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": client_caps, "clientInfo": {"name": "zed", "version": "1"}}}))
    flow.init = decoded(flow.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": 1, "agentCapabilities": agent_caps, "agentInfo": {"name": "harn", "version": "1"}}})))
    return flow


def inject(msg_id, session="s", **fields) -> bytes:
    params = {"sessionId": session, "body": fields.pop("body", "Deps changed."), **fields}
    msg = {"jsonrpc": "2.0", "method": "session/inject_reminder", "params": params}
    if msg_id is not None:
        msg["id"] = msg_id
    return frame(msg)


def prompt(msg_id, session="s") -> bytes:
    return frame({"jsonrpc": "2.0", "id": msg_id, "method": "session/prompt",
                  "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}})


def updates(out, kind) -> list[dict]:
    return [m["params"]["update"] for _, m in out
            if m.get("method") == "session/update" and m["params"]["update"].get("sessionUpdate") == kind]


# -- handshake -----------------------------------------------------------------------------------
def test_a_standard_client_is_told_a_harn_agent_supports_everything_and_harn_keys_stay():
    flow = acp()
    assert flow.host.dialect == "standard" and flow.peer.dialect == "legacy"
    [(to, init)] = flow.init
    caps = init["result"]["agentCapabilities"]
    assert to == HOST and caps["reminders"] == {"inject": True, "emit": True, "propagate": ["all", "session", "none"],
                                                "roleHints": ["system", "developer", "user_block", "ephemeral_cache"]}
    assert caps["_meta"]["harn"] == HARN_AGENT["_meta"]["harn"]


def test_an_agent_without_support_is_advertised_for_what_the_proxy_can_hold():
    flow = acp(agent_caps=NONE_AGENT)
    caps = flow.init[0][1]["result"]["agentCapabilities"]
    assert caps["reminders"]["propagate"] == ["session", "none"] and caps["reminders"]["inject"] is True
    off = acp(agent_caps=NONE_AGENT, rules='[defaults.fallback]\nacp_agent_none = "off"\n')
    assert "reminders" not in off.init[0][1]["result"]["agentCapabilities"]


def test_a_client_that_declares_nothing_learns_its_dialect_from_the_inject_method_it_uses():
    flow = acp(client_caps={})
    assert flow.host.dialect == "none" and flow.init == [(HOST, flow.init[0][1])]
    flow.from_host(frame({"jsonrpc": "2.0", "id": 1, "method": "session/remind", "params": {
        "sessionId": "s", "body": "x", "mode": "finish_step"}}))
    assert flow.host.dialect == "legacy"


# -- inject, toward the agent --------------------------------------------------------------------
def test_a_standard_inject_reaches_harn_as_session_remind_with_mode_always_written():
    flow = acp()
    [(to, remind)] = decoded(flow.from_host(inject(1, dedupeKey="deps", ttlTurns=2, roleHint="developer")))
    assert to == PEER and remind["method"] == "session/remind" and remind["id"] == 1
    params = remind["params"]
    assert params["mode"] == "finish_step" and params["dedupe_key"] == "deps" and params["ttl_turns"] == 2
    assert params["role_hint"] == "developer" and "dedupeKey" not in params
    [(to, answer)] = decoded(flow.from_peer(frame({"jsonrpc": "2.0", "id": 1, "result": {"reminderId": "harn-9"}})))
    assert to == HOST and answer["result"] == {"reminderId": "harn-9"}  # nothing deduped: no dedupedCount


def test_injects_before_the_agents_initialize_answer_wait_for_it_and_then_go_as_any_other():
    flow = make_flow("acp", None, Recorder(route="r", log=io.StringIO()))
    flow.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                          "params": {"protocolVersion": 1, "clientCapabilities": STANDARD_CLIENT}}))
    early = inject(1, ttlTurns=2)
    assert flow.from_host(early) == [] and flow.pending_counts()["initialize"] == 1
    out = decoded(flow.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": 1, "agentCapabilities": HARN_AGENT}})))
    assert [m.get("id") for _, m in out] == [0, 1] and out[0][0] == HOST
    to, sent = out[1]
    assert to == PEER and sent["method"] == "session/remind" and sent["params"]["mode"] == "finish_step"
    assert flow.pending_counts()["initialize"] == 0

    standard = make_flow("acp", None, Recorder(route="r", log=io.StringIO()))
    standard.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}))
    assert standard.from_host(early) == []
    out = standard.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": 1, "agentCapabilities": {"reminders": {"inject": True, "emit": True}}}}))
    assert [type(c) for c in out] == [Forward, Send] and out[1].data == early  # same bytes, only later


def test_injects_wait_only_while_an_initialize_is_answered_and_never_at_stage_observe():
    before_any = make_flow("acp", None, Recorder(route="r", log=io.StringIO()))
    data = inject(1)
    assert before_any.from_host(data) == [Forward(PEER, data)]  # no handshake under way: nothing to wait for
    observing = make_flow("acp", parse_rules_text('[defaults]\nstage = "observe"\n').defaults,
                          Recorder(route="r", log=io.StringIO()))
    observing.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}))
    assert observing.from_host(data) == [Forward(PEER, data)]
    waiting = make_flow("acp", None, Recorder(route="r", log=io.StringIO()))
    waiting.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}))
    waiting.from_host(data)
    waiting.close("the connection closed")
    assert waiting.pending_counts()["initialize"] == 0
    assert waiting.recorder.count("dropped", "acp") == 1


def test_a_legacy_inject_reaches_a_standard_agent_in_camel_case():
    flow = acp(client_caps=LEGACY_CLIENT, agent_caps={"reminders": {"inject": True, "emit": True}})
    remind = frame({"jsonrpc": "2.0", "id": 2, "method": "session/remind", "params": {
        "sessionId": "s", "body": "x", "dedupe_key": "k", "ttl_turns": 3, "mode": "interrupt"}})
    [(_, out)] = decoded(flow.from_host(remind))
    assert out["method"] == "session/inject_reminder"
    assert out["params"] == {"sessionId": "s", "body": "x", "dedupeKey": "k", "ttlTurns": 3,
                             "mode": "interrupt_immediate", "_meta": {"reminder-bridge/original": {"mode": "interrupt"}}}


def test_agent_errors_pass_with_a_reason_and_invalid_injects_are_answered_by_the_proxy():
    flow = acp()
    flow.from_host(inject(3))
    [(_, error)] = decoded(flow.from_peer(frame({"jsonrpc": "2.0", "id": 3, "error": {
        "code": -32602, "message": "session/remind: HARN-RMD-002: body too long"}})))
    assert error["error"]["code"] == -32602 and error["error"]["data"]["reason"] == "HARN-RMD-002"
    [reply] = flow.from_host(inject(4, body=" ", propagate="everyone"))
    assert isinstance(reply, Reply) and reply.to == HOST and reply.request_id == 4
    assert json.loads(reply.data)["error"]["code"] == -32602 and "body" in json.loads(reply.data)["error"]["message"]
    assert flow.from_host(inject(None, body=" ")) == []  # a notification: dropped and counted
    assert flow.recorder.count("invalid") == 2


def test_dedupe_in_a_harn_agent_is_told_to_a_standard_client_before_the_answer():
    flow = acp()
    flow.from_host(inject(1, dedupeKey="deps"))
    flow.from_peer(frame({"jsonrpc": "2.0", "id": 1, "result": {"reminderId": "a"}}))
    flow.from_host(inject(2, dedupeKey="deps"))
    out = decoded(flow.from_peer(frame({"jsonrpc": "2.0", "id": 2, "result": {"reminderId": "b"}})))
    assert [u["droppedReminderIds"] for u in updates(out, "reminder_deduped")] == [["a"]]
    assert out[-1][1]["result"] == {"reminderId": "b", "dedupedCount": 1}  # the answer comes last


# -- an agent without reminder support: the proxy holds --------------------------------------------
def test_the_proxy_holds_renders_expires_and_never_renders_audit_only():
    flow = acp(agent_caps=NONE_AGENT)
    out = decoded(flow.from_host(inject(1, body="Tests are <red> & slow.", ttlTurns=1)))
    assert out == [(HOST, {"jsonrpc": "2.0", "id": 1, "result": {"reminderId": out[0][1]["result"]["reminderId"],
                                                                 "dedupedCount": 0}})]
    flow.from_host(inject(2, body="audit me", mode="audit_only"))
    assert flow.pending_counts()["hold"] == 2
    sent = decoded(flow.from_host(prompt(3)))
    [(to, forwarded)] = [(t, m) for t, m in sent if t == PEER]
    first = forwarded["params"]["prompt"][0]["text"]
    assert first.endswith('>Tests are &lt;red&gt; &amp; slow.</system-reminder>') and "audit me" not in first
    assert [u["body"] for u in updates(sent, "reminder_emitted")] == ["Tests are <red> & slow."]
    done = decoded(flow.from_peer(frame({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}})))
    [expired] = updates(done, "reminder_expired")
    assert expired["phase"] == "ttl_expired" and expired["_meta"] == {"reminder-bridge/synthesized": True}
    assert done[-1] == (HOST, {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}})


def test_a_route_that_does_not_hold_answers_method_not_found():
    flow = acp(agent_caps=NONE_AGENT, rules='[defaults.fallback]\nacp_agent_none = "off"\n')
    [reply] = flow.from_host(inject(1))
    assert isinstance(reply, Reply) and json.loads(reply.data)["error"]["code"] == -32601


# -- emitted, toward the client ------------------------------------------------------------------
HARN_EMITTED = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
    "sessionUpdate": "reminder_emitted", "_meta": {"harn": {"reminder": {
        "reminderId": "p1", "body": "Context is 80% full.", "tags": ["token_pressure"], "roleHint": "developer",
        "renderedRole": "developer", "source": "stdlib_provider", "ttlTurns": None}}}}}}


def test_emitted_reminders_reach_each_client_in_its_own_dialect():
    [(_, standard)] = decoded(acp().from_peer(frame(HARN_EMITTED)))
    update = standard["params"]["update"]
    assert update["reminderId"] == "p1" and update["body"] == "Context is 80% full." and update["source"] == "provider"
    legacy = acp(client_caps=LEGACY_CLIENT)
    data = frame(HARN_EMITTED)
    assert legacy.from_peer(data) == [Forward(HOST, data)]  # legacy to legacy: byte for byte
    assert acp(client_caps={}).from_peer(frame(HARN_EMITTED)) == []  # a client with no support: dropped


def test_lifecycle_updates_a_client_cannot_read_are_dropped_and_others_pass():
    deduped = frame({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
        "sessionUpdate": "reminder_deduped", "reminderId": "b", "dedupeKey": "k", "droppedReminderIds": ["a"]}}})
    assert acp(client_caps=LEGACY_CLIENT).from_peer(deduped) == []
    assert acp().from_peer(deduped) == [Forward(HOST, deduped)]
    chunk = frame({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}}})
    assert acp().from_peer(chunk) == [Forward(HOST, chunk)]


def test_unknown_methods_and_fields_pass_untouched_in_both_directions():
    flow = acp()
    for data, side in ((frame({"jsonrpc": "2.0", "id": 9, "method": "fs/read_text_file", "params": {"path": "/x"}}),
                        "peer"),
                       (frame({"jsonrpc": "2.0", "id": 9, "method": "session/cancel", "params": {"x": 1}}), "host")):
        out = flow.from_peer(data) if side == "peer" else flow.from_host(data)
        assert len(out) == 1 and type(out[0]) is Forward and out[0].data is data


def test_observe_changes_nothing_but_counts_what_would_change():
    flow = acp(rules='[defaults]\nstage = "observe"\n')
    data = inject(1)
    assert flow.from_host(data) == [Forward(PEER, data)]
    assert flow.recorder.count("rewritten") >= 1
    assert not any(isinstance(c, Send) for c in flow.from_peer(frame(HARN_EMITTED)))
