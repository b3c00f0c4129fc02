"""A2A pipeline rules that need no socket (spec §5), fed frame by frame into the sans-I/O flow:
the agent card, InjectTaskReminder toward each kind of agent (the proxy's own GetTask, queue and
attach, dedupe, a prepended text part), legacy metadata toward a standard agent (inject first,
or after the answer names the task), stream events in both directions, and what passes."""
from __future__ import annotations

import io
import json

from bridge.pipeline.commands import HOST, PEER, Call, Forward, Reply, Send, writes
from tests.flows import make_flow
from bridge.rules import parse_rules_text
from bridge.telemetry import Recorder

WALL = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def frame(obj) -> bytes:
    return json.dumps(obj).encode()


def a2a(host: str = "standard", peer: str = "legacy", rules: str = "", **kwargs):
    settings = parse_rules_text(rules).defaults if rules else None
    return make_flow("a2a", settings, Recorder(route="r", log=io.StringIO()), host_dialect=host, peer_dialect=peer,
                     wall=lambda: WALL, **kwargs)


def rpc(msg_id, method: str, params: dict) -> bytes:
    return frame({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})


def message(text: str, task: str | None = "t1", metadata: dict | None = None) -> dict:
    msg: dict = {"messageId": text, "role": "ROLE_USER", "parts": [{"text": text}]}
    if task:
        msg["taskId"] = task
    if metadata:
        msg["metadata"] = metadata
    return msg


def inject(msg_id, body: str = "Tests are red.", task: str = "t1", **fields) -> bytes:
    return rpc(msg_id, "InjectTaskReminder", {"taskId": task, "reminder": {"body": body, **fields}})


def checked(flow, command: Call, known: bool = True, state: str = "TASK_STATE_INPUT_REQUIRED") -> list:
    """Answer the proxy's own GetTask."""
    answer = {"jsonrpc": "2.0", "id": command.id}
    answer.update({"result": {"id": "t1", "status": {"state": state}}} if known
                  else {"error": {"code": -32001, "message": "Task not found"}})
    return flow.from_peer(frame(answer))


# -- the agent card --------------------------------------------------------------------------------
def test_the_card_tells_the_caller_its_dialect_and_names_the_proxy():
    card = {"name": "planner", "capabilities": {"streaming": True, "_meta": {"harn": {"reminders": {
        "inject": True, "emit": True, "propagate": ["all", "session"], "roleHints": ["system", "user_block"]}}}},
            "supportedInterfaces": [{"url": "http://10.0.0.7:9999/a2a", "protocolBinding": "JSONRPC"}]}
    flow = a2a(peer="auto")
    out = flow.rewrite_card(card, lambda url: url.replace("http://10.0.0.7:9999", "http://127.0.0.1:9000"))
    assert flow.peer.dialect == "legacy"
    assert out["capabilities"]["reminders"] == {"inject": True, "emit": True,
                                                "propagate": ["REMINDER_PROPAGATION_SESSION"],
                                                "roleHints": ["REMINDER_ROLE_HINT_SYSTEM", "REMINDER_ROLE_HINT_DEVELOPER"]}
    assert "_meta" not in out["capabilities"] and out["supportedInterfaces"][0]["url"] == "http://127.0.0.1:9000/a2a"
    assert a2a(peer="auto").rewrite_card({"name": "x", "capabilities": {}}) is None  # nothing to change


# -- InjectTaskReminder ----------------------------------------------------------------------------
def test_toward_a_standard_agent_an_inject_passes_untouched_unless_the_trust_limits_cleaned_it():
    flow = a2a(peer="standard", rules='[defaults.trust]\nrole_hint_ceiling = "developer"\n')
    data = inject(1)
    assert flow.from_host(data) == [Forward(PEER, data)]
    [out] = a2a(peer="standard").from_host(inject(2, body="a\x07b"))
    assert isinstance(out, Send) and json.loads(out.data)["params"]["reminder"]["body"] == "ab"


