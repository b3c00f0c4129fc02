"""A bug inside the proxy while it handles a reminder (spec §12: a reminder is never passed on
untranslated because something failed): the request gets -32603 naming the cause, the notification
is dropped and counted, and a frame that carries no reminder still goes on untouched."""
from __future__ import annotations

import json

from bridge.pipeline.commands import HOST, PEER, Forward
from bridge.policy import BudgetState, Policy
from bridge.rules import parse_rules_text
from tests.unit.pipeline.test_policy import acp, decode, frame, inject, legacy_reminder, mcp


class Broken(Policy):
    """A policy with a bug: every reminder it is asked about raises."""

    def screen(self, *args, **kwargs):
        raise KeyError("a bug")


def broken(f, rules: str = "") -> None:
    f.policy = Broken(parse_rules_text(rules).defaults, route="fs", state=BudgetState())


def test_a_reminder_notification_is_dropped_and_counted_never_forwarded_untranslated():
    f = mcp()
    broken(f)
    sent = frame(legacy_reminder(1))
    assert f.from_peer(sent) == []
    assert f.recorder.count("dropped") == 1
    [line] = [json.loads(line) for line in f.log.getvalue().splitlines() if '"pipeline_error"' in line]
    assert line["error"] == "KeyError" and line["method"] == "notifications/message"


def test_a_reminder_request_gets_an_internal_error_naming_the_cause():
    f = acp()
    broken(f)
    [(to, answer)] = decode(f.from_host(inject(7)))
    assert to == HOST
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32603, "message": "reminder could not be handled: internal error", "data": {"reason": "KeyError"}}}
    assert f.recorder.count("refused") == 1


def test_frames_without_a_reminder_and_the_observe_stage_still_pass_untouched():
    f = mcp()
    broken(f)
    log = frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})
    assert f.from_peer(log) == [Forward(HOST, log)]
    watching = acp('[defaults]\nstage = "observe"\n')
    broken(watching, '[defaults]\nstage = "observe"\n')
    sent = inject(8)
    assert watching.from_host(sent) == [Forward(PEER, sent)]
