"""OpenTelemetry (spec §9) with an in-memory span exporter: one span per reminder with the §9
attributes, parented to the caller's `traceparent`, and the rewritten message carrying the
child context in `_meta`; propagation-only, sampling, HTTP headers, body capture, logs."""
from __future__ import annotations

import io
import json

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.flows import make_flow
from bridge.policy import BudgetState, Policy
from bridge.rules import parse_rules_text
from bridge.telemetry import Recorder, Tracing

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"
LEGACY_CAPS = {"_meta": {"harn": {"reminders": {"emit": True}}}}
HARN_AGENT = {"_meta": {"harn": {"sessionUpdateExtensions": ["reminder_emitted"]}}}


def frame(obj) -> bytes:
    return json.dumps(obj).encode()


def setup(protocol: str, rules: str = "", **tracing):
    exporter = InMemorySpanExporter()
    log = io.StringIO()
    recorder = Recorder(route="fs", log=log, tracing=Tracing(span_exporter=exporter, **tracing))
    settings = parse_rules_text(rules).defaults
    flow = make_flow(protocol, settings, recorder, policy=Policy(settings, route="fs", state=BudgetState()))
    return flow, exporter, log


def mcp_flow(rules: str = "", host_caps=None, **tracing):
    flow, exporter, log = setup("mcp", rules, **tracing)
    flow.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "capabilities": host_caps if host_caps is not None else {"reminders": {}}}}))
    flow.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {"capabilities": LEGACY_CAPS, "serverInfo": {}}}))
    return flow, exporter, log


def reminder_msg(n: int = 1, meta: dict | None = None, body: str = "Rebase first.") -> bytes:
    return frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "info", "logger": "harn.reminder", "data": body,
        "_meta": {**(meta or {}), "harn": {"reminder": {"id": f"r{n}", "body": body, "dedupeKey": "k"}}}}})


def test_one_span_per_reminder_with_the_spec_attributes_parented_to_the_caller():
    flow, exporter, _ = mcp_flow()
    [out] = flow.from_peer(reminder_msg(meta={"traceparent": TRACEPARENT, "tracestate": "vendor=1",
                                              "baggage": "tenant=acme"}))
    [span] = exporter.get_finished_spans()  # the handshake's capability rewrite is no reminder: no span
    assert span.name == "notifications/message"
    assert dict(span.attributes) == {  # rpc.system.name: semconv's name now; rpc.system: spec §9's
        "rpc.system.name": "jsonrpc", "rpc.system": "jsonrpc", "rpc.method": "notifications/message", "bridge.protocol": "mcp",
        "bridge.route": "fs", "bridge.stage": "translate", "reminder.action": "rewritten",
        "reminder.source_dialect": "legacy", "reminder.target_dialect": "standard",
        "reminder.id": "r1", "reminder.dedupe_key": "k"}
    assert format(span.context.trace_id, "032x") == TRACE
    assert format(span.parent.span_id, "016x") == PARENT
    meta = json.loads(out.data)["params"]["_meta"]
    assert meta["traceparent"] == f"00-{TRACE}-{format(span.context.span_id, '016x')}-01"
    assert meta["tracestate"] == "vendor=1"
    assert meta["baggage"] == "tenant=acme"


def test_every_decision_gets_its_span_and_reason():
    flow, exporter, _ = mcp_flow("[defaults.budget]\nrate = 60\nburst = 1\n[defaults.trust]\nmax_body_bytes = 20\n")
    flow.from_peer(reminder_msg(1))
    flow.from_peer(reminder_msg(2))
    flow.from_peer(reminder_msg(3, body="x" * 50))
    spans = exporter.get_finished_spans()
    assert [s.attributes["reminder.action"] for s in spans] == ["rewritten", "rate_limited", "refused"]
    assert spans[1].attributes["reminder.budget.scope"] == "server:fs"
    assert spans[2].attributes["reminder.trust.limit"] == "max_body_bytes"
    assert "over max_body_bytes = 20" in spans[2].attributes["reminder.reason"]


def test_a_reminder_without_caller_context_starts_a_trace_and_passes_it_on():
    flow, exporter, _ = mcp_flow()
    [out] = flow.from_peer(reminder_msg())
    [span] = exporter.get_finished_spans()
    assert span.parent is None
    assert json.loads(out.data)["params"]["_meta"]["traceparent"].split("-")[1] == format(span.context.trace_id, "032x")


