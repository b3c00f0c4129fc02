"""Hypothesis fuzz of every codec, the pre-filter and the pipelines (spec §8): over more than
10,000 generated messages no exception escapes, and every frame either leaves byte-identical (the
very bytes object that came in) or is rewritten into output that is valid JSON-RPC and, where it
carries a reminder, valid against the published schema (tests/schemas) or, for the proposed
messages no published schema covers yet, against spec §3–§5 transcribed below.

Generated messages are reminder-shaped often (every dialect's slot, fields in both casings, valid
values mixed with arbitrary JSON) and serialized with random spacing, key casing and `\\u` escapes
of ASCII letters (what the pre-filter must see through).  Runs are derandomized so CI is stable;
set FUZZ_SCALE to scale them (FUZZ_SCALE=10 runs ten times as many examples) and FUZZ_RANDOM=1 for
fresh random examples on each run.
"""
from __future__ import annotations

import importlib
import json
import os
import pkgutil
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

import bridge
from tests.flows import make_flow
from bridge.dialects import a2a as a2a_codecs
from bridge.dialects import acp as acp_codecs
from bridge.dialects import mcp as mcp_codecs
from bridge.model import MODE_VALUES, PROPAGATE_VALUES, ROLE_HINT_VALUES, SOURCE_VALUES, Reminder, ReminderError
from bridge.pipeline.commands import HOST, PEER, writes
from bridge.prefilter import REMINDER_MARKERS, could_concern
from bridge.rules import RouteSettings
from bridge.telemetry import Recorder
from tests.paths import SCHEMAS

pytestmark = pytest.mark.fault

# Hypothesis also draws constants from the source of every local module loaded when it generates an
# example, so the bridge modules other tests happened to import would change what a derandomized
# run draws (and a subset of the suite could fail where the whole passes). Load them all first: the
# same tree draws the same examples, whatever else runs.
for _module in pkgutil.walk_packages(bridge.__path__, "bridge."):
    if not _module.name.endswith(".__main__"):
        importlib.import_module(_module.name)

SCALE = float(os.environ.get("FUZZ_SCALE", "1"))
FUZZ = settings(deadline=None, database=None, derandomize=not os.environ.get("FUZZ_RANDOM"),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


def examples(n: int) -> settings:
    return settings(FUZZ, max_examples=max(1, int(n * SCALE)))


class _Null:
    def write(self, _: str) -> int:
        return 0

    def flush(self) -> None:
        pass


RECORDER = Recorder(route="fuzz", log=_Null())  # type: ignore[arg-type]

#: Generated messages each fuzz test must have run at FUZZ_SCALE=1 (each test counts its own and
#: checks its own floor, so the promise holds whatever order or subset of tests runs).  Set a little
#: under what the examples produce, since Hypothesis may discard an overrun example; together
#: they are the module's promise of more than 10,000 messages.
FLOORS = {"reminder_shapes": 14_000, "conversations[mcp]": 240, "conversations[acp]": 240,
          "conversations[a2a]": 240, "prefilter_sound": 1_000, "prefilter_clears": 800}


def ran_at_least(name: str, messages: int) -> None:
    """Fail the test named ``name`` if it generated fewer messages than its floor (scaled down
    with FUZZ_SCALE below 1, never up)."""
    floor = int(FLOORS[name] * min(SCALE, 1.0))
    assert messages >= floor, f"{name}: the fuzz ran {messages} generated messages, fewer than {floor}"


# -- schemas ---------------------------------------------------------------------------------------


def _load(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / name).read_text())


def _validator(doc: dict[str, Any], definition: str | None = None, patch: dict[str, Any] | None = None):
    defs = {**doc.get("$defs", {}), **(patch or {})}
    schema = {**doc, "$defs": defs} if definition is None else {"$defs": defs, "$ref": f"#/$defs/{definition}"}
    return Draft202012Validator(schema)


_acp_doc = _load("acp-v1.schema.json")
MCP_REMINDER = _validator(_load("mcp-notifications-reminder.schema.json"))
MCP_LOG = _validator(_load("mcp-2025-11-25.schema.json"), "LoggingMessageNotification")
ACP_NOTIFICATION = _validator(_acp_doc, "SessionNotification", patch={"SessionUpdate": {
    "type": "object", "required": ["sessionUpdate"], "properties": {"sessionUpdate": {"type": "string"}}}})
ACP_PROMPT = _validator(_acp_doc, "PromptRequest")

