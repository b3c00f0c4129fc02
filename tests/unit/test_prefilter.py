"""The pre-filter is exact: it may let ordinary frames through to the decoder, but it must never
skip a frame that concerns reminders, however the sender spelled it in JSON."""
from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.cli.translate import translate
from bridge.prefilter import could_concern

# ----------------------------------------------------------------------------- one frame per dialect

REMINDER_MESSAGES: dict[str, Any] = {
    "mcp standard notification": {"jsonrpc": "2.0", "method": "notifications/reminder",
                                  "params": {"reminder": {"id": "r", "body": "b"}}},
    "mcp legacy log": {"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"level": "info", "data": "b", "_meta": {"harn": {"reminder": {"body": "b"}}}}},
    "mcp legacy flat key": {"jsonrpc": "2.0", "method": "notifications/message",
                            "params": {"level": "info", "data": "b", "_meta": {"harn.reminder": {"body": "b"}}}},
    "mcp standard capability": {"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {"reminders": {"emit": True}}}},
    "mcp legacy capability": {"jsonrpc": "2.0", "id": 1,
                              "result": {"capabilities": {"_meta": {"harn": {"reminders": {"emit": True}}}}}},
    "acp inject": {"jsonrpc": "2.0", "id": 1, "method": "session/inject_reminder", "params": {"sessionId": "s", "body": "b"}},
    "acp remind": {"jsonrpc": "2.0", "id": 1, "method": "session/remind", "params": {"sessionId": "s", "body": "b"}},
    "acp emitted standard": {"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s", "update": {"sessionUpdate": "reminder_emitted", "reminderId": "r", "body": "b"}}},
    "acp emitted legacy": {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
        "sessionUpdate": "reminder_emitted", "_meta": {"harn": {"reminder": {"reminderId": "r", "body": "b"}}}}}},
    "acp deduped": {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
        "sessionUpdate": "reminder_deduped", "reminderId": "r", "dedupeKey": "k", "droppedReminderIds": []}}},
    "acp expired": {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
        "sessionUpdate": "reminder_expired", "reminderId": "r", "phase": "cleared"}}},
    "acp legacy capability": {"jsonrpc": "2.0", "id": 0, "result": {"agentCapabilities": {
        "_meta": {"harn": {"sessionUpdateExtensions": ["reminder_emitted"]}}}}},
    "a2a inject": {"jsonrpc": "2.0", "id": 1, "method": "InjectTaskReminder",
                   "params": {"taskId": "t", "reminder": {"body": "b"}}},
    "a2a update frame": {"jsonrpc": "2.0", "id": 1, "result": {"reminderUpdate": {"taskId": "t", "reminder": {"body": "b"}}}},
    "a2a legacy params": {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m", "parts": [{"text": "hi"}]}, "metadata": {"harn": {"reminder": {"body": "b"}}}}},
    "a2a legacy list": {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m", "metadata": {"harn": {"reminders": [{"body": "b"}]}}}}},
    "a2a legacy event": {"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate": {
        "taskId": "t", "metadata": {"harn": {"reminder": {"body": "b"}}}}}},
    "a2a card": {"name": "x", "capabilities": {"reminders": {"inject": True}}},
}


@pytest.mark.parametrize("name", sorted(REMINDER_MESSAGES))
@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("indent", [None, 2])
def test_reminder_frames_concern(name, ensure_ascii, indent):
    frame = json.dumps(REMINDER_MESSAGES[name], ensure_ascii=ensure_ascii, indent=indent).encode()
    assert could_concern(frame)


ESCAPED = [
    rb'{"jsonrpc":"2.0","method":"notifications/\u0072eminder","params":{"reminder":{"id":"r","body":"b"}}}',
    rb'{"jsonrpc":"2.0","method":"notifications/r\u0065m\u0069nd\u0065r","params":{"r\u0065minder":{"body":"b"}}}',
    rb'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x",'
    rb'"_meta":{"harn":{"rem\u0069nder":{"body":"b"}}}}}',
    rb'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x",'
    rb'"_meta":{"harn.rem\u0069nder":{"body":"b"}}}}',
    rb'{"jsonrpc":"2.0","id":1,"method":"session\/remind","params":{"sessionId":"s","body":"b"}}',
    rb'{"jsonrpc":"2.0","id":1,"method":"session\/r\u0065mind","params":{"sessionId":"s","body":"b"}}',
    rb'{"jsonrpc":"2.0","id":1,"method":"session/inject_\u0052\u0045MINDER","params":{}}',
    rb'{"jsonrpc":"2.0","id":1,"method":"InjectTaskR\u0065mind\u0065r","params":{"taskId":"t","reminder":{}}}',
    rb'{"jsonrpc":"2.0","id":1,"result":{"r\u0065minderUpdate":{"taskId":"t"}}}',
    rb'{"jsonrpc":"2.0","id":1,"method":"session/update","params":{"sessionId":"s","update":'
    rb'{"sessionUpdate":"reminder_emitted","_meta":{"harn":{"r\u0045minder":{}}}}}}',
    rb'{"jsonrpc":"2.0","id":1,"method":"session/update","params":{"sessionUpdate":"\u0072\u0065\u006D\u0069\u006E\u0064"}}',
]


