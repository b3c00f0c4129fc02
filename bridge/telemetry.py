"""What the proxy did and why (spec §9): counters, a latency histogram, pending-queue gauges (in
prometheus_client's own types: `bridge.metrics`), OpenTelemetry spans and one log line per notable
decision (a `logging` record: bridge.logs).

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

import functools
import sys
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from bridge.display import MAX_SHOWN_ID, clip
from bridge.logs import PROXY, REMINDERS, log_event, stream_logger

if TYPE_CHECKING:
    from bridge.model import Reminder
    from bridge.metrics import RouteMetrics

#: The actions a reminder can meet (spec §9 `reminder.action`); `channel`: sent as a Claude Code
#: channel event (spec §11), told apart from `rewritten` because it lands in a live session.
ACTIONS = ("rewritten", "channel", "passed", "queued", "attached", "rendered", "dropped", "invalid", "rate_limited",
           "coalesced", "synthesized", "refused")
#: Later steps of a reminder already traced when it was decoded: counted and logged, no span of their own.
FOLLOW_UPS = frozenset({"rendered", "attached", "synthesized"})
#: Decisions that are a budget working as configured: counted always, logged at info (a flood
#: of them must not become a flood of log lines).
QUIET = frozenset({"rate_limited", "coalesced"})
#: Span attributes named by the OpenTelemetry semantic conventions (`rpc.system.name`, which
#: replaced `rpc.system`, still written since spec §9 names it), as plain strings: the conventions
#: package publishes the RPC names only in its private `_incubating` modules.
RPC_SYSTEM_NAME, RPC_SYSTEM, RPC_METHOD = "rpc.system.name", "rpc.system", "rpc.method"
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

        self._direct: _DirectSpans | None = None
        if provider is None:
            provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(sampling)),
                                      resource=Resource.create({"service.name": "reminder-bridge"}))
            if span_exporter is not None:
                processor = SimpleSpanProcessor(span_exporter)
            elif exporter == "console":  # stdout is the protocol channel on stdio: spans go to stderr
                processor = SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr))
            elif exporter == "otlp":
                processor = BatchSpanProcessor(_otlp_exporter(otlp_endpoint))
            else:
                raise ValueError(f"unknown telemetry exporter {exporter!r}")
            provider.add_span_processor(processor)
            self._direct = _DirectSpans(provider, processor, TraceIdRatioBased(sampling))
        self.provider = provider
        self.tracer = provider.get_tracer("reminder-bridge")
        from opentelemetry.propagate import extract

        from bridge.reminder_spans import Recorded

        self._extract, self._recorded = extract, Recorded

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
        its `bridge.reminder_spans.Recorded` handle (what `Recorder.carrier` injects). None when it
        is not recorded, and then ``attributes()`` is never called."""
        parent = self._extract(carrier) if carrier else None
        if self._direct is not None:
            return self._direct.record(name, attributes, parent, start_ns)
        span = self.tracer.start_span(name, context=parent, start_time=start_ns)
        if not span.is_recording():
            return None
        span.set_attributes(attributes())
        span.end()
        return self._recorded(span.get_span_context(), parent)

    def shutdown(self) -> None:
        """Flush and stop the exporter (batched OTLP spans would be lost otherwise)."""
        if self.provider is not None and hasattr(self.provider, "shutdown"):
            self.provider.shutdown()


