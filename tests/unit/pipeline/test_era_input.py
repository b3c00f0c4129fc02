"""What waits on the host's input across the era bridge (bridge/pipeline/era_input.py, eras.py), in
playbook form: frames in, `Write`s and `Wakeup`s out, the clock the test's own; the timer is the
test calling `wake(now)`."""
from __future__ import annotations

import io
import json

import pytest

from bridge.pipeline.commands import HOST, PEER, Wakeup
from bridge.pipeline.era_input import INPUT_BYTES, INPUT_WAITS
from bridge.pipeline.eras import INPUT_EXPIRED, WAIT_FULL, LegacyServer, ModernServer
from bridge.telemetry import Recorder
from tests.unit.pipeline.test_eras import INFO, LEGACY, MODERN, SAMPLE, envelope, frame, initialized, opened, request, sent

CAPS = {"sampling": {}}
WAIT = 30.0
ANSWER = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def wakeups(commands) -> list[float]:
    return [c.at for c in commands if type(c) is Wakeup]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder(route="r", log=io.StringIO())


def legacy(clock: Clock, recorder: Recorder) -> LegacyServer:
    bridge = LegacyServer(MODERN, lambda: MODERN, recorder, streams=True, input_wait_s=WAIT, clock=clock)
    opened(bridge, request(0, "tools/list", envelope(caps=CAPS)))
    bridge.from_server(frame({"jsonrpc": "2.0", "id": 0, "result": {"tools": []}}))
    return bridge


def suspend(bridge: LegacyServer, host_id, server_id) -> tuple[dict, list]:
    """The host's `tools/call` ``host_id``, and the server's sampling request ``server_id`` that
    answers it `input_required`: (that answer, every command the server's request gave)."""
    bridge.toward_server(request(host_id, "tools/call", envelope(caps=CAPS), name="ask"))
    out = bridge.from_server(frame({"jsonrpc": "2.0", "id": server_id, **SAMPLE}))
    [suspended] = sent(out, HOST)
    assert suspended["id"] == host_id and suspended["result"]["resultType"] == "input_required"
    return suspended, out


# -- a 2026-07-28 host that never retries (LegacyServer: Suspended) --------------------------------

def test_a_suspension_asks_for_the_timer_and_an_unretried_one_is_given_up_at_its_deadline(clock, recorder):
    bridge = legacy(clock, recorder)
    suspended, out = suspend(bridge, 5, 70)
    assert wakeups(out) == [clock.now + WAIT]
    clock.now += 10
    assert wakeups(suspend(bridge, 6, 71)[1]) == []  # due later: the timer held is the earlier one
    assert bridge.wake(clock.now + WAIT - 10 - 1) == [Wakeup(clock.now + WAIT - 10)]  # early: nothing given up
    given_up = bridge.wake(clock.now + WAIT - 10)
    error, cancel = sent(given_up, PEER)
    assert error["id"] == 70 and error["error"]["code"] == INPUT_EXPIRED
    message = error["error"]["message"]
    assert f"the {MODERN} host did not answer sampling/createMessage" in message and "within 30 s" in message
    assert error["error"]["data"] == {"feature": "sampling/createMessage", "waitedS": WAIT, "hostEra": MODERN,
                                      "serverEra": LEGACY}
    assert cancel == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 5, "reason": message}}  # its retry could answer nothing now
    assert sent(given_up, HOST) == [] and wakeups(given_up) == [clock.now + WAIT]  # the next one due
    assert recorder.era_inputs_given_up == {("r", "expired"): 1}
    state = bridge.state
    assert list(state.asked) == [("int", 6)] and len(state.inputs.waiting) == 1  # request 5 is gone, 6 waits on
    # the host retries too late: told so, naming the field; the server sees nothing of it
    late = request(8, "tools/call", envelope(caps=CAPS), name="ask", requestState=suspended["result"]["requestState"],
                   inputResponses={"request": ANSWER})
    out = bridge.toward_server(late)
    [refused] = sent(out, HOST)
    assert sent(out, PEER) == [] and refused["id"] == 8 and refused["error"]["code"] == -32602
    assert "requestState" in refused["error"]["message"] and refused["error"]["data"]["field"] == "requestState"
    bridge.wake(clock.now + WAIT)
    assert not state.inputs.waiting and not state.inputs.bytes and not state.asked
    assert not state.inputs.suspended(("int", 6)) and not state.inputs.rebound


def test_a_retry_in_time_answers_the_server_and_leaves_nothing_to_give_up(clock, recorder):
    bridge = legacy(clock, recorder)
    suspended, _ = suspend(bridge, 5, 70)
    retry = request(6, "tools/call", envelope(caps=CAPS), name="ask", requestState=suspended["result"]["requestState"],
                    inputResponses={"request": ANSWER})
    [answer] = sent(bridge.toward_server(retry), PEER)
    assert answer["id"] == 70 and "result" in answer
    assert bridge.wake(clock.now + WAIT) == [] and recorder.era_inputs_given_up == {}


