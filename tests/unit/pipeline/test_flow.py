"""The flow every protocol shares (`bridge/pipeline/flow.py`), fed frame by frame.

`over = "coalesce"` on every protocol: held reminders go out when their bucket has a token
again, because the flow asks its transport for a wakeup at that moment (no fixed polling).
Injected clocks for the three sans-I/O flows (real transports: tests/integration/test_stdio_acp.py
and tests/fault/test_serve.py). And the proxy's own calls: their answers go to the flow that
asked, whatever the id looks like to the pre-filter.

A bug inside the proxy while it handles a reminder (spec §12: a reminder is never passed on
untranslated because something failed): the request gets -32603 naming the cause, the notification
is dropped and counted, and a frame that carries no reminder still goes on untouched."""
from __future__ import annotations

import io
import json

from bridge.pipeline.commands import HOST, PEER, Call, Forward, Reply, Wakeup, writes
from tests.flows import make_flow
from bridge.pipeline.flow import OWN_ID_PREFIX
from bridge.policy import BudgetState, Policy
from bridge.prefilter import REMINDER_MARKERS
from bridge.rules import parse_rules_text
from bridge.telemetry import Recorder
from tests.unit.pipeline.test_pipeline_policy import acp, decode, inject, legacy_reminder, mcp

COALESCE = '[defaults.budget]\nrate = 60\nburst = 1\nkey = "server"\nover = "coalesce"\n'


class Clock:
    def __init__(self, now: float = 500.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def flow(protocol: str, clock: Clock, rules: str = COALESCE, **kwargs):
    settings = parse_rules_text(rules).defaults
    return make_flow(protocol, settings, Recorder(route="r", log=io.StringIO()),
                     policy=Policy(settings, route="r", state=BudgetState()), clock=clock, **kwargs)


def frame(obj) -> bytes:
    return json.dumps(obj).encode()


def wire(commands) -> list[tuple[str, dict]]:
    return [(c.to, json.loads(c.data)) for c in writes(commands)]


def test_acp_injects_over_budget_are_held_and_released_when_tokens_return():
    clock = Clock()
    acp = flow("acp", clock, host_dialect="standard", peer_dialect="legacy")

    def inject(n: int) -> bytes:  # notifications: over budget, they are held, not refused
        return frame({"jsonrpc": "2.0", "method": "session/inject_reminder",
                      "params": {"sessionId": "s", "body": f"note {n}", "dedupeKey": f"k{n}", "mode": "finish_step"}})

    [(to, first)] = wire(acp.from_host(inject(1)))
    assert to == PEER and first["method"] == "session/remind"
    assert acp.from_host(inject(2)) == [Wakeup(clock.now + 1.0)]  # held: wake me when a token is back
    assert acp.from_host(inject(3)) == []
    assert acp.pending_counts()["coalesce"] == 2
    clock.now += 1.0
    released = acp.wake(clock.now)
    assert [m["params"]["body"] for _, m in wire(released)] == ["note 2"]
    assert released[-1] == Wakeup(clock.now + 1.0)
    clock.now += 1.0
    assert [m["params"]["body"] for _, m in wire(acp.wake(clock.now))] == ["note 3"]
    assert acp.pending_counts()["coalesce"] == 0


def test_a2a_reminders_for_a_task_are_released_to_the_task_when_tokens_return():
    """Legacy reminders a caller puts on its messages, over budget, wait for a token; then they ride
    on the next message to their task (an inject first, for a standard agent)."""
    clock = Clock()
    a2a = flow("a2a", clock, host_dialect="legacy", peer_dialect="standard")

    def send(text: str, *bodies: str) -> bytes:
        reminders = [{"id": f"r-{b}", "body": b} for b in bodies]
        message = {"messageId": text, "role": "ROLE_USER", "taskId": "t1", "parts": [{"text": text}]}
        if reminders:
            message["metadata"] = {"harn": {"reminders": reminders}}
        return frame({"jsonrpc": "2.0", "id": text, "method": "SendMessage", "params": {"message": message}})

    out = a2a.from_host(send("m1", "one", "two"))
    calls = [c for c in out if isinstance(c, Call)]
    assert [json.loads(c.data)["params"]["reminder"]["body"] for c in calls] == ["one"]  # the burst
    assert Wakeup(clock.now + 1.0) in out  # "two" is held until a token is back
    assert [c for c in a2a.from_host(send("m2")) if isinstance(c, Call)] == []  # no token yet: nothing rides
    clock.now += 1.0
    assert writes(a2a.wake(clock.now)) == []  # released to the task: it waits for the task's next message
    later = [c for c in a2a.from_host(send("m3")) if isinstance(c, Call)]
    assert [json.loads(c.data)["params"]["reminder"]["body"] for c in later] == ["two"]


def test_mcp_reminders_over_budget_are_released_in_order_when_tokens_return():
    clock = Clock()
    mcp = flow("mcp", clock, host_dialect="standard", peer_declared=True)

    def legacy(n: int) -> bytes:
        return frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {
            "level": "info", "logger": "harn.reminder", "data": "x",
            "_meta": {"harn": {"reminder": {"id": f"r{n}", "body": f"b{n}"}}}}})

    assert wire(mcp.from_peer(legacy(1)))[0][1]["method"] == "notifications/reminder"
    assert mcp.from_peer(legacy(2)) == [Wakeup(clock.now + 1.0)]
    clock.now += 1.0
    assert [m["params"]["reminder"]["id"] for _, m in wire(mcp.wake(clock.now))] == ["r2"]


