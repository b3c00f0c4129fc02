"""MCP codecs (spec §3): `notifications/reminder` (standard) and Harn's logging channel (legacy)."""
from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING, Any

from bridge.dialects.hosts import codecs_toward_host
from bridge.dialects.paths import get_path as _get, params_meta, write_at
from bridge.dialects.shapes import HARN, STANDARD, ReminderShape

if TYPE_CHECKING:
    from bridge.model import Reminder

REMINDER_METHOD = "notifications/reminder"
LOG_METHOD = "notifications/message"
LEGACY_LOGGER = "harn.reminder"

#: The 2026-07-28 `_meta` envelope (every request self-contained): its key names, read by the MCP
#: flow and the outbox alike.
PROTOCOL_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"
#: 2026-07-28 has no GET stream: a host opens `subscriptions/listen`, whose answer is the stream of
#: what its filter (`params.notifications`) opted in to, acknowledged first with what is honoured.
LISTEN_METHOD = "subscriptions/listen"
ACK_METHOD = "notifications/subscriptions/acknowledged"
#: The filter key that opts a listen stream in to reminders (spec §3).
REMINDERS_FILTER = "reminders"

#: What MCP 2026-07-28 over HTTP mirrors of a request in headers (the server checks them against the
#: body), and the methods whose `Mcp-Name` names what they act on (the params key).
VERSION_HEADER, METHOD_HEADER, NAME_HEADER = "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_HEADER_SAFE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")


def header_value(value: str) -> str:
    """``value`` as an HTTP header carries it: printable ASCII as it is, anything else wrapped in
    `=?base64?…?=` as the transport says (so the server recovers the exact text)."""
    if _HEADER_SAFE.fullmatch(value) and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


def routing_headers(msg: dict[str, Any]) -> dict[str, str]:
    """The headers a 2026-07-28 message carries over HTTP: its envelope's protocol version, its
    method and, for a method that names what it acts on, that name (empty without an envelope)."""
    meta = params_meta(msg)
    version = meta.get(PROTOCOL_KEY) if isinstance(meta, dict) else None
    if not isinstance(version, str):
        return {}
    out = {VERSION_HEADER: header_value(version)}
    method = msg.get("method")
    if isinstance(method, str):
        out[METHOD_HEADER] = header_value(method)
        name = _get(msg, "params", NAME_BEARING[method]) if method in NAME_BEARING else None
        if isinstance(name, str):
            out[NAME_HEADER] = header_value(name)
    return out


#: ReminderSpec of the proposed schema: standard has no slot for mode, source, authority and the ids.
SPEC_SHAPE = ReminderShape(
    "mcp.standard", STANDARD, extras_inline=False,
    carries=frozenset({"id", "body", "tags", "dedupe_key", "ttl_turns", "preserve_on_compact", "propagate",
                       "role_hint", "fired_at_turn"}),
)
HARN_SHAPE = ReminderShape("mcp.legacy", HARN)


class McpStandard:
    """The proposed standard: one notification per reminder, capability `reminders`."""

    dialect = "standard"

    @staticmethod
    def slot(msg: dict[str, Any]) -> tuple[Any, str] | None:
        """The reminder object ``msg`` carries and where (for errors), None when it is no reminder."""
        return (_get(msg, "params", "reminder"), "params.reminder.") if msg.get("method") == REMINDER_METHOD else None

    @classmethod
    def is_reminder(cls, msg: dict[str, Any]) -> bool:
        return cls.slot(msg) is not None

    @classmethod
    def decode(cls, msg: dict[str, Any], slot: tuple[Any, str] | None = None) -> Reminder:
        """``slot``: what `slot(msg)` gave, when the caller asked already (a flow tells the codec by it)."""
        payload, where = slot or (_get(msg, "params", "reminder"), "params.reminder.")
        return SPEC_SHAPE.decode(payload, where=where)

    @staticmethod
    def encode(reminder: Reminder, params_meta: dict[str, Any] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"reminder": SPEC_SHAPE.encode(reminder)}
        if params_meta:
            params["_meta"] = params_meta
        return {"jsonrpc": "2.0", "method": REMINDER_METHOD, "params": params}

    @staticmethod
    def carried_meta(msg: dict[str, Any], keep_decoration: bool) -> dict[str, Any] | None:
        """What of the message's `params._meta` a rewrite of it carries on (a copy): all of it."""
        meta = params_meta(msg)
        return dict(meta) if isinstance(meta, dict) else None

    @staticmethod
    def read_capability(caps: Any) -> dict[str, Any] | None:
        found = _get(caps, "reminders")
        return found if isinstance(found, dict) else None

    @staticmethod
    def host_declares(caps: Any) -> bool:
        return McpStandard.host_key(caps) is not None

    @staticmethod
    def host_key(caps: Any) -> tuple[str, ...] | None:
        """Where the host declared reminders: `reminders`, `experimental.reminders`, or an extension
        named `<prefix>/reminders` (how the official SDK's `ClientExtension` advertises a notification
        binding); None when it did not. A 2026-07-28 host is told the server's capability there."""
        if not isinstance(caps, dict):
            return None
        if "reminders" in caps:
            return ("reminders",)
        if "reminders" in (_get(caps, "experimental") or {}):
            return ("experimental", "reminders")
        extensions = caps.get("extensions")
        named = [k for k in extensions if str(k).rpartition("/")[2] == "reminders"] if isinstance(extensions, dict) \
            else []
        return ("extensions", str(named[0])) if named else None

    @staticmethod
    def move_capability(caps: dict[str, Any], key: tuple[str, ...]) -> bool:
        """The capability at `reminders` moved to ``key`` (where the host declared it); False when
        there is none to move or it is there already."""
        if key == ("reminders",) or not isinstance(caps.get("reminders"), dict):
            return False
        cap = caps.pop("reminders")
        parent = caps.get(key[0])
        caps[key[0]] = {**(parent if isinstance(parent, dict) else {}), key[1]: cap}
        return True

    @staticmethod
    def write_capability(caps: dict[str, Any], cap: dict[str, Any] | None) -> None:
        if cap is None:
            caps.pop("reminders", None)
        else:
            caps["reminders"] = cap