def test_what_waits_on_the_host_is_bounded_in_count(clock, recorder):
    """A host that leaves every request suspended: past `INPUT_WAITS` the server's request is
    refused at once, naming the bound, and its host request stays the server's to answer."""
    bridge = legacy(clock, recorder)
    for n in range(INPUT_WAITS):
        suspend(bridge, n + 1, 1000 + n)
    bridge.toward_server(request(9999, "tools/call", envelope(caps=CAPS), name="ask"))
    out = bridge.from_server(frame({"jsonrpc": "2.0", "id": 5000, **SAMPLE}))
    [refused] = sent(out, PEER)
    assert sent(out, HOST) == [] and refused["id"] == 5000 and refused["error"]["code"] == WAIT_FULL
    assert f"{INPUT_WAITS} requests of the server" in refused["error"]["message"]
    assert bridge.state.asked[("int", 9999)] == "tools/call"  # the server answers it (with the refusal's outcome)
    assert recorder.era_inputs_given_up == {("r", "full"): 1}


def test_what_waits_on_the_host_is_bounded_in_bytes(clock, recorder):
    """Hosts choose their ids: ids of a megabyte fill the bytes bound long before the count."""
    bridge = legacy(clock, recorder)
    big = "i" * (1 << 20)
    fit = INPUT_BYTES // (len(big) + 10)
    for n in range(fit):
        suspend(bridge, f"{big}{n}", n)
    bridge.toward_server(request(f"{big}x", "tools/call", envelope(caps=CAPS), name="ask"))
    [refused] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 77, **SAMPLE})), PEER)
    assert refused["error"]["code"] == WAIT_FULL and bridge.state.inputs.bytes <= INPUT_BYTES
    assert len(bridge.state.inputs.waiting) == fit < INPUT_WAITS


# -- a 2025-11-25 host that never answers the bridge's request (ModernServer: Retries) ------------

def modern(clock: Clock, recorder: Recorder) -> ModernServer:
    bridge = ModernServer(LEGACY, lambda: LEGACY, recorder, streams=True, input_wait_s=WAIT, clock=clock)
    initialized(bridge)
    bridge.state.envelope["io.modelcontextprotocol/clientCapabilities"] = CAPS
    return bridge


def ask_host(bridge: ModernServer, host_id) -> tuple[dict, list]:
    """The host's `tools/call` ``host_id``, answered `input_required` by the server: (the bridge's
    request to the host, every command the answer gave)."""
    bridge.toward_server(frame({"jsonrpc": "2.0", "id": host_id, "method": "tools/call", "params": {"name": "c"}}))
    out = bridge.from_server(frame({"jsonrpc": "2.0", "id": host_id, "result": {
        "resultType": "input_required", "inputRequests": {"q": SAMPLE}, "requestState": "s"}}))
    [question] = sent(out, HOST)
    assert question["method"] == "sampling/createMessage"
    return question, out


def test_reverse_an_unanswered_question_is_withdrawn_and_the_host_request_told_why(clock, recorder):
    bridge = modern(clock, recorder)
    question, out = ask_host(bridge, 3)
    assert wakeups(out) == [clock.now + WAIT]
    given_up = bridge.wake(clock.now + WAIT)
    cancel, error = sent(given_up, HOST)
    assert cancel["method"] == "notifications/cancelled" and cancel["params"]["requestId"] == question["id"]
    assert error["id"] == 3 and error["error"]["code"] == INPUT_EXPIRED
    assert f"the {LEGACY} host did not answer sampling/createMessage" in error["error"]["message"]
    assert error["error"]["data"]["hostEra"] == LEGACY and sent(given_up, PEER) == [] and wakeups(given_up) == []
    retries = bridge.state.retries
    assert not retries.open and not retries.asking and not retries.bytes and not retries.sent
    assert recorder.era_inputs_given_up == {("r", "expired"): 1}
    # the host's answer after all: nothing waits for it, and the server never sees it
    late = frame({"jsonrpc": "2.0", "id": question["id"], "result": ANSWER})
    assert bridge.toward_server(late) == []


def test_reverse_what_waits_on_the_host_is_bounded(clock, recorder):
    bridge = modern(clock, recorder)
    for n in range(INPUT_WAITS):
        ask_host(bridge, n)
    bridge.toward_server(frame({"jsonrpc": "2.0", "id": "over", "method": "tools/call", "params": {"name": "c"}}))
    [refused] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": "over", "result": {
        "resultType": "input_required", "inputRequests": {"q": SAMPLE}, "requestState": "s"}})), HOST)
    assert refused["id"] == "over" and refused["error"]["code"] == WAIT_FULL
    assert f"{INPUT_WAITS} requests" in refused["error"]["message"] and len(bridge.state.retries.open) == INPUT_WAITS


def test_the_session_s_client_info_is_its_first_request_s():
    """(The fixture's own check: the session the bridge opened is the one the suspensions use.)"""
    bridge = legacy(Clock(), Recorder(route="r", log=io.StringIO()))
    assert json.loads(bridge.state.session) == [CAPS, INFO]


# -- the server's notifications for a suspended request ride the retry's stream ------------------

