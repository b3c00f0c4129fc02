"""Spans through `reminder-bridge stdio` with `exporter = "otlp"`: a real `mcp` SDK host, the
bundled legacy server and a real OTLP/HTTP receiver. Each reminder the host gets has its span at
the receiver, with the spec §9 attributes, and the trace context in the reminder names that span."""
from __future__ import annotations

import sys

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from mcp import Client, StdioServerParameters  # noqa: E402

from tests.peers.mcp_host import Reminders  # noqa: E402
from tests.peers.otlp_receiver import otlp_receiver, spans_of  # noqa: E402

LEGACY_SERVER = [sys.executable, "-m", "bridge.examples.mcp_legacy_server"]


async def test_each_reminder_reaches_the_receiver_as_the_span_its_trace_context_names(tmp_path):
    with otlp_receiver() as (endpoint, got):
        rules = tmp_path / "rules.toml"
        rules.write_text(f'[telemetry]\nexporter = "otlp"\notlp_endpoint = "{endpoint}"\n')
        ext = Reminders()
        server = StdioServerParameters(command=sys.executable, args=["-m", "bridge", "stdio", "--rules", str(rules),
                                                                     "--", *LEGACY_SERVER])
        async with Client(server, mode="legacy", extensions=[ext]) as client:
            for path in ("a.py", "b.py", "c.py"):
                await client.call_tool("touch_file", {"path": path})
            await client.call_tool("echo", {"text": "sync"})
        # the proxy flushes its batch when the host closes it: every span is in by now
        spans = {span.span_id.hex(): span for span in spans_of(got)}
    assert len(ext.received) == 3
    for reminder, meta in zip(ext.received, ext.metas):
        _, trace_id, span_id, _ = meta["traceparent"].split("-")
        span = spans[span_id]
        assert span.trace_id.hex() == trace_id
        attributes = {kv.key: kv.value.string_value for kv in span.attributes}
        assert attributes["reminder.id"] == reminder["id"]
        assert attributes["reminder.action"] == "rewritten"
        assert attributes["rpc.system.name"] == "jsonrpc" and attributes["bridge.protocol"] == "mcp"
        assert attributes["reminder.source_dialect"] == "legacy"
        assert span.end_time_unix_nano >= span.start_time_unix_nano > 0
    (resource,) = {r.resource.SerializeToString() for request in got for r in request.resource_spans}
    assert b"reminder-bridge" in resource
