"""`FlowDriver` performs a flow's `Perform`s: at once on in-process state (no task, no loop turn),
as a task on state that answers asynchronously, and what waited behind one comes out after what
followed it, in order.  The asynchronous state here is a real `MemoryState` reached through its
async entry, as Redis would be (its failures are FailoverState's, tested with a real Redis)."""
from __future__ import annotations

import asyncio
import io
import json

from bridge.pipeline.commands import HOST, PEER, Forward, Perform, Send
from bridge.assembly import make_flow
from bridge.policy import BudgetState, Policy
from bridge.rules import parse_rules_text
from bridge.state import MemoryState
from bridge.telemetry import Recorder
from bridge.transports.driver import FlowDriver

RULES = "[defaults.budget]\nrate = 60\nburst = 10\n"


class Remote(MemoryState):
    """Memory, performed the way shared state is: asynchronously, by the driver's task."""

    sync = False


def flow(shared=None):
    settings = parse_rules_text(RULES).defaults
    return make_flow("mcp", settings, Recorder(route="r", log=io.StringIO()),
                     policy=Policy(settings, route="r", state=BudgetState(), shared=shared),
                     host_dialect="standard", peer_dialect="legacy")


def reminder(n: int) -> bytes:
    body = f"reminder {n}"
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "info", "logger": "harn.reminder", "data": body,
        "_meta": {"harn": {"reminder": {"id": f"r{n}", "body": body}}}}}).encode()


def other(n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"n": n}}).encode()


async def test_in_process_state_is_performed_in_the_same_call():
    f = flow()
    written: list = []
    driver = FlowDriver(f, written.append, written.append)
    [send] = driver.resolve(f.from_peer(reminder(1)))
    assert type(send) is Send and not f.busy and written == []  # given back at once, nothing left running


async def test_shared_state_is_performed_by_a_task_and_later_frames_follow_in_order():
    f = flow(shared=Remote())
    written: list = []
    all_written = asyncio.Event()

    def write(command) -> None:
        written.append(command)
        if len(written) == 4:
            all_written.set()

    driver = FlowDriver(f, write, write)
    driver.perform(f.from_peer(reminder(1)))
    assert f.busy and written == []
    frames = [other(2), reminder(3), other(4)]
    for frame in frames:
        driver.perform(f.from_peer(frame))
    await asyncio.wait_for(all_written.wait(), 5)
    assert not f.busy
    assert [json.loads(c.data).get("method") for c in written] == [
        "notifications/reminder", "notifications/progress", "notifications/reminder", "notifications/progress"]
    assert written[1] == Forward(HOST, frames[0]) and written[3] == Forward(HOST, frames[2])


async def test_a_request_fed_while_its_flow_waits_gets_its_own_answer():
    f = flow(shared=Remote())
    written: list = []
    driver = FlowDriver(f, written.append, written.append)
    driver.perform(f.from_peer(reminder(1)))
    request = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).encode()
    answer = await driver.fed(f, lambda: f.from_host(request))
    assert answer == [Forward(PEER, request)]  # fed once the Perform before it was done
    assert [json.loads(c.data)["method"] for c in written] == ["notifications/reminder"]
    assert all(type(c) is not Perform for c in written)
