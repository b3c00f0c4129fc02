"""The canonical reminder (spec §2): the one model every dialect decodes into and encodes from.
Its vocabulary and errors are in bridge/fields.py (no pydantic); a route that has decoded no
reminder yet has not imported this module (`bridge.lazy`: issue 23, the cold start).

Values are held in the standard vocabulary.  What a wire value loses on the way in (a Harn
alias such as ``in_pipeline``) is remembered in ``originals`` so an encoder that can express it
writes it back; that is what makes legacy → standard → legacy lossless.
"""
from __future__ import annotations

import json
import operator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, field_validator
from pydantic_core import PydanticSerializationError

# the vocabulary, pydantic-free (bridge/fields.py), and here too: this is the reminder's one import point
from bridge.fields import (  # noqa: F401 - re-exported
    ATTR_BY_WIRE, AUTHORITY_VALUES, CAMEL, FIELDS, MODE_VALUES, ORIGINAL_KEY, PROPAGATE_VALUES, ROLE_HINT_RANK,
    ROLE_HINT_VALUES, SNAKE, SOURCE_VALUES, SYNTHESIZED_KEY, ENCODER, NO_VALUE, Authority, Mode, Propagate,
    ReminderError, RoleHint, json_bytes, uuid7,
)


class Reminder(BaseModel):
    """One ambient reminder, in the standard vocabulary.

    ``model_fields_set`` records which fields the sender wrote; encoders write those (and what
    their wire requires), so a rewrite never adds noise the sender did not send.
    """

    #: Infinity and NaN as the stdlib writes them (`size_at_most` measures with pydantic-core)
    model_config = ConfigDict(extra="forbid", validate_assignment=False, ser_json_inf_nan="constants")

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
        return _validate(values)  # `model_validate`'s own check of its options, skipped: none is given
    except ValidationError as exc:
        err = exc.errors()[0]
        attr = str(err["loc"][0]) if err["loc"] else "reminder"
        name = wire_names.get(attr, CAMEL.get(attr, attr))
        if len(err["loc"]) > 1:
            name += f"[{err['loc'][1]}]"
        value = NO_VALUE if err["type"] == "missing" else err.get("input")
        raise ReminderError(name, _explain(attr, err), value) from None


_validate = Reminder.__pydantic_validator__.validate_python


def _explain(attr: str, err: dict[str, Any]) -> str:
    """The rule ``err`` broke, in the words of spec §2 (the value is added by `ReminderError`)."""
    kind = err["type"]
    if kind == "literal_error":
        allowed = {"propagate": PROPAGATE_VALUES, "role_hint": ROLE_HINT_VALUES, "mode": MODE_VALUES,
                   "authority": AUTHORITY_VALUES}.get(attr, ())
        return f"must be one of {', '.join(allowed)}"
    if kind == "greater_than_equal":
        nullable = " or null" if attr == "fired_at_turn" else ""
        return f"must be an integer >= {err['ctx']['ge']}{nullable}"
    if kind == "value_error":
        return err["msg"].removeprefix("Value error, ")
    if kind == "int_type" and attr in ("ttl_turns",):
        return "must be an integer >= 1"
    if kind == "int_type" and attr == "fired_at_turn":
        return "must be an integer >= 0 or null"
    return _RULES.get(kind, err["msg"])


def _stored(reminder: Reminder) -> dict[str, Any]:
    # the field values themselves: every one is already a JSON value (strings, numbers, lists, objects)
    return {"set": sorted(reminder.model_fields_set), "values": reminder.__dict__}


def dump_json(reminder: Reminder) -> str:
    """The reminder as JSON that `load_json` restores exactly, which fields the sender set
    included: how a reminder waits in shared state for another replica to deliver it."""
    return ENCODER.encode(_stored(reminder))


def encoded_size(reminder: Reminder) -> int:
    """What ``reminder`` costs queued in shared state: the bytes of `dump_json`, every field, `_meta`
    and unknown field included (spec §12: each queued reminder is bounded as a whole)."""
    return json_bytes(_stored(reminder))


#: what `dump_json` writes before the values: the list of set fields (every name, quoted) and keys
_SET_BYTES = 320


#: the most bytes one character of a string takes in the proxy's JSON (a control character: `\u0001`)
_CHAR_BYTES = 6
#: the most the fields other than strings take: enum values, two integers below 10**18, booleans,
#: every field's quoted name, separators and `null`s
_FIXED_BYTES = 640
_BIG = 10**18
_OPTIONAL_STRINGS = ("dedupe_key", "source", "provider_id", "originating_agent_id")


