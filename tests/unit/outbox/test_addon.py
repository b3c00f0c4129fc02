"""The outbox add-on on the MCP flow, frame by frame with a hand-driven clock (docs/outbox.md):
when polls start in each era, what they carry, what becomes of their answers, restarts, and the
proxy's own outbox resource."""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from bridge.pipeline.commands import Defer, Wakeup, receipts_of
from bridge.assembly import make_flow
from bridge.pipeline.flow import OWN_ID_PREFIX
from bridge.transports.driver import run_blocking
from bridge.dialects.mcp import McpStandard
from bridge.outbox.events import parse_event, to_reminder
from bridge.rules import parse_rules_text
from bridge.state.scope import STDIO, Scope
from bridge.telemetry import Recorder

NOTE = "ai.nimblebrain/notification"
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {"extensions": {"com.example/reminders": {}}},
          "io.modelcontextprotocol/clientInfo": {"name": "host", "version": "1"}}


def event(event_id: str, name: str = "domain.active", **shown) -> dict:
    out = {"eventId": event_id, "name": name, "timestamp": "2026-09-01T18:42:10Z", "data": {"id": event_id}}
    if shown:
        out["_meta"] = {NOTE: shown}
    return out


# -- the MCP flow ------------------------------------------------------------------------------
class _Log:
    def __init__(self):
        self.lines: list[dict] = []

    def write(self, text):
        self.lines.append(json.loads(text))

    def flush(self):
        pass


def perform(commands, flow) -> list[tuple[str, dict]]:
    """What a transport does, without one: blocking work run at once, in order (a transport runs it
    on its background thread); what goes on a wire, decoded, and reported written."""
    out: list[tuple[str, dict]] = []
    for command in commands:
        if isinstance(command, Defer):
            out += perform(command.done(run_blocking(command)), flow)
        elif not isinstance(command, Wakeup):
            out.append((command.to, json.loads(command.data)))
            out += perform(flow.written(receipts_of([command])), flow)
    return out


