"""The canonical reminder (SPEC §2): the one model every dialect decodes into and encodes from.

Values are held in the standard vocabulary.  What a wire value loses on the way in (a Harn
alias such as ``in_pipeline``) is remembered in ``originals`` so an encoder that can express it
writes it back; that is what makes legacy → standard → legacy lossless.
"""
from __future__ import annotations

import os
import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, field_validator

Propagate = Literal["all", "session", "none"]
RoleHint = Literal["system", "developer", "user_block", "ephemeral_cache"]
Mode = Literal["interrupt_immediate", "finish_step", "audit_only"]
Authority = Literal["contract", "corrective", "advisory"]

PROPAGATE_VALUES: tuple[str, ...] = ("all", "session", "none")
ROLE_HINT_VALUES: tuple[str, ...] = ("system", "developer", "user_block", "ephemeral_cache")
MODE_VALUES: tuple[str, ...] = ("interrupt_immediate", "finish_step", "audit_only")
AUTHORITY_VALUES: tuple[str, ...] = ("contract", "corrective", "advisory")
SOURCE_VALUES: tuple[str, ...] = ("host", "provider", "hook", "bridge", "inherited")

#: The proxy's own `_meta` key for values a target wire cannot express (SPEC §2).
ORIGINAL_KEY = "reminder-bridge/original"
#: Marks lifecycle updates the proxy made up itself (SPEC §4).
SYNTHESIZED_KEY = "reminder-bridge/synthesized"


def uuid7() -> str:
    """A UUIDv7 (RFC 9562): time-ordered, so ids sort by creation like Harn's."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64 | 0b10 << 62 | (rand & (1 << 62) - 1)
    return str(uuid.UUID(int=value))


class ReminderError(ValueError):
    """An invalid reminder: names the wire field and the rule it broke, for JSON-RPC -32602 answers."""

    def __init__(self, field: str, rule: str):
        self.field = field
        self.rule = rule
        super().__init__(f"invalid reminder: `{field}` {rule}")


class Reminder(BaseModel):
    """One ambient reminder, in the standard vocabulary.

    ``model_fields_set`` records which fields the sender wrote; encoders write those (and what
    their wire requires), so a rewrite never adds noise the sender did not send.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    id: StrictStr = Field(default_factory=uuid7)
    body: StrictStr
    tags: list[StrictStr] = Field(default_factory=list)
    dedupe_key: StrictStr | None = None
    ttl_turns: StrictInt | None = Field(default=None, ge=1)
    preserve_on_compact: StrictBool = False
    propagate: Propagate = "session"
    role_hint: RoleHint = "system"
    fired_at_turn: StrictInt | None = Field(default=None, ge=0)
    mode: Mode = "finish_step"
    source: StrictStr | None = None
    authority: Authority | None = None
    provider_id: StrictStr | None = None
    originating_agent_id: StrictStr | None = None
    meta: dict[str, Any] | None = None
    #: unknown fields, under the names the sender used
    extra: dict[str, Any] = Field(default_factory=dict)
    #: wire values the canonical form cannot tell apart (e.g. source "in_pipeline"), by camelCase field name
    originals: dict[str, Any] = Field(default_factory=dict)

    @field_validator("body")
    @classmethod
    def _body_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must be a non-empty string after trimming")
        return v

    @field_validator("tags")
    @classmethod
    def _clean_tags(cls, v: list[str]) -> list[str]:
        out: list[str] = []
        for tag in v:
            tag = tag.strip()
            if not tag:
                raise ValueError("must not contain empty entries")
            if tag not in out:
                out.append(tag)
        return out

    def is_set(self, field: str) -> bool:
        return field in self.model_fields_set


#: (attribute, camelCase wire name, snake_case wire name), in the order encoders write them.
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("id", "id", "id"),
    ("body", "body", "body"),
    ("tags", "tags", "tags"),
    ("dedupe_key", "dedupeKey", "dedupe_key"),
    ("ttl_turns", "ttlTurns", "ttl_turns"),
    ("preserve_on_compact", "preserveOnCompact", "preserve_on_compact"),
    ("propagate", "propagate", "propagate"),
    ("role_hint", "roleHint", "role_hint"),
    ("fired_at_turn", "firedAtTurn", "fired_at_turn"),
    ("mode", "mode", "mode"),
    ("source", "source", "source"),
    ("authority", "authority", "authority"),
    ("provider_id", "providerId", "provider_id"),
    ("originating_agent_id", "originatingAgentId", "originating_agent_id"),
)
CAMEL = {attr: camel for attr, camel, _ in FIELDS}
SNAKE = {attr: snake for attr, _, snake in FIELDS}
ATTR_BY_WIRE: dict[str, str] = {**{c: a for a, c, _ in FIELDS}, **{s: a for a, _, s in FIELDS}}

_RULES = {
    "int_type": "must be an integer",
    "bool_type": "must be a boolean",
    "string_type": "must be a string",
    "list_type": "must be a list of strings",
    "dict_type": "must be an object",
    "missing": "is required",
}


def build(values: dict[str, Any], wire_names: dict[str, str]) -> Reminder:
    """Validate attribute-keyed values into a Reminder; errors name the field as the sender spelled it."""
    try:
        return Reminder.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        attr = str(err["loc"][0]) if err["loc"] else "reminder"
        name = wire_names.get(attr, CAMEL.get(attr, attr))
        if len(err["loc"]) > 1:
            name += f"[{err['loc'][1]}]"
        raise ReminderError(name, _explain(attr, err)) from None


def _explain(attr: str, err: dict[str, Any]) -> str:
    kind = err["type"]
    got = err.get("input")
    shown = "" if kind == "missing" else f" (got {_short(got)})"
    if kind == "literal_error":
        allowed = {"propagate": PROPAGATE_VALUES, "role_hint": ROLE_HINT_VALUES, "mode": MODE_VALUES,
                   "authority": AUTHORITY_VALUES}.get(attr, ())
        return f"must be one of {', '.join(allowed)}{shown}"
    if kind == "greater_than_equal":
        nullable = " or null" if attr == "fired_at_turn" else ""
        return f"must be an integer >= {err['ctx']['ge']}{nullable}{shown}"
    if kind == "value_error":
        return f"{err['msg'].removeprefix('Value error, ')}{shown}"
    if kind == "int_type" and attr in ("ttl_turns",):
        return f"must be an integer >= 1{shown}"
    if kind == "int_type" and attr == "fired_at_turn":
        return f"must be an integer >= 0 or null{shown}"
    return _RULES.get(kind, err["msg"]) + shown


def _short(value: Any) -> str:
    import json

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
