"""The policy layer as the two sides see it, fed frame by frame into sans-I/O flows: budgets (drop,
coalesce, shadow, structured request errors), every trust limit's refusal, and every stage."""
from __future__ import annotations

import io
import json

import pytest

from tests.flows import make_flow
from bridge.pipeline.commands import HOST, PEER, Wakeup, writes
from bridge.policy import BudgetState, Policy
from bridge.rules import parse_rules_text
from bridge.telemetry import Recorder

LEGACY_CAPS = {"tools": {}, "_meta": {"harn": {"reminders": {"emit": True}}}}
HARN_AGENT_CAPS = {"_meta": {"harn": {"sessionUpdateExtensions": ["reminder_emitted"]}}}


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def frame(obj) -> bytes:
    return json.dumps(obj).encode()


def decode(commands):
    """What went on a wire, decoded (timers and deferred work are not wire traffic)."""
    return [(c.to, json.loads(c.data)) for c in writes(commands)]


def flow(protocol: str, rules: str = "", clock: Clock | None = None, **kwargs):
    settings = parse_rules_text(rules).defaults
    log = io.StringIO()
    recorder = Recorder(route="fs", log=log)
    policy = Policy(settings, route="fs", state=BudgetState())
    f = make_flow(protocol, settings, recorder, policy=policy, clock=clock or Clock(), **kwargs)
    f.log = log
    return f


def mcp(rules: str = "", host_caps=None, **kwargs):
    f = flow("mcp", rules, **kwargs)
    f.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": host_caps if host_caps is not None else {"reminders": {}},
        "clientInfo": {"name": "h", "version": "1"}}}))
    f.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": "2025-11-25", "capabilities": LEGACY_CAPS, "serverInfo": {"name": "s", "version": "1"}}}))
    return f


def legacy_reminder(n: int, key: str | None = None, **fields) -> dict:
    body = fields.pop("body", f"reminder {n}")
    reminder = {"id": f"r{n}", "body": body, **fields}
    if key is not None:
        reminder["dedupeKey"] = key
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "info", "logger": "harn.reminder", "data": body, "_meta": {"harn": {"reminder": reminder}}}}


def acp(rules: str = "", agent_caps=None, client_caps=None, **kwargs):
    f = flow("acp", rules, **kwargs)
    f.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": client_caps if client_caps is not None else {"reminders": {}}}}))
    f.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": 1, "agentCapabilities": agent_caps if agent_caps is not None else HARN_AGENT_CAPS}}))
    return f


def inject(msg_id, **params) -> bytes:
    params.setdefault("sessionId", "s1")
    params.setdefault("body", "Deps changed.")
    return frame({"jsonrpc": "2.0", "id": msg_id, "method": "session/inject_reminder", "params": params})


# -- budgets ---------------------------------------------------------------------------------------


def test_over_budget_notifications_are_dropped_and_everything_else_passes_untouched():
    f = mcp("[defaults.budget]\nrate = 60\nburst = 2\n")
    f.recorder.log_level = "info"  # budget drops are logged at info: a flood must not flood the log
    log = frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})
    got = []
    for n in range(5):
        got += f.from_peer(frame(legacy_reminder(n)))
        got += f.from_peer(log)
    kinds = [json.loads(s.data).get("method") for s in got]
    assert kinds == ["notifications/reminder", "notifications/message"] * 2 + ["notifications/message"] * 3
    assert [s.data for s in got if b"reminder" not in s.data] == [log] * 5  # byte-identical
    assert f.recorder.count("rate_limited") == 3
    assert "reminder budget exceeded for server:fs" in f.log.getvalue()


