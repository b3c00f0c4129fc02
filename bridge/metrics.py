"""The proxy's metrics, exposed in prometheus_client's types (spec §9, docs/observability.md#metrics).

Each route's `Recorder` owns a `RouteMetrics`: counters and a histogram kept as plain numbers
(`Counts`, `Latencies`: the per-reminder path takes no lock) and read at each scrape as the
library's custom-collector families, in a `CollectorRegistry` of the route's own, so a route
that goes away takes its series with it and one route can be shown alone.  The admin port serves
the union, `merged`: every live route's registry and every collector registered for the process
(`bridge.telemetry.register_collector`: `serve`'s connection guard, shared state, outbox
stores), one family per name.

Imported by a Recorder that counts and by the admin port only: a stdio proxy without an admin port
has nothing that could read a metric, counts nothing and never loads prometheus_client
(``Recorder(metrics=False)``).
"""
from __future__ import annotations

import weakref
from bisect import bisect_left
from collections import Counter as Tally
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

#: Upper bounds (seconds) of the rewrite-latency histogram.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class Counts:
    """One counter family's series, ``values``: label values → a plain number counted in place.
    `values[labels] += 1` is two dict operations (C), where a `prometheus_client.Counter` child
    takes a lock on every increment and `labels()` validates and locks on every lookup, which the
    per-reminder path should not pay.  `collect` hands the numbers to the library's
    `CounterMetricFamily` at each scrape, so the exposition is the library's.  Counted on the
    event loop's thread, as every `Recorder` call is.  Label values are the proxy's own words
    (protocols, actions, stages, scope kinds, rules keys), never a client's, so the table stays
    small."""

    __slots__ = ("name", "documentation", "labelnames", "values")

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...]):
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self.values: defaultdict[tuple[str, ...], int] = defaultdict(int)

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, value in self.values.items():
            family.add_metric(labels, float(value))  # the value a library Counter shows
        yield family


class Latencies:
    """The rewrite-latency histogram's series by their label values, each a list of plain numbers:
    the count of each bucket (``LATENCY_BUCKETS``, then +Inf) and the sum last.  An observation is
    a bisection (C) and two increments, where `prometheus_client.Histogram.observe` walks the
    bounds in Python and takes two locks.  `collect` hands the cumulative counts to the library's
    `HistogramMetricFamily` at each scrape: the samples the library's `Histogram` writes."""

    __slots__ = ("name", "documentation", "labelnames", "series")

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...]):
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self.series: dict[tuple[str, ...], list[Any]] = {}

    def observe(self, labels: tuple[str, ...], seconds: float) -> None:
        series = self.series.get(labels)
        if series is None:
            series = self.series[labels] = [0] * (len(LATENCY_BUCKETS) + 1) + [0.0]
        series[bisect_left(LATENCY_BUCKETS, seconds)] += 1  # the first bound >= seconds: its `le`
        series[-1] += seconds

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, series in self.series.items():
            acc, buckets = 0.0, []
            for bound, n in zip(_BOUNDS, series):
                acc += n
                buckets.append((bound, acc))
            family.add_metric(labels, buckets, series[-1])
        yield family


#: The histogram's `le` labels, as the library spells them.
_BOUNDS = (*map(floatToGoString, LATENCY_BUCKETS), "+Inf")