@pytest.mark.parametrize("frame", ESCAPED, ids=range(len(ESCAPED)))
def test_escaped_markers_concern(frame):
    json.loads(frame)  # every one is valid JSON
    assert could_concern(frame)


def test_escaped_method_is_really_rewritten():
    """An escaped spelling is not only let through the filter: the proxy acts on it."""
    [send] = translate("mcp", "host", "standard", "legacy", ESCAPED[0])
    message = json.loads(send.data)
    assert message["method"] == "notifications/message"
    assert message["params"]["_meta"]["harn"]["reminder"] == {"id": "r", "body": "b"}
    [send] = translate("mcp", "host", "legacy", "standard", ESCAPED[2])
    assert json.loads(send.data)["method"] == "notifications/reminder"


ORDINARY = [
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"q":"weather"}}}',
    b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"sunny"}],"isError":false}}',
    b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","logger":"db","data":"slow"}}',
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}',
    rb'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"caf\u00e9 \u4e2d\u6587"}}',
    rb'{"jsonrpc":"2.0","id":1,"result":{"text":"\ud83d\ude00 \u00c9t\u00e9 \u00ff \u0100 \u07ff \uffff"}}',
    rb'{"jsonrpc":"2.0","id":1,"result":{"text":"tab\tnew\nline \u0000 \u001b \u001f \u0080 \u009f"}}',
    '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":'
    '"agent_message_chunk","content":{"type":"text","text":"état 中文 ☕ Rémi"}}}}'.encode(),
    b'{"jsonrpc":"2.0","id":"x","method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"Rappel: mind the gap"}]}}',
    b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","parts":[{"text":"REMINDER"}]}}}',
    b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]',
    b"not json at all",
    b"",
]


@pytest.mark.parametrize("frame", ORDINARY, ids=range(len(ORDINARY)))
def test_ordinary_traffic_is_skipped(frame):
    assert not could_concern(frame)


def test_custom_markers():
    frame = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'
    assert not could_concern(frame)
    assert could_concern(frame, (b"emind", b"initialize"))
    assert not could_concern(frame, (b"tools",))


# ----------------------------------------------------------------------------- property: no false negatives

MARKED = st.sampled_from(["reminder", "emind", "session/remind", "inject_reminder", "reminderUpdate",
                          "InjectTaskReminder", "xemindx", "Reminders"])
fragments = st.text(max_size=8) | MARKED
strings = st.lists(fragments, max_size=3).map("".join)
scalars = st.none() | st.booleans() | st.integers() | strings
json_docs = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                         | st.dictionaries(strings, inner, max_size=3), max_leaves=8)


def contains_marker(obj: Any) -> bool:
    if isinstance(obj, str):
        return "emind" in obj
    if isinstance(obj, list):
        return any(contains_marker(v) for v in obj)
    if isinstance(obj, dict):
        return any(contains_marker(k) or contains_marker(v) for k, v in obj.items())
    return False


def adversarial_dumps(obj: Any, rnd: random.Random) -> str:
    """JSON with characters of strings escaped at random as `\\uXXXX` (either hex case) or `\\/`."""
    if isinstance(obj, str):
        out = []
        for ch in obj:
            roll = rnd.random()
            if ch == "/" and roll < 0.5:
                out.append("\\/")
            elif roll < 0.3 or ch in '"\\' or ord(ch) < 0x20:
                units = [ord(ch)]
                if ord(ch) > 0xFFFF:  # astral: a surrogate pair, as JSON spells it
                    hi, lo = divmod(ord(ch) - 0x10000, 0x400)
                    units = [0xD800 + hi, 0xDC00 + lo]
                upper = rnd.random() < 0.5
                out.extend("\\u" + (f"{u:04X}" if upper else f"{u:04x}") for u in units)
            else:
                out.append(ch)
        return '"' + "".join(out) + '"'
    if isinstance(obj, list):
        return "[" + ",".join(adversarial_dumps(v, rnd) for v in obj) + "]"
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{adversarial_dumps(k, rnd)}: {adversarial_dumps(v, rnd)}" for k, v in obj.items()) + "}"
    return json.dumps(obj)


@settings(max_examples=300, deadline=None)
@given(json_docs, st.sampled_from(["ascii", "utf8", "adversarial"]), st.integers(0, 2**32))
def test_no_false_negatives(doc, style, seed):
    if style == "adversarial":
        text = adversarial_dumps(doc, random.Random(seed))
    else:
        text = json.dumps(doc, ensure_ascii=(style == "ascii"))
    frame = text.encode("utf-8", "surrogatepass")
    assert json.loads(frame) == doc  # the frame really is this document
    if contains_marker(doc):
        assert could_concern(frame)


@settings(max_examples=60, deadline=None)
@given(json_docs.filter(lambda d: not contains_marker(d)))
def test_unescaped_ordinary_documents_are_skipped(doc):
    """Without markers and without escaped ASCII, nothing needs decoding (the filter earns its keep)."""
    frame = json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if b"\\u00" not in frame:
        assert not could_concern(frame)
