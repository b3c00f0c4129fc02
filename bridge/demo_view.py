"""How `reminder-bridge demo` shows a message: JSON laid out within the terminal's width, and what
the proxy changed, path by path.

`layout` breaks lines only between tokens (never inside a key, a number or a string), packing
members onto a line while they fit and indenting the rest under their bracket; a string too long
for any line is shortened with `…` (still a JSON string). `changes` compares a message as sent with
the message delivered for it: `~` a value changed (or moved and changed), `+` added, `-`
removed, `→` moved or renamed with its value kept, each with the reason when there is a rule for
it (a Harn alias, a field the target has no place for).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from bridge.dialects.shapes import A2A, HARN
from bridge.model import ORIGINAL_KEY
from bridge.problems import dotted

ELLIPSIS = "…"
#: the shortest room a shortened string is given: a quote, a character, `…`, a quote
SHORTEST = 4


# -- layout --------------------------------------------------------------------------------------
def _flat(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _shortened(text: str, room: int) -> str:
    """``text`` as a JSON string of at most ``room`` columns, cut with `…` when it must be."""
    whole = _flat(text)
    if len(whole) <= room:
        return whole
    keep = max(1, room - 3)
    while keep > 1 and len(_flat(text[:keep] + ELLIPSIS)) > room:
        keep -= 1
    return _flat(text[:keep] + ELLIPSIS)


def layout(value: Any, width: int, column: int = 0, indent: int | None = None, *, left: int | None = None) -> list[str]:
    """``value`` as JSON lines of at most ``width`` columns. The first line starts at ``column``
    (after what the caller printed) on a line indented by ``indent`` (default: ``column``); the
    others carry their own indentation: under the opening bracket while that is in the ``left``
    columns (default: the left third of the width), else two more than the line the bracket is on."""
    indent = column if indent is None else indent
    left = width // 3 if left is None else left
    whole = _flat(value)
    if column + len(whole) <= width:
        return [whole]
    if isinstance(value, str):
        return [_shortened(value, max(SHORTEST, width - column))]
    if not isinstance(value, (dict, list)) or not value:
        return [whole]  # a number or an empty bracket: one token, whatever the room
    opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
    items = [(_flat(k) + ": ", v) for k, v in value.items()] if isinstance(value, dict) else [("", v) for v in value]
    inner = column + 1 if column + 1 <= left else indent + 2
    lines = [opening]

    def end() -> int:  # the column the current line ends at
        return column + len(lines[0]) if len(lines) == 1 else len(lines[-1])

    for n, (key, item) in enumerate(items):
        tail = closing if n == len(items) - 1 else ","
        piece = key + _flat(item) + tail
        gap = "" if n == 0 else " "
        if end() + len(gap) + len(piece) <= width:
            lines[-1] += gap + piece
            continue
        if n or inner < end():
            lines.append(" " * inner)
        if end() + len(piece) <= width:
            lines[-1] += piece
            continue
        line_indent = indent if len(lines) == 1 else inner
        sub = layout(item, width - len(tail), end() + len(key), line_indent, left=left)
        lines[-1] += key + sub[0]
        lines.extend(sub[1:])
        lines[-1] += tail
    return lines


# -- changes -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Change:
    mark: str  # "~" changed, "+" added, "-" removed, "→" moved or renamed, value kept
    path: tuple
    before: Any = None
    after: Any = None
    to: tuple | None = None  # where it went, for a move
    why: str = ""
    #: inside an object that moved: where it was and where it went (paths are shown below them)
    within: tuple[tuple, tuple] | None = None

    def head(self) -> str:
        """`~ PATH`, `→ FROM → TO`, `+ PATH`, `- PATH` (inside a moved object, the paths below it)."""
        was, now = self.within or ((), ())
        where = _path(self.path[len(was if self.mark != "+" else now):])
        if self.to is not None:
            where += f" → {_path(self.to[len(now):])}"
        return f"{self.mark} {where}"

    @property
    def values(self) -> list[Any]:
        """What to show after the head: before and after, the value added or removed, or nothing."""
        return {"~": [self.before, self.after], "+": [self.after], "-": [self.before]}.get(self.mark, [])

    def text(self) -> str:
        """The change on one line: `~ PATH: BEFORE → AFTER`, `→ FROM → TO`, `+ PATH: VALUE`."""
        values = " → ".join(_flat(v) for v in self.values)
        return f"{self.head()}: {values}" if values else self.head()


def _path(path: tuple) -> str:
    return dotted(path) or "(the message)"


def _diff(a: Any, b: Any, path: tuple, out: list[Change]) -> None:
    """The changes from ``a`` to ``b`` under ``path``: whole subtrees added or removed."""
    if type(a) is type(b) and a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key, value in a.items():
            if key in b:
                _diff(value, b[key], path + (key,), out)
            else:
                out.append(Change("-", path + (key,), before=value))
        out.extend(Change("+", path + (key,), after=value) for key, value in b.items() if key not in a)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, path + (i,), out)
    else:
        out.append(Change("~", path, before=a, after=b))


def _objects(value: Any, path: tuple) -> list[tuple[tuple, dict]]:
    """Every object in ``value`` with its path, outermost first."""
    if isinstance(value, dict):
        found = [(path, value)]
        for key, item in value.items():
            found += _objects(item, path + (key,))
        return found
    if isinstance(value, list):
        return [hit for i, item in enumerate(value) for hit in _objects(item, path + (i,))]
    return []


def _leaves(value: Any, path: tuple = ()) -> dict[tuple, Any]:
    if isinstance(value, dict) and value:
        return {p: v for key, item in value.items() for p, v in _leaves(item, path + (key,)).items()}
    return {path: value}


def _spelling(name: Any) -> str:
    """`dedupe_key` and `dedupeKey`, `reminder_id` and `reminderId`: one field in two spellings."""
    return str(name).replace("_", "").lower()


def _same_name(a: Any, b: Any) -> bool:
    return isinstance(a, str) and isinstance(b, str) and _spelling(a) == _spelling(b)


def _fields(obj: dict) -> set[tuple[tuple, str]]:
    """An object's leaves as (path spelled either way, value) pairs, to compare two objects."""
    return {(tuple(map(_spelling, path)), _flat(value)) for path, value in _leaves(obj).items()}


