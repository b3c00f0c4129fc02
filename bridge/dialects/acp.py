"""ACP codecs (spec §4): `session/inject_reminder` + lifecycle updates (standard) and Harn's
`session/remind` + `_meta.harn.reminder` on `reminder_emitted` (legacy)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bridge.dialects.paths import get_path, set_path
from bridge.dialects.shapes import HARN, STANDARD, ReminderShape
from bridge.fields import PROPAGATE_VALUES, ROLE_HINT_VALUES, SYNTHESIZED_KEY, ReminderError

if TYPE_CHECKING:
    from bridge.model import Reminder

UPDATE_METHOD = "session/update"
EMITTED = "reminder_emitted"
DEDUPED = "reminder_deduped"
EXPIRED = "reminder_expired"
SESSION_KEYS = frozenset({"sessionId", "session_id", "mode"})

INJECT_SHAPE = ReminderShape(
    "acp.inject", STANDARD, write_id="if_set", extras_inline=False,
    carries=frozenset({"id", "body", "tags", "dedupe_key", "ttl_turns", "preserve_on_compact", "propagate",
                       "role_hint", "fired_at_turn", "mode", "source", "provider_id", "originating_agent_id"}),
)
#: Harn validates `session/remind` against an allow-list of snake_case keys and refuses the rest
#: (HARN-RMD-001), so everything else rides in `_meta`; `source` is accepted only as "bridge".
REMIND_SHAPE = ReminderShape(
    "acp.remind", HARN, casing="snake", extras_inline=False, always=frozenset({"mode"}),
    carries=frozenset({"id", "body", "tags", "dedupe_key", "ttl_turns", "preserve_on_compact", "propagate",
                       "role_hint", "fired_at_turn", "mode", "authority", "source"}),
    only_values={"source": frozenset({"bridge"})},
)
#: `source` is required on `reminder_emitted` (spec §4); one the proxy holds itself came from the client.
EMITTED_SHAPE = ReminderShape(
    "acp.emitted", STANDARD, id_key="reminderId", extras_inline=False,
    carries=frozenset({"id", "body", "tags", "dedupe_key", "source", "provider_id", "fired_at_turn"}),
    always=frozenset({"source"}), defaults_for_always={"source": "host"},
)
#: Harn's schema requires tags, roleHint, renderedRole, source and ttlTurns (nullable) on every emit.
HARN_EMITTED_SHAPE = ReminderShape(
    "acp.emitted.legacy", HARN, id_key="reminderId",
    always=frozenset({"tags", "role_hint", "source", "ttl_turns"}),
    defaults_for_always={"source": "host"},
)

FULL_CAPABILITY = {"inject": True, "emit": True, "propagate": list(PROPAGATE_VALUES),
                   "roleHints": list(ROLE_HINT_VALUES)}


def session_of(params: dict[str, Any]) -> Any:
    return params.get("sessionId", params.get("session_id"))


def _update(session_id: Any, update: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": UPDATE_METHOD, "params": {"sessionId": session_id, "update": update}}


def update_kind(msg: dict[str, Any]) -> str | None:
    params = msg.get("params")
    if msg.get("method") != UPDATE_METHOD or not isinstance(params, dict) or not isinstance(params.get("update"), dict):
        return None
    return params["update"].get("sessionUpdate")


class AcpStandard:
    """The proposed standard ACP reminder messages."""

    dialect = "standard"
    inject_method = "session/inject_reminder"

    @staticmethod
    def decode_inject(params: Any) -> Reminder:
        if not isinstance(params, dict):
            raise ReminderError("params", "must be an object")
        reminder = INJECT_SHAPE.decode(params, skip=SESSION_KEYS - {"mode"}, where="params.")
        return reminder

    @staticmethod
    def encode_inject(session_id: Any, reminder: Reminder) -> dict[str, Any]:
        return {"sessionId": session_id, **INJECT_SHAPE.encode(reminder)}

    @staticmethod
    def inject_result(reminder_id: str, deduped_count: int | None = None) -> dict[str, Any]:
        result: dict[str, Any] = {"reminderId": reminder_id}
        if deduped_count is not None:
            result["dedupedCount"] = deduped_count
        return result

    @staticmethod
    def decode_emitted(update: dict[str, Any]) -> Reminder:
        return EMITTED_SHAPE.decode(update, skip=frozenset({"sessionUpdate"}), where="params.update.")

    @staticmethod
    def encode_emitted(session_id: Any, reminder: Reminder) -> dict[str, Any]:
        return _update(session_id, {"sessionUpdate": EMITTED, **EMITTED_SHAPE.encode(reminder)})

    @staticmethod
    def encode_deduped(session_id: Any, reminder_id: str, dedupe_key: str, dropped: list[str],
                       synthesized: bool) -> dict[str, Any]:
        update: dict[str, Any] = {"sessionUpdate": DEDUPED, "reminderId": reminder_id, "dedupeKey": dedupe_key,
                                  "droppedReminderIds": dropped}
        if synthesized:
            update["_meta"] = {SYNTHESIZED_KEY: True}
        return _update(session_id, update)

    @staticmethod
    def encode_expired(session_id: Any, reminder_id: str, phase: str, at_turn: int | None,
                       synthesized: bool) -> dict[str, Any]:
        update: dict[str, Any] = {"sessionUpdate": EXPIRED, "reminderId": reminder_id, "phase": phase}
        if at_turn is not None:
            update["expiredAtTurn"] = at_turn
        if synthesized:
            update["_meta"] = {SYNTHESIZED_KEY: True}
        return _update(session_id, update)

    @staticmethod
    def read_capability(agent_caps: Any) -> dict[str, Any] | None:
        found = agent_caps.get("reminders") if isinstance(agent_caps, dict) else None
        return found if isinstance(found, dict) else None

    @staticmethod
    def client_declares(client_caps: Any) -> bool:
        return isinstance(client_caps, dict) and "reminders" in client_caps

    @staticmethod
    def write_capability(agent_caps: dict[str, Any], cap: dict[str, Any] | None) -> None:
        if cap is None:
            agent_caps.pop("reminders", None)
        else:
            agent_caps["reminders"] = cap


class AcpLegacy:
    """Harn, as its code really behaves (research/harn.md §2.1)."""

    dialect = "legacy"
    inject_method = "session/remind"

    @staticmethod
    def decode_inject(params: Any) -> Reminder:
        if not isinstance(params, dict):
            raise ReminderError("params", "must be an object")
        nested = params.get("reminder")
        if isinstance(nested, dict):  # Harn's nested form: fields under params.reminder, mode beside it
            reminder = REMIND_SHAPE.decode(nested, where="params.reminder.")
        else:
            reminder = REMIND_SHAPE.decode(params, skip=SESSION_KEYS, where="params.")
        # Harn treats a missing or unknown mode as audit_only; keep that meaning explicit.  An
        # unknown spelling means nothing to any dialect, so it is not kept as an original (no
        # decoder could read it back: it made the proxy refuse its own rewrite).
        mode = params.get("mode")
        canonical = HARN.to_canonical("mode", mode) if isinstance(mode, str) else None
        update: dict[str, Any] = {"mode": canonical or "audit_only"}
        if canonical is not None and canonical != mode:
            update["originals"] = {**reminder.originals, "mode": mode}
        reminder = reminder.model_copy(update=update)
        reminder.model_fields_set.update(update)
        return reminder

    @staticmethod
    def encode_inject(session_id: Any, reminder: Reminder) -> dict[str, Any]:
        return {"sessionId": session_id, **REMIND_SHAPE.encode(reminder)}

    @staticmethod
    def inject_result(reminder_id: str, deduped_count: int | None = None) -> dict[str, Any]:
        return {"reminderId": reminder_id}

    @staticmethod
    def decode_emitted(update: dict[str, Any]) -> Reminder:
        payload = ((update.get("_meta") or {}).get("harn") or {}).get("reminder")
        return HARN_EMITTED_SHAPE.decode(payload, where="params.update._meta.harn.reminder.")

    @staticmethod
    def encode_emitted(session_id: Any, reminder: Reminder) -> dict[str, Any]:
        payload = HARN_EMITTED_SHAPE.encode(reminder)
        payload.setdefault("renderedRole", "user" if reminder.role_hint == "user_block" else reminder.role_hint)
        return _update(session_id, {"sessionUpdate": EMITTED, "_meta": {"harn": {"reminder": payload}}})

    @staticmethod
    def read_capability(agent_caps: Any) -> dict[str, Any] | None:
        meta = agent_caps.get("_meta") if isinstance(agent_caps, dict) else None
        harn = meta.get("harn") if isinstance(meta, dict) else None
        extensions = harn.get("sessionUpdateExtensions") if isinstance(harn, dict) else None
        if isinstance(extensions, list) and EMITTED in extensions:
            return dict(FULL_CAPABILITY)  # Harn supports every value (spec §4)
        return None

    @staticmethod
    def client_declares(client_caps: Any) -> bool:
        meta = client_caps.get("_meta") if isinstance(client_caps, dict) else None
        return isinstance(meta, dict) and "harn" in meta

    @staticmethod
    def write_capability(agent_caps: dict[str, Any], cap: dict[str, Any] | None) -> None:
        extensions = get_path(agent_caps, "_meta", "harn", "sessionUpdateExtensions")
        if not isinstance(extensions, list):
            extensions = None
        if cap is not None and cap.get("emit"):
            if extensions is None:
                extensions = []
                set_path(agent_caps, extensions, "_meta", "harn", "sessionUpdateExtensions")
            if EMITTED not in extensions:
                extensions.append(EMITTED)
        elif extensions is not None and EMITTED in extensions:
            extensions.remove(EMITTED)  # Harn cannot say "inject only": no emit means no extension


CODECS = {"standard": AcpStandard, "legacy": AcpLegacy}
