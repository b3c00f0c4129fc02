"""Rewrite cost: reminders per second per core through a whole pipeline, in process.

Each frame goes through `Flow.from_peer` / `Flow.from_host` exactly as a transport hands it
over: pre-filter, JSON decode, dialect decode into the canonical model, policy (trust screening
and a budget charge: the budget is configured so high that it never refuses), encode for the
other side, and one OpenTelemetry span per reminder (SDK tracer, batch processor, an exporter
that drops them).  CPU time is the process's (all threads, so span export counts too).

The baseline is what any JSON-aware proxy pays for the same frames: `json.loads` + `json.dumps`.
"""
from __future__ import annotations

import json
import statistics
import time

GOAL = 20_000


class _NullExporter:
    """Accepts spans and drops them (what an OTLP exporter costs beyond this is network)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans):
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _tracing():
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from bridge.telemetry import Tracing

    exporter = _NullExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "reminder-bridge-bench"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=65_536))
    return Tracing(provider=provider), exporter, provider


def _settings():
    from bridge.rules import Budget, RouteSettings

    return RouteSettings(budget=Budget(rate=1e12, burst=1_000_000_000))  # key = "server", the default


def mcp_frames(count: int) -> list[bytes]:
    """Legacy MCP reminders (Harn's snake_case, as a `notifications/message`), all different."""
    frames = []
    for i in range(count):
        reminder = {"id": f"r-{i}", "body": f"File src/mod{i % 97}.rs changed on disk; re-read it before editing.",
                    "tags": ["fs", f"mod{i % 7}"], "dedupe_key": f"fs:{i % 500}", "ttl_turns": 3,
                    "source": "stdlib_provider", "authority": "advisory", "role_hint": "system"}
        frames.append(json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {
            "level": "info", "logger": "harn.reminder", "data": reminder["body"],
            "_meta": {"harn": {"reminder": reminder}}}}, separators=(",", ":")).encode())
    return frames


def acp_frames(count: int) -> list[bytes]:
    """Standard ACP injects from the client, toward a legacy (Harn) agent."""
    return [json.dumps({"jsonrpc": "2.0", "id": i + 10, "method": "session/inject_reminder", "params": {
        "sessionId": f"s{i % 50}", "id": f"r-{i}", "body": f"Tests in suite {i % 31} are flaky; rerun before blaming.",
        "tags": ["ci"], "dedupeKey": f"ci:{i % 300}", "ttlTurns": 2, "mode": "finish_step"}},
        separators=(",", ":")).encode() for i in range(count)]


def a2a_frames(count: int) -> list[bytes]:
    """Legacy A2A decorations on stream events, toward a standard caller."""
    return [json.dumps({"jsonrpc": "2.0", "id": "call-1", "result": {"statusUpdate": {
        "taskId": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"},
        "metadata": {"harn": {"reminder": {"id": f"r-{i}", "body": f"Budget {i % 13} is nearly spent.",
                                           "tags": ["budget"], "dedupeKey": f"b:{i % 100}", "ttlTurns": 1}}}}}},
        separators=(",", ":")).encode() for i in range(count)]


def _flow(protocol: str, tracing):
    """The flow, and what feeds it one frame as a transport does: in-process state (the budget)
    performed at once, in the same call (`waiting.at_once`, the driver's job)."""
    from bridge.assembly import make_flow
    from bridge.pipeline.waiting import at_once
    from bridge.telemetry import Recorder

    recorder = Recorder(route="bench", tracing=tracing)
    if protocol == "mcp":
        flow = make_flow("mcp", _settings(), recorder, host_dialect="standard", peer_dialect="legacy",
                         peer_declared=True)
        return flow, lambda frame: at_once(flow.from_peer(frame)), "rewritten"
    if protocol == "acp":
        flow = make_flow("acp", _settings(), recorder, host_dialect="standard", peer_dialect="legacy")

        def inject_and_answer(frame: bytes):
            """The agent answers each `session/remind` as a real one does, so requests do not pile
            up open (thousands of them made the garbage collector the measured cost)."""
            sent = at_once(flow.from_host(frame))
            at_once(flow.from_peer(b'{"jsonrpc":"2.0","id":%s,"result":{}}' % frame[22:frame.index(b",", 22)]))
            return sent

        return flow, inject_and_answer, "rewritten"
    flow = make_flow("a2a", _settings(), recorder, host_dialect="standard", peer_dialect="legacy")
    return flow, lambda frame: at_once(flow.from_peer(frame)), "rewritten"


