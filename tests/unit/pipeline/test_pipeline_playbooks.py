"""Flows as plain state machines, in playbook form: frames in, commands out, per protocol.

Each playbook feeds the plain flow (no driver, no event loop) and reads every command it gives:
shared-state work comes out as `Perform(op, ticket)`; the test plays the driver and hands a
result back (`performed`), and sees what follows, including what waited meanwhile (`drain`) and
a `StateUnavailable` result (on_unavailable = closed: -32000 with scope "state").  FailoverState's
two modes are played against a Redis that refuses connections (a real closed port).
"""
from __future__ import annotations

import io
import json
import socket

import pytest

from bridge.pipeline import waiting
from bridge.pipeline.commands import HOST, PEER, Call, Forward, Pause, Perform, Reply, Send
from bridge.assembly import make_flow
from bridge.policy import BudgetState, Policy
from bridge.rules import parse_rules_text
from bridge.state import FailoverState, MemoryState, RedisState, StateUnavailable
from bridge.state.ops import Charge, QueueCount, QueuePush, QueueTake
from bridge.telemetry import Recorder

BUDGET = "[defaults.budget]\nrate = 60\nburst = 1\n"
DOWN = StateUnavailable(cause="redis unavailable: connection")


def frame(obj) -> bytes:
    return json.dumps(obj).encode()


def flow(protocol: str, rules: str = BUDGET, **kwargs):
    settings = parse_rules_text(rules).defaults
    return make_flow(protocol, settings, Recorder(route="r", log=io.StringIO()),
                     policy=Policy(settings, route="r", state=BudgetState()), **kwargs)


def one_perform(commands) -> Perform:
    [perform] = commands
    assert type(perform) is Perform
    return perform


def legacy_log_reminder(n: int) -> bytes:
    reminder = {"id": f"r{n}", "body": f"reminder {n}"}
    return frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "info", "logger": "harn.reminder", "data": reminder["body"], "_meta": {"harn": {"reminder": reminder}}}})


# -- MCP ------------------------------------------------------------------------------------------

def test_mcp_a_budgeted_reminder_is_a_charge_then_the_rewrite_and_later_frames_wait_in_order():
    f = flow("mcp", host_dialect="standard", peer_dialect="legacy")
    perform = one_perform(f.from_peer(legacy_log_reminder(1)))
    assert type(perform.op) is Charge and perform.state is f.policy.budget_state and perform.flow is f
    assert [p.scope for p in perform.op.real] == ["server:r"]
    other = frame({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
    assert f.busy and not f.passes(other, PEER)
    assert f.from_peer(other) == []  # waits behind the charge
    [send] = f.performed(perform.ticket, perform.state.perform_now(perform.op))
    assert type(send) is Send and send.to == HOST and json.loads(send.data)["method"] == "notifications/reminder"
    assert not f.busy
    [forward] = f.drain()
    assert forward == Forward(HOST, other) and forward.data is other  # the very bytes, after the reminder


def test_mcp_a_reminder_notification_is_dropped_when_shared_state_is_away_and_closed():
    f = flow("mcp", host_dialect="standard", peer_dialect="legacy")
    perform = one_perform(f.from_peer(legacy_log_reminder(1)))
    assert f.performed(perform.ticket, DOWN) == []  # never passed on untranslated
    assert f.recorder.count("dropped") == 1


def test_mcp_an_open_tool_call_leaves_unrelated_server_frames_unparsed():
    """The awaited ids are keys: while `tools/call` 7 is open, only its response is looked at."""
    f = flow("mcp", rules="", host_dialect="none", peer_dialect="legacy")
    call = frame({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "t"}})
    assert f.from_host(call) == [Forward(PEER, call)]
    assert 7 in [key[1] for key in f.awaiting]
    unrelated = frame({"jsonrpc": "2.0", "id": 8, "result": {"content": []}})
    progress = frame({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 7}})
    assert f.passes(unrelated, PEER) and f.passes(progress, PEER)
    assert not f.passes(frame({"jsonrpc": "2.0", "id": 7, "result": {"content": []}}), PEER)
    assert not f.passes(b'{"result":{"content":[]},"jsonrpc":"2.0","id":7}', PEER)  # the id last, as TS SDKs write


# -- ACP ------------------------------------------------------------------------------------------

def inject(msg_id: int) -> bytes:
    return frame({"jsonrpc": "2.0", "id": msg_id, "method": "session/inject_reminder",
                  "params": {"sessionId": "s1", "body": "Deps changed."}})


def acp_flow(**kwargs):
    f = flow("acp", **kwargs)
    f.host.learn("standard")
    f.peer.learn("legacy")
    return f


def test_acp_an_inject_is_charged_then_translated():
    f = acp_flow()
    perform = one_perform(f.from_host(inject(3)))
    assert [p.scope for p in perform.op.real] == ["server:r"]
    [send] = f.performed(perform.ticket, (None, None))
    assert send.to == PEER and json.loads(send.data)["method"] == "session/remind"