def test_coalesce_delivers_the_newest_per_key_once_tokens_return():
    clock = Clock()
    f = mcp('[defaults.budget]\nrate = 60\nburst = 1\nover = "coalesce"\n', clock=clock)
    assert len(f.from_peer(frame(legacy_reminder(0, "build")))) == 1  # the burst
    # the first one held asks for a timer at the moment a token returns (60/min: one a second)
    assert f.from_peer(frame(legacy_reminder(1, "build"))) == [Wakeup(clock.now + 1.0)]
    for n in range(2, 6):  # over budget: only the newest per key is held; the timer stands
        assert f.from_peer(frame(legacy_reminder(n, "build"))) == []
    assert f.from_peer(frame(legacy_reminder(6, "lint"))) == []
    assert f.from_peer(frame(legacy_reminder(7))) == []  # no key: held on its own
    assert f.pending_counts()["coalesce"] == 3
    assert f.wake(clock.now) == [Wakeup(clock.now + 1.0)]  # woken early: no token yet, ask again
    clock.now += 1.0
    released = f.wake(clock.now)
    [first] = decode(released)
    assert first[1]["params"]["reminder"]["id"] == "r5"  # newest "build", one token = one reminder
    assert released[-1] == Wakeup(clock.now + 1.0)  # the next token
    rest = []
    for _ in range(2):  # burst 1: the bucket never holds more than one token
        clock.now += 1.0
        rest += decode(f.wake(clock.now))
    assert [m["params"]["reminder"]["id"] for _, m in rest] == ["r6", "r7"]
    assert f.wake(clock.now + 60) == [] and f.pending_counts()["coalesce"] == 0  # nothing held: no timer
    assert f.recorder.count("coalesced") == 7


def test_the_coalesce_queue_is_bounded_by_max_pending_per_session():
    f = mcp('[defaults.budget]\nrate = 60\nburst = 1\nover = "coalesce"\n[defaults.trust]\nmax_pending_per_session = 2\n')
    for n in range(5):
        f.from_peer(frame(legacy_reminder(n)))
    assert f.pending_counts()["coalesce"] == 2
    assert "coalesce queue is full (max_pending_per_session = 2)" in f.log.getvalue()


def test_shadow_changes_nothing_on_the_wire_but_counts():
    f = mcp("[defaults.budget]\nrate = 60\nburst = 1\nshadow = true\n", host_caps={"_meta": {"harn": {"reminders": {}}}})
    frames = [frame(legacy_reminder(n)) for n in range(4)]
    assert [s.data for fr in frames for s in f.from_peer(fr)] == frames  # legacy host: byte-identical
    assert f.recorder.budget_rejections[("mcp", "fs", "server", "true")] == 3
    assert f.recorder.count("rate_limited") == 0


def test_a_request_over_budget_gets_the_structured_error():
    clock = Clock()
    f = acp("[defaults.budget]\nrate = 6\nburst = 1\nkey = \"session\"\n", clock=clock)
    [(to, first)] = decode(f.from_host(inject(1)))
    assert to == PEER and first["method"] == "session/remind"
    clock.now += 2.5
    [(to, refused)] = decode(f.from_host(inject(2)))
    assert to == HOST
    assert refused == {"jsonrpc": "2.0", "id": 2, "error": {
        "code": -32000, "message": "reminder budget exceeded",
        "data": {"retryAfterMs": 7500, "limit": 1, "remaining": 0, "scope": "session:s1"}}}
    clock.now += 7.5
    assert decode(f.from_host(inject(3)))[0][0] == PEER  # retrying when told works
    assert decode(f.from_host(inject(4, sessionId="s2")))[0][0] == PEER  # another session, another bucket


def test_two_connections_sending_the_same_session_id_never_share_its_budget():
    """A session's bucket is keyed by its scope (the sessionId within its connection): another client
    that sends the same id has a bucket of its own, on the same route's budget."""
    settings = parse_rules_text('[defaults.budget]\nrate = 6\nburst = 1\nkey = "session"\n').defaults
    policy = Policy(settings, route="fs", state=BudgetState())
    clients = []
    for _ in range(2):
        f = make_flow("acp", settings, Recorder(route="fs", log=io.StringIO()), policy=policy, clock=Clock())
        f.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": 1, "clientCapabilities": {"reminders": {}}}}))
        f.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1,
                                                                 "agentCapabilities": HARN_AGENT_CAPS}}))
        clients.append(f)
    first, second = clients
    assert decode(first.from_host(inject(1)))[0][0] == PEER
    assert decode(second.from_host(inject(1)))[0][0] == PEER  # the same "s1", another client: its own token
    [(to, refused)] = decode(first.from_host(inject(2)))
    assert to == HOST and refused["error"]["data"]["scope"] == "session:s1"  # what the client calls it