def _pipeline(protocol: str, frames: list[bytes], spans: bool) -> tuple[float, int, dict]:
    """Reminders per CPU second through a fresh flow (spans exported, decision counts)."""
    tracing, exporter, provider = _tracing() if spans else (None, None, None)
    flow, feed, action = _flow(protocol, tracing)
    for frame in frames[:200]:  # warm-up: imports, first-use caches
        feed(frame)
    body = frames[200:]
    start = time.process_time()
    for frame in body:
        out = feed(frame)
    if provider is not None:
        provider.force_flush()
    rate = len(body) / (time.process_time() - start)
    if provider is not None:
        provider.shutdown()
    if not out or out[0].data is body[-1]:
        raise RuntimeError(f"{protocol}: the last reminder was not rewritten: {out}")
    counts = {a: n for (p, _, a), n in flow.recorder.counts.items() if p == protocol}
    return rate, exporter.spans if exporter is not None else 0, counts


def _measure(protocol: str, frames: list[bytes], rounds: int) -> tuple[float, float, float, int, dict]:
    """Medians over alternating rounds: (with spans, without spans, json loads+dumps), per CPU second."""
    with_spans, without, floors = [], [], []
    spans, counts = 0, {}
    for _ in range(rounds):
        rate, spans, counts = _pipeline(protocol, frames, True)
        with_spans.append(rate)
        without.append(_pipeline(protocol, frames, False)[0])
        start = time.process_time()
        for frame in frames[200:]:
            json.dumps(json.loads(frame), separators=(",", ":"), ensure_ascii=False).encode()
        floors.append((len(frames) - 200) / (time.process_time() - start))
    median = statistics.median
    return median(with_spans), median(without), median(floors), spans, counts


def run(quick: bool) -> list[dict]:
    count, rounds = (2_000, 3) if quick else (10_000, 5)
    rows = []
    for protocol, make, what in (("mcp", mcp_frames, "legacy notifications/message → standard notifications/reminder"),
                                 ("acp", acp_frames, "standard session/inject_reminder → legacy session/remind"),
                                 ("a2a", a2a_frames, "legacy statusUpdate decoration → standard reminderUpdate frame")):
        pipeline, bare, floor, spans, counts = _measure(protocol, make(count + 200), rounds)
        rows.append({
            "scenario": f"rewrite cost, {protocol.upper()} (whole pipeline, 1 core)", "unit": "reminders/s",
            "proxy": f"{pipeline:,.0f}/s", "direct": f"{floor:,.0f}/s (json loads+dumps)",
            "ratio": f"{pipeline / floor:.2f}x", "goal": f">= {GOAL:,}/s", "met": pipeline >= GOAL,
            "values": {"reminders_per_cpu_second": pipeline, "without_spans_per_cpu_second": bare,
                       "json_floor_per_cpu_second": floor, "without_spans_ratio": bare / floor, "spans": spans, "counts": counts,
                       "us_per_reminder": 1e6 / pipeline, "us_per_reminder_without_spans": 1e6 / bare},
            "detail": f"{count} distinct reminders, {what}; decode, trust + budget, encode, one span each "
                      f"({spans} exported per round); {1e6 / pipeline:.0f} µs CPU per reminder, {1e6 / bare:.0f} µs "
                      f"({bare:,.0f}/s, {bare / floor:.2f}x the json floor: the goal is >= 0.3x) without spans (telemetry "
                      f"exporter off, the default); median of {rounds}",
        })
    return rows
