"""A module executed at the first read of one of its names, not where it is imported (issue 23:
the cold start). `stdio -- CMD` relays its first answer before any reminder is decoded, so the
reminder model (pydantic, ~150 ms of CPU) must not be on that path; the modules that use it take
it from here, and name it under `if TYPE_CHECKING:` too, so the import graph still shows it.
"""
from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazily(name: str) -> ModuleType:
    """Module ``name``, executed by the stdlib's LazyLoader when an attribute of it is first read
    (from then on an ordinary module: no cost per read beyond a module attribute)."""
    found = sys.modules.get(name)
    if found is not None:
        return found
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.loader is not None, name
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    loader.exec_module(module)
    return module
