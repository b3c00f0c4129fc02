"""spec §2 "lossless round trips", as properties.

1. For every wire shape: decode(encode(r)) == r on the canonical fields, for any valid reminder.
2. For any legacy (Harn) input: legacy → standard → legacy gives back an equivalent input (same
   keys and values once casing, tag trimming and "null means absent" are normalised), lossy enum
   values included: through the real `translate` pipeline both ways for MCP and ACP (remind and
   emitted); for A2A, the stream event through `translate` and back through the codecs.
"""
from __future__ import annotations

import copy
import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.cli.translate import translate
from tests.flows import make_flow
from bridge.dialects.a2a import A2ALegacy, A2AStandard
from bridge.dialects.acp import AcpLegacy, AcpStandard
from bridge.dialects.mcp import McpLegacy, McpStandard
from bridge.model import (
    ATTR_BY_WIRE, AUTHORITY_VALUES, CAMEL, MODE_VALUES, PROPAGATE_VALUES, ROLE_HINT_VALUES, SNAKE, SOURCE_VALUES,
    Reminder,
)
from bridge.rules import RouteSettings

#: The codec property runs 300 examples; the pipeline round trips (each through `translate`
#: twice) 150, which keeps the file near 5 s. Raise both with ROUNDTRIP_EXAMPLES=N for a soak.
_N = os.environ.get("ROUNDTRIP_EXAMPLES")
SETTINGS = settings(max_examples=int(_N or 300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
PIPELINE_SETTINGS = settings(SETTINGS, max_examples=int(_N or 150))

MODE_ALIASES = ("interrupt", "after_current_operation", "steer", "queue", "wait_for_completion")
HARN_SOURCES = ("stdlib_provider", "in_pipeline", "bridge", "hook", "inherited")
ALL_ALIAS_WORDS = set(MODE_ALIASES) | set(HARN_SOURCES) | set(SOURCE_VALUES)

# ----------------------------------------------------------------------------- building blocks

# Kept cheap: the whole suite must stay fast, and generation dominates these tests' run time.
json_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=6)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=2)
                           | st.dictionaries(st.text(max_size=4), inner, max_size=2), max_leaves=3)
#: any unicode but whitespace, control characters and surrogates: a token that needs no trimming
solid = st.characters(exclude_categories=("Zs", "Zl", "Zp", "Cc", "Cs"))
words = st.text(solid, min_size=1, max_size=10)
bodies = st.text(min_size=1, max_size=30).filter(lambda s: s.strip()) | words
ids = words | st.uuids().map(str)
clean_tags = st.lists(words, max_size=4, unique=True)
extra_keys = st.text("abcdefgh-ü", min_size=1, max_size=6).map("x-".__add__)
extras = st.dictionaries(extra_keys, json_values, max_size=2)
metas = st.dictionaries(st.sampled_from(["traceparent", "com.example/k", "x", "ünï"]), json_values, max_size=2)
unknown_sources = st.sampled_from(["coordinator-agent", "file-watcher", "ci"])

CANONICAL_VALUES = {
    "id": ids, "tags": clean_tags, "dedupe_key": words, "ttl_turns": st.integers(1, 50),
    "preserve_on_compact": st.booleans(), "propagate": st.sampled_from(PROPAGATE_VALUES),
    "role_hint": st.sampled_from(ROLE_HINT_VALUES), "fired_at_turn": st.none() | st.integers(0, 50),
    "mode": st.sampled_from(MODE_VALUES), "source": st.sampled_from(SOURCE_VALUES) | unknown_sources,
    "authority": st.sampled_from(AUTHORITY_VALUES), "provider_id": words, "originating_agent_id": words,
    "meta": metas, "extra": extras,
}


@st.composite
def reminders(draw) -> Reminder:
    """A valid canonical reminder with a random subset of fields explicitly set."""
    chosen = draw(st.sets(st.sampled_from(sorted(CANONICAL_VALUES))))
    values: dict[str, Any] = {"body": draw(bodies)}
    for attr in sorted(chosen):
        values[attr] = draw(CANONICAL_VALUES[attr])
    return Reminder(**values)