JSONRPC = Draft202012Validator({"oneOf": [
    {"type": "object", "required": ["jsonrpc", "method"], "properties": {
        "jsonrpc": {"const": "2.0"}, "method": {"type": "string"}, "id": {"type": ["string", "integer", "number"]},
        "params": {"type": ["object", "array"]}}, "not": {"anyOf": [{"required": ["result"]}, {"required": ["error"]}]}},
    {"type": "object", "required": ["jsonrpc", "id", "result"], "properties": {"jsonrpc": {"const": "2.0"}},
     "not": {"anyOf": [{"required": ["method"]}, {"required": ["error"]}]}},
    {"type": "object", "required": ["jsonrpc", "id", "error"], "properties": {
        "jsonrpc": {"const": "2.0"}, "error": {"type": "object", "required": ["code", "message"], "properties": {
            "code": {"type": "integer"}, "message": {"type": "string"}}}},
     "not": {"anyOf": [{"required": ["method"]}, {"required": ["result"]}]}},
]})
_TEXT = {"type": "string", "minLength": 1}
_TAGS = {"type": "array", "items": {"type": "string"}}
#: Harn's reminder object (spec §2–§5: either casing on MCP and A2A metadata).
HARN_REMINDER = Draft202012Validator({"type": "object", "required": ["body"], "properties": {
    "id": {"type": "string"}, "reminderId": {"type": "string"}, "body": _TEXT, "tags": _TAGS,
    "ttlTurns": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},  # Harn writes null (= no TTL)
    "ttl_turns": {"type": "integer", "minimum": 1}}})
#: ACP `session/remind` params: flat snake_case, `mode` always written (spec §4).
ACP_REMIND = Draft202012Validator({"type": "object", "required": ["sessionId", "body", "mode"], "properties": {
    "body": _TEXT, "tags": _TAGS, "ttl_turns": {"type": "integer", "minimum": 1},
    "mode": {"enum": ["interrupt_immediate", "finish_step", "audit_only", "interrupt", "after_current_operation",
                      "steer", "queue", "wait_for_completion"]}},
    "not": {"anyOf": [{"required": [k]} for k in ("dedupeKey", "ttlTurns", "roleHint", "preserveOnCompact",
                                                   "firedAtTurn")]}})
#: ACP `session/inject_reminder` params: flat camelCase + sessionId + mode.
ACP_INJECT = Draft202012Validator({"type": "object", "required": ["sessionId", "body"], "properties": {
    "body": _TEXT, "tags": _TAGS, "ttlTurns": {"type": "integer", "minimum": 1},
    "propagate": {"enum": list(PROPAGATE_VALUES)}, "roleHint": {"enum": list(ROLE_HINT_VALUES)},
    "mode": {"enum": list(MODE_VALUES)}}})
#: ACP reminder updates toward a standard client (spec §4).
ACP_UPDATES = {
    "reminder_emitted": Draft202012Validator({"type": "object", "required": ["reminderId", "body"], "properties": {
        "reminderId": {"type": "string"}, "body": _TEXT, "tags": _TAGS, "dedupeKey": {"type": "string"},
        "firedAtTurn": {"type": ["integer", "null"]}}}),
    "reminder_deduped": Draft202012Validator({"type": "object", "required": ["reminderId", "dedupeKey",
                                                                             "droppedReminderIds"], "properties": {
        "droppedReminderIds": {"type": "array", "items": {"type": "string"}}}}),
    "reminder_expired": Draft202012Validator({"type": "object", "required": ["reminderId", "phase"], "properties": {
        "phase": {"enum": ["ttl_expired", "cleared", "compacted_out"]}}}),
}
#: A2A standard reminder (ProtoJSON enum names, spec §5).
A2A_REMINDER = Draft202012Validator({"type": "object", "required": ["body"], "properties": {
    "id": {"type": "string"}, "body": _TEXT, "tags": _TAGS, "ttlTurns": {"type": "integer", "minimum": 1},
    "propagate": {"type": "string", "pattern": "^REMINDER_PROPAGATION_"},
    "roleHint": {"type": "string", "pattern": "^REMINDER_ROLE_HINT_"}}})


def _errors(validator: Draft202012Validator, instance: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(instance)][:3]


def _harn_reminders(holder: Any) -> list[Any]:
    harn = holder.get("harn") if isinstance(holder, dict) else None
    if not isinstance(harn, dict):
        return []
    one = [harn["reminder"]] if "reminder" in harn else []
    return one + (harn["reminders"] if isinstance(harn.get("reminders"), list) else [])