def progress(token, n: int) -> bytes:
    return frame({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": n, "total": 3}})


def test_progress_while_suspended_waits_for_the_retry_and_comes_under_its_token(clock, recorder):
    """The 2026-07-28 request's stream ended with its input_required answer: the server's progress
    for it is kept (the latest only) and goes out with the retry, under the token the retry asked
    for; what follows the retry too. Other requests' progress passes as it came."""
    bridge = legacy(clock, recorder)
    bridge.toward_server(request(5, "tools/call", envelope(caps=CAPS, progressToken="p5"), name="ask"))
    [suspended] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 70, **SAMPLE})), HOST)
    assert bridge.from_server(progress("p5", 1)) == [] and bridge.from_server(progress("p5", 2)) == []
    other = progress("elsewhere", 1)
    assert sent(bridge.from_server(other), HOST) == [json.loads(other)]
    retry = request(6, "tools/call", envelope(caps=CAPS, progressToken="p6"), name="ask",
                    requestState=suspended["result"]["requestState"], inputResponses={"request": ANSWER})
    out = bridge.toward_server(retry)
    [kept] = sent(out, HOST)
    assert kept["params"] == {"progressToken": "p6", "progress": 2, "total": 3}  # the latest, the retry's token
    assert [m["id"] for m in sent(out, PEER)] == [70]
    [after] = sent(bridge.from_server(progress("p5", 3)), HOST)
    assert after["params"]["progressToken"] == "p6"
    bridge.from_server(frame({"jsonrpc": "2.0", "id": 5, "result": {"content": []}}))
    inputs = bridge.state.inputs
    assert not inputs.tokens and not inputs.token_of and not inputs.retokened and not inputs.held
    assert recorder.era_notifications_dropped == {}


def test_progress_for_a_retry_that_asked_for_none_or_never_came_is_dropped_and_counted(clock, recorder):
    bridge = legacy(clock, recorder)
    bridge.toward_server(request(5, "tools/call", envelope(caps=CAPS, progressToken="p5"), name="ask"))
    [suspended] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 70, **SAMPLE})), HOST)
    bridge.from_server(progress("p5", 1))
    retry = request(6, "tools/call", envelope(caps=CAPS), name="ask", requestState=suspended["result"]["requestState"],
                    inputResponses={"request": ANSWER})
    assert sent(bridge.toward_server(retry), HOST) == []  # the retry asked for no progress
    assert bridge.from_server(progress("p5", 2)) == []
    assert recorder.era_notifications_dropped == {("r", "notifications/progress"): 2}
    # never retried: what was kept goes with the given-up request, counted
    bridge.toward_server(request(7, "tools/call", envelope(caps=CAPS, progressToken="p7"), name="ask"))
    bridge.from_server(frame({"jsonrpc": "2.0", "id": 71, **SAMPLE}))
    bridge.from_server(progress("p7", 1))
    bridge.wake(clock.now + WAIT)
    assert recorder.era_notifications_dropped == {("r", "notifications/progress"): 3}
    assert not bridge.state.inputs.held and not bridge.state.inputs.held_bytes


def test_a_log_line_on_a_suspended_request_s_stream_waits_for_the_retry(clock, recorder):
    """Over HTTP the stream it came on names the request: its log line rides the retry's stream."""
    bridge = legacy(clock, recorder)
    meta = envelope(caps=CAPS, **{"io.modelcontextprotocol/logLevel": "info"})
    bridge.toward_server(request(5, "tools/call", meta, name="ask"))
    [suspended] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 70, **SAMPLE}), 5), HOST)
    line = frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "thinking"}})
    assert bridge.from_server(line, 5) == []
    retry = request(6, "tools/call", meta, name="ask", requestState=suspended["result"]["requestState"],
                    inputResponses={"request": ANSWER})
    assert sent(bridge.toward_server(retry), HOST) == [json.loads(line)]


def test_what_is_kept_for_retries_is_bounded(clock, recorder):
    bridge = legacy(clock, recorder)
    meta = envelope(caps=CAPS, **{"io.modelcontextprotocol/logLevel": "info"})
    bridge.toward_server(request(5, "tools/call", meta, name="ask"))
    bridge.from_server(frame({"jsonrpc": "2.0", "id": 70, **SAMPLE}), 5)
    for n in range(INPUT_WAITS + 3):
        bridge.from_server(frame({"jsonrpc": "2.0", "method": "notifications/message",
                                  "params": {"level": "info", "data": n}}), 5)
    assert bridge.state.inputs.held_count == INPUT_WAITS
    assert recorder.era_notifications_dropped == {("r", "notifications/message"): 3}


def test_the_reverse_bridge_s_own_listen_is_lasting():
    bridge = ModernServer(LEGACY, lambda: LEGACY, streams=True)
    init = frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}}})
    [discover] = bridge.toward_server(init)
    out = bridge.from_server(frame({"jsonrpc": "2.0", "id": json.loads(discover.data)["id"], "result": {
        "capabilities": {"tools": {"listChanged": True}}}}))
    [listen] = [w for w in out if w.to == PEER]
    assert json.loads(listen.data)["method"] == "subscriptions/listen" and listen.lasting
    assert not discover.lasting
