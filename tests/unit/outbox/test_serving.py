"""The serve half (`OutboxServe`) on the MCP flow: the proxy's own outbox resource, listed,
read like an outbox, bounded, pruned, beside the pushes a listening host still gets."""
from __future__ import annotations

import sqlite3

from tests.unit.outbox.link import HARN_CAPS, SERVE, Link, push, read, reminders


def test_serving_lists_the_outbox_and_adds_the_resources_capability(tmp_path):
    link = Link(tmp_path, SERVE, host_caps={})
    [(_, result)] = link.legacy_handshake(HARN_CAPS)
    assert result["result"]["capabilities"]["resources"] == {}
    link.host({"jsonrpc": "2.0", "id": 2, "method": "resources/list"})
    [(_, listed)] = link.peer({"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "Method not found"}})
    assert [r["uri"] for r in listed["result"]["resources"]] == ["bridge://reminders"]
    link.host({"jsonrpc": "2.0", "id": 3, "method": "resources/list"})
    [(_, listed)] = link.peer({"jsonrpc": "2.0", "id": 3, "result": {"resources": [{"uri": "file:///a", "name": "a"}]}})
    assert [r["uri"] for r in listed["result"]["resources"]] == ["file:///a", "bridge://reminders"]


def test_serving_answers_reads_like_an_outbox(tmp_path):
    link = Link(tmp_path, SERVE, host_caps={})
    link.legacy_handshake(HARN_CAPS)
    boot = read(link, "bridge://reminders")
    assert boot["events"] == [] and not boot["truncated"] and not boot["hasMore"]
    for n in range(3):
        assert push(link, f"r{n}") == []  # a `none` host reads them instead of getting tool results
        link.wall += 1
    page = read(link, f"bridge://reminders?cursor={boot['cursor']}&maxEvents=2&maxAgeMs=60000")
    assert [e["eventId"] for e in page["events"]] == ["r0", "r1"] and page["hasMore"] and not page["truncated"]
    shown = page["events"][0]
    assert shown["name"] == "reminder" and shown["data"]["reminder"]["body"] == "Rebase first.\nThen push."
    assert shown["_meta"]["ai.nimblebrain/notification"] == {
        "level": "info", "title": "Rebase first.", "body": "Rebase first. Then push.", "subject": "k"}
    rest = read(link, f"bridge://reminders?cursor={page['cursor']}&maxEvents=2")
    assert [e["eventId"] for e in rest["events"]] == ["r2"] and not rest["hasMore"]
    assert read(link, f"bridge://reminders?cursor={rest['cursor']}")["events"] == []
    assert link.flow.recorder.count("queued", "mcp") == 3


def test_served_replay_is_bounded_and_gaps_are_told(tmp_path):
    link = Link(tmp_path, SERVE, host_caps={})
    link.legacy_handshake(HARN_CAPS)
    boot = read(link, "bridge://reminders")["cursor"]
    push(link, "old")
    link.wall += 600
    push(link, "new")
    recent = read(link, f"bridge://reminders?cursor={boot}&maxAgeMs=60000")
    assert [e["eventId"] for e in recent["events"]] == ["new"] and recent["truncated"]  # maxAgeMs skipped "old"
    stale = read(link, "bridge://reminders?cursor=0123456789ab.1")  # another store's cursor
    assert stale["truncated"] and [e["eventId"] for e in stale["events"]] == ["old", "new"]
    link.wall += 3601  # past retention: "old" and "new" are pruned at the next tick's housekeeping
    link.serve.next_prune = 0
    link.tick()
    gone = read(link, f"bridge://reminders?cursor={boot}")
    assert gone["truncated"] and gone["events"] == []
    bad = read(link, "bridge://reminders?maxEvents=lots")
    assert bad["error"]["code"] == -32602 and "maxEvents must be an integer >= 1" in bad["error"]["message"]


def test_a_listening_host_still_gets_pushes_while_the_outbox_records(tmp_path):
    link = Link(tmp_path, SERVE)
    link.legacy_handshake(HARN_CAPS)
    boot = read(link, "bridge://reminders")["cursor"]
    [got] = reminders(push(link, "r1"))
    assert got["id"] == "r1"
    assert [e["eventId"] for e in read(link, f"bridge://reminders?cursor={boot}")["events"]] == ["r1"]


def test_what_the_proxy_answers_takes_the_flows_era(tmp_path):
    """A 2026-07-28 result carries `resultType`, `ttlMs` and `cacheScope`: the serve half asks the
    MCP flow which era the connection is in (`flow.modern`), never decides it itself."""
    for handshake, modern in (("legacy_handshake", False), ("modern_handshake", True)):
        link = Link(tmp_path, SERVE, host_caps={})
        getattr(link, handshake)(HARN_CAPS)
        assert link.flow.modern is modern
        [(_, answer)] = link.host({"jsonrpc": "2.0", "id": 9, "method": "resources/read",
                                   "params": {"uri": "bridge://reminders"}})
        assert ("resultType" in answer["result"]) is modern
        link.host({"jsonrpc": "2.0", "id": 10, "method": "resources/list"})
        [(_, listed)] = link.peer({"jsonrpc": "2.0", "id": 10, "error": {"code": -32601, "message": "no"}})
        assert ("cacheScope" in listed["result"]) is modern


def test_a_reminder_the_store_cannot_take_is_kept_and_written_at_the_retry(tmp_path):
    link = Link(tmp_path, SERVE, host_caps={})
    link.legacy_handshake(HARN_CAPS)
    boot = read(link, "bridge://reminders")["cursor"]
    store = link.serve.store
    append, failing = store.append_served, [True]

    def flaky(*args):
        if failing[0]:
            raise sqlite3.OperationalError("database is locked")
        return append(*args)

    store.append_served = flaky
    assert push(link, "r1") == [] and push(link, "r2") == []  # kept, in order, behind the failed one
    assert read(link, f"bridge://reminders?cursor={boot}")["events"] == []
    failing[0] = False
    assert link.serve.retry_at is not None
    link.tick(link.serve.retry_at - link.now)
    assert [e["eventId"] for e in read(link, f"bridge://reminders?cursor={boot}")["events"]] == ["r1", "r2"]