COMPARED = ("id", "body", "tags", "dedupe_key", "ttl_turns", "preserve_on_compact", "propagate", "role_hint",
            "fired_at_turn", "mode", "source", "authority", "provider_id", "originating_agent_id", "meta", "extra")


def canonical(r: Reminder, *, id_written: bool = True, source_default: str | None = None,
              ignore_extra: tuple[str, ...] = ()) -> dict[str, Any]:
    out = {f: getattr(r, f) for f in COMPARED}
    if not id_written:
        del out["id"]
    out["meta"] = out["meta"] or None  # an empty `_meta` says nothing
    out["extra"] = {k: v for k, v in out["extra"].items() if k not in ignore_extra}
    if out["source"] is None and source_default:
        out["source"] = source_default
    return out


def wire(obj: Any) -> Any:
    """What a peer would really receive: JSON text, parsed."""
    return json.loads(json.dumps(obj))


# ----------------------------------------------------------------------------- 1. decode(encode(r)) == r


def _mcp_legacy(r):
    msg = wire(McpLegacy.encode(r))
    assert McpLegacy.is_reminder(msg)
    return McpLegacy.decode(msg), {}


def _acp_inject_standard(r):
    params = wire(AcpStandard.encode_inject("sess", r))
    assert params["sessionId"] == "sess"
    # the standard inject writes an id only if the sender gave one (the agent assigns it otherwise)
    return AcpStandard.decode_inject(params), {"id_written": r.is_set("id")}


def _acp_inject_legacy(r):
    params = wire(AcpLegacy.encode_inject("sess", r))
    assert "mode" in params and all(k == "sessionId" or k == k.lower() for k in params)
    return AcpLegacy.decode_inject(params), {}


def _acp_emitted_standard(r):
    msg = wire(AcpStandard.encode_emitted("sess", r))
    return AcpStandard.decode_emitted(msg["params"]["update"]), {"source_default": "host"}


def _acp_emitted_legacy(r):
    msg = wire(AcpLegacy.encode_emitted("sess", r))
    payload = msg["params"]["update"]["_meta"]["harn"]["reminder"]
    assert {"tags", "roleHint", "renderedRole", "source", "ttlTurns"} <= set(payload)
    # renderedRole is derived from roleHint; it comes back as an unknown field of Harn's payload
    return AcpLegacy.decode_emitted(msg["params"]["update"]), {"source_default": "host",
                                                                "ignore_extra": ("renderedRole",)}


def _a2a_inject(r):
    params = wire(A2AStandard.encode_inject("task-1", r))
    for key, names in (("propagate", "REMINDER_PROPAGATION_"), ("roleHint", "REMINDER_ROLE_HINT_")):
        if key in params["reminder"]:
            assert params["reminder"][key].startswith(names)
    task, back = A2AStandard.decode_inject(params)
    assert task == "task-1"
    return back, {}


def _a2a_update(r):
    return A2AStandard.decode_update(wire(A2AStandard.encode_update("task-1", "ctx-1", r, "expired")))[1], {}


SHAPES = {
    "mcp.standard": lambda r: (McpStandard.decode(wire(McpStandard.encode(r))), {}),
    "mcp.legacy": _mcp_legacy,
    "acp.inject.standard": _acp_inject_standard,
    "acp.inject.legacy": _acp_inject_legacy,
    "acp.emitted.standard": _acp_emitted_standard,
    "acp.emitted.legacy": _acp_emitted_legacy,
    "a2a.inject.standard": _a2a_inject,
    "a2a.update.standard": _a2a_update,
}


def _a2a_legacy(rs: list[Reminder], where: str) -> list[Reminder]:
    """Harn's metadata channel on SendMessage params or on one kind of stream event."""
    if where == "params":
        holder: dict[str, Any] = {"message": {"messageId": "m"}}
        A2ALegacy.put_on_params(holder, rs)
        holder = wire(holder)
        back = A2ALegacy.take_from_params(holder)
        assert holder == {"message": {"messageId": "m"}}  # taken off, no husks left
        return back
    holder = {where: {"taskId": "t", "contextId": "c"}}
    assert A2ALegacy.put_on_event(holder, rs)
    holder = wire(holder)
    _, _, back = A2ALegacy.take_from_event(holder)
    assert holder == {where: {"taskId": "t", "contextId": "c"}}
    return back


