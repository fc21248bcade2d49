"""The dependency rule (docs/architecture.md): server -> engine -> planner -> storage ->
catalog, each importing only its own layer and the layers after it, and no import cycle
among modules. Imports inside functions count; those under `if TYPE_CHECKING:` do not.
headwater/ (the CLI on top, shared errors at the bottom) is outside the layers."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("server", "engine", "planner", "storage", "catalog")  # top to bottom
FOLDERS = (*LAYERS, "headwater")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[0] == "headwater":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["headwater", *parts])


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for folder in FOLDERS for p in (REPO / folder).rglob("*.py")}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return hidden


def _imports(path: Path, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, module) for every headwater module the file imports."""
    tree = ast.parse(path.read_text())
    hidden = _type_checking_nodes(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from headwater.server import auth` imports the module auth when it is one
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                for a in node.names
            ]
        else:
            continue
        found += [(node.lineno, n) for n in names if n.startswith("headwater.")]
    return found


def _layer(module: str) -> str | None:
    part = module.split(".")[1] if module.count(".") else ""
    return part if part in LAYERS else None


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    upward: list[str] = []
    for module, path in modules.items():
        own = _layer(module)
        for line, target in _imports(path, modules):
            if target in modules and target != module:
                graph[module].add(target)
            theirs = _layer(target)
            if own and theirs and LAYERS.index(theirs) < LAYERS.index(own):
                upward.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    return graph, upward


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_layers_only_import_downward() -> None:
    _, upward = _graph()
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_import_cycles() -> None:
    graph, _ = _graph()
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_rule_sees_a_violation(tmp_path: Path) -> None:
    """The checker itself: an upward import inside a function is found."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from headwater.server.wire import x\n")
    assert _imports(f, {}) == [(2, "headwater.server.wire")]
