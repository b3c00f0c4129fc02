"""Tiny helpers for nested JSON paths, so codecs add and remove decorations without leaving
empty husks (`"_meta": {}`) behind in messages the sender never had them in."""
from __future__ import annotations

from typing import Any


def get_path(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def params_meta(msg: Any) -> Any:
    """``msg["params"]["_meta"]`` or None: the slot reminders and trace context ride in, read on
    every candidate frame (so not through `get_path`'s loop)."""
    params = msg.get("params") if isinstance(msg, dict) else None
    return params.get("_meta") if isinstance(params, dict) else None


def set_path(obj: dict[str, Any], value: Any, *keys: str) -> None:
    for key in keys[:-1]:
        obj = obj.setdefault(key, {})
    obj[keys[-1]] = value


def pop_path(obj: Any, *keys: str) -> Any:
    """Remove obj[k1][k2]…; containers emptied by the removal are removed too."""
    if not keys or not isinstance(obj, dict) or keys[0] not in obj:
        return None
    if len(keys) == 1:
        return obj.pop(keys[0])
    child = obj[keys[0]]
    found = pop_path(child, *keys[1:])
    if isinstance(child, dict) and not child:
        del obj[keys[0]]
    return found


def write_at(obj: dict[str, Any], value: Any, *keys: str) -> None:
    """Set obj[k1][k2]… to ``value``, or remove it (and emptied containers) when ``value`` is None."""
    if value is None:
        pop_path(obj, *keys)
    else:
        set_path(obj, value, *keys)