def _moves(removed: list[Change], added: list[Change]) -> list[tuple[Change, tuple, dict, Change]]:
    """Objects that moved: an added object whose fields are mostly those of an object inside a
    removed subtree ((the removal, where inside it, the object, the addition))."""
    found = []
    for plus in added:
        if not isinstance(plus.after, dict) or not plus.after:
            continue
        wanted = _fields(plus.after)
        best, score = None, 0.5  # more than half of the fields alike
        for minus in removed:
            for where, obj in _objects(minus.before, minus.path):
                have = _fields(obj)
                alike = len(wanted & have) / max(len(wanted), len(have))
                if alike > score:
                    best, score = (minus, where, obj, plus), alike
        if best is not None:
            found.append(best)
    return found


def _pair(removed: list[Change], added: list[Change], within: tuple[tuple, tuple] | None = None) -> list[Change]:
    """A removed and an added leaf of one field in two places or spellings, as one change."""
    out = []
    for minus in [c for c in removed if not isinstance(c.before, dict)]:
        for plus in added:
            plus_leaves = _leaves(plus.after, plus.path) if isinstance(plus.after, dict) else {plus.path: plus.after}
            hit = next(((p, v) for p, v in plus_leaves.items() if p and _same_name(p[-1], minus.path[-1])), None)
            if hit is None:
                continue
            path, value = hit
            if value == minus.before:
                out.append(Change("→", minus.path, to=path, why=_why_renamed(minus.path[-1], path[-1], path),
                                  within=within))
            else:
                out.append(Change("~", minus.path, minus.before, value, to=path,
                                  why=_why_value(minus.path[-1], minus.before, value, path), within=within))
            removed.remove(minus)
            if plus_leaves == {path: value}:
                added.remove(plus)
            break
    return out


#: why the proxy adds a field, where one rule always says so
_ADDED_WHY = {
    "id": "every reminder has an id; the proxy makes one (a UUIDv7) when the sender gave none (spec §2)",
    "mode": "Harn reads a missing mode as audit_only, and the model would never see it: a downgrade always "
            "writes one (spec §4)",
}
#: the enum fields whose values dialects spell differently (spec §2)
_VOCABULARY = frozenset(HARN.decode)


def _spelled(removed: list[Change], added: list[Change]) -> list[Change]:
    """An enum field the target spells differently (`source: "stdlib_provider"` → `"provider"`),
    wherever the two messages keep it: one `~` with the reason, beside the removals and additions."""
    was = {p: v for c in removed for p, v in _leaves(c.before, c.path).items() if p and _attr(p[-1]) in _VOCABULARY}
    out = []
    for c in added:
        for path, value in _leaves(c.after, c.path).items():
            if not path or _attr(path[-1]) not in _VOCABULARY:
                continue
            hit = next(((p, v) for p, v in was.items() if _attr(p[-1]) == _attr(path[-1]) and v != value
                        and _why_value(p[-1], v, value, path)), None)
            if hit is not None:
                out.append(Change("~", hit[0], hit[1], value, to=path, why=_why_value(path[-1], hit[1], value, path)))
    return out


