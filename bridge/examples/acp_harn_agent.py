"""A Harn-like legacy ACP v1 agent, for demos and as a real subprocess peer in tests.

It reproduces what Harn really does on the ACP wire (research/harn.md §2.1, §3, §4), so the
proxy is tested against the legacy behaviour it has to translate, quirks included:
`session/remind` takes flat snake_case fields and rejects camelCase (HARN-RMD-001), a
missing or unknown `mode` means `audit_only` (the model never sees the reminder), dedupe
happens when the queue drains rather than at inject time, and delivered reminders are
reported only as `reminder_emitted` updates with the payload under `_meta.harn.reminder`.
A prompt turn is an echo; there is no model.

Run: python -m bridge.examples.acp_harn_agent
"""

import itertools
import sys
import uuid
from dataclasses import dataclass, field

from bridge.examples._stdio import serve
from bridge.examples.rpc import RpcError

REMINDER_OPTIONS = frozenset(
    {
        "_meta", "body", "dedupe_key", "fired_at_turn", "id", "preserve_on_compact",
        "propagate", "role_hint", "authority", "source", "tags", "ttl_turns",
    }
)
MODES = {
    "interrupt_immediate": "interrupt_immediate",
    "interrupt": "interrupt_immediate",
    "finish_step": "finish_step",
    "after_current_operation": "finish_step",
    "steer": "finish_step",
    "queue": "audit_only",
}
PROPAGATE = ("all", "session", "none")
ROLE_HINTS = ("system", "developer", "user_block", "ephemeral_cache")
AUTHORITIES = ("contract", "corrective", "advisory")
SESSION_KEYS = ("mode", "sessionId", "session_id")


def _remind_error(code: str, detail: str) -> RpcError:
    """Harn's wording: `session/remind: HARN-RMD-00x: <detail>` under -32602."""
    return RpcError(-32602, f"session/remind: {code}: {detail}")


def _one_of(values: tuple[str, ...]) -> str:
    return ", ".join(values[:-1]) + ", or " + values[-1]


def _optional_int(payload: dict, key: str, minimum: int, bound: str) -> int | None:
    value = payload.get(key)
    if value is None:
        return None
    # bool is an int in Python, and a JSON float such as 2.0 must fail as Harn's serde does.
    if isinstance(value, bool) or not isinstance(value, int):
        raise _remind_error("HARN-RMD-002", f"`{key}` must be an integer")
    if value < minimum:
        raise _remind_error("HARN-RMD-002", f"`{key}` must be {bound}")
    return value


def _choice(payload: dict, key: str, allowed: tuple[str, ...], default: str, code: str) -> str:
    value = payload.get(key)
    if value is None:
        return default
    if value not in allowed:
        raise _remind_error(code, f"`{key}` must be one of {_one_of(allowed)}")
    return value


