"""The proxy's metrics in prometheus_client's own types (spec §9, docs/observability.md#metrics).

Each route's `Recorder` owns a `RouteMetrics`: Counters and a Histogram in a `CollectorRegistry`
of the route's own, so a route that goes away takes its series with it and one route can be shown
alone.  The admin port serves the union, `merged`: every live route's registry and every collector
registered for the process (`bridge.telemetry.register_collector`: `serve`'s connection guard,
shared state, outbox stores), one family per name.

Imported by a Recorder that counts and by the admin port only: a stdio proxy without an admin port
has nothing that could read a metric, counts nothing and never loads prometheus_client
(``Recorder(metrics=False)``).
"""
from __future__ import annotations

import weakref
from collections import Counter as Tally
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

#: Upper bounds (seconds) of the rewrite-latency histogram.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class Children(dict):
    """The labelled children of one metric by their label values, each looked up once:
    `children[labels].inc()` is a dict lookup, where `labels()` validates and takes a lock on every
    call, which the per-reminder path should not pay.  Label values are the proxy's own words
    (protocols, actions, stages, scope kinds, rules keys), never a client's, so the table stays
    small."""

    def __init__(self, metric: Any):
        super().__init__()
        self.metric = metric

    def __missing__(self, labels: tuple[str, ...]) -> Any:
        child = self[labels] = self.metric.labels(*labels)
        return child


class RouteMetrics:
    """One route's families, in the order `/metrics` has always listed them."""

    def __init__(self, recorder: Any):
        self.registry = registry = CollectorRegistry(auto_describe=False)

        def counter(name: str, help_text: str, *labels: str) -> Children:
            return Children(Counter(name, help_text, labels, registry=registry))

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
        self.rewrite_duration = Children(Histogram(
            "reminder_bridge_rewrite_duration_seconds",
            "Time to decode, police and re-encode a message the proxy rewrote.", ("protocol", "route"),
            buckets=LATENCY_BUCKETS, registry=registry))
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

    def totals(self, children: Children) -> Tally[tuple[str, ...]]:
        """What ``children``'s counter has counted, by its label values in label order, in the order
        the label sets first appeared (the console and the demo read these)."""
        return Tally({tuple(sample.labels.values()): int(sample.value)
                      for family in children.metric.collect() for sample in family.samples
                      if sample.name.endswith("_total")})


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
