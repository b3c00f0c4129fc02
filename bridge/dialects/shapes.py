"""How one reminder object is spelled on one wire slot, and the generic encode/decode for it.

Each protocol codec names a few `ReminderShape`s (casing, vocabulary, which fields the slot can
carry) and lets this module do the field work, so the lossless-round-trip rule of spec §2 lives
in one place: what a slot cannot carry goes under ``_meta["reminder-bridge/original"]`` and
comes back on decode.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from bridge.fields import (
    ATTR_BY_WIRE, CAMEL, FIELDS, MODE_VALUES, ORIGINAL_KEY, PROPAGATE_VALUES, ROLE_HINT_VALUES, SNAKE,
    SOURCE_VALUES, ReminderError,
)
from bridge.lazy import lazily

if TYPE_CHECKING:
    from bridge import model
    from bridge.model import Reminder
else:  # pydantic: loaded by the first reminder a route decodes (issue 23)
    model = lazily("bridge.model")

ENUM_ATTRS = ("propagate", "role_hint", "mode", "source")
CANONICAL = {"propagate": PROPAGATE_VALUES, "role_hint": ROLE_HINT_VALUES, "mode": MODE_VALUES, "source": SOURCE_VALUES}

_IDENTITY = {attr: {v: v for v in values} for attr, values in CANONICAL.items()}
_MODE_ALIASES = {"interrupt": "interrupt_immediate", "after_current_operation": "finish_step", "steer": "finish_step",
                 "queue": "audit_only", "wait_for_completion": "audit_only"}
_SOURCE_ALIASES = {"stdlib_provider": "provider", "in_pipeline": "provider"}
#: Harn spellings a standard wire reads but never writes: they go back under `_meta` instead (spec §2).
_HARN_ONLY = {"mode": frozenset(_MODE_ALIASES), "source": frozenset(_SOURCE_ALIASES)}


@dataclass(frozen=True)
class Vocabulary:
    """Enum spellings of one dialect: wire → canonical on decode, canonical → wire on encode."""

    name: str
    decode: dict[str, dict[str, str]]
    encode: dict[str, dict[str, str]]
    #: wire values read leniently (another dialect's aliases) but never written on this wire
    input_only: dict[str, frozenset[str]] = field(default_factory=dict)
    #: attr → wire → (canonical, whether the wire value is remembered as an original): what
    #: `to_canonical` and the decoder's check work out, once per vocabulary, not per reminder
    reads: dict[str, dict[str, tuple[str, bool]]] = field(init=False, repr=False, compare=False)
    #: attr → canonical → `to_wire(attr, canonical, None)`: a reminder with no originals (the usual)
    writes: dict[str, dict[str, tuple[str, Any]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        reads = {attr: {wire: (canonical, self.encode[attr].get(canonical, canonical) != wire
                               and wire not in self.input_only.get(attr, ()))
                        for wire, canonical in table.items()} for attr, table in self.decode.items()}
        writes = {attr: {canonical: self.to_wire(attr, canonical, None) for canonical in CANONICAL[attr]}
                  for attr in self.decode}
        object.__setattr__(self, "reads", reads)
        object.__setattr__(self, "writes", writes)

    def to_canonical(self, attr: str, wire: str) -> str | None:
        found = self.decode[attr].get(wire)
        if found is None and attr == "source":
            return wire  # sources name producers; an unknown one is kept verbatim, never refused
        return found

    def to_wire(self, attr: str, canonical: str, original: Any) -> tuple[str, Any]:
        """The wire value for ``canonical``, and what the wire loses (None when nothing)."""
        dec = self.decode[attr]
        writable = original not in self.input_only.get(attr, ())
        if isinstance(original, str) and dec.get(original) == canonical and writable:
            return original, None
        wire = self.encode[attr].get(canonical, canonical)
        if dec.get(wire, wire) != canonical:
            return wire, original if original is not None else canonical
        return wire, original


STANDARD = Vocabulary(
    "standard",
    decode={**_IDENTITY, "mode": {**_IDENTITY["mode"], **_MODE_ALIASES},
            "source": {**_IDENTITY["source"], **_SOURCE_ALIASES}},
    encode=_IDENTITY,
    input_only=_HARN_ONLY,
)
HARN = Vocabulary(
    "harn",
    decode={**_IDENTITY, "mode": {**_IDENTITY["mode"], **_MODE_ALIASES},
            "source": {"stdlib_provider": "provider", "in_pipeline": "provider", "bridge": "host", "hook": "hook",
                       "inherited": "inherited", "host": "host", "provider": "provider"}},
    encode={**_IDENTITY, "source": {"host": "bridge", "provider": "stdlib_provider", "hook": "hook",
                                    "inherited": "inherited", "bridge": "bridge"}},
)
A2A = Vocabulary(
    "a2a",
    decode={**STANDARD.decode,
            "propagate": {"REMINDER_PROPAGATION_SESSION": "session", "REMINDER_PROPAGATION_NONE": "none",
                          "REMINDER_PROPAGATION_UNSPECIFIED": "session", **_IDENTITY["propagate"]},
            "role_hint": {"REMINDER_ROLE_HINT_SYSTEM": "system", "REMINDER_ROLE_HINT_DEVELOPER": "developer",
                          "REMINDER_ROLE_HINT_UNSPECIFIED": "system", **_IDENTITY["role_hint"]}},
    encode={**_IDENTITY,
            # A2A has no ALL propagation and only two role hints: write the nearest, keep the original.
            "propagate": {"session": "REMINDER_PROPAGATION_SESSION", "none": "REMINDER_PROPAGATION_NONE",
                          "all": "REMINDER_PROPAGATION_SESSION"},
            "role_hint": {"system": "REMINDER_ROLE_HINT_SYSTEM", "developer": "REMINDER_ROLE_HINT_DEVELOPER",
                          "user_block": "REMINDER_ROLE_HINT_DEVELOPER", "ephemeral_cache": "REMINDER_ROLE_HINT_SYSTEM"}},
    # lower-case values are read from lenient senders, but an A2A wire only ever gets enum names
    input_only={**_HARN_ONLY, "propagate": frozenset(PROPAGATE_VALUES),
                "role_hint": frozenset(ROLE_HINT_VALUES)},
)

ALL_ATTRS = frozenset(attr for attr, _, _ in FIELDS)
#: Every slot's name for the reminder id: an unknown field by one of these names (e.g. a stray
#: `reminderId` on an MCP reminder, whose id is `id`) would be read as the id by another
#: dialect's reader, so it rides under `_meta[ORIGINAL_KEY]` instead of inline.
ID_KEYS = frozenset({"id", "reminderId", "reminder_id"})
#: How `ReminderShape.encode` writes a field: as it is, through the vocabulary, or under `_meta`.
_PLAIN, _ENUM, _LOST = "plain", "enum", "lost"
#: Encode plans a shape keeps (one per set of fields senders set: a hostile sender varying them
#: gets plans made afresh, never an unbounded table).
_PLANS = 64


@dataclass(frozen=True)
class ReminderShape:
    """One wire slot for a reminder object."""

    name: str
    vocab: Vocabulary
    casing: Literal["camel", "snake"] = "camel"
    carries: frozenset[str] = ALL_ATTRS
    id_key: str = "id"
    write_id: Literal["always", "if_set"] = "always"
    always: frozenset[str] = frozenset()
    defaults_for_always: dict[str, Any] = field(default_factory=dict)
    meta_key: str = "_meta"
    extras_inline: bool = True
    #: A2A carries metadata as a protobuf Struct, where every number is a double: `2.0` there
    #: means 2. Elsewhere a float turn count is refused (spec §2).
    integral_floats: bool = False
    #: attr → the only wire values this slot accepts; another value rides in `_meta[ORIGINAL_KEY]`
    only_values: dict[str, frozenset[str]] = field(default_factory=dict)
    #: `encode`'s plans by the set of fields a reminder's sender set (`_plan`)
    _plans: dict[frozenset[str], tuple[tuple[str, str, str, str, bool], ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    #: wire name → attribute: both casings, and this slot's own name for the id
    _attr_of: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_attr_of", {**ATTR_BY_WIRE, self.id_key: "id"})

    def decode(self, obj: Any, skip: frozenset[str] = frozenset(), where: str = "") -> Reminder:
        """Wire object → Reminder. Both casings are accepted; ``skip`` names envelope keys (sessionId…)."""
        if not isinstance(obj, dict):
            raise ReminderError(where.rstrip(".") or "reminder", "must be an object")
        values: dict[str, Any] = {}
        names: dict[str, str] = {}
        extra: dict[str, Any] = {}
        originals: dict[str, Any] = {}
        meta: Any = None
        attr_of = self._attr_of
        for key, value in obj.items():
            attr = attr_of.get(key)
            if skip and key in skip:
                continue
            if attr is not None and attr not in values:
                values[attr] = value
                names[attr] = where + key
            elif key == self.meta_key:
                meta = value
            else:
                extra[key] = value
        if meta is not None and not isinstance(meta, dict):
            raise ReminderError(where + self.meta_key, "must be an object")
        _tidy_id_and_key(values)
        if self.integral_floats:
            for attr in ("ttl_turns", "fired_at_turn"):
                value = values.get(attr)
                if isinstance(value, float) and value.is_integer():
                    values[attr] = int(value)
        reads = self.vocab.reads
        for attr in ENUM_ATTRS:
            wire = values.get(attr)
            if isinstance(wire, str):
                # (`to_canonical`, and whether the wire value is remembered, read off a table: a
                # lenient spelling is normalised, not remembered; an unknown source is kept verbatim)
                read = reads[attr].get(wire)
                if read is not None:
                    values[attr] = read[0]
                    if read[1]:
                        originals[CAMEL[attr]] = wire
        if meta and ORIGINAL_KEY in meta:
            meta = dict(meta)
            _restore(meta.pop(ORIGINAL_KEY), values, extra, originals, names, where + self.meta_key)
            meta = meta or None  # only the proxy's own key was there: leave no `_meta: {}` husk
        if meta is not None:
            values["meta"] = meta
        if extra:
            values["extra"] = extra
        if originals:
            values["originals"] = originals
        if "body" not in values:
            raise ReminderError(where + "body", "is required")
        return model.build(values, names)

    def encode(self, reminder: Reminder) -> dict[str, Any]:
        """Reminder → wire object; fields this slot cannot carry go to ``_meta[ORIGINAL_KEY]``."""
        out: dict[str, Any] = {}
        lost: dict[str, Any] = {}
        values = reminder.__dict__
        originals = reminder.originals
        for attr, name, camel, kind, defaulted in self._plan(reminder.model_fields_set):
            value = values[attr]
            if defaulted and value is None:
                value = self.defaults_for_always.get(attr)
            if kind is _PLAIN:
                out[name] = value
                continue
            if kind is _LOST:
                if value is not None:
                    lost[camel] = originals.get(camel, value)
                continue
            if isinstance(value, str):  # an enum
                canonical = value
                original = originals.get(camel) if originals else None
                written = self.vocab.writes[attr].get(value) if original is None else None
                value, loss = written if written is not None else self.vocab.to_wire(attr, value, original)
                if attr in self.only_values and value not in self.only_values[attr]:
                    lost[camel] = originals.get(camel, canonical)
                    continue
                if loss is not None:
                    lost[camel] = loss
            out[name] = value
        for key, value in reminder.extra.items():
            if self.extras_inline and key not in out and key not in ID_KEYS:
                out[key] = value
            else:
                lost[key] = value
        meta = dict(reminder.meta) if reminder.meta else {}
        if lost:
            meta[ORIGINAL_KEY] = lost
        if meta or reminder.meta is not None:
            out[self.meta_key] = meta
        return out

    def _plan(self, fields_set: set[str]) -> tuple[tuple[str, str, str, str, bool], ...]:
        """What `encode` writes for a reminder whose sender set ``fields_set``, in wire order: (attr,
        wire name, camelCase name, how: plain | enum | lost, defaulted: unset but always written).
        Worked out once per set of fields (a route sees a handful); past `_PLANS` sets, afresh."""
        key = frozenset(fields_set)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        names = CAMEL if self.casing == "camel" else SNAKE
        steps = []
        for attr, camel, _ in FIELDS:
            if attr == "id":
                if self.write_id == "always" or "id" in key:
                    steps.append((attr, self.id_key, camel, _PLAIN, False))
                continue
            if attr not in key and attr not in self.always:
                continue
            kind = _LOST if attr not in self.carries else _ENUM if attr in ENUM_ATTRS else _PLAIN
            steps.append((attr, names[attr], camel, kind, attr not in key))
        plan = tuple(steps)
        if len(self._plans) < _PLANS:
            self._plans[key] = plan
        return plan


def _tidy_id_and_key(values: dict[str, Any]) -> None:
    """Harn's rules: ids and dedupe keys are trimmed; empty means absent (a fresh id is generated).

    Harn also takes `tags` and `ttl_turns` as "null or …": null means absent (no tags, no TTL), so a
    standard wire never gets a `ttlTurns: null` its schema forbids.
    """
    for attr in ("tags", "ttl_turns"):
        if attr in values and values[attr] is None:
            del values[attr]
    for attr in ("id", "dedupe_key"):
        value = values.get(attr)
        if isinstance(value, str):
            value = value.strip()
            if value:
                values[attr] = value
            else:
                del values[attr]
        elif value is None and attr in values:
            del values[attr]


def _restore(saved: Any, values: dict[str, Any], extra: dict[str, Any], originals: dict[str, Any],
             names: dict[str, str], where: str) -> None:
    """Bring back what an earlier rewrite could not carry on its wire."""
    if not isinstance(saved, dict):
        raise ReminderError(f"{where}.{ORIGINAL_KEY}", "must be an object")
    for key, value in saved.items():
        attr = ATTR_BY_WIRE.get(key)
        if attr is None:
            extra.setdefault(key, value)
            continue
        names[attr] = f"{where}.{ORIGINAL_KEY}.{key}"
        if attr in ENUM_ATTRS and isinstance(value, str) and value not in CANONICAL[attr]:
            canonical = HARN.to_canonical(attr, value) or STANDARD.to_canonical(attr, value)
            if canonical is not None and canonical != value:
                originals[CAMEL[attr]] = value
                values[attr] = canonical
                continue
        values[attr] = value