@SETTINGS
@given(st.lists(reminders(), min_size=1, max_size=2),
       st.sampled_from(["params", "task", "statusUpdate", "artifactUpdate", "message"]))
def test_every_shape_decodes_what_it_encodes(rs, a2a_where):
    for r in rs:
        for name, roundtrip in SHAPES.items():
            back, how = roundtrip(r)
            ignore = how.pop("ignore_extra", ())
            assert canonical(back, ignore_extra=ignore, **how) == canonical(r, **how), name
    # Harn's A2A channel carries one reminder as `reminder`, several as `reminders`
    assert [canonical(b) for b in _a2a_legacy(rs, a2a_where)] == [canonical(r) for r in rs], a2a_where


# ----------------------------------------------------------------------------- 2. legacy → standard → legacy


def padded(s: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(st.sampled_from(["", "", " ", "  "]), s, st.sampled_from(["", "", " ", "\t"])).map("".join)


_HARN_COMMON: dict[str, st.SearchStrategy[Any]] = {
    "tags": st.none() | st.lists(padded(words), max_size=4),
    "dedupe_key": padded(words) | st.sampled_from(["", " "]),
    "ttl_turns": st.none() | st.integers(1, 50),
    "preserve_on_compact": st.booleans(),
    "propagate": st.sampled_from(PROPAGATE_VALUES),
    "role_hint": st.sampled_from(ROLE_HINT_VALUES),
    "fired_at_turn": st.none() | st.integers(0, 50),
    "authority": st.sampled_from(AUTHORITY_VALUES),
}
HARN_OPTIONAL: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    # Harn's `session/remind` allow-list: `source` only as "bridge", no provider/agent ids, no unknown keys
    "acp-remind": {**_HARN_COMMON, "source": st.just("bridge")},
    "other": {**_HARN_COMMON, "mode": st.sampled_from(MODE_VALUES + MODE_ALIASES),
              "source": st.sampled_from(HARN_SOURCES) | unknown_sources, "provider_id": words,
              "originating_agent_id": words},
}
HARN_FIELD_SETS = {name: st.sets(st.sampled_from(sorted(fields))) for name, fields in HARN_OPTIONAL.items()}
harn_ids = padded(ids) | st.sampled_from(["", "  "])
casings = st.booleans()


@st.composite
def harn_reminder(draw, *, casing: str, protocol: str) -> dict[str, Any]:
    """A reminder object as a legacy (Harn) sender writes it, every optional field maybe absent.

    `casing` is "camel", "snake" or "mixed" (both are accepted on input); values include the
    Harn aliases and the values the standard (or A2A) wire cannot express.
    """
    kind = "acp-remind" if protocol == "acp-remind" else "other"
    optional = HARN_OPTIONAL[kind]
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["id"] = draw(harn_ids)
    out["body"] = draw(bodies)
    for attr in sorted(draw(HARN_FIELD_SETS[kind])):
        camel = casing == "camel" or (casing == "mixed" and draw(casings))
        out[CAMEL[attr] if camel else SNAKE[attr]] = draw(optional[attr])
    if kind == "other":
        out.update(draw(extras))
    if draw(st.booleans()):
        out["_meta"] = draw(metas)
    return out


def normalise(obj: dict[str, Any], casing: str) -> dict[str, Any]:
    """An input as the equivalent canonical spelling: one casing, trimmed, null/blank = absent."""
    names = CAMEL if casing == "camel" else SNAKE
    out: dict[str, Any] = {}
    for k, v in obj.items():
        attr = ATTR_BY_WIRE.get(k)
        name = names[attr] if attr else k
        if attr == "tags":
            if v is None:
                continue
            v = list(dict.fromkeys(t.strip() for t in v))
        elif attr in ("id", "dedupe_key"):
            v = v.strip()
            if not v:
                continue
        elif attr == "ttl_turns" and v is None:
            continue
        elif k == "_meta" and not v:
            continue
        out[name] = v
    return out


