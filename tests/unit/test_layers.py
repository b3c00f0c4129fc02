"""The package's layers stack one way (ARCHITECTURE.md): no import circle anywhere in `bridge/`, between
modules or between packages, lazy and type-only imports included (they hide circles, they do not remove
them), and every package sits on a layer, so the core never imports a transport, the command line or an
add-on."""
from __future__ import annotations

import ast
from pathlib import Path

BRIDGE = Path(__file__).resolve().parents[2] / "bridge"


def _modules() -> dict[str, Path]:
    found = {}
    for path in BRIDGE.rglob("*.py"):
        parts = list(path.relative_to(BRIDGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(path: Path, module: str, known: set[str]) -> set[str]:
    """Every `bridge.*` module ``path`` imports: lazy ones and `if TYPE_CHECKING:` ones too (a
    type-only import still ties the two modules together, and hides a circle as well as a lazy one)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        out.update(name for name in names if name in known and name != module)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(path, name, known) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


#: Every package and top-level module of `bridge/`, bottom up: each imports only from levels below its
#: own. A new one must be placed here, so the test covers all of `bridge/`.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("bridge.fields", "bridge.lazy"),  # the reminder's vocabulary, and how the model is loaded at first use
    ("bridge", "bridge.model", "bridge.jsonrpc", "bridge.display", "bridge.environ", "bridge.urls", "bridge.metrics",
     "bridge.loop", "bridge.probe", "bridge.prefilter", "bridge.declaration", "bridge.examples", "bridge.throttle",
     "bridge.problems", "bridge.pending", "bridge.reminder_spans"),
    ("bridge.dialects", "bridge.lifecycle", "bridge.logs", "bridge.state", "bridge.defaults", "bridge.otlp"),
    ("bridge.rules", "bridge.telemetry"),
    ("bridge.envelope", "bridge.policy"),
    ("bridge.pipeline",),  # the core ends here: it imports no add-on, transport or command line
    ("bridge.outbox",),  # an add-on
    ("bridge.assembly",),  # a route's flow with its add-ons
    ("bridge.transports", "bridge.console", "bridge.demo_view"),
    ("bridge.admin", "bridge.demo"),
    ("bridge.cli",),
    ("bridge.__main__",),
)
LEVEL = {unit: level for level, units in enumerate(LAYERS) for unit in units}


def _unit(module: str) -> str:
    """The package (or top-level module) of `bridge/` that ``module`` belongs to."""
    return ".".join(module.split(".")[:2])


def test_no_import_circle_between_modules():
    assert _cycles(_graph()) == []


def test_no_import_circle_between_packages():
    packages: dict[str, set[str]] = {}
    for module, imports in _graph().items():
        packages.setdefault(_unit(module), set()).update(_unit(i) for i in imports if _unit(i) != _unit(module))
    assert _cycles(packages) == []


def test_every_package_and_module_has_a_layer():
    assert {_unit(m) for m in _modules()} == set(LEVEL)


def test_layers_import_only_downwards():
    wrong = {(m, i) for m, imports in _graph().items() for i in imports
             if _unit(i) != _unit(m) and LEVEL[_unit(i)] >= LEVEL[_unit(m)]}
    assert wrong == set()


def test_the_walk_sees_lazy_and_type_only_imports(tmp_path: Path):
    """The checker itself: a function-level and a `TYPE_CHECKING` import count (else a circle through one
    could hide), and a circle is found."""
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bridge.a import X\n"
                      "def f():\n    import bridge.b\n")
    assert _imports(source, "bridge.m", {"bridge.a", "bridge.b", "bridge.m"}) == {"bridge.a", "bridge.b"}
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
