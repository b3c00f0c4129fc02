"""What the proxy writes is valid against the published schemas (tests/schemas, copies of ../shared/schemas).

Every message checked here is produced by the proxy itself (`bridge.cli.translate` or a flow),
never written by hand.
"""
from __future__ import annotations

import json
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from bridge.cli.translate import translate
from tests.flows import make_flow
from bridge.rules import RouteSettings


def out(protocol: str, toward: str, source: str, target: str, msg: Any) -> list[dict[str, Any]]:
    raw = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
    return [json.loads(s.data) for s in translate(protocol, toward, source, target, raw)]


def validator_for(doc: dict[str, Any], definition: str | None = None,
                  patch: dict[str, Any] | None = None) -> Draft202012Validator:
    """A validator for ``doc`` (or one of its `$defs`), resolving refs against the whole document."""
    defs = dict(doc.get("$defs", {}))
    if patch:
        defs.update(patch)
    schema = {**doc, "$defs": defs}
    if definition is not None:
        schema = {"$schema": doc.get("$schema"), "$defs": defs, "$ref": f"#/$defs/{definition}"}
    return Draft202012Validator(schema)


def assert_valid(validator: Draft202012Validator, instance: Any) -> None:
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


# ----------------------------------------------------------------------------- inputs

LEGACY_MCP_INPUTS = {
    "full": {"id": "r-1", "body": "Re-read src/lib.rs before editing.", "tags": [" ws ", "ws", "file"],
             "dedupeKey": "f:src/lib.rs", "ttlTurns": 2, "preserveOnCompact": True, "propagate": "all",
             "roleHint": "ephemeral_cache", "firedAtTurn": 0},
    "harn-extras": {"body": "Budget exceeded.", "mode": "steer", "source": "in_pipeline", "authority": "corrective",
                    "providerId": "budget", "originatingAgentId": "agent-7", "x-vendor": {"a": 1},
                    "_meta": {"com.example/k": "v"}},
    "snake": {"id": "  r-3 ", "body": "cargo check passed", "dedupe_key": " ", "ttl_turns": None, "role_hint": "developer",
              "fired_at_turn": None, "preserve_on_compact": False},
    "minimal": {"body": "é 中 ☕"},
}


def legacy_mcp(reminder: dict[str, Any], flat: bool = False) -> dict[str, Any]:
    meta = {"harn.reminder": reminder} if flat else {"harn": {"reminder": reminder}, "traceparent": "00-a-b-01"}
    return {"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "logger": "harn.reminder", "data": reminder["body"], "_meta": meta}}


# ----------------------------------------------------------------------------- MCP


@pytest.fixture(scope="module")
def reminder_schema(load_schema):
    return validator_for(load_schema("mcp-notifications-reminder.schema.json"))


@pytest.fixture(scope="module")
def logging_schema(load_schema):
    doc = load_schema("mcp-2025-11-25.schema.json")
    assert "LoggingMessageNotification" in doc["$defs"]
    return validator_for(doc, "LoggingMessageNotification")


@pytest.mark.parametrize("name", sorted(LEGACY_MCP_INPUTS))
@pytest.mark.parametrize("flat", [False, True])
def test_standard_mcp_reminder_output_is_valid(reminder_schema, name, flat):
    [message] = out("mcp", "host", "legacy", "standard", legacy_mcp(LEGACY_MCP_INPUTS[name], flat))
    assert message["method"] == "notifications/reminder"
    assert_valid(reminder_schema, message)


def test_standard_mcp_output_of_every_mcp_vector_is_valid(reminder_schema, vectors_dir):
    checked = 0
    for path in sorted(vectors_dir.glob("mcp-*.json")):
        vector = json.loads(path.read_text())
        if vector["target"] != "standard":
            continue
        for message in out("mcp", vector["toward"], vector["source"], vector["target"], vector["input"]):
            if message.get("method") == "notifications/reminder":
                assert_valid(reminder_schema, message)
                checked += 1
    assert checked >= 2


@pytest.mark.parametrize("name", sorted(LEGACY_MCP_INPUTS))
def test_legacy_mcp_logging_output_is_valid(logging_schema, reminder_schema, name):
    [standard] = out("mcp", "host", "legacy", "standard", legacy_mcp(LEGACY_MCP_INPUTS[name]))
    [legacy] = out("mcp", "host", "standard", "legacy", standard)
    assert legacy["method"] == "notifications/message"
    assert_valid(logging_schema, legacy)


def test_schema_check_is_not_vacuous(logging_schema, reminder_schema):
    """The validators really refuse what the proxy must never write."""
    assert list(reminder_schema.iter_errors({"jsonrpc": "2.0", "method": "notifications/reminder",
                                             "params": {"reminder": {"id": "r", "body": "b", "ttlTurns": None}}}))
    assert list(reminder_schema.iter_errors({"jsonrpc": "2.0", "method": "notifications/reminder",
                                             "params": {"reminder": {"id": "r", "body": "b", "mode": "x",
                                                                     "propagate": "everyone"}}}))
    assert list(logging_schema.iter_errors({"jsonrpc": "2.0", "method": "notifications/message",
                                            "params": {"level": "chatty", "data": "x"}}))


def test_mcp_initialize_result_with_reminder_capability_is_valid(load_schema):
    doc = load_schema("mcp-2025-11-25.schema.json")
    result_schema = validator_for(doc, "InitializeResult")
    cap = {"emit": True, "propagate": ["session", "none"], "roleHints": ["system"]}
    response = {"jsonrpc": "2.0", "id": 1, "result": {
        "protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": True}, "_meta": {"harn": {"reminders": cap}}},
        "serverInfo": {"name": "harn", "version": "0.8.163"}}}
    [rewritten] = out("mcp", "host", "legacy", "standard", response)
    assert rewritten["result"]["capabilities"]["reminders"] == cap
    assert_valid(result_schema, rewritten["result"])