class _DirectSpans:
    """A reminder's span made finished, straight into the provider's span processor.

    A reminder span has no children, events or links, and its attributes are the proxy's own
    strings, so the SDK's live-span lifecycle (a `Span` with locks, bounded attribute and event
    containers, processor start and end calls) was most of its cost and bought nothing. This
    builds the `ReadableSpan` the SDK's `Span.end()` would hand on: same sampler, id generator,
    resource and scope, the trace id and state taken from the parent as `Tracer.start_span` takes
    them. Used only with a provider this module built, so it knows the one processor, and the
    sampler: `ParentBased(root)` is decided here as the SDK decides it (a valid parent's sampled
    flag, else the root ratio's bound on the trace id's low 64 bits), without its three calls."""

    def __init__(self, provider: Any, processor: Any, root: Any) -> None:
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, TraceFlags, get_current_span

        from bridge.reminder_spans import Recorded, ReminderSpan

        self._bound, self._limit = root.bound, root.TRACE_ID_LIMIT
        self._ids, self._resource = provider.id_generator, provider.resource
        self._scope = InstrumentationScope("reminder-bridge")
        self._end = processor.on_end
        self._span, self._readable, self._current, self._recorded = SpanContext, ReminderSpan, get_current_span, Recorded
        sampled, random_id = TraceFlags.SAMPLED, getattr(TraceFlags, "RANDOM_TRACE_ID", 0)  # W3C level 2, SDK >= 1.39
        self._flags = {False: TraceFlags(sampled), True: TraceFlags(sampled | random_id)}
        self._new_id_random = bool(random_id) and self._ids.is_trace_id_random()

    def record(self, name: str, attributes: Callable[[], dict[str, Any]], parent: Any, start_ns: int | None) -> Any:
        parent_span = self._current(parent).get_span_context() if parent is not None else None
        if parent_span is not None and parent_span.is_valid:
            if not parent_span.trace_flags.sampled:
                return None
            trace_id, random_id = parent_span.trace_id, getattr(parent_span.trace_flags, "random_trace_id", False)
            state = parent_span.trace_state
        else:
            parent_span, trace_id, random_id, state = None, self._ids.generate_trace_id(), self._new_id_random, None
            if trace_id & self._limit >= self._bound:
                return None
        context = self._span(trace_id, self._ids.generate_span_id(), False, self._flags[random_id], state)
        values = attributes()
        now = time.time_ns()
        self._end(self._readable(name, context, parent_span, self._resource, values, start_ns or now, now, self._scope))
        return self._recorded(context, parent)


def _otlp_exporter(endpoint: str | None) -> Any:
    try:
        from bridge.otlp import LeanOTLPSpanExporter
    except ImportError:
        raise RuntimeError("telemetry.exporter = \"otlp\" needs the optional extra: "
                           "pip install 'reminder-bridge[otlp]'") from None
    if endpoint is not None and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return LeanOTLPSpanExporter(endpoint=endpoint) if endpoint else LeanOTLPSpanExporter()


OFF = Tracing()
_default_tracing: Tracing = OFF


def configure(tracing: Tracing) -> Tracing:
    """Make ``tracing`` the process default, used by every Recorder not given its own."""
    global _default_tracing
    previous, _default_tracing = _default_tracing, tracing
    return previous


