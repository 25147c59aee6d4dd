"""The import graph of ``ledger/``, read statically from the source (issue 33 item 6).

Shared by ``tests/unit/test_import_graph.py`` (which fails on any circle) and
``tools/import_cycles.py`` (which prints them), so the rule and the tool agree.

What counts as an edge ``a -> b`` (module ``a`` names module ``b`` in an import statement):

- **Every** ``import`` / ``from ... import`` in ``a``'s source, wherever it stands: at module
  level, under ``if TYPE_CHECKING:``, inside functions and methods (lazy imports). A type-only
  import is still a dependency a reader has to follow, and a lazy import is a circle that only
  waits for the right call order; neither is a way out of a circle, so both count.
- ``from ledger.x import y`` is an edge to ``ledger.x.y`` when that is a module, else to
  ``ledger.x``; relative imports are resolved against ``a``'s package.
- Only modules inside ``ledger/`` are nodes; imports of anything else are ignored.
- The implicit import of parent packages (``import ledger.engine.host`` first runs
  ``ledger/engine/__init__.py``) is *not* an edge: otherwise a package ``__init__`` that
  re-exports its submodules (as ``ledger.engine`` does) would put every submodule in a circle
  with it. Naming the package itself (``from ledger.engine import Engine``) is an edge to it.

A circle is a strongly connected component of more than one module (Tarjan); a module importing
itself is not reported.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ledger"


@dataclass(frozen=True)
class Edge:
    """One import statement that links two ``ledger`` modules."""

    source: str
    target: str
    line: int
    kind: str
    """``"module"``, ``"type-checking"`` or ``"function"`` (where the import stands)."""


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, list[str], int, str]]:
    """``(imported module, names, line, kind)`` for every import statement anywhere in ``tree``."""
    found: list[tuple[str, list[str], int, str]] = []

    def visit(node: ast.AST, kind: str) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            inner = "function" if kind == "function" else "type-checking"
            for child in node.body:
                visit(child, inner)
            for child in node.orelse:
                visit(child, kind)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            kind = "function"
        if isinstance(node, ast.Import):
            found.extend((alias.name, [], node.lineno, kind) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((base, [alias.name for alias in node.names], node.lineno, kind))
        for inner_node in ast.iter_child_nodes(node):
            visit(inner_node, kind)

    visit(tree, "module")
    return found


def edges(package: Path = PACKAGE) -> list[Edge]:
    """Every import edge between two modules of ``package``."""
    known = sources(package)
    found: list[Edge] = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        for target, names, line, kind in imports(tree, name, path.name == "__init__.py"):
            for imported in names or [""]:
                candidate = f"{target}.{imported}" if imported else target
                if candidate in known:
                    found.append(Edge(name, candidate, line, kind))
                elif target in known:
                    found.append(Edge(name, target, line, kind))
    return found


def graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    result: dict[str, set[str]] = {name: set() for name in sources(package)}
    for edge in edges(package):
        if edge.source != edge.target:
            result[edge.source].add(edge.target)
    return result


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
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
        for nxt in sorted(graph.get(node, ())):
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
    return sorted(found)


def describe(component: list[str], all_edges: list[Edge]) -> str:
    """A circle as text: its modules, then each import inside it (``a:line -> b [kind]``)."""
    members = set(component)
    lines = [f"circle of {len(component)} modules: {', '.join(component)}"]
    inside = sorted(
        {(e.source, e.line, e.target, e.kind) for e in all_edges if e.source != e.target}
    )
    for source, line, target, kind in inside:
        if source in members and target in members:
            lines.append(f"  {source}:{line} -> {target} [{kind}]")
    return "\n".join(lines)