def one(protocol: str, toward: str, source: str, target: str, msg: dict[str, Any]) -> dict[str, Any]:
    sends = translate(protocol, toward, source, target, json.dumps(msg, ensure_ascii=False).encode())
    assert len(sends) == 1, sends
    return json.loads(sends[0].data)


def same_input(back: dict[str, Any], given: dict[str, Any], casing: str, *, id_key: str = "id") -> None:
    expected = normalise(given, casing)
    actual = normalise(back, casing)
    if id_key == "id" and "id" not in expected:  # the proxy generated one: it must be there, and a UUID
        assert len(actual.pop("id")) == 36
    assert actual == expected


@PIPELINE_SETTINGS
@given(harn_reminder(casing="mixed", protocol="mcp"), st.booleans())
def test_mcp_legacy_standard_legacy(reminder, flat):
    meta = {"harn.reminder": reminder} if flat else {"harn": {"reminder": reminder}}
    msg = {"jsonrpc": "2.0", "method": "notifications/message",
           "params": {"level": "info", "logger": "harn.reminder", "data": reminder["body"], "_meta": meta}}
    standard = one("mcp", "host", "legacy", "standard", copy.deepcopy(msg))
    assert standard["method"] == "notifications/reminder"
    spec = standard["params"]["reminder"]
    assert spec.get("propagate", "session") in PROPAGATE_VALUES  # only standard values on a standard wire
    back = one("mcp", "host", "standard", "legacy", standard)
    assert back["params"]["data"] == reminder["body"]
    same_input(back["params"]["_meta"]["harn"]["reminder"], reminder, "camel")


@PIPELINE_SETTINGS
@given(harn_reminder(casing="snake", protocol="acp-remind"),
       st.sampled_from([None, *MODE_VALUES, *MODE_ALIASES, "typo"]), st.booleans(), st.booleans())
def test_acp_remind_legacy_standard_legacy(reminder, mode, nested, is_request):
    params: dict[str, Any] = {"sessionId": "sess-1"}
    if nested:
        params["reminder"] = reminder
    else:
        params.update(reminder)
    if mode is not None:
        params["mode"] = mode
    msg = {"jsonrpc": "2.0", "method": "session/remind", "params": params}
    if is_request:
        msg["id"] = 9
    standard = one("acp", "peer", "legacy", "standard", copy.deepcopy(msg))
    assert standard["method"] == "session/inject_reminder" and standard.get("id") == msg.get("id")
    assert standard["params"]["mode"] in MODE_VALUES
    back = one("acp", "peer", "standard", "legacy", standard)
    assert back["method"] == "session/remind"
    out = dict(back["params"])
    assert out.pop("sessionId") == "sess-1"
    # Harn reads a missing or unknown mode as audit_only; the proxy writes that meaning explicitly
    expected_mode = mode if mode in MODE_VALUES + MODE_ALIASES else "audit_only"
    assert out.pop("mode") == expected_mode
    same_input(out, reminder, "snake")


@PIPELINE_SETTINGS
@given(harn_reminder(casing="camel", protocol="acp-emitted"))
def test_acp_emitted_legacy_standard_legacy(reminder):
    payload = dict(reminder)
    payload["reminderId"] = payload.pop("id", "").strip() or "r-generated-by-harn"
    # Harn always writes these (ttlTurns may be null); renderedRole is derived from roleHint
    if payload.get("tags") is None:
        payload["tags"] = []
    payload.setdefault("roleHint", "system")
    payload.setdefault("source", "stdlib_provider")
    payload.setdefault("ttlTurns", None)
    payload["renderedRole"] = "user" if payload["roleHint"] == "user_block" else payload["roleHint"]
    msg = {"jsonrpc": "2.0", "method": "session/update",
           "params": {"sessionId": "s", "update": {"sessionUpdate": "reminder_emitted",
                                                   "_meta": {"harn": {"reminder": payload}}}}}
    standard = one("acp", "host", "legacy", "standard", copy.deepcopy(msg))
    update = standard["params"]["update"]
    assert update["sessionUpdate"] == "reminder_emitted"
    if payload["source"] in HARN_SOURCES:  # a Harn spelling never reaches a standard wire
        assert update["source"] in SOURCE_VALUES
    else:
        assert update["source"] == payload["source"]
    assert "harn" not in update.get("_meta", {})
    back = one("acp", "host", "standard", "legacy", standard)
    assert set(back["params"]["update"]) == {"sessionUpdate", "_meta"}
    got = back["params"]["update"]["_meta"]["harn"]["reminder"]
    same_input(got, payload, "camel", id_key="reminderId")