# ----------------------------------------------------------------------------- ACP


@pytest.fixture(scope="module")
def acp_doc(load_schema):
    return load_schema("acp-v1.schema.json")


@pytest.fixture(scope="module")
def session_notification(acp_doc):
    return validator_for(acp_doc, "SessionNotification")


@pytest.fixture(scope="module")
def session_envelope(acp_doc):
    # The v1 schema's SessionUpdate union has no reminder kinds (they are the proposal the proxy
    # implements), so a rewritten reminder update is checked against the SessionNotification
    # envelope with `update` relaxed to "an object naming its sessionUpdate"; everything around
    # it (sessionId, _meta) is checked as published.
    relaxed = {"type": "object", "required": ["sessionUpdate"], "properties": {"sessionUpdate": {"type": "string"}}}
    return validator_for(acp_doc, "SessionNotification", patch={"SessionUpdate": relaxed})


def assert_jsonrpc_notification(message: dict[str, Any], method: str) -> None:
    assert message["jsonrpc"] == "2.0" and message["method"] == method and "id" not in message


def test_agent_message_chunk_passes_through_valid(session_notification):
    raw = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":'
           b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"remind me: caf\\u00e9"}}}}')
    [send] = translate("acp", "host", "legacy", "standard", raw)
    assert send.data == raw
    message = json.loads(send.data)
    assert_jsonrpc_notification(message, "session/update")
    assert_valid(session_notification, message["params"])


def test_session_notification_schema_is_not_vacuous(session_notification, session_envelope):
    bad = {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "nope"}}}
    assert list(session_notification.iter_errors(bad))
    assert list(session_envelope.iter_errors({"update": {"sessionUpdate": "x"}}))  # sessionId is required
    assert list(session_envelope.iter_errors({"sessionId": "s", "update": {"sessionUpdate": "x"}, "_meta": 3}))


def _emitted_legacy() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "session-1", "update": {
        "sessionUpdate": "reminder_emitted", "_meta": {"harn": {"reminder": {
            "reminderId": "reminder-1", "tags": ["token_pressure"], "body": "Refresh the context.",
            "roleHint": "user_block", "renderedRole": "user", "source": "in_pipeline", "ttlTurns": None}}}}}}


def test_rewritten_reminder_updates_have_a_valid_envelope(session_envelope):
    [standard] = out("acp", "host", "legacy", "standard", _emitted_legacy())
    [legacy] = out("acp", "host", "standard", "legacy", standard)
    for message in (standard, legacy):
        assert_jsonrpc_notification(message, "session/update")
        assert message["params"]["update"]["sessionUpdate"] == "reminder_emitted"
        assert_valid(session_envelope, message["params"])


