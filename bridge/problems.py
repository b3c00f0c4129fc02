"""Problems in a rules file, in the words `reminder-bridge check` uses: `FILE:LINE: KEY: MESSAGE`.

Apart from the schema (bridge/rules.py) so that the schema reads as the rules it states: here is
what turns a pydantic error into plain words, and which line of the file it belongs to.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import re
import tomllib
import types
import typing
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel

__all__ = ["RuleProblem", "RulesError", "describe_key", "dotted", "line_of", "locate_keys", "explain", "show"]


# ---------------------------------------------------------------- problems


@dataclasses.dataclass(frozen=True)
class RuleProblem:
    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class RulesError(Exception):
    """Every problem found in a rules file, not just the first."""

    def __init__(self, problems: list[RuleProblem]):
        self.problems = problems
        super().__init__("\n".join(map(str, problems)))


# ---------------------------------------------------------------- messages


def dotted(path: Iterable) -> str:
    """('routes', 'fs.v2', 'command', 0) → 'routes."fs.v2".command[0]' (TOML key syntax)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            seg = part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else json.dumps(part)
            out += f".{seg}" if out else seg
    return out


def show(v: Any) -> str:
    """A value as it would be written in TOML."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "[" + ", ".join(map(show, v)) + "]"
    return str(v)


def _resolve(root: type[BaseModel], loc: tuple) -> tuple[type[BaseModel] | None, Any, list]:
    """Walk the schema along `loc`: (model holding the last key, the key's type, its constraints)."""
    tp: Any = root
    model, meta = None, []
    for part in loc:
        tp, _ = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            model, field = tp, tp.model_fields.get(part)
            if field is None:
                return model, None, []
            tp, meta = field.annotation, list(field.metadata)
        elif typing.get_origin(tp) in (dict, list):
            tp, meta = typing.get_args(tp)[-1], []
        else:
            return model, None, []
    tp, more = _unwrap(tp)
    return model, tp, meta + more


def _unwrap(tp: Any) -> tuple[Any, list]:
    """Strip `X | None` and Annotated[X, ...]; return X and the Annotated constraints."""
    meta: list = []
    while True:
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp, meta
            tp = args[0]
        elif typing.get_origin(tp) is Annotated:
            tp, *extra = typing.get_args(tp)
            for m in extra:
                meta.extend(getattr(m, "metadata", [m]))
        else:
            return tp, meta


def describe_key(model: type[BaseModel], key: str) -> str:
    """What ``model``'s ``key`` accepts, in the words `check` uses ("an integer >= 0")."""
    field = model.model_fields[key]
    tp, meta = _unwrap(field.annotation)
    return _describe(tp, meta + list(field.metadata)) or "a valid value"


def _describe(tp: Any, meta: list) -> str | None:
    """What a key accepts, in words: 'an integer >= 1', 'one of a, b', 'a table'…"""
    if typing.get_origin(tp) is Literal:
        return "one of " + ", ".join(map(str, typing.get_args(tp)))
    bounds = {b: getattr(m, b) for m in meta for b in ("ge", "gt", "le", "min_length")
              if getattr(m, b, None) is not None}
    if tp is bool:
        return "true or false"
    if tp in (int, float):
        what = "an integer" if tp is int else "a number"
        if "ge" in bounds and "le" in bounds:
            return f"{what} from {bounds['ge']:g} to {bounds['le']:g}"
        if "gt" in bounds:
            return f"{what} > {bounds['gt']:g}"
        if "ge" in bounds:
            return f"{what} >= {bounds['ge']:g}"
        return what
    if tp is str:
        return "a string"
    if typing.get_origin(tp) is list:
        return "a non-empty list of strings" if bounds.get("min_length") else "a list of strings"
    if typing.get_origin(tp) is dict or (isinstance(tp, type) and issubclass(tp, BaseModel)):
        return "a table"
    return None


_FALLBACK_TYPES = {"string_type": "a string", "int_type": "an integer", "bool_type": "true or false",
                   "float_type": "a number", "dict_type": "a table", "model_type": "a table", "list_type": "a list"}


def explain(err: dict, root: type[BaseModel]) -> str:
    """Turn one pydantic error under ``root`` into plain words: what is wrong, what is allowed, what was given."""
    kind, loc = err["type"], tuple(err["loc"])
    model, tp, meta = _resolve(root, loc)
    if kind == "extra_forbidden":
        allowed = sorted(model.model_fields) if model else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f'; did you mean "{close[0]}"?' if close else ""
        return f"unknown key{hint} (allowed: {', '.join(allowed)})"
    if kind == "value_error":
        return str(err["ctx"]["error"])
    what = _describe(tp, meta) or _FALLBACK_TYPES.get(kind)
    if kind == "missing":
        return f"required key is missing; must be {what}" if what else "required key is missing"
    if what:
        return f"must be {what} (got {show(err['input'])})"
    return f"{err['msg']} (got {show(err['input'])})"


# ---------------------------------------------------------------- line locator

def locate_keys(text: str) -> dict[tuple, int]:
    """Map each key path defined in TOML `text` to its 1-based line.

    tomllib keeps no positions, so each statement is parsed on its own: from a line, as many lines
    as its value spans (a multi-line string or array parses only once whole). A header names the
    table the keys after it belong to. Every prefix of a path is recorded at its first appearance,
    so a missing key can point at the table that should hold it. `text` has already parsed whole.
    """
    found: dict[tuple, int] = {}
    lines, table, start = text.splitlines(), (), 0
    while start < len(lines):
        for end in range(start + 1, len(lines) + 1):
            try:
                parsed = tomllib.loads("\n".join(lines[start:end]))
                break
            except tomllib.TOMLDecodeError:
                continue
        else:
            break
        header = lines[start].lstrip().startswith("[")
        path = _only_path(parsed, into_lists=header)
        if header:
            table = path
        else:
            path = table + path
        for i in range(1, len(path) + 1):
            found.setdefault(path[:i], start + 1)
        start = end
    return found


def _only_path(data: Any, into_lists: bool) -> tuple:
    """The keys down a one-statement document: ``{"a": {"b": 1}}`` → ("a", "b"); an `[[array]]`
    header's list of one table is stepped into, an inline table of several keys is not."""
    path: tuple = ()
    while True:
        if into_lists and isinstance(data, list) and len(data) == 1:
            data = data[0]
        if not isinstance(data, dict) or len(data) != 1:
            return path
        (key, data), = data.items()
        path += (key,)


def line_of(lines: dict[tuple, int], path: tuple) -> int | None:
    """The line of `path`, else of its longest defined prefix (e.g. the table of a missing key)."""
    path = tuple(p for p in path if not isinstance(p, int))
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return None
