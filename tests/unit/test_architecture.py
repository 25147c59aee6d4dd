"""The code as a map (issue 28, docs/design.md#architecture): rules a reader can rely on, checked
on the source itself.

- **No import circles** in ``ledger/``: a module never reaches itself through the modules it
  imports when it runs (module-level and function-level imports both count; imports under
  ``if TYPE_CHECKING:`` do not here, since they never run; tests/unit/test_import_graph.py is
  stricter and counts those too, issue 33).
- **No private names across modules**: ``from ledger.x import _name`` only inside ``ledger.x``.
- **No module over 600 lines.**
- **pygit2 only in the git layer** (``ledger/git/``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "ledger"
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, list[str]]]:
    """``(imported module, names)`` for every import that runs (not under TYPE_CHECKING)."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((base, [alias.name for alias in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _graph() -> tuple[dict[str, set[str]], list[str], list[str]]:
    sources = _sources()
    graph: dict[str, set[str]] = {name: set() for name in sources}
    private: list[str] = []
    pygit2: list[str] = []
    for name, path in sources.items():
        tree = ast.parse(path.read_text(), str(path))
        for target, names in _imports(tree, name, path.name == "__init__.py"):
            if target == "pygit2" or target.startswith("pygit2."):
                if not name.startswith("ledger.git"):
                    pygit2.append(name)
                continue
            if not target.startswith("ledger"):
                continue
            for imported in names or [""]:
                candidate = f"{target}.{imported}" if imported else target
                if candidate in sources:
                    graph[name].add(candidate)
                elif target in sources:
                    graph[name].add(target)
                    if imported.startswith("_") and target != name:
                        private.append(f"{name} imports {target}.{imported}")
    return graph, private, pygit2


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def strongconnect(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt == node:
                continue
            if nxt not in index:
                strongconnect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            strongconnect(node)
    return found


def test_there_are_no_import_circles_in_the_package() -> None:
    graph, _, _ = _graph()
    assert _cycles(graph) == []


def test_no_module_imports_another_modules_private_names() -> None:
    _, private, _ = _graph()
    assert private == []


def test_pygit2_is_imported_only_by_the_git_layer() -> None:
    _, _, pygit2 = _graph()
    assert sorted(set(pygit2)) == []


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.name))
def test_no_module_is_over_600_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE.parent)}: {lines} lines"


GIT_LAYERS = {
    "basics": 0,
    "shadow.layout": 1,
    "capture": 2,
    "feed": 3,
    "store": 3,
    "restore": 4,
    "shadow.upkeep": 4,
    "shadow.open": 5,
}
"""The git layer's subsystems, bottom up (ledger/git/__init__.py): each imports only lower ones."""


def _subsystem(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["ledger", "git"] or len(parts) < 3:
        return None
    if len(parts) == 3:
        return (
            parts[2] if parts[2] in ("capture", "feed", "store", "restore", "shadow") else "basics"
        )
    return f"shadow.{parts[3]}" if parts[2] == "shadow" else parts[2]


def test_the_git_layers_subsystems_import_only_lower_layers() -> None:
    graph, _, _ = _graph()
    upward = []
    for module, targets in graph.items():
        here = _subsystem(module)
        if here is None or here == "shadow":
            continue
        for target in targets:
            there = _subsystem(target)
            if there is None or there == here or there == "shadow":
                continue
            if GIT_LAYERS[there] >= GIT_LAYERS[here]:
                upward.append(f"{module} ({here}) imports {target} ({there})")
    assert upward == []


def test_the_checker_finds_a_circle_and_a_private_import() -> None:
    """The rules above can fail: a made-up circle is found."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    tree = ast.parse("from ledger.x import _hidden\nif TYPE_CHECKING:\n    import ledger.y\n")
    assert _imports(tree, "ledger.z", False) == [("ledger.x", ["_hidden"])]
