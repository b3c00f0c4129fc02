"""bridge/ imports libraries only through their public modules: a private one (OpenTelemetry's
`semconv._incubating`, say) may change or vanish in any release, whatever the pin says."""
from __future__ import annotations

import ast
import re

from tests.paths import ROOT

#: a dotted module name in a string (what `importlib.import_module` would be handed)
MODULE_NAME = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+")


def private(module: str) -> bool:
    """A library's module with a private part (`_x`; `__x__` is not private)."""
    return not module.startswith("bridge") and any(
        part.startswith("_") and not part.endswith("__") for part in module.split("."))


def private_imports() -> list[str]:
    """`file:line module` for every import in bridge/ of a private module, and every string that
    names one (an `importlib` call would hide it from `import` statements)."""
    found = []
    for path in sorted((ROOT / "bridge").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_NAME.fullmatch(node.value):
                names = [node.value]
            else:
                continue
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names if private(name)]
    return found


def test_bridge_imports_no_private_module_of_a_library():
    assert private_imports() == []


def test_the_scan_sees_an_incubating_import():
    """The check itself: OpenTelemetry's incubating semconv, however it is imported, is private."""
    assert private("opentelemetry.semconv._incubating.attributes.rpc_attributes")
    assert not private("opentelemetry.semconv.attributes.server_attributes") and not private("bridge._x")
    assert MODULE_NAME.fullmatch("opentelemetry.semconv._incubating.attributes")
