"""What the proxy did and why (spec §9): counters, a latency histogram, pending-queue gauges,
OpenTelemetry spans and one log line per notable decision (a `logging` record: bridge.logs).

Flows only ever call `Recorder.reminder(...)` (through `Flow.record`) and `Recorder.carrier(...)`
(through `Flow.stamp`); every OpenTelemetry call is in this module, and the SDK is imported
only when spans are switched on.  Bodies are never logged nor put on spans unless
`telemetry.capture_bodies` is set.

Cheap by construction: a span the sampler drops costs its `start_span` and nothing more (no
attributes built, no context serialised: the caller's own keys are carried on as they came), and
trace context is read and written by `opentelemetry.propagate`, so `OTEL_PROPAGATORS` decides
which keys (W3C `traceparent`/`tracestate` and `baggage` by default) a carrier holds.
"""
from __future__ import annotations

import bisect
import functools
import sys
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TextIO

from opentelemetry.semconv._incubating.attributes.rpc_attributes import RPC_METHOD, RPC_SYSTEM, RPC_SYSTEM_NAME

from bridge.display import MAX_SHOWN_ID, clip
from bridge.logs import PROXY, REMINDERS, log_event, stream_logger
from bridge.model import Reminder

#: The actions a reminder can meet (spec §9 `reminder.action`); `channel`: sent as a Claude Code
#: channel event (spec §11), told apart from `rewritten` because it lands in a live session.
ACTIONS = ("rewritten", "channel", "passed", "queued", "attached", "rendered", "dropped", "invalid", "rate_limited",
           "coalesced", "synthesized", "refused")
#: Later steps of a reminder already traced when it was decoded: counted and logged, no span of their own.
FOLLOW_UPS = frozenset({"rendered", "attached", "synthesized"})
#: Decisions that are a budget working as configured: counted always, logged at info (a flood
#: of them must not become a flood of log lines).
QUIET = frozenset({"rate_limited", "coalesced"})
#: Upper bounds (seconds) of the rewrite-latency histogram.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
LOG_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}

_RECORDERS: "weakref.WeakSet[Recorder]" = weakref.WeakSet()


@functools.cache
def trace_keys() -> tuple[str, ...]:
    """The carrier keys the configured propagators (`OTEL_PROPAGATORS`) read and write, looked up
    once, on first use: `traceparent`, `tracestate`, `baggage` by default (MCP and ACP reserve
    those at the root of `_meta`)."""
    from opentelemetry.propagate import get_global_textmap

    return tuple(sorted(get_global_textmap().fields))


class Tracing:
    """Spans for reminders (spec §9), or only trace-context propagation.

    Modes: ``spans`` (an SDK tracer provider with the configured exporter and sampler),
    ``propagation_only`` (no spans; the caller's context is carried into rewritten messages),
    and off (exporter ``none``: the same as propagation only, with nothing imported).
    """

    def __init__(self, *, exporter: str = "none", sampling: float = 1.0, propagation_only: bool = False,
                 capture_bodies: bool = False, otlp_endpoint: str | None = None, span_exporter: Any = None,
                 provider: Any = None):
        self.capture_bodies = capture_bodies
        self.propagation_only = propagation_only
        self.exporter = exporter
        self.provider = None
        self.tracer = None
        if propagation_only or (exporter == "none" and span_exporter is None and provider is None):
            return
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        if provider is None:
            provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(sampling)),
                                      resource=Resource.create({"service.name": "reminder-bridge"}))
            if span_exporter is not None:
                provider.add_span_processor(SimpleSpanProcessor(span_exporter))
            elif exporter == "console":  # stdout is the protocol channel on stdio: spans go to stderr
                provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
            elif exporter == "otlp":
                provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(otlp_endpoint)))
        self.provider = provider
        self.tracer = provider.get_tracer("reminder-bridge")
        from opentelemetry.propagate import extract
        from opentelemetry.trace import set_span_in_context

        self._extract, self._in_context = extract, set_span_in_context

    @classmethod
    def from_settings(cls, telemetry: Any, **kwargs: Any) -> "Tracing":
        """From a rules file's `[telemetry]` table (`bridge.rules.Telemetry`)."""
        return cls(exporter=telemetry.exporter, sampling=telemetry.sampling,
                   propagation_only=telemetry.propagation_only, capture_bodies=telemetry.capture_bodies,
                   otlp_endpoint=telemetry.otlp_endpoint, **kwargs)

    @property
    def spans(self) -> bool:
        return self.tracer is not None

    def record(self, name: str, attributes: Callable[[], dict[str, Any]], carrier: Mapping[str, str] | None,
               start_ns: int | None) -> Any:
        """One finished span, child of the context in ``carrier``, when the sampler keeps it: returns
        its context (what `Recorder.carrier` injects). None when it is not recorded, and then
        ``attributes()`` is never called."""
        parent = self._extract(carrier) if carrier else None
        span = self.tracer.start_span(name, context=parent, start_time=start_ns)
        if not span.is_recording():
            return None
        span.set_attributes(attributes())
        span.end()
        return self._in_context(span, parent)

    def shutdown(self) -> None:
        """Flush and stop the exporter (batched OTLP spans would be lost otherwise)."""
        if self.provider is not None and hasattr(self.provider, "shutdown"):
            self.provider.shutdown()


