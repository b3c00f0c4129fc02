"""bridge.otlp: the lean encoder writes the very bytes the OpenTelemetry exporter's own encoder
writes, for every span shape the SDK makes; and the exporter posts them to a real receiver."""
from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import SpanLimits, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, TraceFlags, TraceState  # noqa: E402
from opentelemetry.trace import set_span_in_context  # noqa: E402
from opentelemetry.trace.status import Status, StatusCode  # noqa: E402

from bridge.otlp import LeanOTLPSpanExporter, SpanEncoder  # noqa: E402
from tests.peers.otlp_receiver import otlp_receiver  # noqa: E402


class _Keep(SpanExporter):
    def __init__(self) -> None:
        self.spans: list = []

    def export(self, spans):
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def _provider(resource: dict, limits: SpanLimits | None = None) -> tuple[TracerProvider, _Keep]:
    keep = _Keep()
    provider = TracerProvider(resource=Resource.create(resource), span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(keep))
    return provider, keep


def _remote_parent(remote: bool, state: TraceState | None = None):
    context = SpanContext(trace_id=0x0AF7651916CD43DD8448EB211C80319C, span_id=0xB7AD6B7169203331,
                          is_remote=remote, trace_flags=TraceFlags(1), trace_state=state)
    return set_span_in_context(NonRecordingSpan(context))


def _spans() -> list:
    """Every shape: the proxy's own reminder span, and what the SDK allows beyond it."""
    provider, keep = _provider({"service.name": "reminder-bridge"})
    tracer = provider.get_tracer("reminder-bridge")
    other = provider.get_tracer("other", "1.2.3", schema_url="https://opentelemetry.io/schemas/1.21.0")
    for i in range(3):  # the reminder span as telemetry.Recorder writes it; ids differ, the rest repeats
        span = tracer.start_span("notifications/message")
        span.set_attributes({"rpc.system.name": "jsonrpc", "rpc.method": "notifications/message",
                             "reminder.id": f"r-{i}", "reminder.dedupe_key": "", "bridge.route": "default"})
        span.end()
    span = tracer.start_span("scalars")  # every scalar the encoder writes itself
    span.set_attributes({"flag": True, "off": False, "n": -7, "zero": 0, "big": 2**62, "ratio": 0.25, "neg": -1.5,
                         "empty": "", "text": "é \u2028 😀", "long": "x" * 300})
    span.end()
    span = tracer.start_span("out of range")  # an int past int64: the library's to drop
    span.set_attributes({"huge": 2**64, "ok": "kept"})
    span.end()
    span = tracer.start_span("session/prompt", context=_remote_parent(True, TraceState([("vendor", "v1")])),
                             kind=SpanKind.SERVER, attributes={"flag": True, "off": False, "n": -7, "big": 2**62,
                                                               "ratio": 0.25, "tags": ("a", "b"), "ints": (1, 2),
                                                               "text": "é \u2028 😀"})
    span.add_event("queued", {"pending": 3})
    span.set_status(Status(StatusCode.ERROR, "upstream went away"))
    span.end()
    span = other.start_span("tasks/send", context=_remote_parent(False), kind=SpanKind.CLIENT,
                            links=[Link(SpanContext(1, 2, is_remote=True), {"why": "follows"})])
    span.set_status(Status(StatusCode.OK))
    span.end()
    for kind in (SpanKind.PRODUCER, SpanKind.CONSUMER, SpanKind.INTERNAL):
        tracer.start_span("", kind=kind).end()
    limited, kept = _provider({"service.name": "limited"}, SpanLimits(max_span_attributes=2, max_events=1,
                                                                       max_links=1))
    span = limited.get_tracer("x").start_span("over", links=[Link(SpanContext(3, 4, False)),
                                                             Link(SpanContext(5, 6, False))])
    span.set_attributes({"a": "1", "b": "2", "c": "3"})
    span.add_event("one")
    span.add_event("two")
    span.end()
    return keep.spans + kept.spans


def test_the_bytes_are_the_library_encoders_for_every_span_shape():
    spans = _spans()
    assert SpanEncoder().encode(spans) == encode_spans(spans).SerializePartialToString()


def test_kept_pairs_do_not_change_later_batches():
    """The second batch reuses encoded pairs and the resource: still byte for byte the library's."""
    encoder, spans = SpanEncoder(), _spans()
    encoder.encode(spans)
    assert encoder.encode(spans[::-1]) == encode_spans(spans[::-1]).SerializePartialToString()


def test_a_lone_surrogate_becomes_a_replacement_character_not_a_lost_attribute():
    provider, keep = _provider({"service.name": "reminder-bridge"})
    span = provider.get_tracer("t").start_span("m")
    span.set_attribute("reminder.id", "x\ud800")
    span.end()
    assert not encode_spans(keep.spans).resource_spans[0].scope_spans[0].spans[0].attributes  # the library drops it
    parsed = ExportTraceServiceRequest.FromString(SpanEncoder().encode(keep.spans))
    (kv,) = parsed.resource_spans[0].scope_spans[0].spans[0].attributes
    assert kv.value.string_value == "x\ufffd"


def test_kept_pairs_stay_bounded_under_distinct_values():
    provider, keep = _provider({"service.name": "reminder-bridge"})
    tracer = provider.get_tracer("t")
    for i in range(5000):
        span = tracer.start_span("m")
        span.set_attribute("reminder.id", f"r-{i}")
        span.end()
    encoder = SpanEncoder()
    assert encoder.encode(keep.spans) == encode_spans(keep.spans).SerializePartialToString()
    assert len(encoder._pairs) <= 4096


@pytest.fixture
def receiver():
    with otlp_receiver() as (endpoint, got):
        yield endpoint, got


def test_the_exporter_posts_the_batch_to_a_real_receiver(receiver):
    endpoint, got = receiver
    spans = _spans()
    exporter = LeanOTLPSpanExporter(endpoint=endpoint)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert got == [encode_spans(spans)]
    exporter.shutdown()
    assert exporter.export(spans) is SpanExportResult.FAILURE  # after shutdown, as the library's


def test_an_unreachable_receiver_is_a_failed_export_not_an_exception():
    exporter = LeanOTLPSpanExporter(endpoint="http://127.0.0.1:9/v1/traces", timeout=1)
    assert exporter.export(_spans()) is SpanExportResult.FAILURE


def test_the_proxys_own_spans_take_the_short_way_to_the_same_bytes():
    """Spans `Tracing` makes itself (`ReminderSpan`: no events, links or status to check), alone and
    in a batch beside the SDK's own: the library's bytes either way."""
    from opentelemetry.propagate import inject

    from bridge.reminder_spans import ReminderSpan
    from bridge.telemetry import Tracing

    keep = _Keep()
    tracing = Tracing(span_exporter=keep)
    parent: dict[str, str] = {}
    inject(parent, context=_remote_parent(True, TraceState([("vendor", "v1")])))
    for i, carrier in enumerate([None, parent, None]):
        tracing.record("notifications/message", lambda i=i: {"rpc.method": "notifications/message",
                                                             "reminder.id": f"r-{i}", "reminder.coalesced": True,
                                                             "n": i}, carrier, 5 + i)
    assert [type(s) for s in keep.spans] == [ReminderSpan] * 3
    assert SpanEncoder().encode(keep.spans) == encode_spans(keep.spans).SerializePartialToString()
    other = [s for s in _spans() if s.resource.attributes["service.name"] == "limited"]  # another resource
    mixed = keep.spans[:1] + other + keep.spans[1:]
    assert SpanEncoder().encode(mixed) == encode_spans(mixed).SerializePartialToString()