def test_acp_inject_and_emitted_updates_carry_the_child_context():
    flow, exporter, _ = setup("acp")
    flow.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": {"reminders": {}}}}))
    flow.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {"agentCapabilities": HARN_AGENT}}))
    [out] = flow.from_host(frame({"jsonrpc": "2.0", "id": 1, "method": "session/inject_reminder", "params": {
        "sessionId": "s", "body": "b", "_meta": {"traceparent": TRACEPARENT}}}))
    emitted = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "_meta": {
        "traceparent": TRACEPARENT}, "update": {"sessionUpdate": "reminder_emitted", "_meta": {"harn": {"reminder": {
            "reminderId": "e1", "body": "b", "tags": [], "roleHint": "system", "renderedRole": "system",
            "source": "stdlib_provider", "ttlTurns": None}}}}}}
    [update] = flow.from_peer(frame(emitted))
    inject_span, emit_span = exporter.get_finished_spans()
    assert (inject_span.name, emit_span.name) == ("session/inject_reminder", "session/update")
    assert all(format(s.parent.span_id, "016x") == PARENT for s in (inject_span, emit_span))
    sent = json.loads(out.data)
    assert sent["method"] == "session/remind"
    assert sent["params"]["_meta"]["traceparent"].split("-")[2] == format(inject_span.context.span_id, "016x")
    got = json.loads(update.data)
    assert got["params"]["_meta"]["traceparent"].split("-")[2] == format(emit_span.context.span_id, "016x")


def test_propagation_only_makes_no_spans_and_carries_the_callers_context():
    flow, exporter, _ = mcp_flow(propagation_only=True)
    [out] = flow.from_peer(reminder_msg(meta={"traceparent": TRACEPARENT}))
    assert exporter.get_finished_spans() == ()
    assert json.loads(out.data)["params"]["_meta"]["traceparent"] == TRACEPARENT


def test_sampling_zero_records_no_new_trace_but_follows_a_sampled_caller():
    flow, exporter, _ = mcp_flow(sampling=0.0)
    flow.from_peer(reminder_msg(1))
    assert exporter.get_finished_spans() == ()  # a root span at ratio 0: not recorded
    flow.from_peer(reminder_msg(2, meta={"traceparent": TRACEPARENT}))
    [span] = exporter.get_finished_spans()  # the caller sampled its trace: so does the proxy
    assert span.attributes["reminder.id"] == "r2"


def test_a_span_not_recorded_leaves_the_callers_context_as_it_came():
    flow, exporter, _ = mcp_flow()  # ParentBased: a caller that did not sample its trace is followed
    unsampled = f"00-{TRACE}-{PARENT}-00"
    [out] = flow.from_peer(reminder_msg(meta={"traceparent": unsampled, "tracestate": "vendor=1"}))
    assert exporter.get_finished_spans() == ()
    meta = json.loads(out.data)["params"]["_meta"]
    assert (meta["traceparent"], meta["tracestate"]) == (unsampled, "vendor=1")


@pytest.mark.parametrize("propagators, carried", [("tracecontext", ["traceparent"]),
                                                  ("tracecontext,baggage", ["baggage", "traceparent"])])
def test_otel_propagators_chooses_the_keys_carried(propagators, carried):
    import os
    import subprocess
    import sys

    # what the proxy writes as headers on a request it forwards (A2A over HTTP: no `_meta` slot)
    script = ("import json\n"
              "from tests.unit.test_telemetry import mcp_flow, reminder_msg, TRACEPARENT\n"
              "flow, _, _ = mcp_flow()\n"
              "flow.from_peer(reminder_msg(meta={'traceparent': TRACEPARENT, 'baggage': 'k=v'}))\n"
              "print(json.dumps(sorted(flow.trace_context())))\n")
    probe = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "OTEL_PROPAGATORS": propagators})
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout) == carried


def test_http_headers_are_the_parent_unless_meta_names_one():
    flow, exporter, _ = mcp_flow()
    other = f"00-{'1' * 32}-{'2' * 16}-01"
    flow.from_peer(reminder_msg(1), headers={"traceparent": other})
    flow.from_peer(reminder_msg(2, meta={"traceparent": TRACEPARENT}), headers={"traceparent": other})
    by_header, by_meta = exporter.get_finished_spans()
    assert format(by_header.parent.span_id, "016x") == "2" * 16
    assert format(by_meta.parent.span_id, "016x") == PARENT


def test_bodies_reach_spans_and_logs_only_with_capture_switched_on():
    flow, exporter, log = mcp_flow("[defaults.trust]\nmax_body_bytes = 5\n")
    flow.from_peer(reminder_msg(body="secret plan"))
    assert "reminder.body" not in exporter.get_finished_spans()[0].attributes
    assert "secret plan" not in log.getvalue()
    flow, exporter, log = mcp_flow("[defaults.trust]\nmax_body_bytes = 5\n", capture_bodies=True)
    flow.from_peer(reminder_msg(body="secret plan"))
    assert exporter.get_finished_spans()[0].attributes["reminder.body"] == "secret plan"
    assert json.loads(log.getvalue().splitlines()[-1])["body"] == "secret plan"