@PIPELINE_SETTINGS
@given(st.lists(harn_reminder(casing="mixed", protocol="a2a"), min_size=1, max_size=3),
       st.sampled_from(["statusUpdate", "artifactUpdate", "message", "task"]))
def test_a2a_legacy_standard_legacy_on_stream_events(rs, kind):
    id_key = "id" if kind == "task" else "taskId"
    # reminders on one event need ids to be told apart
    rs = [{**r, "id": f"r{i}-{r.get('id', '').strip() or 'x'}"} for i, r in enumerate(rs)]
    harn = {"reminder": rs[0]} if len(rs) == 1 else {"reminders": rs}
    event = {id_key: "task-9", "contextId": "ctx-1", "metadata": {"harn": harn}}
    frame = {"jsonrpc": "2.0", "id": 3, "result": {kind: event}}
    sends = translate("a2a", "host", "legacy", "standard", json.dumps(frame).encode())
    frames = [json.loads(s.data) for s in sends]
    assert len(frames) == len(rs) + 1
    updates, rest = frames[:-1], frames[-1]
    assert rest == {"jsonrpc": "2.0", "id": 3, "result": {kind: {id_key: "task-9", "contextId": "ctx-1"}}}
    for f in updates:
        reminder = f["result"]["reminderUpdate"]["reminder"]
        assert reminder.get("propagate", "REMINDER_PROPAGATION_SESSION").startswith("REMINDER_PROPAGATION_")
        assert reminder.get("roleHint", "REMINDER_ROLE_HINT_SYSTEM").startswith("REMINDER_ROLE_HINT_")
    # and back: the frames' reminders go onto the next event for a legacy caller (codec level; the
    # flow's holding of frames across a stream is test_held_update_reaches_legacy_caller below)
    held = [A2AStandard.decode_update(f["result"])[1] for f in updates]
    result = rest["result"]
    assert A2ALegacy.put_on_event(result, held)
    got = wire(result)[kind]["metadata"]["harn"]
    got_list = [got["reminder"]] if "reminder" in got else got["reminders"]
    assert len(got_list) == len(rs)
    for g, r in zip(got_list, rs):
        same_input(g, r, "camel")
    # the inject direction: SendMessage metadata → InjectTaskReminder → metadata again
    for r in rs:
        [taken] = A2ALegacy.take_from_params({"metadata": {"harn": {"reminder": copy.deepcopy(r)}}})
        _, again = A2AStandard.decode_inject(wire(A2AStandard.encode_inject("t", taken)))
        holder: dict[str, Any] = {}
        A2ALegacy.put_on_params(holder, [again])
        same_input(holder["metadata"]["harn"]["reminder"], r, "camel")


def test_held_update_reaches_legacy_caller():
    flow = make_flow("a2a", RouteSettings(), host_dialect="legacy", peer_dialect="standard")
    update = {"jsonrpc": "2.0", "id": 3, "result": {"reminderUpdate": {
        "taskId": "t", "contextId": "c", "reminder": {"id": "r", "body": "b", "propagate": "REMINDER_PROPAGATION_NONE"}}}}
    assert flow.from_peer(json.dumps(update).encode()) == []
    [send] = flow.from_peer(b'{"jsonrpc":"2.0","id":3,"result":{"statusUpdate":{"taskId":"t","contextId":"c"}}}')
    event = json.loads(send.data)["result"]["statusUpdate"]
    assert event["metadata"] == {"harn": {"reminder": {"id": "r", "body": "b", "propagate": "none"}}}