def test_the_answer_to_the_proxys_own_call_goes_to_the_flow_that_asked():
    """A standard inject toward a legacy agent: the proxy checks the task with its own GetTask. The
    answer is routed by the call's id, which carries no pre-filter marker: the flow knows its calls."""
    assert not any(marker in OWN_ID_PREFIX.encode() for marker in REMINDER_MARKERS)
    a2a = flow("a2a", Clock(), rules="", host_dialect="standard", peer_dialect="legacy")
    inject = {"jsonrpc": "2.0", "id": 7, "method": "InjectTaskReminder",
              "params": {"taskId": "t9", "reminder": {"body": "Tests are red."}}}
    [call] = a2a.from_host(frame(inject))
    assert isinstance(call, Call) and call.to == PEER and call.id.startswith(OWN_ID_PREFIX)
    assert json.loads(call.data) == {"jsonrpc": "2.0", "id": call.id, "method": "GetTask", "params": {"id": "t9"}}
    answer = frame({"jsonrpc": "2.0", "id": call.id, "result": {"id": "t9", "status": {"state": "TASK_STATE_WORKING"}}})
    assert not a2a.passes(answer, PEER)  # looked at, though no reminder marker is in it
    [reply] = a2a.from_peer(answer)
    assert isinstance(reply, Reply) and reply.to == HOST and reply.request_id == 7
    assert json.loads(reply.data)["result"]["dedupedCount"] == 0
    late = frame({"jsonrpc": "2.0", "id": call.id, "result": {}})
    assert not a2a.passes(late, PEER)  # no call waits now, and still looked at: the id is the proxy's
    assert a2a.from_peer(late) == []  # answered once; a repeat (or an answer after the flow stopped
    # waiting) is dropped: on the host's side it could only be taken for the answer to something else
    other = frame({"jsonrpc": "2.0", "id": "rb-someone-else", "result": {}})
    assert a2a.passes(other, PEER) or [c.data for c in a2a.from_peer(other)] == [other]  # not the proxy's id


# -- a bug inside the proxy (spec §12) -------------------------------------------------------------
class Broken(Policy):
    """A policy with a bug: every reminder it is asked about raises."""

    def screen(self, *args, **kwargs):
        raise KeyError("a bug")


def broken(f, rules: str = "") -> None:
    f.policy = Broken(parse_rules_text(rules).defaults, route="fs", state=BudgetState())


def test_a_reminder_notification_is_dropped_and_counted_never_forwarded_untranslated():
    f = mcp()
    broken(f)
    sent = frame(legacy_reminder(1))
    assert f.from_peer(sent) == []
    assert f.recorder.count("dropped") == 1
    [line] = [json.loads(line) for line in f.log.getvalue().splitlines() if '"pipeline_error"' in line]
    assert line["error"] == "KeyError" and line["method"] == "notifications/message"


def test_a_reminder_request_gets_an_internal_error_naming_the_cause():
    f = acp()
    broken(f)
    [(to, answer)] = decode(f.from_host(inject(7)))
    assert to == HOST
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32603, "message": "reminder could not be handled: internal error", "data": {"reason": "KeyError"}}}
    assert f.recorder.count("refused") == 1


def test_frames_without_a_reminder_and_the_observe_stage_still_pass_untouched():
    f = mcp()
    broken(f)
    log = frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})
    assert f.from_peer(log) == [Forward(HOST, log)]
    watching = acp('[defaults]\nstage = "observe"\n')
    broken(watching, '[defaults]\nstage = "observe"\n')
    sent = inject(8)
    assert watching.from_host(sent) == [Forward(PEER, sent)]
