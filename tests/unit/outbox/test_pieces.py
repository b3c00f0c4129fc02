"""Outbox pieces that need no process (docs/outbox.md): declarations and their rules-file
refusals, the event → reminder mapping, the poll cadence and the store."""
from __future__ import annotations

import json
import sqlite3
from urllib.parse import parse_qs, urlsplit

import pytest

from bridge.declaration import check_resource, read_manifest, read_uri
from bridge.outbox.events import Malformed, answer_from_read, parse_answer, parse_event, plain, to_reminder
from bridge.outbox.poller import Cadence, Poller
from bridge.outbox.store import Store
from bridge.rules import RulesError, parse_rules_text

NOTE = "ai.nimblebrain/notification"


def event(event_id: str, name: str = "domain.active", **shown) -> dict:
    out = {"eventId": event_id, "name": name, "timestamp": "2026-09-01T18:42:10Z", "data": {"id": event_id}}
    if shown:
        out["_meta"] = {NOTE: shown}
    return out


# -- declarations ------------------------------------------------------------------------------
@pytest.mark.parametrize("uri, says", [
    ("notifications", "has no scheme"),
    ("/var/outbox", "has no scheme"),
    ("acme://notifications?since=1", "carries a query string"),
    ("acme://notifications#latest", "carries a fragment"),
    ("acme://x y", "whitespace"),
    ("a" * 500 + "://" + "b" * 20, "at most 512"),
] + [(f"{scheme}://acme/notifications", f"uses the {scheme}:// scheme, which hosts resolve themselves")
     for scheme in ("skill", "ui", "instructions", "artifact", "files", "app")])
def test_refused_declarations_say_why(uri, says):
    with pytest.raises(ValueError) as refused:
        check_resource(uri)
    assert says in str(refused.value)


def test_accepted_declaration_and_the_read_uri():
    assert check_resource("acme://notifications") == "acme://notifications"
    assert read_uri("acme://n", None, 100, 5000) == "acme://n?maxEvents=100&maxAgeMs=5000"  # bootstrap: no cursor
    uri = read_uri("acme://n", "a b/c:1", 10, 60)
    assert parse_qs(urlsplit(uri).query) == {"cursor": ["a b/c:1"], "maxEvents": ["10"], "maxAgeMs": ["60"]}
    assert "+" not in uri  # RFC 6570 percent-encodes spaces


def test_manifest_declaration(tmp_path):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"name": "acme", "_meta": {"ai.nimblebrain/host": {
        "host_version": "1.0", "notifications": {"resource": "acme://notifications"}}}}))
    assert read_manifest(manifest) == "acme://notifications"
    manifest.write_text(json.dumps({"_meta": {"ai.nimblebrain/host": {"notifications": {"resource": "ui://acme"}}}}))
    with pytest.raises(ValueError, match=r'notifications.resource uses the ui:// scheme'):
        read_manifest(manifest)
    manifest.write_text(json.dumps({"name": "acme"}))
    with pytest.raises(ValueError, match="declares no outbox"):
        read_manifest(manifest)


def problems(text: str, file: str = "<string>") -> list[str]:
    with pytest.raises(RulesError) as err:
        parse_rules_text(text, file)
    return [str(p) for p in err.value.problems]


def test_rules_refusals_name_file_line_and_key(tmp_path):
    (tmp_path / "ui.json").write_text(json.dumps(
        {"_meta": {"ai.nimblebrain/host": {"notifications": {"resource": "app://acme"}}}}))
    rules = tmp_path / "rules.toml"
    found = problems(
        '[routes.a]\nprotocol = "mcp"\n[routes.a.outbox]\nresource = "acme://n?x=1"\n'
        '[routes.b]\nprotocol = "mcp"\noutbox = { manifest = "ui.json" }\n'
        '[routes.c]\nprotocol = "mcp"\n[routes.c.outbox]\nresource = "acme://n"\nmanifest = "ui.json"\n'
        '[routes.d]\nprotocol = "mcp"\n[routes.d.outbox]\npoll_floor_ms = 5000\npoll_ceiling_ms = 1000\n'
        'max_events = 0\n'
        '[routes.e]\nprotocol = "acp"\nserve_outbox = { resource = "acme://r" }\n'
        '[routes.f]\nprotocol = "mcp"\nserve_outbox = { resource = "skill://r", retention_s = 0 }\n',
        str(rules))
    where = str(rules)
    assert f"{where}:4: routes.a.outbox.resource: carries a query string" in found[0]
    assert found[1].startswith(f'{where}:7: routes.b.outbox.manifest: manifest \'{tmp_path}/ui.json\': '
                               '_meta["ai.nimblebrain/host"].notifications.resource uses the app:// scheme')
    assert found[2] == f"{where}:12: routes.c.outbox.manifest: give resource or manifest, not both"
    assert found[3] == f"{where}:17: routes.d.outbox.poll_ceiling_ms: must be >= poll_floor_ms (5000) (got 1000)"
    assert found[4] == f"{where}:18: routes.d.outbox.max_events: must be an integer from 1 to 1000 (got 0)"
    assert found[5] == f"{where}:19: routes.e: outbox and serve_outbox are MCP resources; this route's protocol is acp"
    assert found[6].startswith(f"{where}:24: routes.f.serve_outbox.resource: uses the skill:// scheme")
    assert found[7] == f"{where}:24: routes.f.serve_outbox.retention_s: must be an integer >= 1 (got 0)"
    assert len(found) == 8