class Link:
    """One MCP connection through the sans-I/O flow, with a hand-driven clock."""

    def __init__(self, tmp_path: Path, table: str = "", host_caps: dict | None = None, route_extra: str = "",
                 scope: Scope | None = None, beside: "Link | None" = None):
        """``beside``: another connection of the same route (its recorder, so its store)."""
        rules = (f'[routes.r]\nprotocol = "mcp"\n{route_extra}\n{table}\n')
        rules = rules.replace("STORE", str(tmp_path / "outbox.sqlite3"))
        self.log = beside.log if beside is not None else _Log()
        self.wall = 1_800_000_000.0
        self.now = 100.0
        recorder = beside.flow.recorder if beside is not None else Recorder(route="r", log=self.log)
        self.flow = make_flow("mcp", parse_rules_text(rules).routes["r"], recorder,
                              clock=lambda: self.now, scope=scope or Scope.connection("r", STDIO))
        self.outbox = self.flow.addons[0] if self.flow.addons else None
        if self.outbox is not None:
            self.outbox.wall = lambda: self.wall
        self.host_caps = {"reminders": {}} if host_caps is None else host_caps

    def host(self, msg) -> list[tuple[str, dict]]:
        return perform(self.flow.from_host(json.dumps(msg).encode()), self.flow)

    def peer(self, msg) -> list[tuple[str, dict]]:
        return perform(self.flow.from_peer(json.dumps(msg).encode()), self.flow)

    def tick(self, seconds: float = 0.25) -> list[tuple[str, dict]]:
        """Time passes; the flow is woken (a transport would have woken it at its `Wakeup`)."""
        self.now += seconds
        return perform(self.flow.wake(self.now), self.flow)

    def legacy_handshake(self, server_caps: dict | None = None) -> list[tuple[str, dict]]:
        self.host({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": self.host_caps, "clientInfo": {"name": "h", "version": "1"}}})
        out = self.peer({"jsonrpc": "2.0", "id": 1, "result": {
            "protocolVersion": "2025-11-25", "capabilities": server_caps or {"tools": {}},
            "serverInfo": {"name": "s", "version": "1"}}})
        assert self.tick() == []  # not before the handshake completed
        self.host({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return out

    def modern_handshake(self, server_caps: dict | None = None) -> list[tuple[str, dict]]:
        meta = {**MODERN, "io.modelcontextprotocol/clientCapabilities": self.host_caps}
        self.host({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}})
        return self.peer({"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": server_caps or {"tools": {}},
            "ttlMs": 0, "cacheScope": "private"}})

    def answer(self, request: dict, events: list, cursor: str | None = "c1", **flags) -> list[tuple[str, dict]]:
        body = {"events": events, "cursor": cursor, **flags}
        if request["method"] == "events/poll":
            return self.peer({"jsonrpc": "2.0", "id": request["id"], "result": {"resultType": "complete", **body}})
        return self.peer({"jsonrpc": "2.0", "id": request["id"], "result": {"contents": [
            {"uri": request["params"]["uri"], "mimeType": "application/json", "text": json.dumps(body)}]}})


PULL = ('[routes.r.outbox]\nresource = "acme://n"\nstore = "STORE"\npoll_floor_ms = 1000\n'
        'poll_ceiling_ms = 10000\nmax_events = 50\nmax_age_ms = 3600000\n')
SERVE = '[routes.r.serve_outbox]\nresource = "bridge://reminders"\nstore = "STORE"\nretention_s = 3600\n'


def only_poll(out) -> dict:
    [(to, request)] = out
    assert to == "peer" and request["id"].startswith(OWN_ID_PREFIX)
    return request


def query(request) -> dict:
    return {k: v[0] for k, v in parse_qs(urlsplit(request["params"]["uri"]).query).items()}


def reminders(out) -> list[dict]:
    assert all(to == "host" for to, _ in out)
    return [m["params"]["reminder"] for _, m in out if m.get("method") == "notifications/reminder"]


def test_legacy_polls_start_after_initialized_and_answers_never_reach_the_host(tmp_path):
    link = Link(tmp_path, PULL)
    [(_, result)] = link.legacy_handshake()
    assert result["result"]["capabilities"]["reminders"] == {
        "emit": True, "propagate": ["session"], "roleHints": ["user_block"]}  # what the host will get
    first = only_poll(link.tick())
    assert first["method"] == "resources/read" and "_meta" not in first["params"]
    assert query(first) == {"maxEvents": "50", "maxAgeMs": "3600000"}  # bootstrap: no cursor
    assert link.answer(first, [], cursor="0", nextPollMs=2000) == []  # consumed, not forwarded
    assert link.tick(1.0) == []
    second = only_poll(link.tick(1.0))
    assert query(second)["cursor"] == "0"
    out = link.answer(second, [event("e1", subject="acme.test", title="acme.test is active"), event("e2")],
                      cursor="2", nextPollMs=60_000)
    assert [r["dedupeKey"] if "dedupeKey" in r else r["body"] for r in reminders(out)] == [
        "domain.active:acme.test", "domain.active"]
    assert link.tick(9.0) == [] and query(only_poll(link.tick(1.0)))["cursor"] == "2"  # ceiling 10 s
    assert link.flow.recorder.count("rewritten", "mcp") == 2


def test_modern_polls_carry_the_hosts_envelope_and_wait_for_a_successful_discover(tmp_path):
    link = Link(tmp_path, PULL)
    meta = {**MODERN}
    link.host({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}})
    link.peer({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}})
    assert link.tick() == []  # a failed probe: the host falls back to initialize, no modern poll
    link.host({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": meta}})
    link.peer({"jsonrpc": "2.0", "id": 2, "result": {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                                                     "capabilities": {}, "ttlMs": 0, "cacheScope": "private"}})
    poll = only_poll(link.tick())
    assert poll["params"]["_meta"] == MODERN  # protocol version, client capabilities and info, as the host sent them


def test_modern_host_without_a_probe_commits_with_its_first_request(tmp_path):
    link = Link(tmp_path, PULL)
    link.host({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": MODERN}})
    assert only_poll(link.tick())["params"]["_meta"] == MODERN


def test_events_extension_is_polled_through_events_poll(tmp_path):
    link = Link(tmp_path, PULL)
    link.modern_handshake({"extensions": {"io.modelcontextprotocol/events": {}}})
    listing = only_poll(link.tick())
    assert listing["method"] == "events/list"
    out = link.peer({"jsonrpc": "2.0", "id": listing["id"], "result": {"resultType": "complete", "events": [
        {"name": "email.received", "delivery": ["poll", "push"], "inputSchema": {"type": "object"}},
        {"name": "build.failed", "delivery": ["webhook"], "inputSchema": {"type": "object"}},
        {"name": "repo.pushed", "delivery": ["poll"], "inputSchema": {"type": "object", "required": ["repo"]}}]}})
    poll = only_poll(out)
    assert poll["method"] == "events/poll"
    params = poll["params"]
    assert (params["name"], params["arguments"], params["cursor"], params["maxEvents"]) == ("email.received", {}, None, 50)
    assert params["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {  # the host's, declaring the extension
        "reminders": {}, "extensions": {"io.modelcontextprotocol/events": {}}}
    assert link.answer(poll, [], cursor="h1") == []
    assert link.tick(1.75) == []
    again = only_poll(link.tick(0.25))  # quiet: 2 s later
    assert again["params"]["cursor"] == "h1"
    [got] = reminders(link.answer(again, [event("m1", name="email.received")], cursor="h2"))
    assert got["body"] == "email.received"


def test_has_more_polls_again_at_once(tmp_path):
    link = Link(tmp_path, PULL)
    link.legacy_handshake()
    first = only_poll(link.tick())
    out = link.answer(first, [event("e1")], cursor="1", hasMore=True, nextPollMs=60_000)
    assert [to for to, _ in out] == ["host", "peer"]
    assert query(out[1][1])["cursor"] == "1"


def test_a_malformed_event_is_dropped_alone_and_counted(tmp_path):
    link = Link(tmp_path, PULL)
    link.legacy_handshake()
    out = link.answer(only_poll(link.tick()), [event("e1"), {"eventId": "e2", "name": "bad event"}, "junk", event("e3")])
    assert [r["_meta"]["reminder-bridge/event"]["event"]["eventId"] for r in reminders(out)] == ["e1", "e3"]
    assert link.flow.recorder.count("invalid", "mcp") == 2
    dropped = [line for line in link.log.lines if line["event"] == "invalid"]
    assert "event 1 (e2) dropped: `name` is not a string" in dropped[0]["why"]
    assert "event 2 dropped: the event is not an object" in dropped[1]["why"]


def test_a_malformed_answer_keeps_the_cursor_and_backs_off(tmp_path):
    link = Link(tmp_path, PULL)
    link.legacy_handshake()
    link.answer(only_poll(link.tick()), [], cursor="5")
    broken = only_poll(link.tick(2.0))  # quiet: backed off to 2 s
    assert link.peer({"jsonrpc": "2.0", "id": broken["id"], "result": {"contents": [{"uri": "x", "text": "{"}]}}) == []
    assert link.tick(1.0) == [] and link.tick(1.0)  # backed off 2 s
    failure = next(line for line in link.log.lines if line["event"] == "outbox_poll_failed")
    assert "not JSON" in failure["why"] and "the cursor stays" in failure["why"]


def test_errors_back_off_and_a_lost_answer_times_out(tmp_path):
    link = Link(tmp_path, PULL)
    link.legacy_handshake()
    first = only_poll(link.tick())
    assert link.peer({"jsonrpc": "2.0", "id": first["id"], "error": {"code": -32002, "message": "gone"}}) == []
    assert link.tick(1.5) == []
    lost = only_poll(link.tick(0.5))
    assert link.tick(29.0) == []  # waiting for the answer
    retry = only_poll(link.tick(1.5) or link.tick(4.0))  # timed out at 30 s, then backed off
    assert retry["id"] != lost["id"]
    assert link.answer(lost, [event("late")], cursor="9") == []  # a late answer is dropped, never forwarded
    assert query(retry).get("cursor") is None


def test_truncated_answers_produce_one_gap_reminder(tmp_path):
    link = Link(tmp_path, PULL)
    link.legacy_handshake()
    out = link.answer(only_poll(link.tick()), [event("e9")], cursor="9", truncated=True)
    gap, got = reminders(out)
    assert gap["body"].startswith("Some events from acme://n were missed")
    assert gap["tags"] == ["outbox.truncated", "level:attention"] and gap["dedupeKey"] == "outbox.truncated:r|acme://n"
    assert got["_meta"]["reminder-bridge/event"]["event"]["eventId"] == "e9"
    assert any(line["event"] == "outbox_truncated" for line in link.log.lines)


def test_a_restart_neither_loses_nor_repeats(tmp_path):
    link = Link(tmp_path, PULL)
    link.legacy_handshake()
    first = only_poll(link.tick())
    link.outbox.store.mark_delivered = lambda rowids: None  # dies between storing and handing over
    link.answer(first, [event("e1"), event("e2")], cursor="2")
    restarted = Link(tmp_path, PULL)
    restarted.legacy_handshake()
    out = restarted.tick()
    assert [r["_meta"]["reminder-bridge/event"]["event"]["eventId"] for r in reminders(out[:-1])] == ["e1", "e2"]
    poll = out[-1][1]
    assert query(poll)["cursor"] == "2"  # no bootstrap: it resumes
    # e2 comes again from the server (at-least-once): stored once, sent once
    assert reminders(restarted.answer(poll, [event("e2"), event("e3")], cursor="3")) == [
        to_reminder_wire("r|acme://n", event("e3"))]
    third = Link(tmp_path, PULL)
    third.legacy_handshake()
    assert query(only_poll(third.tick()))["cursor"] == "3"


def to_reminder_wire(source: str, raw: dict) -> dict:
    return McpStandard.encode(to_reminder(source, parse_event(raw)))["params"]["reminder"]


def test_a_host_without_reminder_support_gets_them_in_the_next_tool_result(tmp_path):
    link = Link(tmp_path, PULL, host_caps={})
    link.legacy_handshake()
    assert link.answer(only_poll(link.tick()), [event("e1", title="deploy finished")]) == []
    pending = link.outbox.store.undelivered(link.outbox.source)
    assert len(pending) == 1  # queued for the tool result: not delivered yet, so a restart re-queues it
    link.host({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "t"}})
    [(_, result)] = link.peer({"jsonrpc": "2.0", "id": 5, "result": {"content": []}})
    assert "deploy finished</system-reminder>" in result["result"]["content"][0]["text"]
    assert link.outbox.store.undelivered(link.outbox.source) == []


def test_outbox_traffic_leaves_the_hot_path_alone(tmp_path):
    link = Link(tmp_path, PULL + SERVE)
    link.legacy_handshake()
    only_poll(link.tick())
    frame = b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}'
    [send] = link.flow.from_host(frame)
    assert send.data is frame  # untouched, not even parsed
    assert link.flow.passes(b'{"jsonrpc":"2.0","id":3,"result":{"content":[]}}', "peer")


def test_observe_stage_polls_nothing(tmp_path):
    rules = parse_rules_text('[routes.r]\nprotocol = "mcp"\nstage = "observe"\n' + PULL.replace(
        "STORE", str(tmp_path / "s.sqlite3"))).routes["r"]
    log = _Log()
    flow = make_flow("mcp", rules, Recorder(route="r", log=log))
    assert flow.addons == () and log.lines[0]["event"] == "outbox_off"


# -- the proxy's own outbox --------------------------------------------------------------------
LEGACY_REMINDER = {"jsonrpc": "2.0", "method": "notifications/message", "params": {
    "level": "info", "logger": "harn.reminder", "data": "b",
    "_meta": {"harn": {"reminder": {"id": "r1", "body": "Rebase first.\nThen push.", "dedupeKey": "k"}}}}}
HARN_CAPS = {"_meta": {"harn": {"reminders": {"emit": True}}}}


def push(link: Link, rid: str) -> list:
    msg = json.loads(json.dumps(LEGACY_REMINDER))
    msg["params"]["_meta"]["harn"]["reminder"]["id"] = rid
    return link.peer(msg)


def read(link: Link, uri: str, msg_id: int = 50) -> dict:
    [(to, response)] = link.host({"jsonrpc": "2.0", "id": msg_id, "method": "resources/read", "params": {"uri": uri}})
    assert to == "host"  # answered by the proxy, never sent to the server
    if "error" in response:
        return response
    return json.loads(response["result"]["contents"][0]["text"])


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
    link.outbox.next_prune = 0
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


def test_budgets_and_trust_limits_apply_to_reminders_made_from_events(tmp_path):
    link = Link(tmp_path, PULL, route_extra='[routes.r.budget]\nrate = 1\nburst = 2\n'
                                            '[routes.r.trust]\nrole_hint_ceiling = "ephemeral_cache"\n')
    link.legacy_handshake()
    out = link.answer(only_poll(link.tick()), [event("e1"), event("e2"), event("e3")])
    got = reminders(out)
    assert [r["_meta"]["reminder-bridge/event"]["event"]["eventId"] for r in got] == ["e1", "e2"]
    assert {r["roleHint"] for r in got} == {"ephemeral_cache"}  # lowered to the route's ceiling
    assert link.flow.recorder.count("rate_limited", "mcp") == 1
    assert sum(link.flow.recorder.budget_rejections.values()) == 1
    assert link.outbox.store.undelivered(link.outbox.source) == []  # decided: never handed over again


# -- whose: every row belongs to the flow's scope -------------------------------------------------
UNLISTENING = {**MODERN, "io.modelcontextprotocol/clientCapabilities": {}}  # a 2026-07-28 host without reminders


def test_sessions_of_one_route_share_a_store_and_nothing_in_it(tmp_path):
    a = Link(tmp_path, PULL + SERVE, host_caps={}, scope=Scope.mcp_session("r", "session-a"))
    b = Link(tmp_path, PULL + SERVE, scope=Scope.mcp_session("r", "session-b"), beside=a)
    assert a.outbox.store is b.outbox.store
    for link in (a, b):
        link.legacy_handshake(HARN_CAPS)
    assert a.answer(only_poll(a.tick()), [event("for-a")]) == []  # a `none` host: served to a, not pushed
    a_start, b_start = read(a, "bridge://reminders")["cursor"], read(b, "bridge://reminders")["cursor"]
    push(a, "ra")
    assert only_poll(b.tick())["method"] == "resources/read"  # b's own first read, and nothing of a's
    everything = a_start.rpartition(".")[0] + ".0"
    assert read(b, f"bridge://reminders?cursor={everything}")["events"] == []
    assert [e["eventId"] for e in read(a, f"bridge://reminders?cursor={everything}")["events"]] == [
        to_reminder_wire("r|acme://n", event("for-a"))["id"], "ra"]
    assert read(b, f"bridge://reminders?cursor={b_start}")["events"] == []


def test_a_request_that_is_nobodys_has_no_outbox_and_is_told_what_to_configure(tmp_path):
    link = Link(tmp_path, PULL + SERVE, scope=Scope.request("r"))
    link.host({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": UNLISTENING}})
    assert link.tick() == []  # no poll: nothing later would carry what it found
    refused = read(link, "bridge://reminders")
    assert refused["error"]["code"] == -32600
    assert 'routes.r.serve_outbox.identity = "header:<name>"' in refused["error"]["message"]
    assert push(link, "r1") == [] and link.outbox.incoming.first_tries == 0  # not recorded for anyone


def test_requests_of_one_identity_poll_once_per_floor_and_share_what_is_held(tmp_path):
    who = Scope.identity("r", "header:authorization", "Bearer alice")
    first = Link(tmp_path, PULL, host_caps={}, scope=who)
    first.host({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": UNLISTENING}})
    poll = only_poll(first.tick())
    assert first.answer(poll, [event("mail-1")]) == []  # held for the identity's next tool result
    later = Link(tmp_path, PULL, host_caps={}, scope=who, beside=first)  # the identity's next request
    later.now = first.now
    later.host({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t", "_meta": UNLISTENING}})
    assert later.tick(0.1) == []  # within poll_floor_ms of the last poll: none, and mail-1 is claimed by the first
    later.now += 1.0
    assert only_poll(later.tick())["method"] == "resources/read"  # a floor later: it polls
    first.flow.close("the request ended")  # mail-1 was never written: it stays for the identity
    third = Link(tmp_path, PULL, host_caps={}, scope=who, beside=first)
    third.host({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t", "_meta": UNLISTENING}})
    third.tick()
    [(_, result)] = third.peer({"jsonrpc": "2.0", "id": 3, "result": {"content": []}})
    assert "domain.active" in result["result"]["content"][0]["text"]  # mail-1, in its next request's tool result
    assert third.outbox.store.undelivered(third.outbox.source) == []