# -- trust limits: the refusal a user sees ----------------------------------------------------------


@pytest.mark.parametrize("trust, params, message, data", [
    ("max_body_bytes = 8", {"body": "ünïcödé!"},
     "reminder refused: `body` is 12 bytes, over max_body_bytes = 8", {"limit": "max_body_bytes", "value": 8}),
    ("max_tags = 2", {"tags": ["a", "b", "c"]},
     "reminder refused: 3 tags, over max_tags = 2", {"limit": "max_tags", "value": 2}),
    ("max_tag_chars = 4", {"tags": ["ok", "toolong"]},
     "reminder refused: `tags[1]` is 7 characters, over max_tag_chars = 4", {"limit": "max_tag_chars", "value": 4}),
    ("max_id_bytes = 4", {"id": "toolong"},
     "reminder refused: `id` is 7 bytes, over max_id_bytes = 4", {"limit": "max_id_bytes", "value": 4}),
    ("max_dedupe_key_bytes = 4", {"dedupeKey": "ünï"},
     "reminder refused: `dedupeKey` is 5 bytes, over max_dedupe_key_bytes = 4",
     {"limit": "max_dedupe_key_bytes", "value": 4}),
    ("strip_control = true", {"body": "\x07\x1b\u0085"},
     "reminder refused: `body` is empty once control characters are stripped (strip_control = true)",
     {"limit": "strip_control", "value": True}),
])
def test_each_content_limit_refuses_an_inject_naming_the_limit_and_its_value(trust, params, message, data):
    f = acp(f"[defaults.trust]\n{trust}\n")
    [(to, reply)] = decode(f.from_host(inject(7, **params)))
    assert to == HOST
    assert reply["error"] == {"code": -32602, "message": message, "data": data}
    assert f.recorder.trust_refusals[("acp", "fs", data["limit"])] == 1


def test_a_reminder_too_large_as_a_whole_is_refused_naming_its_largest_field_before_any_token_is_taken():
    f = acp("[defaults.trust]\nmax_reminder_bytes = 1024\n[defaults.budget]\nrate = 1\nburst = 1\nkey = \"session\"\n")
    [(to, reply)] = decode(f.from_host(inject(7, notes="x" * 2000)))
    assert to == HOST and reply["error"]["code"] == -32602
    assert reply["error"]["data"] == {"limit": "max_reminder_bytes", "value": 1024}
    assert reply["error"]["message"].startswith("reminder refused: it is ")
    assert "over max_reminder_bytes = 1024 (the largest field is `notes`, 2009 bytes)" in reply["error"]["message"]
    assert decode(f.from_host(inject(8)))[0][0] == PEER  # the session's one token was not spent on it


def test_pending_per_session_refuses_the_inject_that_would_overflow():
    f = acp("[defaults.trust]\nmax_pending_per_session = 2\n", agent_caps={})  # no reminder support: held
    assert "result" in decode(f.from_host(inject(1, dedupeKey="a")))[-1][1]
    assert "result" in decode(f.from_host(inject(2, dedupeKey="b")))[-1][1]
    assert "result" in decode(f.from_host(inject(3, dedupeKey="b", body="newer")))[-1][1]  # replaces: fits
    [(_, refused)] = decode(f.from_host(inject(4, dedupeKey="c")))
    assert refused["error"] == {
        "code": -32000, "message": "reminder refused: the session already holds 2 pending reminders "
                                   "(max_pending_per_session = 2)",
        "data": {"limit": "max_pending_per_session", "value": 2}}
    assert f.pending_counts()["hold"] == 2
    assert "result" in decode(f.from_host(inject(5, sessionId="s2")))[-1][1]  # per session