def check_message(protocol: str, msg: Any) -> list[str]:
    """Problems with one JSON-RPC message the proxy wrote (empty when it is valid)."""
    problems = _errors(JSONRPC, msg)
    if problems or not isinstance(msg, dict):
        return problems
    method, params = msg.get("method"), msg.get("params")
    result = msg.get("result")
    if protocol == "mcp":
        if method == "notifications/reminder":
            problems += _errors(MCP_REMINDER, msg)
        elif method == "notifications/message":
            problems += _errors(MCP_LOG, msg)
            meta = params.get("_meta") if isinstance(params, dict) else None
            for reminder in _harn_reminders(meta) if isinstance(meta, dict) else []:
                problems += _errors(HARN_REMINDER, reminder)
    elif protocol == "acp":
        if method == "session/update" and isinstance(params, dict):
            problems += _errors(ACP_NOTIFICATION, params)
            update = params.get("update") if isinstance(params.get("update"), dict) else {}
            kind = update.get("sessionUpdate")
            harn = update.get("_meta") if isinstance(update.get("_meta"), dict) else {}
            if kind in ACP_UPDATES and not _harn_reminders(harn):
                problems += _errors(ACP_UPDATES[kind], update)
            for reminder in _harn_reminders(harn):
                problems += _errors(HARN_REMINDER, reminder)
        elif method == "session/remind":
            problems += _errors(ACP_REMIND, params)
        elif method == "session/inject_reminder":
            problems += _errors(ACP_INJECT, params)
        elif method == "session/prompt":
            problems += _errors(ACP_PROMPT, params)
    elif protocol == "a2a":
        if method == "InjectTaskReminder" and isinstance(params, dict):
            problems += _errors(A2A_REMINDER, params.get("reminder"))
        if isinstance(result, dict) and isinstance(result.get("reminderUpdate"), dict):
            problems += _errors(A2A_REMINDER, result["reminderUpdate"].get("reminder"))
        holders = [params, params.get("message") if isinstance(params, dict) else None]
        holders += [result.get(k) for k in a2a_codecs.EVENT_KINDS] if isinstance(result, dict) else []
        for holder in holders:
            if isinstance(holder, dict):
                for reminder in _harn_reminders(holder.get("metadata")):
                    problems += _errors(HARN_REMINDER, reminder)
    return problems


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def check_output(protocol: str, frame: bytes, sends: list) -> None:
    """Each frame out is the input itself, or valid rewritten JSON-RPC (members of a rewritten
    batch that came in as they are, even garbage, are the sender's business)."""
    passed: set[str] = set()
    for send in sends:
        assert send.to in (HOST, PEER)
        if send.data is frame:
            continue
        assert isinstance(send.data, bytes)
        if not passed and frame:
            incoming = json.loads(frame)
            passed = {_canonical(m) for m in (incoming if isinstance(incoming, list) else [incoming])}
        out = json.loads(send.data)  # rewritten output is always JSON the proxy wrote itself
        for msg in out if isinstance(out, list) else [out]:
            if isinstance(out, list) and _canonical(msg) in passed:
                continue
            problems = check_message(protocol, msg)
            assert not problems, f"{protocol} output invalid: {problems}\n  in: {frame[:300]!r}\n  out: {send.data[:500]!r}"


# -- strategies ------------------------------------------------------------------------------------
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.text(max_size=12),
                    st.floats(allow_nan=False, allow_infinity=False))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                    max_leaves=6)
WORDS = st.sampled_from(["", " ", "x", "ok", "re-read it", "é 中 ☕", "a\u0000b\tc\u0085", "<b>&amp;</b>", "  pad  "])
ODD = st.one_of(SCALARS, JSON)
_VALID = {
    "id": st.one_of(WORDS, st.text(max_size=20)), "reminderId": WORDS, "body": st.one_of(WORDS, st.text(max_size=60)),
    "tags": st.lists(st.one_of(WORDS, st.text(max_size=10)), max_size=5),
    "dedupeKey": WORDS, "dedupe_key": WORDS, "ttlTurns": st.integers(-2, 5), "ttl_turns": st.integers(-2, 5),
    "preserveOnCompact": st.booleans(), "preserve_on_compact": st.booleans(),
    "propagate": st.sampled_from(PROPAGATE_VALUES + ("REMINDER_PROPAGATION_ALL", "REMINDER_PROPAGATION_SESSION",
                                                     "everywhere")),
    "roleHint": st.sampled_from(ROLE_HINT_VALUES + ("REMINDER_ROLE_HINT_SYSTEM", "REMINDER_ROLE_HINT_USER", "root")),
    "role_hint": st.sampled_from(ROLE_HINT_VALUES + ("root",)),
    "firedAtTurn": st.one_of(st.none(), st.integers(-1, 9)), "fired_at_turn": st.one_of(st.none(), st.integers(-1, 9)),
    "mode": st.sampled_from(MODE_VALUES + ("interrupt", "steer", "queue", "wait_for_completion", "bogus")),
    "source": st.sampled_from(SOURCE_VALUES + ("stdlib_provider", "in_pipeline", "somebody")),
    "authority": st.sampled_from(("contract", "corrective", "advisory", "boss")),
    "providerId": WORDS, "originatingAgentId": WORDS,
    "_meta": st.one_of(JSON, st.just({"reminder-bridge/original": {"propagate": "all"}})),
    "x-vendor": JSON,
}
#: Each field: a valid value most of the time, anything at all otherwise.
FIELDS_ = {name: st.one_of(valid, valid, valid, ODD) for name, valid in _VALID.items()}
FIELD_NAMES = sorted(FIELDS_)
_REMINDERS = st.fixed_dictionaries({}, optional=FIELDS_)


@st.composite
def reminder_dicts(draw) -> dict[str, Any]:
    reminder = draw(_REMINDERS)
    if "body" not in reminder and draw(st.integers(0, 4)):  # usually a body
        reminder["body"] = draw(FIELDS_["body"])
    return reminder


