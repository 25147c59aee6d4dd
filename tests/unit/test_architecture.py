"""The code as a map (issue 28, docs/design.md#architecture): rules a reader can rely on, checked
on the source itself.

- **No import circles** in ``ledger/``: checked by tests/unit/test_import_graph.py, which counts
  every import (module-level, function-level and under ``if TYPE_CHECKING:``; issue 33).
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


def test_the_checker_finds_a_private_import() -> None:
    """The rules above can fail (circles: tests/unit/test_import_graph.py)."""
    tree = ast.parse("from ledger.x import _hidden\nif TYPE_CHECKING:\n    import ledger.y\n")
    assert _imports(tree, "ledger.z", False) == [("ledger.x", ["_hidden"])]