def test_acp_an_inject_gets_the_state_error_when_shared_state_is_away_and_closed():
    f = acp_flow()
    perform = one_perform(f.from_host(inject(3)))
    [reply] = f.performed(perform.ticket, DOWN)
    assert type(reply) is Reply and reply.to == HOST and reply.request_id == 3 and reply.retry_after_ms == 1000
    assert json.loads(reply.data)["error"] == {"code": -32000, "message": "reminder state unavailable",
                                               "data": {"scope": "state"}}


def test_a_backlog_past_its_bound_pauses_the_transport_and_eases_once_handled(monkeypatch):
    monkeypatch.setattr(waiting, "BACKLOG_HIGH", 4)
    f = acp_flow()
    perform = one_perform(f.from_host(inject(3)))
    progress = [frame({"jsonrpc": "2.0", "method": "session/update", "params": {"n": n}}) for n in range(6)]
    given = [f.from_peer(p) for p in progress]
    assert given == [[], [], [], [], [Pause(True)], []]  # told once
    f.performed(perform.ticket, (None, None))
    out = f.drain()
    assert out[0] == Pause(False) and [c.data for c in out[1:]] == progress  # in order, untouched


# -- A2A ------------------------------------------------------------------------------------------

def rpc(msg_id, method: str, params: dict) -> bytes:
    return frame({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})


def test_a2a_an_inject_toward_a_legacy_agent_counts_checks_and_queues_through_state():
    f = flow("a2a", rules="", host_dialect="standard", peer_dialect="legacy")
    queues = f.queued.state
    count = one_perform(f.from_host(rpc(7, "InjectTaskReminder", {"taskId": "t9", "reminder": {"body": "x"}})))
    assert type(count.op) is QueueCount and count.state is queues
    [call] = f.performed(count.ticket, 0)
    assert type(call) is Call and json.loads(call.data)["method"] == "GetTask"
    answer = frame({"jsonrpc": "2.0", "id": call.id, "result": {"id": "t9", "status": {"state": "TASK_STATE_WORKING"}}})
    push = one_perform(f.from_peer(answer))
    assert type(push.op) is QueuePush and push.op.key.endswith(":queue")
    [reply] = f.performed(push.ticket, queues.perform_now(push.op))
    assert reply.to == HOST and json.loads(reply.data)["result"]["dedupedCount"] == 0
    # the caller's next message for t9 takes the queue: one step on the same state, then the metadata
    send = rpc(8, "SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER", "taskId": "t9",
                                              "parts": [{"text": "go on"}]}})
    take = one_perform(f.from_host(send))
    assert type(take.op) is QueueTake and take.op.key == push.op.key
    [out] = f.performed(take.ticket, queues.perform_now(take.op))
    assert json.loads(out.data)["params"]["metadata"]["harn"]["reminder"]["body"] == "x"


def test_a2a_an_inject_whose_queue_is_away_gets_the_state_error():
    f = flow("a2a", rules="", host_dialect="standard", peer_dialect="legacy")
    count = one_perform(f.from_host(rpc(7, "InjectTaskReminder", {"taskId": "t9", "reminder": {"body": "x"}})))
    [reply] = f.performed(count.ticket, DOWN)
    assert json.loads(reply.data)["error"]["data"] == {"scope": "state"} and reply.retry_after_ms == 1000


def test_a2a_a_message_goes_on_when_its_queue_is_away():
    f = flow("a2a", rules="", host_dialect="standard", peer_dialect="legacy")
    send = rpc(8, "SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER", "taskId": "t9",
                                              "parts": [{"text": "go on"}]}})
    take = one_perform(f.from_host(send))
    assert f.performed(take.ticket, DOWN) == [Forward(PEER, send)]


# -- the one state entry: FailoverState judges, the flow only sees a result -------------------------

def refused_url() -> str:
    with socket.socket() as s:  # a port nothing listens on: every connection is refused
        s.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{s.getsockname()[1]}/0"


@pytest.mark.parametrize("mode", ["open", "closed"])
async def test_failover_performs_an_op_or_says_why_not(mode):
    f = flow("mcp", host_dialect="standard", peer_dialect="legacy")
    state = FailoverState(RedisState(refused_url(), timeout_s=0.2), MemoryState(), mode)
    try:
        op = one_perform(f.from_peer(legacy_log_reminder(1))).op
        result = await state.perform(op)
        if mode == "closed":
            assert isinstance(result, StateUnavailable) and result.data() == {"scope": "state"}
        else:
            assert result == (None, None)  # charged on this replica's memory
        assert state.stats()["degraded"] and state.cause == "connection"
    finally:
        await state.close()


def test_acp_an_inject_that_waited_for_the_agent_is_charged_after_the_initialize_answer_goes_on():
    """The early inject's charge comes after the initialize answer, which goes on at once, untouched."""
    f = flow("acp")
    f.host.learn("standard")
    init = frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"clientCapabilities": {}}})
    f.from_host(init)
    assert f.from_host(inject(3)) == []  # waits for the agent's answer (its dialect decides)
    answer = frame({"jsonrpc": "2.0", "id": 0, "result": {"agentCapabilities": {"reminders": {"inject": True}}}})
    forward, perform = f.from_peer(answer)
    assert forward == Forward(HOST, answer) and forward.data is answer and type(perform) is Perform
    [send] = f.performed(perform.ticket, (None, None))
    assert send == Send(PEER, inject(3))  # standard to standard: as it came