class RouteMetrics:
    """One route's families, in the order `/metrics` has always listed them."""

    def __init__(self, recorder: Any):
        self.registry = registry = CollectorRegistry(auto_describe=False)

        def counter(name: str, help_text: str, *labels: str) -> Counts:
            counts = Counts(name, help_text, labels)
            registry.register(counts)
            return counts

        self.reminders = counter(
            "reminder_bridge_reminders",
            "Reminder decisions by protocol, route, action and the stage they were taken in (observe: would have).",
            "protocol", "route", "action", "stage")
        self.budget_rejections = counter(
            "reminder_bridge_budget_rejections",
            "Reminders over budget, by the kind of bucket that refused; shadow=\"true\" were only counted.",
            "protocol", "route", "scope", "shadow")
        self.trust_refusals = counter("reminder_bridge_trust_refusals",
                                      "Reminders refused by a trust limit, by the limit.", "protocol", "route", "limit")
        self.rewrite_duration = Latencies(
            "reminder_bridge_rewrite_duration_seconds",
            "Time to decode, police and re-encode a message the proxy rewrote.", ("protocol", "route"))
        registry.register(self.rewrite_duration)
        registry.register(Pending(weakref.WeakMethod(recorder.pending)))
        self.reloads = counter(
            "reminder_bridge_rules_reloads",
            "Rules reloads, applied or refused, by route and by the setting that decided it (field).",
            "route", "result", "field")
        self.sessions_ended = counter(
            "reminder_bridge_sessions_ended",
            "serve: MCP sessions whose state the proxy dropped: evicted (the table was full), expired (idle), "
            "closed (DELETE).", "route", "reason")
        self.http_refused = counter(
            "reminder_bridge_http_refused",
            "serve: requests the proxy refused itself, by reason (origin, max_body_bytes, max_inflight_bytes).",
            "route", "reason")
        self.era_handshakes = counter(
            "reminder_bridge_era_handshakes",
            "MCP handshakes by side and the protocol revision (era) it spoke: 2025-11-25 (initialize) or "
            "2026-07-28 (server/discover or a request's _meta envelope).", "protocol", "route", "side", "era")
        self.era_bridged = counter(
            "reminder_bridge_era_bridged_requests",
            "Host requests the era bridge carried (or answered, or refused) between a host of one MCP revision "
            "and a server of the other.", "route", "host_era", "server_era")
        self.era_inputs_given_up = counter(
            "reminder_bridge_era_inputs_given_up",
            "Server-to-client requests the era bridge gave up: expired (the host did not answer within "
            "input_wait_s), full (too many already waited on the host).", "route", "reason")
        self.era_notifications_dropped = counter(
            "reminder_bridge_era_notifications_dropped",
            "Server notifications (progress, log lines) for a request the era bridge answered input_required "
            "that no stream of the host could take: its retry never came, asked for no progress, or no room was "
            "left to keep them for it.", "route", "method")

    @staticmethod
    def totals(counts: Counts) -> Tally[tuple[str, ...]]:
        """What ``counts`` has counted, by its label values in label order, in the order the label
        sets first appeared (the console and the demo read these)."""
        return Tally(counts.values)


class Pending:
    """`reminder_bridge_pending_reminders`: a level read from the route's live flows at each
    scrape, prometheus_client's custom-collector way (nothing to count: the queues are the truth).
    Holds its Recorder weakly: the registry must not keep a finished route alive."""

    def __init__(self, pending: Callable[[], Callable[[], dict[tuple[str, str, str], int]] | None]):
        self.pending = pending

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily("reminder_bridge_pending_reminders",
                                   "Reminders held now, by queue (coalesce, hold, tool_result, ...).",
                                   labels=("protocol", "route", "queue"))
        read = self.pending()
        for labels, n in sorted((read() if read is not None else {}).items()):
            family.add_metric(labels, n)
        yield family


def merged(collectors: Iterable[Any]) -> list[Metric]:
    """One family per name over ``collectors`` (objects with prometheus_client's `collect()`), in
    the order names first appear.  A series two collectors share (two live Recorders of one route
    name) is summed, so the exposition never repeats a series.  `_created` samples are left out:
    the exposition keeps the series it has always had."""
    families: dict[str, Metric] = {}
    at: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    for collector in collectors:
        for metric in collector.collect():
            family = families.get(metric.name)
            if family is None:
                family = families[metric.name] = Metric(metric.name, metric.documentation, metric.type, metric.unit)
            for sample in metric.samples:
                if sample.name.endswith("_created"):
                    continue
                key = (sample.name, tuple(sorted(sample.labels.items())))
                index = at.get(key)
                if index is None:
                    at[key] = len(family.samples)
                    family.samples.append(sample)
                else:
                    seen = family.samples[index]
                    family.samples[index] = seen._replace(value=seen.value + sample.value)
    return list(families.values())