class Recorder:
    """Counts reminder decisions by (protocol, route, action, stage), traces them and logs the notable ones.

    ``metrics=False``: count nothing (a stdio proxy without an admin port, where nothing could
    read a metric: it never loads prometheus_client)."""

    def __init__(self, route: str = "default", log: TextIO | None = None, log_level: str = "warning",
                 tracing: Tracing | None = None, metrics: bool = True):
        self.route = route
        #: this route's counters and histogram (prometheus_client's), or None: nothing is counted
        self.metrics: RouteMetrics | None = None
        if metrics:
            from bridge.metrics import RouteMetrics

            self.metrics = RouteMetrics(self)
        self._flows: weakref.WeakSet[Any] = weakref.WeakSet()
        #: add-ons told of every decision, handshake and refusal (the console's live feed): objects
        #: with `decision(record: dict)`, `handshake(record: dict)` and `refusal(record: dict)`;
        #: they must not block
        self.listeners: list[Any] = []
        #: when these counters started (wall clock): the console's "since" stamp
        self.started = time.time()
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
        if self.count_decision(action, protocol, stage, why):
            return None
        return self.follow(action, protocol=protocol, method=method, reminder=reminder, source=source, target=target,
                           why=why, stage=stage, carrier=carrier, attributes=attributes, start_ns=start_ns,
                           session=session, direction=direction)

    def count_decision(self, action: str, protocol: str, stage: str, why: str | None) -> bool:
        """`reminder`'s first half: count the decision; True when nothing else wants it (no listener,
        no span, below the log level: the usual), so a caller gathers nothing for `follow`."""
        if self.metrics is not None:
            self.metrics.reminders.values[protocol, self.route, action, stage] += 1
        level = 30 if why is not None and action not in QUIET else 20
        return level < self._level and not self.listeners and self.tracing.tracer is None

    def follow(self, action: str, *, protocol: str, method: str | None, reminder: Reminder | None = None,
               source: str | None = None, target: str | None = None, why: str | None = None,
               stage: str = "translate", carrier: Mapping[str, str] | None = None,
               attributes: dict[str, Any] | None = None, start_ns: int | None = None,
               session: Any = None, direction: str | None = None) -> Any:
        """`reminder`'s second half, once `count_decision` said something wants more: listeners, the
        span, the log line."""
        level = 30 if why is not None and action not in QUIET else 20
        tracing = self.tracing
        if self.listeners:
            record = {"route": self.route, "protocol": protocol, "method": method, "action": action,
                      "stage": stage, "source": source, "target": target, "reason": why,
                      "session": session, "direction": direction, "reminder": reminder}
            for listener in self.listeners:
                listener.decision(record)
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
        if level >= self._level:
            fields: dict[str, Any] = dict(protocol=protocol, method=method, stage=stage if stage != "translate" else None,
                                          id=clip(reminder.id, MAX_SHOWN_ID) if reminder else None,
                                          dedupe_key=clip(reminder.dedupe_key, MAX_SHOWN_ID) if reminder else None,
                                          source=source, target=target, why=why)
            if reminder is not None and tracing.capture_bodies:
                fields["body"] = reminder.body
            if context is not None:
                fields["trace_id"] = format(context.span.trace_id, "032x")
            self._line(self._decisions, action, {"level": "warning" if level == 30 else "info", **fields})
        return context

    @staticmethod
    def carrier(context: Any, inbound: Mapping[str, str] | None) -> dict[str, str]:
        """Trace-context keys for a rewritten message's `_meta`: the proxy's recorded span (and the
        caller's baggage) as the propagators write them when there is one, else the caller's own keys
        carried through as they came (``inbound`` holds only `trace_keys()`)."""
        if context is not None:
            return context.carrier()
        return dict(inbound) if inbound else {}

    def budget_rejected(self, protocol: str, scope: str, shadow: bool) -> None:
        kind = scope.split(":", 1)[0]
        if self.metrics is not None:
            self.metrics.budget_rejections.values[protocol, self.route, kind, "true" if shadow else "false"] += 1
        self._refused(protocol, "budget", kind, shadow)

    def trust_refused(self, protocol: str, limit: str) -> None:
        if self.metrics is not None:
            self.metrics.trust_refusals.values[protocol, self.route, limit] += 1
        self._refused(protocol, "trust", limit, False)

    def _refused(self, protocol: str, by: str, limit: str, shadow: bool) -> None:
        """Listeners hear of each refusal as the two counters above count it: ``by`` budget (``limit``
        the bucket's kind) or trust (``limit`` the trust limit's name)."""
        if self.listeners:
            record = {"route": self.route, "protocol": protocol, "by": by, "limit": limit, "shadow": shadow}
            for listener in self.listeners:
                listener.refusal(record)

    def bridged(self, host_era: str, server_era: str) -> None:
        """The era bridge took a host request of ``host_era`` toward a server of ``server_era``
        (`bridge.pipeline.eras`): carried, answered in the server's place, or refused by name."""
        if self.metrics is not None:
            self.metrics.era_bridged.values[self.route, host_era, server_era] += 1

    def era_input_given_up(self, reason: str) -> None:
        """The era bridge gave up a server-to-client request it carried: expired | full."""
        if self.metrics is not None:
            self.metrics.era_inputs_given_up.values[self.route, reason] += 1

    def era_notification_dropped(self, method: str) -> None:
        """The era bridge dropped a server notification for a request it answered input_required."""
        if self.metrics is not None:
            self.metrics.era_notifications_dropped.values[self.route, method] += 1

    @property
    def era_notifications_dropped(self) -> Counter[tuple[str, ...]]:
        """By (route, method)."""
        return self._totals("era_notifications_dropped")

    @property
    def era_inputs_given_up(self) -> Counter[tuple[str, ...]]:
        """By (route, reason)."""
        return self._totals("era_inputs_given_up")

    def rewrite_latency(self, protocol: str, seconds: float) -> None:
        if self.metrics is not None:
            self.metrics.rewrite_duration.observe((protocol, self.route), seconds)

    def reloaded(self, result: str, field: str) -> None:
        """A rules reload: ``result`` ok | refused; ``field`` the setting that decided it (`upstream`/
        `path` moved live, or what refused the file: `problems`, `routes`, `protocol`, `upstream`,
        `path`; "" for an ordinary reload)."""
        if self.metrics is not None:
            self.metrics.reloads.values[self.route, result, field] += 1

    def session_ended(self, reason: str) -> None:
        """serve: an MCP session's state dropped: evicted | expired | closed."""
        if self.metrics is not None:
            self.metrics.sessions_ended.values[self.route, reason] += 1

    def request_refused(self, reason: str) -> None:
        """serve: a request the proxy refused itself: origin | max_body_bytes | max_inflight_bytes."""
        if self.metrics is not None:
            self.metrics.http_refused.values[self.route, reason] += 1

    # -- what has been counted (the console, the demo's summary, tests): read from the metrics ------
    def _totals(self, family: str) -> Counter[tuple[str, ...]]:
        return self.metrics.totals(getattr(self.metrics, family)) if self.metrics is not None else Counter()

    @property
    def staged(self) -> Counter[tuple[str, ...]]:
        """Decisions by (protocol, route, action, stage), stage `observe` = would have happened."""
        return self._totals("reminders")

    @property
    def counts(self) -> Counter[tuple[str, ...]]:
        """Decisions by (protocol, route, action), whatever the stage."""
        out: Counter[tuple[str, ...]] = Counter()
        for (protocol, route, action, _), n in self.staged.items():
            out[(protocol, route, action)] += n
        return out

    @property
    def bridged_requests(self) -> Counter[tuple[str, ...]]:
        """By (route, host_era, server_era)."""
        return self._totals("era_bridged")

    @property
    def budget_rejections(self) -> Counter[tuple[str, ...]]:
        """By (protocol, route, scope kind, shadow "true"|"false")."""
        return self._totals("budget_rejections")

    @property
    def trust_refusals(self) -> Counter[tuple[str, ...]]:
        """By (protocol, route, limit)."""
        return self._totals("trust_refusals")

    def handshake(self, side: str, dialect: str, *, protocol: str, client: str | None = None,
                  version: str | None = None, capabilities: Any = None, scope: Any = None,
                  era: str | None = None) -> None:
        """A side's reminder dialect as its handshake (or first reminder message) showed it:
        ``side`` host|peer, ``dialect`` standard|legacy|none, ``client`` its name (MCP clientInfo,
        ACP clientInfo, A2A card name) when it gave one; ``era`` the MCP revision it spoke (counted:
        the era mix of a route that migrates).  ``version`` and ``capabilities`` (as the side sent
        them: listeners check their types) and ``scope`` (the flow's `Scope`) only reach listeners:
        the console tells hosts apart by them."""
        if era is not None and self.metrics is not None:
            self.metrics.era_handshakes.values[protocol, self.route, side, era] += 1
        if self.listeners:
            record = {"route": self.route, "protocol": protocol, "side": side, "dialect": dialect, "client": client,
                      "version": version, "capabilities": capabilities, "scope": scope, "era": era}
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


#: Metric families beyond the routes' own: prometheus_client collectors (objects with `collect()`
#: yielding its metric families), e.g. `serve`'s connection guard, shared state, outbox stores.
#: Held weakly: a collector leaves `/metrics` with its owner.
_COLLECTORS: "weakref.WeakSet[Any]" = weakref.WeakSet()


def register_collector(collector: Any) -> None:
    """Serve ``collector``'s families on the admin port (every one in the process)."""
    _COLLECTORS.add(collector)


def collectors() -> Iterable[Any]:
    return list(_COLLECTORS)