def size_at_most(reminder: Reminder) -> int:
    """An upper bound of `encoded_size`, far cheaper (the hot path: most reminders are far below
    their limit).  A reminder of plain fields (and string originals) is bounded by counting
    characters; one carrying `_meta`, unknown fields or other originals (any JSON at all) is
    encoded by pydantic-core, which
    writes the same JSON as the stdlib except that a float in exponent form may be one byte
    shorter (``1e-7``, not ``1e-07``), hence a quarter more."""
    values = reminder.__dict__
    ttl, fired = values["ttl_turns"], values["fired_at_turn"]
    originals = _strings_bytes(values["originals"]) if values["originals"] else 0
    if originals is not None and not (values["extra"] or values["meta"]) and (ttl is None or -_BIG < ttl < _BIG) \
            and (fired is None or -_BIG < fired < _BIG):
        tags = values["tags"]
        chars = len(values["id"]) + len(values["body"]) + (sum(map(len, tags)) + 3 * len(tags) if tags else 0)
        for name in _OPTIONAL_STRINGS:
            value = values[name]
            if value is not None:
                chars += len(value)
        return _SET_BYTES + _FIXED_BYTES + chars * _CHAR_BYTES + originals
    try:
        values = len(Reminder.__pydantic_serializer__.to_json(reminder))
    except PydanticSerializationError:  # a lone surrogate: the stdlib decoder lets them through
        return encoded_size(reminder)
    return _SET_BYTES + values * 5 // 4 + 1


def _strings_bytes(strings: dict[str, Any]) -> int | None:
    """At most the bytes of ``strings`` (`originals`: wire values the canonical form cannot tell
    apart) beyond the `{}` counted in `_FIXED_BYTES`; None when a value is not a string."""
    size = 0
    for key, value in strings.items():
        if type(value) is not str:
            return None
        size += (len(key) + len(value)) * _CHAR_BYTES + 6  # two pairs of quotes, a colon, a comma
    return size


def load_json(text: str) -> Reminder:
    """The reminder `dump_json` wrote (trusted: the proxy's own, already validated once)."""
    data = json.loads(text)
    return Reminder.model_construct(_fields_set=set(data["set"]), **data["values"])


#: The fields in the order a `Packed` holds them, after the set fields' bits.
_PACKED: tuple[str, ...] = tuple(Reminder.model_fields)
_BITS = {name: 1 << i for i, name in enumerate(_PACKED)}
_VALUES = operator.itemgetter(*_PACKED)
_LISTS = tuple(i for i, info in enumerate(Reminder.model_fields.values()) if info.annotation == list[StrictStr])
_DICTS = tuple(_PACKED.index(name) for name in ("extra", "originals"))
_set = object.__setattr__


class Packed(tuple):  # type: ignore[type-arg]
    """A reminder as it waits to be delivered (an ACP session holds 64 of them, and a proxy
    10,000 sessions): the field values in one tuple, the set fields as bits, lists as tuples and
    empty dicts as None.  A pydantic instance costs ~1.4 KB beside its values (its `__dict__`,
    a set of six names alone 728 B, two empty dicts), this ~200 B; `reminder()` gives back an
    equal one, every field and which were set included (spec §4: delivered later unchanged)."""

    __slots__ = ()

    @classmethod
    def of(cls, reminder: Reminder) -> Packed:
        values = list(_VALUES(reminder.__dict__))
        for i in _LISTS:
            values[i] = tuple(values[i])
        for i in _DICTS:
            if not values[i]:
                values[i] = None
        return cls((sum(map(_BITS.__getitem__, reminder.model_fields_set)), *values))

    def reminder(self) -> Reminder:
        """A Reminder equal to the packed one (its own lists and empty dicts: the caller may change
        them), built as `model_construct` builds one, without its pass over defaults (4x faster):
        the values were validated once already."""
        values = list(self)
        bits = values.pop(0)
        for i in _LISTS:
            values[i] = list(values[i])
        for i in _DICTS:
            if values[i] is None:
                values[i] = {}
        out = Reminder.__new__(Reminder)
        _set(out, "__dict__", dict(zip(_PACKED, values)))
        _set(out, "__pydantic_fields_set__", {name for name, bit in _BITS.items() if bits & bit})
        _set(out, "__pydantic_extra__", None)
        _set(out, "__pydantic_private__", None)
        return out

    @property
    def id(self) -> str:
        return self[_ID]  # type: ignore[no-any-return]

    @property
    def dedupe_key(self) -> str | None:
        return self[_DEDUPE_KEY]  # type: ignore[no-any-return]

    @property
    def mode(self) -> str:
        return self[_MODE]  # type: ignore[no-any-return]


_ID, _DEDUPE_KEY, _MODE = (1 + _PACKED.index(name) for name in ("id", "dedupe_key", "mode"))