class McpLegacy:
    """Harn's channel: `notifications/message` carrying `_meta.harn.reminder` (read leniently)."""

    dialect = "legacy"

    @staticmethod
    def slot(msg: dict[str, Any]) -> tuple[Any, str] | None:
        """The reminder object ``msg`` carries and where (for errors), None when it is no reminder."""
        if msg.get("method") != LOG_METHOD:
            return None
        meta = params_meta(msg)
        if not isinstance(meta, dict):
            return None
        harn = meta.get("harn")
        nested = harn.get("reminder") if isinstance(harn, dict) else None
        if nested is not None:
            return nested, "params._meta.harn.reminder."
        if "harn.reminder" in meta:
            return meta["harn.reminder"], "params._meta[\"harn.reminder\"]."
        return None

    @classmethod
    def is_reminder(cls, msg: dict[str, Any]) -> bool:
        return cls.slot(msg) is not None

    @classmethod
    def decode(cls, msg: dict[str, Any], slot: tuple[Any, str] | None = None) -> Reminder:
        """``slot``: what `slot(msg)` gave, when the caller asked already (a flow tells the codec by it)."""
        payload, where = slot or cls.slot(msg) or (None, "params._meta.harn.reminder.")
        return HARN_SHAPE.decode(payload, where=where)

    @staticmethod
    def encode(reminder: Reminder, params_meta: dict[str, Any] | None = None) -> dict[str, Any]:
        meta = dict(params_meta or {})
        harn = dict(meta.get("harn") or {})
        harn["reminder"] = HARN_SHAPE.encode(reminder)
        meta["harn"] = harn
        return {"jsonrpc": "2.0", "method": LOG_METHOD,
                "params": {"level": "info", "logger": LEGACY_LOGGER, "data": reminder.body, "_meta": meta}}

    @staticmethod
    def carried_meta(msg: dict[str, Any], keep_decoration: bool) -> dict[str, Any] | None:
        """What of the message's `params._meta` a rewrite of it carries on: every key but the
        reminder slot itself, unless ``keep_decoration`` (`dual`). Only the two levels the removal
        changes (`_meta` and `_meta.harn`) are copied, not the message."""
        meta = params_meta(msg)
        if not isinstance(meta, dict):
            return None
        meta = dict(meta)
        harn = meta.get("harn")
        if isinstance(harn, dict):
            harn = meta["harn"] = dict(harn)
        if not keep_decoration:
            if isinstance(harn, dict):  # `pop_path(meta, "harn", "reminder")`, on the copy made just above
                harn.pop("reminder", None)
                if not harn:
                    del meta["harn"]
            meta.pop("harn.reminder", None)
        return meta or None

    @staticmethod
    def read_capability(caps: Any) -> dict[str, Any] | None:
        found = _get(caps, "_meta", "harn", "reminders")
        return found if isinstance(found, dict) else None

    @staticmethod
    def host_declares(caps: Any) -> bool:
        return _get(caps, "_meta", "harn", "reminders") is not None

    @staticmethod
    def write_capability(caps: dict[str, Any], cap: dict[str, Any] | None) -> None:
        write_at(caps, cap, "_meta", "harn", "reminders")


#: What servers and hosts speak (spec §3): decoded from a server, written toward a host.
CODECS = {"standard": McpStandard, "legacy": McpLegacy}
#: What the proxy can write toward a host: those, and the host adapters (spec §11), which no
#: server speaks to the proxy and `auto` never picks.
HOST_CODECS = {**CODECS, **codecs_toward_host("mcp")}