def test_toward_a_legacy_agent_the_task_is_checked_then_the_reminder_rides_on_the_next_message():
    flow = a2a()
    [call] = flow.from_host(inject(1, dedupeKey="ci", propagate="REMINDER_PROPAGATION_SESSION"))
    assert isinstance(call, Call) and json.loads(call.data)["method"] == "GetTask"
    [reply] = checked(flow, call)
    assert isinstance(reply, Reply) and reply.request_id == 1
    first = json.loads(reply.data)["result"]
    assert first["dedupedCount"] == 0 and first["acceptedAt"] == "2026-01-01T00:00:00.000Z"  # the flow's clock
    [call] = flow.from_host(inject(2, body="Tests are green again.", dedupeKey="ci"))
    assert json.loads(checked(flow, call)[0].data)["result"]["dedupedCount"] == 1  # the newer one replaced it
    assert flow.pending_counts()["task"] == 1
    [(to, sent)] = [(c.to, json.loads(c.data)) for c in writes(flow.from_host(rpc(3, "SendMessage",
                                                                                   {"message": message("next")})))]
    carried = sent["params"]["metadata"]["harn"]["reminder"]
    assert to == PEER and carried["body"] == "Tests are green again." and carried["dedupeKey"] == "ci"
    assert flow.pending_counts()["task"] == 0


def test_an_unknown_task_is_refused_with_task_not_found():
    flow = a2a()
    [call] = flow.from_host(inject(1, task="nope"))
    [reply] = checked(flow, call, known=False)
    error = json.loads(reply.data)["error"]
    assert error["code"] == -32001 and error["message"] == "Task not found: nope"


def test_a_task_in_a_terminal_state_refuses_the_inject_in_either_protocol_version_and_queues_nothing():
    for state in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED",
                  "completed", "canceled"):  # v1.0 and v0.3 names
        flow = a2a()
        [call] = flow.from_host(inject(1))
        [reply] = checked(flow, call, state=state)
        error = json.loads(reply.data)["error"]
        assert error["code"] == -32004 and f"Task t1 is in terminal state: {state}" in error["message"]
        assert flow.pending_counts()["task"] == 0
    for state in ("TASK_STATE_WORKING", "TASK_STATE_SUBMITTED", "TASK_STATE_AUTH_REQUIRED", "working"):
        flow = a2a()
        [call] = flow.from_host(inject(1))
        assert "result" in json.loads(checked(flow, call, state=state)[0].data)
        assert flow.pending_counts()["task"] == 1


def test_toward_an_agent_without_support_the_reminder_is_a_prepended_text_part_and_audit_only_never_shows():
    flow = a2a(peer="none")
    for n, fields in enumerate(({"id": "r-42"}, {"mode": "audit_only"})):
        [call] = flow.from_host(inject(n, body=f"note {n}", **fields))
        checked(flow, call)
    [out] = writes(flow.from_host(rpc(9, "SendMessage", {"message": message("next")})))
    parts = json.loads(out.data)["params"]["message"]["parts"]
    assert parts == [{"text": '<system-reminder id="r-42" source="host">note 0</system-reminder>'}, {"text": "next"}]


def test_invalid_injects_are_answered_by_the_proxy():
    [reply] = a2a().from_host(rpc(1, "InjectTaskReminder", {"reminder": {"body": "x"}}))
    assert isinstance(reply, Reply) and "taskId" in json.loads(reply.data)["error"]["message"]


# -- legacy metadata toward a standard agent -------------------------------------------------------
HARN = {"harn": {"reminder": {"id": "r1", "body": "Upstream PR landed; rebase first.", "dedupeKey": "pr"}}}


def test_metadata_on_a_message_to_a_known_task_is_injected_first_and_the_message_goes_on_bare():
    flow = a2a(host="legacy", peer="standard")
    out = flow.from_host(rpc(1, "SendMessage", {"message": message("go", metadata=HARN)}))
    [call, forwarded] = out
    assert isinstance(call, Call) and json.loads(call.data)["params"] == {
        "taskId": "t1", "reminder": {"id": "r1", "body": "Upstream PR landed; rebase first.", "dedupeKey": "pr"}}
    assert forwarded.to == PEER and "metadata" not in json.loads(forwarded.data)["params"]["message"]
    assert flow.from_peer(frame({"jsonrpc": "2.0", "id": call.id, "result": {"reminderId": "r1"}})) == []  # ours