def test_a_notification_over_a_trust_limit_is_dropped_and_the_log_says_why():
    f = mcp("[defaults.trust]\nmax_body_bytes = 5\n")
    assert f.from_peer(frame(legacy_reminder(1, body="far too long"))) == []
    line = json.loads(f.log.getvalue().splitlines()[-1])
    assert line["event"] == "refused" and line["id"] == "r1"
    assert line["why"] == "reminder refused: `body` is 12 bytes, over max_body_bytes = 5"
    assert "far too long" not in f.log.getvalue()  # bodies are never logged by default


def test_control_characters_are_stripped_and_tab_and_newline_kept():
    f = mcp()
    [(_, out)] = decode(f.from_peer(frame(legacy_reminder(1, body="a\tb\nc\x00d\x1be\u009bf\r", tags=["x\x07y"]))))
    assert out["params"]["reminder"]["body"] == "a\tb\ncdef"
    assert out["params"]["reminder"]["tags"] == ["xy"]


def test_control_characters_force_a_rewrite_even_between_same_dialects():
    f = mcp(host_caps={"_meta": {"harn": {"reminders": {}}}})
    clean = frame(legacy_reminder(1))
    assert f.from_peer(clean)[0].data == clean
    [(_, out)] = decode(f.from_peer(frame(legacy_reminder(2, body="bell\x07"))))
    assert out["params"]["_meta"]["harn"]["reminder"]["body"] == "bell" and out["params"]["data"] == "bell"


def test_role_hint_ceiling_lowers_what_the_peer_claims_and_says_so():
    f = mcp('[defaults.trust]\nrole_hint_ceiling = "developer"\n')
    f.recorder.log_level = "info"
    [(_, out)] = decode(f.from_peer(frame(legacy_reminder(1, roleHint="system"))))
    assert out["params"]["reminder"]["roleHint"] == "developer"
    assert "system lowered to role_hint_ceiling = developer" in f.log.getvalue()
    [(_, low)] = decode(f.from_peer(frame(legacy_reminder(2, roleHint="user_block"))))
    assert low["params"]["reminder"]["roleHint"] == "user_block"  # below the ceiling: untouched


def test_role_hint_ceiling_applies_to_the_peer_only():
    f = acp('[defaults.trust]\nrole_hint_ceiling = "user_block"\n')
    [(_, out)] = decode(f.from_host(inject(1, roleHint="system")))
    assert out["params"]["role_hint"] == "system"  # the client (host side) is not the peer
    emitted = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {
        "sessionUpdate": "reminder_emitted", "_meta": {"harn": {"reminder": {
            "reminderId": "e1", "body": "b", "tags": [], "roleHint": "system", "renderedRole": "system",
            "source": "stdlib_provider", "ttlTurns": None}}}}}}
    [(_, update)] = decode(f.from_peer(frame(emitted)))
    original = update["params"]["update"]["_meta"]["reminder-bridge/original"]
    assert original["roleHint"] == "user_block"  # the agent's claim, lowered, is what the client sees


# -- stages ------------------------------------------------------------------------------------------


def test_observe_mcp_changes_nothing_and_counts_what_would_change():
    f = mcp('[defaults]\nstage = "observe"\n[defaults.budget]\nrate = 60\nburst = 1\n')
    frames = [frame(legacy_reminder(n, body=f"x{n}\x07")) for n in range(3)]
    assert [s.data for fr in frames for s in f.from_peer(fr)] == frames
    assert f.recorder.staged[("mcp", "fs", "rewritten", "observe")] == 4  # the capability and 3 reminders
    assert f.recorder.budget_rejections[("mcp", "fs", "server", "true")] == 2


def test_observe_acp_passes_injects_and_errors_untouched():
    f = acp('[defaults]\nstage = "observe"\n[defaults.trust]\nmax_body_bytes = 3\n')
    bad = inject(1, body="far too long")
    assert f.from_host(bad)[0].data == bad  # a refusal it would give is only counted
    legacy = frame({"jsonrpc": "2.0", "id": 2, "method": "session/remind", "params": {"sessionId": "s", "body": "x"}})
    assert f.from_host(legacy)[0].data == legacy
    assert f.recorder.staged[("acp", "fs", "refused", "observe")] == 1