def test_log_lines_are_json_with_reminder_ids_and_the_trace():
    flow, exporter, log = mcp_flow("[defaults.trust]\nmax_tags = 0\n")
    flow.from_peer(frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "info", "logger": "harn.reminder", "data": "b", "_meta": {"traceparent": TRACEPARENT, "harn": {
            "reminder": {"id": "r9", "body": "b", "tags": ["t"]}}}}}))
    line = json.loads(log.getvalue().splitlines()[-1])
    assert line["event"] == "refused" and line["id"] == "r9" and line["route"] == "fs"
    assert line["trace_id"] == TRACE and line["ts"].endswith("Z")


def test_without_telemetry_the_callers_context_passes_and_nothing_is_imported():
    import subprocess
    import sys

    flow = make_flow("mcp", None, Recorder(log=io.StringIO()))
    assert flow.recorder.tracing.tracer is None
    flow.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {"reminders": {}}}}))
    flow.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {"capabilities": LEGACY_CAPS, "serverInfo": {}}}))
    [out] = flow.from_peer(reminder_msg(meta={"traceparent": TRACEPARENT}))
    assert json.loads(out.data)["params"]["_meta"] == {"traceparent": TRACEPARENT}
    probe = subprocess.run([sys.executable, "-c", "import sys; from bridge.assembly import make_flow; "
                            "make_flow('mcp').from_peer(b'{}'); print('opentelemetry.sdk' in sys.modules)"],
                           capture_output=True, text=True, timeout=30)
    assert probe.stdout.strip() == "False"  # the SDK costs start-up time only when spans are on


def test_otlp_exporter_needs_the_optional_extra_or_says_how_to_get_it():
    try:
        import opentelemetry.exporter.otlp.proto.http  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match=r"pip install 'reminder-bridge\[otlp\]'"):
            Tracing(exporter="otlp")
    else:
        tracing = Tracing(exporter="otlp", otlp_endpoint="http://127.0.0.1:9")
        assert tracing.spans
        tracing.provider.shutdown()


def test_trace_context_gives_headers_for_bodies_without_a_meta_slot():
    flow, exporter, _ = mcp_flow()
    flow.from_peer(reminder_msg(meta={"traceparent": TRACEPARENT}))
    [span] = exporter.get_finished_spans()
    assert flow.trace_context()["traceparent"] == f"00-{TRACE}-{format(span.context.span_id, '016x')}-01"


@pytest.mark.parametrize("sampling", [1.0, 0.0, 0.5])
@pytest.mark.parametrize("carrier", [None, {"traceparent": TRACEPARENT, "tracestate": "vendor=v1"},
                                     {"traceparent": f"00-{TRACE}-{PARENT}-00"},
                                     {"traceparent": f"00-{'f' * 32}-{PARENT}-01"}])
def test_a_reminder_span_is_the_one_the_sdk_tracer_would_make(carrier, sampling):
    """The direct span (`Tracing` built from settings) against the SDK's own `start_span`/`end`
    (`Tracing` given a provider): same trace, parent, state, sampling, kind, scope and attributes."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    direct = InMemorySpanExporter()
    sdk = InMemorySpanExporter()
    ours = Tracing(span_exporter=direct, sampling=sampling)
    provider = TracerProvider(resource=ours.provider.resource, sampler=ParentBased(TraceIdRatioBased(sampling)))
    provider.add_span_processor(SimpleSpanProcessor(sdk))
    provider.id_generator, ours._direct._ids = _SameIds(), _SameIds()  # the same new trace ids on both sides
    made = []
    for tracing, exporter in ((ours, direct), (Tracing(provider=provider), sdk)):
        recorded = [tracing.record("notifications/message", lambda: {"reminder.id": "r1", "bridge.route": "fs"},
                                   carrier, 5) is None for _ in range(2)]
        made.append((recorded, [(s.name, s.context.trace_id, s.context.trace_flags, s.context.trace_state,
                                 s.parent, s.kind, s.instrumentation_scope.name, dict(s.attributes), s.resource,
                                 s.start_time) for s in exporter.get_finished_spans()]))
    assert made[0] == made[1]
    for span in made[0][1]:
        if carrier is not None:
            assert format(span[4].span_id, "016x") == PARENT
            assert format(span[1], "032x") == carrier["traceparent"].split("-")[1]
    assert made[0][1] or sampling == 0.0 or carrier["traceparent"].endswith("-00")  # not a test of nothing


class _SameIds:
    """New ids as a sequence, so a root span's sampling (which reads the trace id) can be compared:
    one trace id under the 0.5 bound and one over it."""

    def __init__(self) -> None:
        self.traces = iter([0x1, 0xFFFFFFFFFFFFFFFF] * 2)

    def generate_trace_id(self) -> int:
        return next(self.traces)

    def generate_span_id(self) -> int:
        return 0x1234

    def is_trace_id_random(self) -> bool:
        return True
