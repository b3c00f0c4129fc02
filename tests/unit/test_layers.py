"""The package's layers stack one way (ARCHITECTURE.md): no import circle anywhere in `bridge/`,
lazy imports inside functions included (they hide circles, they do not remove them), and the
core never imports a transport, the command line, or an add-on."""
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
    """Every `bridge.*` module ``path`` imports, except under `if TYPE_CHECKING:` (types only)."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
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


def test_no_import_circle_in_the_package():
    assert _cycles(_graph()) == []


def test_the_core_never_imports_transports_the_command_line_or_add_ons():
    core = ("bridge.model", "bridge.dialects", "bridge.prefilter", "bridge.lifecycle", "bridge.envelope",
            "bridge.jsonrpc", "bridge.policy", "bridge.pipeline.flow", "bridge.pipeline.mcp", "bridge.pipeline.acp",
            "bridge.pipeline.a2a", "bridge.pipeline.commands", "bridge.pipeline.negotiation", "bridge.pipeline.addons")
    outer = ("bridge.transports", "bridge.cli", "bridge.outbox.addon", "bridge.outbox.base", "bridge.outbox.pull",
             "bridge.outbox.serving", "bridge.admin", "bridge.console", "bridge.demo")
    graph = _graph()
    wrong = {(m, i) for m, imports in graph.items() if m.startswith(core)
             for i in imports if i.startswith(outer)}
    assert wrong == set()


def test_the_walk_sees_lazy_imports():
    """The checker itself: a function-level import counts (else the first test could not fail)."""
    graph = _graph()
    assert "bridge.outbox.addon" in graph["bridge.pipeline.factory"]