@pytest.fixture
def held_flow():
    """A standard client in front of an agent with no reminder support: the proxy holds and renders."""
    return make_flow("acp", RouteSettings(), host_dialect="standard", peer_dialect="none")


def test_prompt_with_prepended_reminder_is_a_valid_prompt_request(acp_doc, session_envelope, held_flow):
    prompt_request = validator_for(acp_doc, "PromptRequest")
    inject = {"jsonrpc": "2.0", "id": 1, "method": "session/inject_reminder",
              "params": {"sessionId": "sess-1", "body": "Never push to <main> & friends.", "dedupeKey": "push"}}
    answers = [json.loads(s.data) for s in held_flow.from_host(json.dumps(inject).encode())]
    assert answers and answers[0]["id"] == 1 and answers[0]["result"]["reminderId"]
    prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
              "params": {"sessionId": "sess-1", "prompt": [{"type": "text", "text": "Go on."}]}}
    sends = held_flow.from_host(json.dumps(prompt).encode())
    to_agent = [json.loads(s.data) for s in sends if s.to == "peer"]
    [request] = to_agent
    blocks = request["params"]["prompt"]
    assert len(blocks) == 2 and blocks[1] == {"type": "text", "text": "Go on."}
    assert blocks[0]["type"] == "text" and "Never push to &lt;main&gt; &amp; friends." in blocks[0]["text"]
    assert_valid(prompt_request, request["params"])
    for update in (json.loads(s.data) for s in sends if s.to == "host"):
        assert_jsonrpc_notification(update, "session/update")
        assert_valid(session_envelope, update["params"])


# ----------------------------------------------------------------------------- A2A


def required_fields(proto: str, message: str) -> list[str]:
    """camelCase names of the REQUIRED fields of ``message`` in the proto (ProtoJSON spelling)."""
    block = re.search(rf"^message {message} \{{(.*?)^\}}", proto, re.S | re.M)
    assert block, message
    names = re.findall(r"^\s*(?:repeated |optional )?[\w.]+ (\w+) = \d+ \[\(google\.api\.field_behavior\) = REQUIRED\]",
                       block.group(1), re.M)
    return [re.sub(r"_(\w)", lambda m: m.group(1).upper(), n) for n in names]


CARD_REQUIRED = ["name", "description", "supportedInterfaces", "version", "capabilities", "defaultInputModes",
                 "defaultOutputModes", "skills"]
INTERFACE_REQUIRED = ["url", "protocolBinding", "protocolVersion"]


def test_card_output_keeps_every_required_agentcard_field(schemas_dir, vectors_dir):
    proto = (schemas_dir / "a2a-v1.proto").read_text()
    assert required_fields(proto, "AgentCard") == CARD_REQUIRED
    assert required_fields(proto, "AgentInterface") == INTERFACE_REQUIRED
    vector = json.loads((vectors_dir / "a2a-card-capability-legacy-to-standard.json").read_text())
    [card] = out("a2a", "host", "legacy", "standard", vector["input"])
    for key in CARD_REQUIRED:
        assert key in card, key
    assert card["capabilities"]["reminders"]["inject"] is True
    for iface in card["supportedInterfaces"]:
        for key in INTERFACE_REQUIRED:
            assert isinstance(iface.get(key), str) and iface[key], key


def test_card_rewritten_for_a_public_url_keeps_required_fields(schemas_dir, vectors_dir):
    vector = json.loads((vectors_dir / "a2a-card-capability-legacy-to-standard.json").read_text())
    flow = make_flow("a2a", RouteSettings(), host_dialect="standard", peer_dialect="legacy",
                     public_url="https://proxy.example/a2a")
    card = flow.rewrite_card(json.loads(json.dumps(vector["input"])))
    assert card is not None
    assert all(key in card for key in CARD_REQUIRED)
    assert [i["url"] for i in card["supportedInterfaces"]] == ["https://proxy.example/a2a"]
    assert all(i[k] for i in card["supportedInterfaces"] for k in INTERFACE_REQUIRED)