def _otlp_exporter(endpoint: str | None) -> Any:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise RuntimeError("telemetry.exporter = \"otlp\" needs the optional extra: "
                           "pip install 'reminder-bridge[otlp]'") from None
    if endpoint is not None and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()


OFF = Tracing()
_default_tracing: Tracing = OFF


def configure(tracing: Tracing) -> Tracing:
    """Make ``tracing`` the process default, used by every Recorder not given its own."""
    global _default_tracing
    previous, _default_tracing = _default_tracing, tracing
    return previous


class Histogram:
    __slots__ = ("counts", "sum", "count")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.sum += seconds
        self.count += 1


class Recorder:
    """Counts reminder decisions by (protocol, route, action), traces them and logs the notable ones."""

    def __init__(self, route: str = "default", log: TextIO | None = None, log_level: str = "warning",
                 tracing: Tracing | None = None):
        self.route = route
        self.counts: Counter[tuple[str, str, str]] = Counter()
        #: the same decisions with the stage they were taken in (`observe` = would have happened)
        self.staged: Counter[tuple[str, str, str, str]] = Counter()
        self.budget_rejections: Counter[tuple[str, str, str, str]] = Counter()  # protocol, route, scope kind, shadow
        self.trust_refusals: Counter[tuple[str, str, str]] = Counter()  # protocol, route, limit
        #: (ok | refused, the setting that decided it: `upstream`/`path` moved live, or what refused the
        #: file: `problems`, `routes`, `protocol`, `upstream`, `path`; "" for an ordinary reload)
        self.reloads: Counter[tuple[str, str]] = Counter()
        self.http_refused: Counter[str] = Counter()  # serve: origin | max_body_bytes | max_inflight_bytes | ...
        self.sessions_ended: Counter[str] = Counter()  # serve: evicted | expired | closed
        self.latency: dict[tuple[str, str], Histogram] = {}
        self._flows: weakref.WeakSet[Any] = weakref.WeakSet()
        #: add-ons told of every decision and handshake (the console's live feed): objects with
        #: `decision(record: dict)` and `handshake(record: dict)`; they must not block
        self.listeners: list[Any] = []
        #: set by whoever owns the route (an HTTP route, the stdio proxy): () -> its protocol, stage,
        #: budgets, for the admin port's status page
        self.status_source: Any = None
        #: where lines go: the `reminder_bridge` loggers, or (given ``log``) one of its own writing JSON there
        own = stream_logger(log) if log is not None else None
        self._decisions, self._events = (own, own) if own is not None else (REMINDERS, PROXY)
        self._tracing = tracing
        self.log_level = log_level
        _RECORDERS.add(self)

    @property
    def log_level(self) -> str:
        return self._level_name

    @log_level.setter
    def log_level(self, name: str) -> None:
        self._level_name = name
        self._level = LOG_LEVELS.get(name, 30)
        self._verbose = self._level <= 20

    @property
    def tracing(self) -> Tracing:
        return self._tracing if self._tracing is not None else _default_tracing

    @tracing.setter
    def tracing(self, tracing: Tracing | None) -> None:
        self._tracing = tracing

    # -- decisions -----------------------------------------------------------------------------
    def reminder(self, action: str, *, protocol: str, method: str | None, reminder: Reminder | None = None,
                 source: str | None = None, target: str | None = None, why: str | None = None,
                 stage: str = "translate", carrier: Mapping[str, str] | None = None,
                 attributes: dict[str, Any] | None = None, start_ns: int | None = None,
                 session: Any = None, direction: str | None = None) -> Any:
        """Count, trace and log one decision.  Returns the context of the span recorded for it (None
        without one): `carrier` puts it into the message the decision rewrote. ``session`` (whatever key
        the flow keeps the reminder's state under) and ``direction`` (toward_host | toward_peer)
        only reach listeners."""
        self.counts[(protocol, self.route, action)] += 1
        self.staged[(protocol, self.route, action, stage)] += 1
        if self.listeners:
            record = {"route": self.route, "protocol": protocol, "method": method, "action": action,
                      "stage": stage, "source": source, "target": target, "reason": why,
                      "session": session, "direction": direction, "reminder": reminder}
            for listener in self.listeners:
                listener.decision(record)
        tracing = self.tracing
        context = None
        if tracing.tracer is not None and action not in FOLLOW_UPS and not (reminder is None and action == "rewritten"):
            def span_attributes() -> dict[str, Any]:
                attrs: dict[str, Any] = {
                    RPC_SYSTEM_NAME: "jsonrpc", RPC_SYSTEM: "jsonrpc", RPC_METHOD: method or "",
                    "bridge.protocol": protocol, "bridge.route": self.route, "bridge.stage": stage,
                    "reminder.action": action, "reminder.source_dialect": source or "",
                    "reminder.target_dialect": target or "",
                }
                if reminder is not None:
                    attrs["reminder.id"] = reminder.id
                    attrs["reminder.dedupe_key"] = reminder.dedupe_key or ""
                    if tracing.capture_bodies:
                        attrs["reminder.body"] = reminder.body
                if why is not None:
                    attrs["reminder.reason"] = why
                if attributes:
                    attrs.update(attributes)
                return attrs

            context = tracing.record(method or "reminder", span_attributes, carrier, start_ns)
        level = 30 if why is not None and action not in QUIET else 20
        if level >= self._level:
            fields: dict[str, Any] = dict(protocol=protocol, method=method, stage=stage if stage != "translate" else None,
                                          id=clip(reminder.id, MAX_SHOWN_ID) if reminder else None,
                                          dedupe_key=clip(reminder.dedupe_key, MAX_SHOWN_ID) if reminder else None,
                                          source=source, target=target, why=why)
            if reminder is not None and tracing.capture_bodies:
                fields["body"] = reminder.body
            if context is not None:
                from opentelemetry.trace import get_current_span

                fields["trace_id"] = format(get_current_span(context).get_span_context().trace_id, "032x")
            self._line(self._decisions, action, {"level": "warning" if level == 30 else "info", **fields})
        return context

    @staticmethod
    def carrier(context: Any, inbound: Mapping[str, str] | None) -> dict[str, str]:
        """Trace-context keys for a rewritten message's `_meta`: the proxy's recorded span (and the
        caller's baggage) as the propagators write them when there is one, else the caller's own keys
        carried through as they came (``inbound`` holds only `trace_keys()`)."""
        if context is not None:
            from opentelemetry.propagate import inject

            out: dict[str, str] = {}
            inject(out, context=context)
            return out
        return dict(inbound) if inbound else {}

    def budget_rejected(self, protocol: str, scope: str, shadow: bool) -> None:
        self.budget_rejections[(protocol, self.route, scope.split(":", 1)[0], "true" if shadow else "false")] += 1

    def trust_refused(self, protocol: str, limit: str) -> None:
        self.trust_refusals[(protocol, self.route, limit)] += 1

    def rewrite_latency(self, protocol: str, seconds: float) -> None:
        hist = self.latency.get((protocol, self.route))
        if hist is None:
            hist = self.latency[(protocol, self.route)] = Histogram()
        hist.observe(seconds)

    def handshake(self, side: str, dialect: str, *, protocol: str, client: str | None = None) -> None:
        """A side's reminder dialect as its handshake (or first reminder message) showed it:
        ``side`` host|peer, ``dialect`` standard|legacy|none, ``client`` its name (MCP clientInfo,
        ACP clientInfo, A2A card name) when it gave one."""
        if self.listeners:
            record = {"route": self.route, "protocol": protocol, "side": side, "dialect": dialect, "client": client}
            for listener in self.listeners:
                listener.handshake(record)

    def track(self, flow: Any) -> None:
        """Count ``flow``'s pending queues in the gauges while it lives (it offers `pending_counts()`)."""
        self._flows.add(flow)

    def flows(self) -> list[Any]:
        """What `track` was given and still lives (the console reads a flow's stage and policy
        when no `status_source` describes the route)."""
        return list(self._flows)

    def pending(self) -> dict[tuple[str, str, str], int]:
        """Pending reminders now held, by (protocol, route, queue)."""
        out: Counter[tuple[str, str, str]] = Counter()
        for flow in list(self._flows):
            for queue, n in flow.pending_counts().items():
                out[(flow.protocol, self.route, queue)] += n
        return dict(out)

    # -- logging -------------------------------------------------------------------------------
    def info(self, event: str, **fields: Any) -> None:
        """Routine events (process started, admin listening): logged only at --log-level info."""
        if self._verbose:
            self.log(event, level="info", **fields)

    def warning(self, event: str, **fields: Any) -> None:
        if self._level <= 30:
            self.log(event, level="warning", **fields)

    def log(self, event: str, **fields: Any) -> None:
        """One log line about what the proxy did (not a reminder decision), whatever the level."""
        self._line(self._events, event, fields)

    def _line(self, logger: Any, event: str, fields: dict[str, Any]) -> None:
        """`event`, this route, and the fields that have a value, as one record (bridge.logs)."""
        log_event(logger, {"event": event, "route": self.route, **{k: v for k, v in fields.items() if v is not None}})

    def count(self, action: str, protocol: str | None = None) -> int:
        return sum(n for (p, _, a), n in self.counts.items() if a == action and protocol in (None, p))


def recorders() -> Iterable[Recorder]:
    """Every live Recorder in the process (the admin port serves them all)."""
    return list(_RECORDERS)


#: Metric families beyond the reminder decisions: objects with `families()` returning
#: [(name, kind, help, [(suffix, labels, value), ...]), ...] (e.g. `serve`'s connection guard).
_COLLECTORS: "weakref.WeakSet[Any]" = weakref.WeakSet()


def register_collector(collector: Any) -> None:
    _COLLECTORS.add(collector)


def collectors() -> Iterable[Any]:
    return list(_COLLECTORS)