def test_an_identity_must_name_a_header_end_to_end_and_one_way(tmp_path):
    where = str(tmp_path / "rules.toml")
    found = problems(
        '[routes.a]\nprotocol = "mcp"\n[routes.a.serve_outbox]\nresource = "bridge://r"\nidentity = "cookie:sid"\n'
        '[routes.b]\nprotocol = "mcp"\nserve_outbox = { resource = "bridge://r", identity = "header:Mcp-Session-Id" }\n'
        '[routes.c]\nprotocol = "mcp"\n[routes.c.outbox]\nresource = "acme://n"\nidentity = "header:authorization"\n'
        '[routes.c.serve_outbox]\nresource = "bridge://r"\nidentity = "header:x-user"\n', where)
    assert found[0] == (f'{where}:5: routes.a.serve_outbox.identity: must be "header:<name>", naming a request header '
                        'such as authorization (got "cookie:sid")')
    assert found[1].startswith(f'{where}:8: routes.b.serve_outbox.identity: "Mcp-Session-Id" names no one')
    assert found[2] == (f"{where}:9: routes.c: outbox.identity and serve_outbox.identity differ; a route keys its "
                        "outboxes one way (set it once)")
    named = parse_rules_text('[routes.a]\nprotocol = "mcp"\nserve_outbox = { resource = "bridge://r", '
                             'identity = "header:Authorization" }\n').routes["a"]
    assert named.identity == "header:authorization"  # header names are case-blind


def test_rules_paths_are_relative_to_the_rules_file(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps(
        {"_meta": {"ai.nimblebrain/host": {"notifications": {"resource": "acme://n"}}}}))
    rules = parse_rules_text('[routes.a]\nprotocol = "mcp"\n[routes.a.outbox]\nmanifest = "manifest.json"\n'
                             'store = "state/outbox.sqlite3"\n', str(tmp_path / "rules.toml"))
    outbox = rules.routes["a"].outbox
    assert outbox.manifest == str(tmp_path / "manifest.json") and outbox.store == str(tmp_path / "state/outbox.sqlite3")
    assert (outbox.max_events, outbox.poll_floor_ms, outbox.poll_ceiling_ms) == (100, 1000, 60000)


# -- events → reminders ------------------------------------------------------------------------
def test_event_becomes_a_standard_reminder():
    raw = event("evt_1", subject="acme.test", level="attention", title="acme.test\x1b[1m is\nactive",
                body="DNS\tpropagated.\x07", link={"resource": "acme://campaigns/1"})
    raw["data"] = {"nested": {"n": [1, 2.5, None]}, "ok": True}
    reminder = to_reminder("r|acme://n", parse_event(raw))
    assert reminder.body == "acme.test [1m is active\nDNS propagated."
    assert reminder.tags == ["domain.active", "level:attention"]
    assert reminder.dedupe_key == "domain.active:acme.test"
    assert reminder.meta["reminder-bridge/event"] == {"source": "r|acme://n", "event": raw}  # data verbatim
    assert reminder.role_hint == "user_block" and reminder.source == "bridge"
    assert reminder.id == to_reminder("r|acme://n", parse_event(raw)).id  # one event, one id
    assert reminder.id != to_reminder("other", parse_event(raw)).id


def test_event_defaults_and_caps():
    bare = to_reminder("s", parse_event(event("e1", name="job.done")))
    assert bare.body == "job.done" and bare.tags == ["job.done", "level:info"] and bare.dedupe_key is None
    long = to_reminder("s", parse_event(event("e2", title="t" * 300, body="b" * 3000)))
    title, body = long.body.split("\n")
    assert len(title) == 200 and title.endswith("…") and len(body) == 2000 and body.endswith("…")
    assert plain("a\x00b\x85c\u200bd", 10) == "a b c\u200bd"  # C0 and C1 go, other text stays


@pytest.mark.parametrize("mutate, says", [
    (lambda e: e.pop("eventId"), "`eventId`"),
    (lambda e: e.update(eventId="x\x00"), "`eventId`"),
    (lambda e: e.update(name="two words"), "`name`"),
    (lambda e: e.update(timestamp="yesterday"), "`timestamp`"),
    (lambda e: e.update(data=[1]), "`data`"),
    (lambda e: e.update(cursor=7), "`cursor`"),
    (lambda e: e.update(_meta=[]), "`_meta`"),
    (lambda e: e.update(_meta={NOTE: {"level": "critical"}}), "`level`"),
    (lambda e: e.update(_meta={NOTE: {"title": 3}}), "`title`"),
    (lambda e: e.update(_meta={NOTE: {"link": {"resource": "javascript:alert(1)"}}}), "`link.resource`"),
    (lambda e: e.update(data={"blob": "x" * 70_000}), "over the cap"),
])
def test_malformed_events_are_refused_with_the_field(mutate, says):
    raw = event("e1")
    mutate(raw)
    with pytest.raises(Malformed, match=says.replace("[", r"\[")):
        parse_event(raw)