def validate_reminder(payload: dict) -> dict:
    """Check a `session/remind` payload as Harn's `bridge/remind.rs` does; return the stored reminder."""
    unknown = sorted(set(payload) - REMINDER_OPTIONS)
    if "content" in unknown:
        raise _remind_error("HARN-RMD-002", "session/remind expects reminder `body`, not user-message `content`")
    if unknown:
        raise _remind_error("HARN-RMD-001", "unknown reminder option(s): " + ", ".join(unknown))

    body = payload.get("body")
    if not isinstance(body, str) or not body.strip():
        raise _remind_error("HARN-RMD-002", "`body` must be a non-empty string")
    tags = payload.get("tags")
    if tags is None:
        tags = []
    if not isinstance(tags, list) or not all(isinstance(tag, str) and tag.strip() for tag in tags):
        raise _remind_error("HARN-RMD-002", "`tags` must be a list of non-empty strings")
    dedupe_key = payload.get("dedupe_key")
    if dedupe_key is not None and not isinstance(dedupe_key, str):
        raise _remind_error("HARN-RMD-002", "`dedupe_key` must be a string")
    ttl_turns = _optional_int(payload, "ttl_turns", 1, "> 0")
    fired_at_turn = _optional_int(payload, "fired_at_turn", 0, ">= 0")
    if payload.get("source") not in (None, "bridge"):
        raise _remind_error("HARN-RMD-002", "`source` must be `bridge` when set")
    propagate = _choice(payload, "propagate", PROPAGATE, "session", "HARN-RMD-005")
    role_hint = _choice(payload, "role_hint", ROLE_HINTS, "system", "HARN-RMD-002")
    authority = _choice(payload, "authority", AUTHORITIES, "contract", "HARN-RMD-002")
    preserve = payload.get("preserve_on_compact")
    if preserve is not None and not isinstance(preserve, bool):
        raise _remind_error("HARN-RMD-002", "`preserve_on_compact` must be a boolean")
    if not isinstance(payload.get("_meta"), (dict, type(None))):
        raise _remind_error("HARN-RMD-002", "`_meta` must be an object or null")
    reminder_id = payload.get("id")
    if reminder_id is not None and not isinstance(reminder_id, str):
        raise _remind_error("HARN-RMD-002", "`id` must be a string")

    # Harn accepts `_meta` but does not keep it; the rest mirrors its SystemReminder.
    return {
        "id": (reminder_id or "").strip() or str(uuid.uuid4()),
        "tags": list(dict.fromkeys(tag.strip() for tag in tags)),
        "dedupe_key": (dedupe_key or "").strip() or None,
        "ttl_turns": ttl_turns,
        "preserve_on_compact": bool(preserve),
        "propagate": propagate,
        "role_hint": role_hint,
        "authority": authority,
        "source": "bridge",
        "body": body.strip(),
        "fired_at_turn": fired_at_turn or 0,
    }


def delivery_mode(mode) -> str:
    """Harn's `QueuedUserMessageMode::from_str`: anything unrecognised, or nothing, is `audit_only`."""
    return MODES.get(mode, "audit_only") if isinstance(mode, str) else "audit_only"


@dataclass
class Session:
    """Per-session reminder state; Harn keeps the queue and the delivered directives apart."""

    queue: list[tuple[dict, str]] = field(default_factory=list)  # (reminder, mode), FIFO
    pending: list[dict] = field(default_factory=list)  # delivered directives, rendered each turn
    audited: list[dict] = field(default_factory=list)  # drained audit_only reminders, never rendered