def test_metadata_on_a_first_message_is_injected_once_the_answer_names_the_task():
    flow = a2a(host="legacy", peer="standard")
    [forwarded] = flow.from_host(rpc(1, "SendMessage", {"message": message("go", task=None, metadata=HARN)}))
    assert isinstance(forwarded, Send) and forwarded.to == PEER
    answer = frame({"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": "t7", "contextId": "c"}}})
    call, relayed = flow.from_peer(answer)
    assert isinstance(call, Call) and json.loads(call.data)["params"]["taskId"] == "t7"
    assert relayed == Forward(HOST, answer)  # the caller's answer goes on as it came


def test_invalid_metadata_refuses_the_message_with_the_field():
    bad = {"harn": {"reminder": {"body": 7}}}
    [reply] = a2a(host="legacy", peer="standard").from_host(rpc(1, "SendMessage", {"message": message("x", metadata=bad)}))
    assert "params.message.metadata.harn.reminder.body" in json.loads(reply.data)["error"]["message"]


# -- stream events, toward the caller -------------------------------------------------------------
def event(kind: str = "statusUpdate", metadata: dict | None = None, stream="s1") -> dict:
    body: dict = {"taskId": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}
    if metadata:
        body["metadata"] = metadata
    return {"jsonrpc": "2.0", "id": stream, "result": {kind: body}}


def test_a_decoration_becomes_a_reminder_update_frame_before_its_event_for_a_standard_caller():
    flow = a2a(host="standard", peer="legacy")
    [update, ev] = [(c.to, json.loads(c.data)) for c in writes(flow.from_peer(frame(event(metadata=HARN))))]
    assert update[1]["id"] == "s1" and update[1]["result"]["reminderUpdate"]["reminder"]["body"].startswith("Upstream")
    assert update[1]["result"]["reminderUpdate"]["taskId"] == "t1"
    assert "metadata" not in ev[1]["result"]["statusUpdate"]


def test_a_reminder_update_frame_rides_on_the_next_event_for_a_legacy_caller_and_is_dropped_for_none():
    update = {"jsonrpc": "2.0", "id": "s1", "result": {"reminderUpdate": {"taskId": "t1", "contextId": "c1",
                                                                          "reminder": {"id": "u1", "body": "Heads up."}}}}
    flow = a2a(host="legacy", peer="standard")
    assert flow.from_peer(frame(update)) == []
    [out] = writes(flow.from_peer(frame(event())))
    assert json.loads(out.data)["result"]["statusUpdate"]["metadata"]["harn"]["reminder"]["body"] == "Heads up."
    none = a2a(host="none", peer="standard")
    assert none.from_peer(frame(update)) == [] and none.recorder.count("dropped") == 1


def test_the_reminders_waiting_for_a_legacy_callers_next_event_are_bounded_the_oldest_dropped_and_counted():
    flow = a2a(host="legacy", peer="standard", rules="[defaults.trust]\nmax_pending_per_session = 2\n")
    for n in range(3):
        update = {"jsonrpc": "2.0", "id": "s1", "result": {"reminderUpdate": {
            "taskId": "t1", "contextId": "c1", "reminder": {"id": f"u{n}", "body": f"Heads up {n}."}}}}
        assert flow.from_peer(frame(update)) == []
    assert flow.pending_counts()["stream"] == 2 and flow.recorder.count("dropped") == 1
    [out] = writes(flow.from_peer(frame(event())))
    assert "Heads up 0." not in out.data.decode() and "Heads up 2." in out.data.decode()
    assert flow.pending_counts()["stream"] == 0


def test_a_broken_decoration_leaves_its_event_as_it_came():
    data = frame(event(metadata={"harn": {"reminder": {"body": ""}}}))
    flow = a2a(host="standard", peer="legacy")
    assert flow.from_peer(data) == [Forward(HOST, data)] and flow.recorder.count("invalid") == 1


def test_other_methods_and_answers_pass_untouched():
    flow = a2a()
    for data, side in ((rpc(1, "GetTask", {"id": "t1"}), HOST), (rpc(2, "CancelTask", {"id": "t1"}), HOST),
                       (frame({"jsonrpc": "2.0", "id": 1, "result": {"id": "t1"}}), PEER)):
        out = flow.from_host(data) if side == HOST else flow.from_peer(data)
        assert len(out) == 1 and type(out[0]) is Forward and out[0].data is data