def rpc(method: str | None, params: Any = None, msg_id: Any = None, result: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0"}
    if msg_id is not None:
        msg["id"] = msg_id
    if method is not None:
        msg["method"] = method
        if params is not None:
            msg["params"] = params
    else:
        msg["result"] = result
    return msg


IDS = st.one_of(st.integers(0, 50), st.sampled_from(["a", "reminder-bridge:1", "1"]))
SESSIONS = st.sampled_from(["s1", "s2", "sess é 3"])


@st.composite
def mcp_messages(draw) -> tuple[str, dict[str, Any]]:
    r = draw(reminder_dicts())
    caps = draw(st.sampled_from([{}, {"reminders": {}}, {"experimental": {"reminders": {}}},
                                 {"_meta": {"harn": {"reminders": {"emit": True}}}}, JSON]))
    if not isinstance(caps, dict):
        caps = draw(caps)
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return HOST, rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": caps}, draw(IDS))
    if choice == 1:
        return PEER, rpc(None, msg_id=draw(IDS), result={"protocolVersion": "2025-11-25", "capabilities": caps,
                                                         "serverInfo": {"name": "s", "version": "1"}})
    if choice == 2:
        return PEER, rpc("notifications/reminder", {"reminder": r, **draw(st.sampled_from([{}, {"_meta": {"k": 1}}]))})
    if choice in (3, 4):
        meta = draw(st.sampled_from(["nested", "flat"]))
        holder = {"harn": {"reminder": r}} if meta == "nested" else {"harn.reminder": r}
        return PEER, rpc("notifications/message", {"level": "info", "logger": "harn.reminder",
                                                   "data": draw(JSON), "_meta": holder})
    if choice == 5:
        meta = draw(st.sampled_from([{}, {"io.modelcontextprotocol/logLevel": "info"},
                                     {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}]))
        return HOST, rpc("tools/call", {"name": "t", "arguments": draw(JSON), "_meta": meta}, draw(IDS))
    if choice == 6:
        return PEER, rpc(None, msg_id=draw(IDS), result={"content": [{"type": "text", "text": "ok"}],
                                                         "structuredContent": draw(JSON)})
    if choice == 7:
        return HOST, rpc("server/discover", {"_meta": {"io.modelcontextprotocol/clientCapabilities": caps}}, draw(IDS))
    odd = draw(st.dictionaries(st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"]), JSON,
                               max_size=5))
    return draw(st.sampled_from([HOST, PEER])), odd


@st.composite
def acp_messages(draw) -> tuple[str, dict[str, Any]]:
    r = draw(reminder_dicts())
    session = draw(SESSIONS)
    choice = draw(st.integers(0, 9))
    if choice == 0:
        caps = draw(st.sampled_from([{}, {"reminders": {}}, {"_meta": {"harn": {}}}]))
        return HOST, rpc("initialize", {"protocolVersion": 1, "clientCapabilities": caps}, draw(IDS))
    if choice == 1:
        caps = draw(st.sampled_from([{}, {"reminders": {"inject": True, "emit": True}},
                                     {"_meta": {"harn": {"sessionUpdateExtensions": ["reminder_emitted"]}}}]))
        return PEER, rpc(None, msg_id=draw(IDS), result={"protocolVersion": 1, "agentCapabilities": caps})
    if choice in (2, 3):
        method = draw(st.sampled_from(["session/inject_reminder", "session/remind"]))
        params = {"sessionId": session, **r}
        return HOST, rpc(method, params, draw(st.one_of(st.none(), IDS)))
    if choice == 4:
        return HOST, rpc("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]},
                         draw(IDS))
    if choice == 5:
        return PEER, rpc(None, msg_id=draw(IDS), result={"stopReason": "end_turn"})
    if choice in (6, 7):
        if draw(st.booleans()):
            update = {"sessionUpdate": "reminder_emitted", **{("reminderId" if k == "id" else k): v for k, v in r.items()}}
        else:
            update = {"sessionUpdate": "reminder_emitted", "_meta": {"harn": {"reminder": r}}}
        return PEER, rpc("session/update", {"sessionId": session, "update": update})
    if choice == 8:
        kind = draw(st.sampled_from(["reminder_deduped", "reminder_expired", "agent_message_chunk"]))
        return PEER, rpc("session/update", {"sessionId": session, "update": {"sessionUpdate": kind, **draw(
            st.dictionaries(st.sampled_from(["reminderId", "dedupeKey", "phase", "content"]), JSON, max_size=3))}})
    return PEER, rpc(None, msg_id=draw(IDS), result=draw(JSON))


@st.composite
def a2a_messages(draw) -> tuple[str, dict[str, Any]]:
    r = draw(reminder_dicts())
    task = draw(st.sampled_from(["t1", "t2", None]))
    choice = draw(st.integers(0, 7))
    harn = {"harn": draw(st.sampled_from([{"reminder": r}, {"reminders": [r, r]}, {"reminders": r}]))}
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    if task:
        message["taskId"] = task
    if choice in (0, 1):
        method = draw(st.sampled_from(sorted(a2a_codecs.SEND_METHODS)))
        where = draw(st.sampled_from(["params", "message"]))
        params = {"message": {**message, "metadata": harn} if where == "message" else message}
        if where == "params":
            params["metadata"] = harn
        return HOST, rpc(method, params, draw(IDS))
    if choice == 2:
        return HOST, rpc("InjectTaskReminder", {"taskId": task, "reminder": r, "metadata": {}}, draw(IDS))
    if choice in (3, 4):
        kind = draw(st.sampled_from(a2a_codecs.EVENT_KINDS))
        event = {"id" if kind == "task" else "taskId": task, "contextId": "c", "metadata": harn}
        return PEER, rpc(None, msg_id=draw(IDS), result={kind: event})
    if choice == 5:
        return PEER, rpc(None, msg_id=draw(IDS), result={"reminderUpdate": {"taskId": task, "contextId": "c",
                                                                            "reminder": r}})
    if choice == 6:
        return PEER, rpc(None, msg_id=draw(IDS), result={"id": task, "status": {"state": "TASK_STATE_WORKING"}})
    return draw(st.sampled_from([HOST, PEER])), rpc(draw(st.sampled_from(["GetTask", "CancelTask", "x"])), draw(JSON),
                                                    draw(IDS))


MESSAGES = {"mcp": mcp_messages(), "acp": acp_messages(), "a2a": a2a_messages()}


#: How a peer might write JSON: (spaced, ASCII-only with \u escapes, ASCII letters written as \u00XX).
STYLES = st.tuples(st.booleans(), st.booleans(), st.sampled_from(["", "", "", "e", "m", "i", "n", "d", "emind", "st"]))


def serialize(obj: Any, style: tuple[bool, bool, str]) -> bytes:
    """``obj`` as JSON text in ``style``: escaped letters go through every key and string, which
    is what the pre-filter must see through."""
    spaced, ascii_only, letters = style
    sep, colon = (", ", ": ") if spaced else (",", ":")

    def text(value: str) -> str:
        out = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
        if letters and "\\" not in out:
            out = "".join(f"\\u{ord(c):04x}" if c in letters else c for c in out)
        return '"' + out + '"'

    def dump(value: Any) -> str:
        if isinstance(value, dict):
            return "{" + sep.join(text(str(k)) + colon + dump(v) for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + sep.join(dump(v) for v in value) + "]"
        if isinstance(value, str):
            return text(value)
        return json.dumps(value)

    return dump(obj).encode()


@st.composite
def serialized(draw, obj: Any) -> bytes:
    return serialize(obj, draw(STYLES))


def shapes(r: dict[str, Any], caps: dict[str, Any], session: Any, task: Any) -> dict[str, list[tuple[str, Any]]]:
    """``r`` in every slot of every dialect, after the handshakes that make a flow look for it."""
    emitted = {("reminderId" if k == "id" else k): v for k, v in r.items()}
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}], **({"taskId": task} if task else {})}
    return {
        "mcp": [
            (HOST, rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": caps}, 1)),
            (PEER, rpc(None, msg_id=1, result={"protocolVersion": "2025-11-25", "serverInfo": {"name": "s"},
                                               "capabilities": caps})),
            (PEER, rpc("notifications/reminder", {"reminder": r})),
            (PEER, rpc("notifications/message", {"level": "info", "logger": "harn.reminder", "data": "x",
                                                 "_meta": {"harn": {"reminder": r}}})),
            (PEER, rpc("notifications/message", {"level": "info", "data": "x", "_meta": {"harn.reminder": r}})),
            (HOST, rpc("tools/call", {"name": "t", "arguments": {}}, 2)),
            (PEER, rpc(None, msg_id=2, result={"content": [{"type": "text", "text": "ok"}]})),
        ],
        "acp": [
            (HOST, rpc("initialize", {"protocolVersion": 1, "clientCapabilities": caps}, 1)),
            (PEER, rpc(None, msg_id=1, result={"protocolVersion": 1, "agentCapabilities": caps})),
            (HOST, rpc("session/inject_reminder", {"sessionId": session, **r}, 2)),
            (HOST, rpc("session/remind", {"sessionId": session, **r}, 3)),
            (PEER, rpc(None, msg_id=3, result={"reminderId": "x"})),
            (HOST, rpc("session/inject_reminder", {"sessionId": session, **r})),
            (PEER, rpc("session/update", {"sessionId": session, "update": {"sessionUpdate": "reminder_emitted",
                                                                            **emitted}})),
            (PEER, rpc("session/update", {"sessionId": session, "update": {
                "sessionUpdate": "reminder_emitted", "_meta": {"harn": {"reminder": r}}}})),
            (HOST, rpc("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}, 4)),
            (PEER, rpc(None, msg_id=4, result={"stopReason": "end_turn"})),
        ],
        "a2a": [
            (HOST, rpc("SendMessage", {"message": message, "metadata": {"harn": {"reminder": r}}}, 1)),
            (PEER, rpc(None, msg_id=1, result={"task": {"id": task or "t9", "contextId": "c",
                                                        "metadata": {"harn": {"reminders": [r]}}}})),
            (HOST, rpc("SendStreamingMessage", {"message": {**message, "metadata": {"harn": {"reminders": [r, r]}}}}, 2)),
            (PEER, rpc(None, msg_id=2, result={"statusUpdate": {"taskId": task, "contextId": "c",
                                                                "metadata": {"harn": {"reminder": r}}}})),
            (HOST, rpc("InjectTaskReminder", {"taskId": task, "reminder": r}, 3)),
            (PEER, rpc(None, msg_id=2, result={"reminderUpdate": {"taskId": task, "contextId": "c", "reminder": r}})),
            (PEER, rpc(None, msg_id=2, result={"artifactUpdate": {"taskId": task, "contextId": "c", "artifact": {}}})),
        ],
    }


CODEC_CASES = {
    "mcp.standard": (lambda r: mcp_codecs.McpStandard.decode(rpc("notifications/reminder", {"reminder": r}))),
    "mcp.legacy": (lambda r: mcp_codecs.McpLegacy.decode(rpc("notifications/message", {
        "level": "info", "logger": "harn.reminder", "data": "x", "_meta": {"harn": {"reminder": r}}}))),
    "acp.standard.inject": (lambda r: acp_codecs.AcpStandard.decode_inject({"sessionId": "s", **r})),
    "acp.legacy.inject": (lambda r: acp_codecs.AcpLegacy.decode_inject({"sessionId": "s", **r})),
    "acp.standard.emitted": (lambda r: acp_codecs.AcpStandard.decode_emitted({"sessionUpdate": "reminder_emitted", **{
        ("reminderId" if k == "id" else k): v for k, v in r.items()}})),
    "acp.legacy.emitted": (lambda r: acp_codecs.AcpLegacy.decode_emitted({"sessionUpdate": "reminder_emitted",
                                                                         "_meta": {"harn": {"reminder": r}}})),
    "a2a.standard": (lambda r: a2a_codecs.A2AStandard.decode_inject({"taskId": "t", "reminder": r})[1]),
    "a2a.legacy": (lambda r: a2a_codecs.A2ALegacy.take_from_params({"metadata": {"harn": {"reminder": r}}})[0]),
}


def encodings(reminder: Reminder) -> list[tuple[str, dict[str, Any]]]:
    """``reminder`` written by every encoder, as whole messages."""
    params: dict[str, Any] = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}
    a2a_codecs.A2ALegacy.put_on_params(params, [reminder])
    event = {"statusUpdate": {"taskId": "t", "contextId": "c"}}
    a2a_codecs.A2ALegacy.put_on_event(event, [reminder])
    return [
        ("mcp", mcp_codecs.McpStandard.encode(reminder)),
        ("mcp", mcp_codecs.McpLegacy.encode(reminder)),
        ("acp", rpc("session/inject_reminder", acp_codecs.AcpStandard.encode_inject("s", reminder), 1)),
        ("acp", rpc("session/remind", acp_codecs.AcpLegacy.encode_inject("s", reminder), 1)),
        ("acp", acp_codecs.AcpStandard.encode_emitted("s", reminder)),
        ("acp", acp_codecs.AcpLegacy.encode_emitted("s", reminder)),
        ("a2a", rpc("InjectTaskReminder", a2a_codecs.A2AStandard.encode_inject("t", reminder), 1)),
        ("a2a", rpc(None, msg_id=1, result=a2a_codecs.A2AStandard.encode_update("t", "c", reminder))),
        ("a2a", rpc("SendMessage", params, 1)),
        ("a2a", rpc(None, msg_id=1, result=event)),
    ]


def check_codecs(reminder: dict[str, Any]) -> int:
    """Every decoder raises nothing but ReminderError on ``reminder``; what decodes is written validly
    by every encoder, and reads back from the standard MCP form with the same id, body and tags."""
    for codec, decode in CODEC_CASES.items():
        try:
            decoded = decode(reminder)
        except ReminderError:
            continue
        assert isinstance(decoded, Reminder) and decoded.body.strip(), codec
        for protocol, msg in encodings(decoded):
            problems = check_message(protocol, json.loads(json.dumps(msg)))  # plain JSON, nothing Python-only
            assert not problems, f"{codec} → {msg}: {problems}"
        again = mcp_codecs.McpStandard.decode(mcp_codecs.McpStandard.encode(decoded))
        assert (again.id, again.body, again.tags) == (decoded.id, decoded.body, decoded.tags)
    return len(CODEC_CASES)


def check_prefilter(frame: bytes) -> None:
    """Exactness: a frame the pre-filter clears holds no marker in any decoded key or string."""
    if could_concern(frame, REMINDER_MARKERS):
        return
    decoded = json.dumps(json.loads(frame), ensure_ascii=False)
    assert not any(marker.decode() in decoded for marker in REMINDER_MARKERS), frame[:300]


def feed(protocol: str, flow: Any, origin: str, frame: bytes) -> int:
    """One frame through ``flow``, checked; returns 1 (the message count)."""
    cleared = flow.passes(frame, origin)
    sends = writes(flow.from_host(frame) if origin == HOST else flow.from_peer(frame))
    check_output(protocol, frame, sends)
    if cleared:  # the pre-filter let it by: never decoded, never touched
        assert len(sends) == 1 and sends[0].data is frame
    return 1


DIALECTS = ("auto", "standard", "legacy", "none")
STAGES = ("translate", "translate", "dual", "observe", "enforce")
CAPS = st.sampled_from([{}, {"reminders": {"inject": True, "emit": True}}, {"experimental": {"reminders": {}}},
                        {"_meta": {"harn": {"reminders": {"emit": True}, "sessionUpdateExtensions":
                                            ["reminder_emitted"]}}}])


@st.composite
def flows(draw, protocol: str):
    kwargs: dict[str, Any] = {"host_dialect": draw(st.sampled_from(DIALECTS)),
                              "peer_dialect": draw(st.sampled_from(DIALECTS))}
    if protocol == "mcp":
        kwargs["peer_declared"] = draw(st.sampled_from([None, True, False]))
    return make_flow(protocol, RouteSettings(stage=draw(st.sampled_from(STAGES))), RECORDER, **kwargs)


# -- the fuzz --------------------------------------------------------------------------------------
def test_every_reminder_shape_through_every_codec_the_prefilter_and_the_pipelines():
    """One generated reminder, decoded by every codec and written by every encoder, then carried
    in every slot of every dialect (after each protocol's handshake) through a flow of random
    dialects and stage: nothing raises; the pre-filter is exact; each frame out is the frame in,
    or valid rewritten output."""
    ran = {"messages": 0}

    @examples(500)
    @given(reminder=reminder_dicts(), styles=st.lists(STYLES, min_size=1, max_size=3), caps=CAPS,
           session=SESSIONS, task=st.sampled_from(["t1", None]), mcp=flows("mcp"), acp=flows("acp"),
           a2a=flows("a2a"))
    def fuzz(reminder, styles, caps, session, task, mcp, acp, a2a):
        ran["messages"] += check_codecs(reminder)
        for protocol, flow in (("mcp", mcp), ("acp", acp), ("a2a", a2a)):
            for i, (origin, msg) in enumerate(shapes(reminder, caps, session, task)[protocol]):
                frame = serialize(msg, styles[i % len(styles)])
                check_prefilter(frame)
                ran["messages"] += feed(protocol, flow, origin, frame)
            check_output(protocol, b"", writes(flow.wake(flow.clock() + 3600)))  # coalesced reminders released, if any

    fuzz()
    ran_at_least("reminder_shapes", ran["messages"])


@pytest.mark.parametrize("protocol", ["mcp", "acp", "a2a"])
def test_random_conversations_pass_untouched_or_become_valid_output(protocol):
    """Arbitrary conversations (1–6 frames, either direction, batches, odd ids and shapes)
    through a fresh flow of random dialects and stage."""
    ran = {"messages": 0}

    @examples(120)
    @given(data=st.data())
    def fuzz(data):
        flow = data.draw(flows(protocol))
        for _ in range(data.draw(st.integers(1, 6))):
            origin, msg = data.draw(MESSAGES[protocol])
            if data.draw(st.integers(0, 9)) == 0:
                msg = [msg, data.draw(MESSAGES[protocol])[1]]  # a batch
            frame = data.draw(serialized(msg))
            check_prefilter(frame)
            ran["messages"] += feed(protocol, flow, origin, frame)
        check_output(protocol, b"", writes(flow.wake(flow.clock() + 3600)))

    fuzz()
    ran_at_least(f"conversations[{protocol}]", ran["messages"])


#: Keys and strings for the pre-filter fuzz: the marker's letters (so markers form often), other
#: cases, JSON's specials, controls, non-ASCII and a character outside the BMP.  No `u` or digits:
#: a literal backslash then `u00..` in a string would be a (harmless) false positive.
_PIECES = st.lists(st.sampled_from(list("emindrEMIND s/_-\"\\\x00\x1f\x7fé☃😀") + ["emind"] * 4),
                   max_size=8).map("".join)
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | _PIECES,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_PIECES, inner, max_size=3),
                     max_leaves=10)