class HarnLikeAgent:
    """Message handler; `main()` wires it to stdio."""

    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}
        self._session_numbers = itertools.count(1)
        self._methods = {
            "initialize": self._initialize,
            "session/new": self._new_session,
            "session/cancel": lambda params: ([], {}),
            "session/remind": self._remind,
            "session/prompt": self._prompt,
            "_harn/pending": self._pending,
        }

    def handle(self, msg: dict) -> list[dict]:
        """Return the messages to send back for one incoming message, in wire order."""
        method = msg.get("method")
        if not isinstance(method, str):
            return []  # a response: this agent never sends requests
        is_request = "id" in msg
        handler = self._methods.get(method)
        if handler is None:
            if not is_request:
                return []  # ACP: unrecognised notifications are ignored
            return [RpcError(-32601, "Method not found", {"method": method}).reply(msg["id"])]
        try:
            updates, result = handler(msg.get("params"))
        except RpcError as exc:
            return [exc.reply(msg["id"])] if is_request else []
        if is_request:
            return updates + [{"jsonrpc": "2.0", "id": msg["id"], "result": result}]
        return updates

    def _initialize(self, params) -> tuple[list[dict], dict]:
        return [], {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": False,
                "_meta": {
                    "harn": {
                        "extensionContract": "https://harnlang.com/spec/harn-extensions/v1",
                        "sessionUpdateExtensions": ["tool_lifecycle", "reminder_emitted"],
                    }
                },
            },
            "agentInfo": {"name": "harn-like", "version": "0.8.163"},
            "authMethods": [],
        }

    def _new_session(self, params) -> tuple[list[dict], dict]:
        session_id = f"sess-{next(self._session_numbers)}"
        self.sessions[session_id] = Session()
        return [], {"sessionId": session_id}

    def _session(self, session_id) -> Session:
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            raise RpcError(-32004, f"Session not found: {session_id}")
        return session

    def _remind(self, params) -> tuple[list[dict], dict]:
        if not isinstance(params, dict):
            raise _remind_error("HARN-RMD-002", "session/remind params must be an object")
        session_id = params.get("sessionId", params.get("session_id"))
        if session_id is None:
            # Harn falls back to its first session; with none at all it needs the id.
            if not self.sessions:
                raise RpcError(-32602, "session/remind requires sessionId")
            session_id = next(iter(self.sessions))
        session = self._session(session_id)
        if "reminder" in params:
            payload = params["reminder"]
            if not isinstance(payload, dict):
                raise _remind_error("HARN-RMD-002", "session/remind payload must be a reminder object")
        else:
            payload = {key: value for key, value in params.items() if key not in SESSION_KEYS}
        reminder = validate_reminder(payload)
        session.queue.append((reminder, delivery_mode(params.get("mode"))))
        return [], {"reminderId": reminder["id"]}

    def _prompt(self, params) -> tuple[list[dict], dict]:
        params = params if isinstance(params, dict) else {}
        session_id = params.get("sessionId")
        session = self._session(session_id)
        prompt = params.get("prompt")
        if not isinstance(prompt, list):
            raise RpcError(-32602, "Invalid params", {"reason": "`prompt` must be a list of content blocks"})

        self._drain(session)
        updates = [_update(session_id, _reminder_emitted(reminder)) for reminder in session.pending]
        text = "echo: " + " ".join(
            block["text"] for block in prompt if isinstance(block, dict) and block.get("type") == "text"
        )
        if session.pending:
            text += " [reminders: " + "; ".join(reminder["body"] for reminder in session.pending) + "]"
        updates.append(
            _update(session_id, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
        )
        self._expire(session)
        return updates, {"stopReason": "end_turn"}

    @staticmethod
    def _drain(session: Session) -> None:
        """Deliver the queue at the start of a turn; the newest reminder wins per dedupe key."""
        for reminder, mode in session.queue:
            if mode == "audit_only":
                session.audited.append(reminder)
                continue
            key = reminder["dedupe_key"]
            if key is not None:
                session.pending = [other for other in session.pending if other["dedupe_key"] != key]
            session.pending.append(reminder)
        session.queue.clear()

    @staticmethod
    def _expire(session: Session) -> None:
        """Harn's post-turn TTL pass: 1 expires, more counts down, none stays until cleared."""
        kept = []
        for reminder in session.pending:
            ttl = reminder["ttl_turns"]
            if ttl is None:
                kept.append(reminder)
            elif ttl > 1:
                reminder["ttl_turns"] = ttl - 1
                kept.append(reminder)
        session.pending = kept

    def _pending(self, params) -> tuple[list[dict], dict]:
        """Test hook: which reminders are standing directives and which were only audited."""
        session = self._session(params.get("sessionId") if isinstance(params, dict) else None)
        return [], {
            "pending": [reminder["id"] for reminder in session.pending],
            "audited": [reminder["id"] for reminder in session.audited],
        }


def _reminder_emitted(reminder: dict) -> dict:
    """Harn's outbound shape: nothing at the update root, the payload only under `_meta.harn`."""
    return {
        "sessionUpdate": "reminder_emitted",
        "_meta": {
            "harn": {
                "reminder": {
                    "reminderId": reminder["id"],
                    "tags": list(reminder["tags"]),
                    "body": reminder["body"],
                    "roleHint": reminder["role_hint"],
                    "renderedRole": "user",
                    "source": reminder["source"],
                    "ttlTurns": reminder["ttl_turns"],
                }
            }
        },
    }


def _update(session_id: str, update: dict) -> dict:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}


def main() -> int:
    return serve("acp_harn_agent", HarnLikeAgent().handle)


if __name__ == "__main__":
    sys.exit(main())
