"""A flow's decisions: counted by the recorder, and trace context carried into what it rewrote."""
from bridge.assembly import make_flow
from bridge.rules import RouteSettings
from bridge.telemetry import Recorder


def _flow():
    return make_flow("mcp", RouteSettings(), Recorder(route="r"), host_dialect="standard", peer_dialect="legacy")


def test_a_decision_is_counted_under_the_flow_protocol_and_stage():
    flow = _flow()
    flow.record("rewritten", "notifications/message", source="legacy", target="standard")
    assert flow.recorder.counts[("mcp", "r", "rewritten")] == 1


def test_the_callers_trace_context_rides_a_rewritten_message_without_tracing():
    flow = _flow()
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    flow._inbound = {"jsonrpc": "2.0", "method": "x", "params": {"_meta": {"traceparent": parent}}}
    stamped = flow.stamp({"jsonrpc": "2.0", "method": "notifications/reminder", "params": {"reminder": {}}})
    assert stamped["params"]["_meta"] == {"traceparent": parent}


def test_nothing_is_added_when_there_is_no_context_to_carry():
    flow = _flow()
    flow._inbound = {"jsonrpc": "2.0", "method": "x", "params": {}}
    message = {"jsonrpc": "2.0", "method": "notifications/reminder", "params": {"reminder": {}}}
    assert flow.stamp(message) == {"jsonrpc": "2.0", "method": "notifications/reminder", "params": {"reminder": {}}}
