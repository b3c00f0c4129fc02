"""A reminder's span as the proxy makes it (`bridge.telemetry._DirectSpans`), and its handle.

Imported only when spans are on (it needs the OpenTelemetry SDK). Two facts the proxy knows
about its own spans let the hot path skip work the general SDK code must do:

- a `ReminderSpan` has no events, links, limits or status, and its attributes are one plain
  dict of scalars, so the OTLP encoder (`bridge.otlp`) reads it without the checks a span of
  unknown make needs;
- a `Recorded` handle keeps the span's `SpanContext` and the context it was made under; the
  OpenTelemetry `Context` the propagators take is built only when they are needed, since with
  the default W3C propagators the carried keys are the `traceparent` (and `tracestate`) the
  `tracecontext` propagator would write, formatted here (tests/unit/test_reminder_spans.py holds
  the two to the same output).
"""
from __future__ import annotations

import functools
from typing import Any

from opentelemetry import baggage
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagate import get_global_textmap, inject
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import INVALID_SPAN_CONTEXT, NonRecordingSpan, SpanContext, SpanKind, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator


#: `trace-flags` as the header writes them (two hex digits), for every value of the byte
_FLAGS = {n: f"{n:02x}" for n in range(256)}


class ReminderSpan(ReadableSpan):
    """A finished span the proxy made. `fields`: what the OTLP encoder writes of it (its context,
    parent, name, kind, start and end, and its attributes: one dict of str, bool, int, float
    values), in the order `bridge.otlp.SpanEncoder` takes them."""

    def __init__(self, name: str, context: SpanContext, parent: SpanContext | None, resource: Any,
                 attributes: dict[str, Any], start_time: int, end_time: int, scope: Any) -> None:
        super().__init__(name, context, parent, resource, attributes, start_time=start_time, end_time=end_time,
                         instrumentation_scope=scope)
        self.fields = (context, parent, name, SpanKind.INTERNAL, start_time, end_time, attributes)


class Recorded:
    """A recorded reminder span: its `SpanContext`, and the context (the caller's, extracted) it is
    a child of. What `Recorder.carrier` injects into the message the decision rewrote."""

    __slots__ = ("span", "parent")

    def __init__(self, span: SpanContext, parent: Any) -> None:
        self.span, self.parent = span, parent

    def context(self) -> Any:
        """The OpenTelemetry `Context`: the span current in the parent's (so the parent's baggage
        stays with it)."""
        return set_span_in_context(NonRecordingSpan(self.span), self.parent)

    def carrier(self) -> dict[str, str]:
        """The keys the configured propagators write for this span."""
        span = self.span
        if _w3c_only() and span != INVALID_SPAN_CONTEXT and (self.parent is None or not baggage.get_all(self.parent)):
            # `to_bytes().hex()`: the same lowercase, zero-padded hex as `:032x`, at half its cost
            flags = span.trace_flags
            keys = {"traceparent": f"00-{span.trace_id.to_bytes(16, 'big').hex()}-"
                                   f"{span.span_id.to_bytes(8, 'big').hex()}-{_FLAGS.get(flags) or f'{flags:02x}'}"}
            if span.trace_state:
                keys["tracestate"] = span.trace_state.to_header()
            return keys
        out: dict[str, str] = {}
        inject(out, context=self.context())
        return out


@functools.cache
def _w3c_only() -> bool:
    """The global propagators are the default `tracecontext,baggage` (or `tracecontext` alone):
    then a span without baggage is carried as its `traceparent` and `tracestate` only. Looked up
    once, as `bridge.telemetry.trace_keys` is."""
    textmap = get_global_textmap()
    kinds = [type(p) for p in getattr(textmap, "_propagators", ())] if type(textmap) is CompositePropagator else []
    return bool(kinds) and kinds[0] is TraceContextTextMapPropagator and kinds[1:] in ([], [W3CBaggagePropagator])
