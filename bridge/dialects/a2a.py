"""A2A v1.0 codecs (spec §5): `InjectTaskReminder` + `reminderUpdate` frames (standard) and
`metadata.harn.reminder(s)` on messages and stream events (legacy)."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from bridge.dialects.paths import get_path, write_at
from bridge.dialects.shapes import A2A, ALL_ATTRS, HARN, ReminderShape
from bridge.model import Reminder, ReminderError

INJECT_METHOD = "InjectTaskReminder"
SEND_METHODS = frozenset({"SendMessage", "SendStreamingMessage", "message/send", "message/stream"})
STREAM_METHODS = frozenset({"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"})
GET_TASK_METHODS = ("GetTask", "tasks/get")
EVENT_KINDS = ("task", "statusUpdate", "artifactUpdate", "message")
REASONS = {"deduped": "REMINDER_DEDUPED", "expired": "REMINDER_EXPIRED"}
#: Task states after which a task takes no more messages (A2A §3.1.1; v1.0 and v0.3 names).
TERMINAL_STATES = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED",
                             "completed", "failed", "canceled", "rejected"})

#: spec §2: standard wires have no `authority`; it rides in `metadata["reminder-bridge/original"]`.
STANDARD_SHAPE = ReminderShape("a2a.standard", A2A, meta_key="metadata", carries=ALL_ATTRS - {"authority"},
                               integral_floats=True)
LEGACY_SHAPE = ReminderShape("a2a.legacy", HARN, integral_floats=True)


def terminal_state(task: Any) -> str | None:
    """The state of a `Task` (a `GetTask` result) when it is terminal, else None."""
    state = get_path(task, "status", "state")
    return state if isinstance(state, str) and state in TERMINAL_STATES else None


def _harn(metadata: Any) -> dict[str, Any] | None:
    harn = metadata.get("harn") if isinstance(metadata, dict) else None
    return harn if isinstance(harn, dict) and ("reminder" in harn or "reminders" in harn) else None


def _take(holder: dict[str, Any], where: str) -> list[Reminder]:
    """Remove `metadata.harn.reminder(s)` from ``holder`` and decode them; prunes emptied maps."""
    metadata = holder.get("metadata")
    harn = _harn(metadata)
    if harn is None:
        return []
    raw = []
    if "reminder" in harn:
        raw.append((harn.pop("reminder"), f"{where}metadata.harn.reminder."))
    if "reminders" in harn:
        many = harn.pop("reminders")
        if not isinstance(many, list):
            raise ReminderError(f"{where}metadata.harn.reminders", "must be a list of reminder objects")
        raw.extend((item, f"{where}metadata.harn.reminders[{i}].") for i, item in enumerate(many))
    if not harn:
        del metadata["harn"]
    if not metadata:
        del holder["metadata"]
    return [LEGACY_SHAPE.decode(obj, where=w) for obj, w in raw]


def _put(holder: dict[str, Any], reminders: list[Reminder]) -> None:
    if not isinstance(holder.get("metadata"), dict):  # absent, or `null` as some encoders write it
        holder["metadata"] = {}
    if not isinstance(holder["metadata"].get("harn"), dict):
        holder["metadata"]["harn"] = {}
    harn = holder["metadata"]["harn"]
    encoded = [LEGACY_SHAPE.encode(r) for r in reminders]
    if len(encoded) == 1:
        harn["reminder"] = encoded[0]
    else:
        harn["reminders"] = encoded


def _convert_values(cap: dict[str, Any], encode: bool) -> dict[str, Any]:
    out = dict(cap)
    for key, attr in (("propagate", "propagate"), ("roleHints", "role_hint")):
        values = cap.get(key)
        if isinstance(values, list):
            table = A2A.encode[attr] if encode else A2A.decode[attr]
            mapped = [table.get(v, v) for v in values if isinstance(v, str)]
            out[key] = list(dict.fromkeys(mapped))
    return out


class A2AStandard:
    """The proposed A2A reminder RPC and stream frame, with ProtoJSON enum names."""

    dialect = "standard"

    @staticmethod
    def decode_inject(params: Any) -> tuple[Any, Reminder]:
        if not isinstance(params, dict):
            raise ReminderError("params", "must be an object")
        task_id = params.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise ReminderError("params.taskId", "is required (a non-empty string)")
        return task_id, STANDARD_SHAPE.decode(params.get("reminder"), where="params.reminder.")

    @staticmethod
    def encode_inject(task_id: str, reminder: Reminder) -> dict[str, Any]:
        return {"taskId": task_id, "reminder": STANDARD_SHAPE.encode(reminder)}

    @staticmethod
    def inject_result(reminder_id: str, deduped_count: int, accepted_at: float) -> dict[str, Any]:
        """``accepted_at``: wall-clock seconds (the flow's clock; a codec reads none)."""
        accepted = datetime.fromtimestamp(accepted_at, timezone.utc).isoformat(timespec="milliseconds")
        return {"reminderId": reminder_id, "dedupedCount": deduped_count, "acceptedAt": accepted.replace("+00:00", "Z")}

    @staticmethod
    def decode_update(result: dict[str, Any]) -> tuple[dict[str, Any], Reminder]:
        update = result["reminderUpdate"]
        return update, STANDARD_SHAPE.decode(update.get("reminder"), where="result.reminderUpdate.reminder.")

    @staticmethod
    def encode_update(task_id: Any, context_id: Any, reminder: Reminder, reason: str | None = None) -> dict[str, Any]:
        update: dict[str, Any] = {"taskId": task_id, "contextId": context_id, "reminder": STANDARD_SHAPE.encode(reminder)}
        if reason:
            update["reason"] = REASONS[reason]
        return {"reminderUpdate": update}

    @staticmethod
    def read_capability(caps: Any) -> dict[str, Any] | None:
        found = caps.get("reminders") if isinstance(caps, dict) else None
        return _convert_values(found, encode=False) if isinstance(found, dict) else None

    @staticmethod
    def write_capability(caps: dict[str, Any], cap: dict[str, Any] | None) -> None:
        if cap is None:
            caps.pop("reminders", None)
        else:
            caps["reminders"] = _convert_values(cap, encode=True)


class A2ALegacy:
    """Harn's proposed metadata channel: reminders ride on messages and stream events."""

    dialect = "legacy"

    @staticmethod
    def take_from_params(params: dict[str, Any]) -> list[Reminder]:
        found = _take(params, "params.")
        message = params.get("message")
        if isinstance(message, dict):
            found += _take(message, "params.message.")
        return found

    @staticmethod
    def put_on_params(params: dict[str, Any], reminders: list[Reminder]) -> None:
        _put(params, reminders)

    @staticmethod
    def take_from_event(result: Any) -> tuple[Any, Any, list[Reminder]]:
        """(taskId, contextId, reminders) of a stream event, reminders removed from it."""
        if not isinstance(result, dict):
            return None, None, []
        for kind in EVENT_KINDS:
            event = result.get(kind)
            if isinstance(event, dict):
                task_id = event.get("id") if kind == "task" else event.get("taskId")
                return task_id, event.get("contextId"), _take(event, f"result.{kind}.")
        return None, None, []

    @staticmethod
    def put_on_event(result: dict[str, Any], reminders: list[Reminder]) -> bool:
        for kind in EVENT_KINDS:
            if isinstance(result.get(kind), dict):
                _put(result[kind], reminders)
                return True
        return False

    @staticmethod
    def read_capability(caps: Any) -> dict[str, Any] | None:
        found = get_path(caps, "_meta", "harn", "reminders")
        return dict(found) if isinstance(found, dict) else None

    @staticmethod
    def write_capability(caps: dict[str, Any], cap: dict[str, Any] | None) -> None:
        write_at(caps, cap, "_meta", "harn", "reminders")


CODECS = {"standard": A2AStandard, "legacy": A2ALegacy}