def _has_marker(value: Any) -> bool:
    """Does a decoded JSON value hold a marker in any key or string?"""
    if isinstance(value, str):
        return any(marker.decode() in value for marker in REMINDER_MARKERS)
    if isinstance(value, list):
        return any(_has_marker(v) for v in value)
    if isinstance(value, dict):
        return any(_has_marker(k) or _has_marker(v) for k, v in value.items())
    return False


def _escape(char: str, upper: bool) -> str:
    units = [ord(char)] if ord(char) <= 0xFFFF else [0xD800 + (ord(char) - 0x10000 >> 10),
                                                     0xDC00 + (ord(char) - 0x10000 & 0x3FF)]
    text = "".join(f"\\u{unit:04x}" for unit in units)
    return text.upper().replace("\\U", "\\u") if upper else text


def _printable_ascii(char: str) -> bool:
    return 0x20 <= ord(char) <= 0x7F


@st.composite
def escaped_json(draw, only_beyond_ascii: bool = False) -> tuple[Any, bytes]:
    """A JSON value and its text with characters written as `\\uXXXX` (any hex case; surrogate
    pairs beyond the BMP): none, a share of them, exactly one anywhere, or exactly one letter of
    a marker (the hardest case for the pre-filter); only characters outside printable ASCII when
    ``only_beyond_ascii``."""
    value = draw(_JSON)
    rnd = draw(st.randoms(use_true_random=False))
    rate = draw(st.sampled_from(["marker", "marker", "one", 0.0, 0.05, 0.3, 1.0]))
    spaced = draw(st.booleans())
    offsets: list[int] = []  # the position of every character (in writing order) inside a marker
    total = _chars(value, offsets)
    target = -1
    if rate == "one" and total:
        target = rnd.randrange(total)
    elif rate == "marker" and offsets:
        target = rnd.choice(offsets)
    seen = [0]

    def escaped(char: str) -> bool:
        seen[0] += 1
        if only_beyond_ascii and _printable_ascii(char):
            return False
        return seen[0] - 1 == target if rate in ("one", "marker") else rnd.random() < rate

    def text(string: str) -> str:
        out = []
        for char in string:
            if escaped(char):
                out.append(_escape(char, rnd.random() < 0.5))
            else:
                out.append(json.dumps(char, ensure_ascii=False)[1:-1])  # `"`, `\\`, controls stay valid
        return '"' + "".join(out) + '"'

    def dump(v: Any) -> str:
        sep, colon = (", ", ": ") if spaced else (",", ":")
        if isinstance(v, dict):
            return "{" + sep.join(text(k) + colon + dump(x) for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + sep.join(dump(x) for x in v) + "]"
        return text(v) if isinstance(v, str) else json.dumps(v)

    return value, dump(value).encode()


def _chars(value: Any, offsets: list[int], start: int = 0) -> int:
    """How many characters ``value``'s keys and strings hold, in writing order from ``start``;
    appends to ``offsets`` the position of each character that is part of a marker."""
    if isinstance(value, str):
        for marker in REMINDER_MARKERS:
            found = value.find(marker.decode())
            while found >= 0:
                offsets.extend(range(start + found, start + found + len(marker)))
                found = value.find(marker.decode(), found + 1)
        return len(value)
    count = 0
    if isinstance(value, list):
        for v in value:
            count += _chars(v, offsets, start + count)
    elif isinstance(value, dict):
        for k, v in value.items():
            count += _chars(k, offsets, start + count)
            count += _chars(v, offsets, start + count)
    return count


def test_the_prefilter_never_skips_a_frame_whose_json_holds_a_marker():
    """No false negatives, against a reference (decode, look in every key and string): however
    the frame spells it, a marker means could_concern is True; and any bytes that are JSON obey
    the same rule."""
    ran = {"messages": 0}

    @examples(600)
    @given(pair=escaped_json(), raw=st.binary(max_size=300))
    def fuzz(pair, raw):
        value, frame = pair
        assert json.loads(frame) == value  # the generator writes valid JSON for the value
        if _has_marker(value):
            assert could_concern(frame, REMINDER_MARKERS) is True, frame
        try:
            decoded = json.loads(raw)
        except ValueError:
            decoded = None
        if _has_marker(decoded):
            assert could_concern(raw, REMINDER_MARKERS) is True, raw
        ran["messages"] += 2

    fuzz()
    ran_at_least("prefilter_sound", ran["messages"])


def test_the_prefilter_clears_frames_that_cannot_hold_a_marker():
    """It filters: bytes with neither the marker nor a `\\u00` escape are skipped, and so is JSON
    without a marker whose only escapes are of characters outside printable ASCII (controls,
    `é`, surrogate pairs), which cannot spell one."""
    ran = {"messages": 0}

    @examples(300)
    @given(raw=st.binary(max_size=300), text=st.text(max_size=100), pair=escaped_json(only_beyond_ascii=True))
    def fuzz(raw, text, pair):
        for frame in (raw, text.encode()):
            if b"emind" not in frame and b"\\u00" not in frame:
                assert could_concern(frame, REMINDER_MARKERS) is False, frame
            assert could_concern(frame + b"emind") is True
        value, frame = pair
        if not _has_marker(value):
            assert could_concern(frame, REMINDER_MARKERS) is False, frame
        ran["messages"] += 3

    fuzz()
    ran_at_least("prefilter_clears", ran["messages"])


def test_the_fuzz_floors_add_up_to_ten_thousand_messages():
    """Each fuzz test checks its own floor; a full run of this module therefore covers at least
    the sum (the module docstring's promise), whichever tests run in whatever order."""
    assert sum(FLOORS.values()) >= 10_000


@pytest.mark.parametrize("protocol", ["mcp", "acp"])
def test_a_response_with_an_unhashable_id_passes_untouched(protocol):
    flow = make_flow(protocol, RouteSettings(), RECORDER)
    first = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{},"clientCapabilities":{}}}'
    flow.from_host(first)
    for frame in (b'{"jsonrpc":"2.0","id":[],"result":{}}', b'{"jsonrpc":"2.0","id":{"a":1},"error":{"code":1}}'):
        assert [s.data for s in flow.from_peer(frame)] == [frame]
