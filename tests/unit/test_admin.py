"""The admin port's Prometheus exposition (spec §9), without a socket: every family, counting what
the flows decided, one family per name across routes, and nothing kept without an admin port."""
from __future__ import annotations

import io
import json
import re

from bridge.admin import prometheus_text, registry_of
from tests.flows import make_flow
from bridge.policy import BudgetState, Policy
from bridge.rules import parse_rules_text
from bridge.telemetry import Recorder

LEGACY_CAPS = {"_meta": {"harn": {"reminders": {"emit": True}}}}


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of a Prometheus text exposition, keyed by name and label set (in any order)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, labels, value = SAMPLE.match(line).groups()
            out[(name, frozenset(LABEL.findall(labels or "")))] = float(value)
    return out


def value(text: str, name: str, **labels: str) -> float | None:
    return samples(text).get((name, frozenset(labels.items())))


def frame(obj) -> bytes:
    return json.dumps(obj).encode()


def mcp_flow(recorder: Recorder, rules: str = ""):
    settings = parse_rules_text(rules).defaults
    flow = make_flow("mcp", settings, recorder, policy=Policy(settings, route=recorder.route, state=BudgetState()))
    flow.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}}}))
    flow.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {"capabilities": LEGACY_CAPS, "serverInfo": {}}}))
    return flow


def legacy(n: int) -> bytes:
    return frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "info", "logger": "harn.reminder", "data": "b",
        "_meta": {"harn": {"reminder": {"id": f"r{n}", "body": f"b{n}", "dedupeKey": f"k{n}"}}}}})


def test_metrics_text_has_every_family_and_counts_what_happened():
    recorder = Recorder(route="fs", log=io.StringIO())
    flow = mcp_flow(recorder, '[defaults.budget]\nrate = 60\nburst = 2\nover = "coalesce"\n')
    for n in range(5):
        flow.from_peer(legacy(n))  # a `none` host: two queued for the next tool result, three coalesced
    text = prometheus_text(recorder)
    mcp = {"protocol": "mcp", "route": "fs"}
    assert value(text, "reminder_bridge_reminders_total", **mcp, action="queued", stage="translate") == 2
    assert value(text, "reminder_bridge_reminders_total", **mcp, action="coalesced", stage="translate") == 3
    assert value(text, "reminder_bridge_budget_rejections_total", **mcp, scope="server", shadow="false") == 3
    assert value(text, "reminder_bridge_pending_reminders", **mcp, queue="coalesce") == 3
    assert value(text, "reminder_bridge_pending_reminders", **mcp, queue="tool_result") == 2
    assert "# TYPE reminder_bridge_rewrite_duration_seconds histogram" in text
    del flow  # a closed connection's queues leave the gauges
    import gc

    gc.collect()
    assert "queue=" not in prometheus_text(recorder)


def test_rewrite_latency_histogram_counts_rewrites():
    recorder = Recorder(route="fs", log=io.StringIO())
    flow = mcp_flow(recorder)
    flow.from_host(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "capabilities": {"reminders": {}}}}))
    flow.from_peer(frame({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": LEGACY_CAPS, "serverInfo": {}}}))
    rewrites = {"protocol": "mcp", "route": "fs"}
    before = value(prometheus_text(recorder), "reminder_bridge_rewrite_duration_seconds_count", **rewrites) or 0
    flow.from_peer(legacy(1))
    text = prometheus_text(recorder)
    assert value(text, "reminder_bridge_rewrite_duration_seconds_bucket", **rewrites, le="+Inf") == before + 1
    assert value(text, "reminder_bridge_rewrite_duration_seconds_count", **rewrites) == before + 1


def test_each_route_counts_in_prometheus_client_types_and_metrics_merge_them_one_family_per_name():
    """A route's Recorder counts in prometheus_client's own Counter and Histogram, in a registry of
    its own; `/metrics` merges every route's into one family per name. Two live Recorders of one
    route name are one series, summed (a series twice is an invalid exposition), and no
    `_created` series appear beside the ones the docs list. Both formats parse strictly."""
    from prometheus_client import generate_latest
    from prometheus_client.openmetrics.exposition import generate_latest as openmetrics
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    budget = '[defaults.budget]\nrate = 60\nburst = 2\nover = "coalesce"\n'
    fs, ci, ci_again = (Recorder(route=name, log=io.StringIO()) for name in ("fs", "ci", "ci"))
    flows = [mcp_flow(recorder, budget) for recorder in (fs, ci, ci_again)]
    for flow in flows:
        for n in range(5):
            flow.from_peer(legacy(n))
    queued = {"protocol": "mcp", "route": "fs", "action": "queued", "stage": "translate"}
    assert fs.metrics.registry.get_sample_value("reminder_bridge_reminders_total", queued) == 2
    assert fs.metrics.registry.get_sample_value("reminder_bridge_rewrite_duration_seconds_count",
                                                {"protocol": "mcp", "route": "fs"}) is None  # nothing rewritten
    registry = registry_of(lambda: [fs, ci, ci_again])
    text = generate_latest(registry).decode()
    assert value(text, "reminder_bridge_reminders_total", **queued) == 2
    assert value(text, "reminder_bridge_reminders_total", **{**queued, "route": "ci"}) == 4
    assert value(text, "reminder_bridge_budget_rejections_total", protocol="mcp", route="ci", scope="server",
                 shadow="false") == 6
    assert value(text, "reminder_bridge_pending_reminders", protocol="mcp", route="ci", queue="coalesce") == 6
    series = [line.rsplit(" ", 1)[0] for line in text.splitlines() if not line.startswith("#")]
    assert len(series) == len(set(series)) and "_created" not in text
    types = re.findall(r"^# TYPE (\S+) ", text, re.M)
    assert len(types) == len(set(types)) and types[:8] == [
        "reminder_bridge_reminders_total", "reminder_bridge_budget_rejections_total",
        "reminder_bridge_trust_refusals_total", "reminder_bridge_rewrite_duration_seconds",
        "reminder_bridge_pending_reminders", "reminder_bridge_rules_reloads_total",
        "reminder_bridge_sessions_ended_total", "reminder_bridge_http_refused_total"]
    parsed = {f.name: f for f in text_string_to_metric_families(openmetrics(registry).decode())}
    assert parsed["reminder_bridge_reminders"].type == "counter"
    assert parsed["reminder_bridge_pending_reminders"].type == "gauge"


def test_a_recorder_without_metrics_counts_nothing():
    """A stdio proxy without an admin port: nothing could read a metric, so none is kept."""
    recorder = Recorder(route="fs", log=io.StringIO(), metrics=False)
    flow = mcp_flow(recorder, '[defaults.budget]\nrate = 60\nburst = 2\n')
    for n in range(3):
        flow.from_peer(legacy(n))
    assert recorder.metrics is None and recorder.counts == {} and recorder.budget_rejections == {}
    assert "route=\"fs\"" not in prometheus_text(recorder)
