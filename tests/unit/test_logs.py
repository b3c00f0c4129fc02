"""Log lines are stdlib `logging` records (bridge.logs): code that embeds the proxy adds a handler to
the `reminder_bridge` hierarchy and sees every line as a record; the process's own writer holds a
bounded queue, so a stderr nobody reads loses lines, counted, and never blocks a caller."""
from __future__ import annotations

import json
import logging
import os
import threading

from bridge.logs import configure, log_event
from tests.flows import make_flow
from bridge.policy import BudgetState, Policy
from bridge.rules import parse_rules_text
from bridge.telemetry import Recorder
from tests.peers.processes import wait_until

LEGACY_CAPS = {"_meta": {"harn": {"reminders": {"emit": True}}}}


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def frame(obj) -> bytes:
    return json.dumps(obj).encode()


def test_embedding_code_adds_a_handler_and_sees_each_decision_as_a_record():
    kept = Kept()
    hierarchy = logging.getLogger("reminder_bridge")
    hierarchy.addHandler(kept)
    hierarchy.setLevel(logging.INFO)
    try:
        settings = parse_rules_text("[defaults.trust]\nmax_tags = 0\n").defaults
        flow = make_flow("mcp", settings, Recorder(route="fs", log_level="info"),
                         policy=Policy(settings, route="fs", state=BudgetState()))
        flow.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                              "params": {"capabilities": {"reminders": {}}}}))
        flow.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {"capabilities": LEGACY_CAPS, "serverInfo": {}}}))
        flow.from_peer(frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {
            "level": "info", "logger": "harn.reminder", "data": "b",
            "_meta": {"harn": {"reminder": {"id": "r9\x1b[2J", "body": "b", "tags": ["t"]}}}}}))
    finally:
        hierarchy.removeHandler(kept)
        hierarchy.setLevel(logging.NOTSET)
    [refused] = [r for r in kept.records if r.event == "refused"]
    assert (refused.name, refused.levelno) == ("reminder_bridge.reminders", logging.WARNING)
    assert refused.fields["route"] == "fs" and refused.fields["id"] == "r9\x1b[2J"  # the value, for code
    assert refused.getMessage().startswith(r"refused route=fs protocol=mcp method=notifications/message id=r9\x1b[2J ")


def test_a_stderr_nobody_reads_loses_lines_counted_and_never_blocks_the_caller():
    """5,000 lines of ~200 bytes toward a pipe nobody reads (64 KiB) and a queue of 2,000 bytes:
    every call returns; what did not fit is dropped, and the next line that fits says how many."""
    read_end, write_end = os.pipe()
    stream = os.fdopen(write_end, "w")
    logger = logging.Logger("reminder_bridge.test")
    stop = configure("json", stream=stream, logger=logger, max_bytes=2000)
    recorder_fields = {"event": "upstream_error", "route": "r", "why": "x" * 150}
    for n in range(5000):
        log_event(logger, {**recorder_fields, "n": n})
    stream.close()  # the writer has its own copy of the descriptor
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(read_end, 65536), b"")))
    reader.start()
    queued = logger.handlers[0]
    wait_until(lambda: queued.queued == 0)  # the host reads again: the writer empties the queue
    log_event(logger, {**recorder_fields, "n": 5000})
    stop()
    reader.join(10)
    os.close(read_end)
    records = [json.loads(line) for line in b"".join(chunks).decode().splitlines()]
    written = [r["n"] for r in records if r["event"] == "upstream_error"]
    dropped = [r["lines"] for r in records if r["event"] == "log_lines_dropped"]
    assert written == sorted(written) and written[-1] == 5000
    assert len(written) + sum(dropped) == 5001
    assert records[-2]["event"] == "log_lines_dropped"  # the pipe was full to the end: said before the line that fit
