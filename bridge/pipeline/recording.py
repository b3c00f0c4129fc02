"""`Recording`: how a flow counts, traces and logs its decisions (spec §9), and carries trace
context into what it rewrote.  A mixin of `Flow`, kept apart so each file holds one job; the
recorder (`bridge.telemetry.Recorder`) does the counting and the I/O, off the core.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bridge.dialects.paths import params_meta
from bridge.telemetry import trace_keys

if TYPE_CHECKING:
    from bridge.model import Reminder


class Recording:
    """What `Flow` records (the attributes it uses are the flow's own)."""

    recorder: Any
    protocol: str
    stage: str
    scope: Any
    _attributes: dict[str, Any] | None
    _start_ns: int | None
    _direction: str | None
    _span: Any
    _inbound: dict[str, Any] | None
    _headers: Mapping[str, str] | None

    def record(self, action: str, method: str | None, reminder: Reminder | None = None, *,
               source: str | None = None, target: str | None = None, why: str | None = None,
               session: Any = None) -> None:
        """Count, trace and log one decision about a reminder of the message being handled."""
        attributes, self._attributes = self._attributes, None
        if self.recorder.count_decision(action, self.protocol, self.stage, why):
            return  # counted, and nothing else wants it
        context = self.recorder.follow(action, protocol=self.protocol, method=method, reminder=reminder,
                                       source=source, target=target, why=why, stage=self.stage,
                                       carrier=self._carrier() if self.recorder.tracing.tracer is not None else None,
                                       attributes=attributes, start_ns=self._start_ns,
                                       session=self.scope if session is None else session,
                                       direction=self._direction)
        if context is not None:
            self._span = context

    def stamp(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Write trace context into ``msg``'s `params._meta` (a message the proxy made or rewrote):
        the span of the last decision as parent, else the incoming message's own context."""
        if self._span is not None:  # the recorded span is the parent: the incoming keys are not read
            keys = self.recorder.carrier(self._span, None)
        else:
            inbound = self._carrier()
            if inbound is None:  # nothing to carry: the common case without tracing
                return msg
            keys = self.recorder.carrier(None, inbound)
        params = msg.get("params")
        if keys and isinstance(params, dict):
            meta = params.get("_meta")
            params["_meta"] = {**(meta if isinstance(meta, dict) else {}), **keys}
        return msg

    def trace_context(self) -> dict[str, str]:
        """Trace-context headers (`traceparent`, ...) for the request the proxy forwards after the
        message just handled: for transports whose bodies have no `_meta` slot (A2A over HTTP)."""
        return self.recorder.carrier(self._span, self._carrier())

    def _carrier(self) -> dict[str, str] | None:
        """Trace context of the message being handled (the propagators' keys): HTTP headers,
        overridden by `params._meta`."""
        carrier: dict[str, str] | None = None
        meta = params_meta(self._inbound)
        for source in (self._headers, meta):  # `_meta` last: it overrides the headers
            if source and (type(source) is dict or isinstance(source, Mapping)):  # a dict skips the ABC's check
                for key in trace_keys():
                    if isinstance(value := source.get(key), str):
                        if carrier is None:
                            carrier = {}
                        carrier[key] = value
        return carrier
