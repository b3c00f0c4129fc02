"""bridge.reminder_spans: a recorded span carries the very keys the configured propagators would
inject, whether the short W3C way is taken or not."""
from __future__ import annotations

import random

import pytest

from opentelemetry import baggage
from opentelemetry.propagate import get_global_textmap, inject, set_global_textmap
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace import INVALID_SPAN_CONTEXT, NonRecordingSpan, SpanContext, TraceFlags, TraceState
from opentelemetry.trace import set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from bridge import reminder_spans
from bridge.reminder_spans import Recorded


def _contexts(seed: int) -> list[SpanContext]:
    rng = random.Random(seed)
    out = [INVALID_SPAN_CONTEXT]
    for _ in range(50):
        state = TraceState([("vendor", "v1"), ("k", f"{rng.randrange(99)}")]) if rng.random() < 0.4 else None
        out.append(SpanContext(rng.getrandbits(128) or 1, rng.getrandbits(64) or 1, False,
                               TraceFlags(rng.choice([0, 1, 3])), state))
    return out


def _parents() -> list:
    remote = set_span_in_context(NonRecordingSpan(SpanContext(0xAB, 0xCD, True, TraceFlags(1))))
    return [None, remote, baggage.set_baggage("user", "u1", context=remote), baggage.set_baggage("a", "b")]


def _injected(recorded: Recorded) -> dict[str, str]:
    out: dict[str, str] = {}
    inject(out, context=recorded.context())
    return out


@pytest.mark.parametrize("parent", _parents())
def test_the_carrier_is_what_the_default_propagators_inject(parent):
    assert reminder_spans._w3c_only()  # the default OTEL_PROPAGATORS: the short way is under test
    for span in _contexts(7):
        recorded = Recorded(span, parent)
        assert recorded.carrier() == _injected(recorded)


def test_other_propagators_are_asked_as_they_are_configured(monkeypatch):
    """A textmap other than the default (here tracecontext twice over a composite): the library's
    own inject, so whatever the propagators write is what is carried."""
    default = get_global_textmap()
    only = CompositePropagator([TraceContextTextMapPropagator(), TraceContextTextMapPropagator()])
    try:
        set_global_textmap(only)
        reminder_spans._w3c_only.cache_clear()
        assert not reminder_spans._w3c_only()
        for span in _contexts(11)[:10]:
            recorded = Recorded(span, None)
            assert recorded.carrier() == _injected(recorded)
    finally:
        set_global_textmap(default)
        reminder_spans._w3c_only.cache_clear()


@pytest.mark.parametrize("flags", [*range(256), 0x100])
def test_every_trace_flags_value_is_written_as_the_propagator_writes_it(flags):
    """The header's flags come from a table of the 256 bytes; anything wider, as the library writes it."""
    recorded = Recorded(SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, False,
                                    TraceFlags(flags)), None)
    assert recorded.carrier() == _injected(recorded)