def _at(value: Any, path: tuple) -> Any:
    for part in path:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def _explained(change: Change, delivered: Any) -> Change:
    """``change`` with the reason for a field the proxy adds to every reminder of a kind."""
    if change.mark != "+" or change.why or not change.path or change.path[-1] not in _ADDED_WHY:
        return change
    if not isinstance(_at(delivered, change.path[:-1]), dict) or "body" not in _at(delivered, change.path[:-1]):
        return change  # not a field of a reminder
    return Change("+", change.path, after=change.after, why=_ADDED_WHY[change.path[-1]], within=change.within)


def changes(sent: Any, delivered: Any) -> list[Change]:
    """What the proxy changed in ``sent`` to deliver ``delivered``, path by path."""
    return [_explained(change, delivered) for change in _changes(sent, delivered)]


def _changes(sent: Any, delivered: Any) -> list[Change]:
    found: list[Change] = []
    _diff(sent, delivered, (), found)
    removed = [c for c in found if c.mark == "-"]
    added = [c for c in found if c.mark == "+"]
    out = [c for c in found if c.mark == "~"]
    out = [Change("~", c.path, c.before, c.after, why=_why_value(c.path[-1] if c.path else "", c.before, c.after,
                                                                 c.path)) for c in out]
    for minus, where, obj, plus in _moves(removed, added):
        out.append(Change("→", where, to=plus.path))
        within = (where, plus.path)
        inner: list[Change] = []
        _diff(obj, plus.after, (), inner)
        rest_removed = [Change("-", where + c.path, before=c.before, within=within) for c in inner if c.mark == "-"]
        rest_added = [Change("+", plus.path + c.path, after=c.after, within=within) for c in inner if c.mark == "+"]
        out += [Change("~", where + c.path, c.before, c.after, within=within,
                       why=_why_value(c.path[-1] if c.path else "", c.before, c.after, c.path)) for c in inner
                if c.mark == "~"]
        out += _pair(rest_removed, rest_added, within)
        out += rest_removed + rest_added
        added.remove(plus)
        if minus in removed and _prune(minus.before, where[len(minus.path):]) is None:
            removed.remove(minus)  # it held nothing but what moved
    out += _pair(removed, added)
    return out + _spelled(removed, added) + removed + added


def _prune(value: Any, inside: tuple) -> Any:
    """``value`` without what is at ``inside`` (and the objects that empties), None when nothing is left."""
    if not inside:
        return None
    if not isinstance(value, dict) or inside[0] not in value:
        return value
    rest = {k: v for k, v in value.items() if k != inside[0]}
    kept = _prune(value[inside[0]], inside[1:])
    if kept is not None:
        rest[inside[0]] = kept
    return rest or None


# -- reasons -------------------------------------------------------------------------------------
_CAMEL = re.compile(r"[a-z][A-Z]")


def _attr(key: Any) -> str:
    return re.sub(r"(?<=[a-z])([A-Z])", r"_\1", str(key)).lower()


def _kept_aside(path: tuple) -> str:
    return (f'kept under _meta["{ORIGINAL_KEY}"]: this message has no place for it, and a round trip loses '
            "nothing (spec §2)") if ORIGINAL_KEY in path else ""


def _why_value(key: Any, before: Any, after: Any, path: tuple) -> str:
    """Why a value changed, when a rule of spec §2 says so."""
    attr, why = _attr(key), ""
    if isinstance(before, str) and isinstance(after, str) and before != after:
        if HARN.decode.get(attr, {}).get(before) == after:
            why = f'"{before}" is Harn\'s name for "{after}" (spec §2)'
        elif HARN.encode.get(attr, {}).get(before) == after:
            why = f'Harn\'s name for "{before}" (spec §2)'
        elif A2A.encode.get(attr, {}).get(before) == after:
            why = f"A2A's enum name for {before}"
    return "; ".join(part for part in (why, _kept_aside(path)) if part)


def _why_renamed(old: Any, new: Any, path: tuple) -> str:
    if _CAMEL.search(str(old)) and "_" in str(new):
        return "Harn spells it snake_case"
    if "_" in str(old) and _CAMEL.search(str(new)):
        return "the standard spells it camelCase"
    return _kept_aside(path)