@pytest.mark.parametrize("body, says", [
    ([], "not an object"), ({"events": {}}, "`events` is not an array"),
    ({"events": [], "cursor": ""}, "`cursor`"), ({"events": [], "hasMore": "yes"}, "`hasMore`"),
    ({"events": [], "nextPollMs": -1}, "`nextPollMs`"), ({"events": [0] * 5001}, "over the cap"),
    ({"events": [], "resultType": "input_required"}, "resultType"),
])
def test_malformed_answers_fail_the_poll(body, says):
    with pytest.raises(Malformed, match=says):
        parse_answer(body)


def test_answer_from_a_resource_read():
    answer = answer_from_read({"contents": [{"uri": "acme://n", "text": json.dumps({"events": [], "cursor": "9"})}]})
    assert (answer.cursor, answer.truncated, answer.has_more, answer.next_poll_ms) == ("9", False, False, None)
    with pytest.raises(Malformed, match="not JSON"):
        answer_from_read({"contents": [{"uri": "acme://n", "text": "<html>"}]})


# -- cadence -----------------------------------------------------------------------------------
def test_cadence_honours_next_poll_ms_within_floor_and_ceiling():
    poller = Poller(Cadence(floor_ms=1000, ceiling_ms=60_000), now=0.0)
    assert poller.due(0.0)
    poller.start(0.0)
    assert not poller.due(100.0)  # one read in flight at a time
    poller.succeeded(1.0, events=1, has_more=False, next_poll_ms=30_000)
    assert poller.wait_ms(1.0) == 30_000
    poller.start(31.0)
    poller.succeeded(31.0, events=0, has_more=False, next_poll_ms=5)  # floored
    assert poller.wait_ms(31.0) == 1000
    poller.start(32.0)
    poller.succeeded(32.0, events=0, has_more=False, next_poll_ms=10 ** 9)  # ceilinged
    assert poller.wait_ms(32.0) == 60_000


def test_has_more_reads_at_once_but_never_spins():
    poller = Poller(Cadence(floor_ms=1000, ceiling_ms=8000, max_chain=3), now=0.0)
    for _ in range(3):
        poller.start(0.0)
        poller.succeeded(0.0, events=100, has_more=True, next_poll_ms=60_000)
        assert poller.due(0.0)
    poller.start(0.0)
    poller.succeeded(0.0, events=100, has_more=True, next_poll_ms=None)
    assert not poller.due(0.0) and poller.wait_ms(0.0) == 1000


def test_quiet_and_failing_streams_back_off_and_recover():
    cadence = Cadence(floor_ms=1000, ceiling_ms=8000, timeout_ms=30_000)
    poller = Poller(cadence, now=0.0)
    waits = []
    for _ in range(5):
        poller.start(0.0)
        poller.failed(0.0)
        waits.append(poller.wait_ms(0.0))
    assert waits == [2000, 4000, 8000, 8000, 8000]
    poller.start(0.0)
    poller.succeeded(0.0, events=0, has_more=False, next_poll_ms=None)
    assert poller.wait_ms(0.0) == 2000  # quiet, not failing
    poller.start(0.0)
    poller.succeeded(0.0, events=2, has_more=False, next_poll_ms=None)
    assert poller.wait_ms(0.0) == 1000  # events: back to the floor
    poller.start(10.0)
    assert not poller.expired(39.0) and poller.expired(40.0)


# -- the store ---------------------------------------------------------------------------------
def test_store_dedupes_and_moves_the_cursor_with_the_events(tmp_path):
    path = tmp_path / "s.sqlite3"
    store = Store(path)
    assert store.cursor("src", "acme://n") is None
    assert store.accept("src", "acme://n", [("e1", "event", "{}"), ("e2", "event", "{}")], "2", 1) == 2
    assert store.accept("src", "acme://n", [("e2", "event", "{}"), ("e3", "event", "{}")], "3", 2) == 1
    assert store.accept("other", "acme://n", [("e1", "event", "{}")], None, 2) == 1  # ids are per source
    assert [r[1] for r in store.undelivered("src")] == ["e1", "e2", "e3"]
    store.mark_delivered([r[0] for r in store.undelivered("src")][:2])
    store.close()
    again = Store(path)  # a restart: the cursor and what was not handed over survive
    assert again.cursor("src", "acme://n") == "3" and [r[1] for r in again.undelivered("src")] == ["e3"]
    with pytest.raises(sqlite3.Error):  # the second item cannot be written: the whole poll is not stored
        again.accept("src", "acme://n", [("e4", "event", "{}"), ("e5", "event", object())], "5", 3)  # type: ignore[list-item]
    assert again.cursor("src", "acme://n") == "3"  # nothing stored, so the cursor did not move
    assert [r[1] for r in again.undelivered("src")] == ["e3"]
