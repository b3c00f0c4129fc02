"""The add-on dispatcher (`AddOns`): in which order add-ons are asked and how their answers
combine, and the typed flow protocol they see, which the MCP flow satisfies."""
from __future__ import annotations

from bridge.model import Reminder
from bridge.pipeline.addons import AddOn, AddOns, FlowApi, McpFlowApi
from bridge.pipeline.commands import HOST, Forward, Receipt
from tests.flows import make_flow
from bridge.pipeline.mcp import McpFlow

REMINDER = Reminder(id="r1", body="b")


class Noting(AddOn):
    """An add-on that notes what it is asked and answers what it is given."""

    def __init__(self, label: str, answer=None, keeps: bool = False, at: float | None = None):
        self.label, self.answer, self.keeps, self.at = label, answer, keeps, at
        self.asked: list[str] = []

    def host_markers(self):
        return (self.label.encode(),)

    def on_host(self, msg):
        self.asked.append("host")
        return self.answer

    def on_reminder(self, reminder, method, source, target):
        self.asked.append("reminder")
        return [Forward(HOST, self.label.encode())], self.keeps

    def next_wake(self):
        return self.at

    def on_written(self, receipts):
        self.asked.append("written")
        return [Forward(HOST, self.label.encode())]


def test_the_first_add_on_that_answers_a_host_request_is_the_last_asked():
    first, second, third = Noting("a"), Noting("b", answer=[Forward(HOST, b"x")]), Noting("c")
    assert AddOns((first, second, third)).on_host({"id": 1, "method": "resources/read"}) == [Forward(HOST, b"x")]
    assert (first.asked, second.asked, third.asked) == (["host"], ["host"], [])
    assert AddOns((Noting("a"),)).on_host({"id": 1}) is None


def test_a_reminder_gathers_commands_up_to_the_add_on_that_keeps_it():
    keeper, after = Noting("b", keeps=True), Noting("c")
    out, kept = AddOns((Noting("a"), keeper, after)).on_reminder(REMINDER, None, "legacy", "none")
    assert (out, kept, after.asked) == ([Forward(HOST, b"a"), Forward(HOST, b"b")], True, [])
    assert AddOns((Noting("a"),)).on_reminder(REMINDER, None, "legacy", "standard") == ([Forward(HOST, b"a")], False)


def test_markers_timers_and_receipts_combine_over_every_add_on():
    addons = AddOns((Noting("a", at=5.0), Noting("b"), Noting("c", at=2.0)))
    assert addons.host_markers() == (b"a", b"b", b"c")
    assert addons.next_wake() == 2.0 and AddOns((Noting("a"),)).next_wake() is None
    assert addons.on_written([]) == [] and all(a.asked == [] for a in addons)  # nothing written: nobody asked
    assert addons.on_written([Receipt("a", 1)]) == [Forward(HOST, b"a"), Forward(HOST, b"b"), Forward(HOST, b"c")]


def test_a_flow_holds_its_add_ons_as_the_dispatcher_and_attaches_each():
    one, two = Noting("a"), Noting("b")
    flow = McpFlow(addons=(one, two))
    assert isinstance(flow.addons, AddOns) and tuple(flow.addons) == (one, two)
    assert one.flow is flow and two.flow is flow
    assert make_flow("acp").addons == ()


def test_the_mcp_flow_offers_everything_an_mcp_add_on_may_use():
    flow = make_flow("mcp")
    members = {name for proto in (FlowApi, McpFlowApi) for name in
               [*proto.__annotations__, *(n for n in vars(proto) if not n.startswith("_"))]}
    assert {"scope", "recorder", "clock", "call", "reply", "record", "modern", "host", "target", "watch",
            "refresh_markers", "deliver"} <= members
    assert [name for name in sorted(members) if not hasattr(flow, name)] == []
    assert flow.modern is False  # the era is the flow's: none settled yet