def test_observe_acp_counts_what_hold_would_queue_without_holding():
    f = acp('[defaults]\nstage = "observe"\n', agent_caps={})
    data = inject(1)
    assert f.from_host(data)[0].data == data
    assert f.recorder.staged[("acp", "fs", "queued", "observe")] == 1
    assert f.pending_counts()["hold"] == 0


def test_dual_keeps_the_legacy_decoration_beside_the_standard_form():
    f = mcp('[defaults]\nstage = "dual"\n')
    [(_, out)] = decode(f.from_peer(frame(legacy_reminder(1))))
    assert out["method"] == "notifications/reminder" and out["params"]["_meta"]["harn"]["reminder"]["id"] == "r1"
    a = acp('[defaults]\nstage = "dual"\n')
    emitted = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {
        "sessionUpdate": "reminder_emitted", "_meta": {"harn": {"reminder": {
            "reminderId": "e1", "body": "b", "tags": [], "roleHint": "system", "renderedRole": "system",
            "source": "stdlib_provider", "ttlTurns": None}}}}}}
    [(_, update)] = decode(a.from_peer(frame(emitted)))
    assert update["params"]["update"]["body"] == "b" and update["params"]["update"]["_meta"]["harn"]["reminder"]


def test_translate_rewrites_without_the_legacy_decoration():
    f = mcp()
    [(_, out)] = decode(f.from_peer(frame(legacy_reminder(1))))
    assert out["method"] == "notifications/reminder" and "_meta" not in out["params"]


def test_enforce_refuses_legacy_host_input_naming_the_standard_method():
    f = acp('[defaults]\nstage = "enforce"\n')
    legacy = frame({"jsonrpc": "2.0", "id": 9, "method": "session/remind", "params": {"sessionId": "s", "body": "x"}})
    [(to, reply)] = decode(f.from_host(legacy))
    assert to == HOST and reply["id"] == 9
    assert "session/inject_reminder" in reply["error"]["message"]
    assert reply["error"]["code"] == -32602  # the one enforce answer, on every protocol
    assert reply["error"]["data"] == {"stage": "enforce", "standardMethod": "session/inject_reminder"}
    [(to, _)] = decode(f.from_host(inject(10)))
    assert to == PEER  # the standard method still works
    m = mcp('[defaults]\nstage = "enforce"\n')  # MCP reminders only flow toward the host: as translate
    [(_, out)] = decode(m.from_peer(frame(legacy_reminder(1))))
    assert out["method"] == "notifications/reminder"


def test_a_reconfigure_flips_the_stage_for_the_next_message():
    f = mcp('[defaults]\nstage = "observe"\n')
    data = frame(legacy_reminder(1))
    assert f.from_peer(data)[0].data == data
    f.reconfigure(parse_rules_text('[defaults]\nstage = "translate"\n').defaults)
    [(_, out)] = decode(f.from_peer(frame(legacy_reminder(2))))
    assert out["method"] == "notifications/reminder"


def test_a_reminder_riding_on_a_request_can_be_refused_without_refusing_the_request():
    """For A2A's `metadata.harn.reminder` on `SendMessage`: the reminder is dropped, the message goes on."""
    from bridge.model import Reminder
    from bridge.pipeline.waiting import Step, at_once

    f = flow("a2a", "[defaults.budget]\nrate = 60\nburst = 1\n")
    send = {"jsonrpc": "2.0", "id": 4, "method": "SendMessage", "params": {}}
    judged: list = []
    then = Step(lambda outcome: judged.append(outcome) or [])

    def police(reminder, **kw):
        assert at_once(f.police(send, reminder, "SendMessage", origin=HOST, then=then, **kw)) == []
        return judged.pop()

    kept, out = police(Reminder(body="one"), request=False)
    assert kept is not None and out == []
    refused, out = police(Reminder(body="two"), request=False)
    assert refused is None and out == []  # no error answer: the caller's message is not refused
    refused, out = police(Reminder(body="three"))
    assert json.loads(out[0].data)["error"]["message"] == "reminder budget exceeded"  # as a request, it would be
