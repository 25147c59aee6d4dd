"""No import circles in ``ledger/``, counting every import (issue 33 item 6).

Stricter than the circle rule of tests/unit/test_architecture.py, which skips imports under
``if TYPE_CHECKING:``: here those count too, and so do imports inside functions, since a
type-only or lazy import is still a dependency that runs back (tests/importgraph.py says
exactly what counts). ``python tools/import_cycles.py`` prints the same circles.
"""

from __future__ import annotations

from pathlib import Path

from tests.importgraph import Edge, cycles, describe, edges, graph


def test_no_module_of_ledger_reaches_itself_through_any_import() -> None:
    found = cycles(graph())
    all_edges = edges()
    assert found == [], "import circles in ledger/:\n" + "\n".join(
        describe(component, all_edges) for component in found
    )


def _package(root: Path, files: dict[str, str]) -> Path:
    package = root / "ledger"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_a_circle_closed_by_a_type_checking_import_is_found(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from ledger.b import thing\n",
            "b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from ledger.a import Other\n"
            ),
            "c.py": "import ledger.a\n",
        },
    )
    assert cycles(graph(package)) == [["ledger.a", "ledger.b"]]
    assert Edge("ledger.b", "ledger.a", 3, "type-checking") in edges(package)


def test_a_circle_closed_by_an_import_inside_a_function_is_found(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "sub/__init__.py": "",
            "sub/x.py": "from . import y\n",
            "sub/y.py": "def later():\n    from ledger.sub.x import run\n    return run\n",
        },
    )
    assert cycles(graph(package)) == [["ledger.sub.x", "ledger.sub.y"]]
    assert Edge("ledger.sub.y", "ledger.sub.x", 2, "function") in edges(package)


def test_a_package_that_re_exports_its_modules_is_no_circle_with_them(tmp_path: Path) -> None:
    """Importing ``ledger.p.m`` runs ``ledger/p/__init__.py`` first; that implicit import is not
    an edge, or every re-exporting package would be in a circle with its modules."""
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "p/__init__.py": "from ledger.p.m import M\n",
            "p/m.py": "from ledger.p.n import N\nM = N\n",
            "p/n.py": "N = 1\n",
        },
    )
    assert cycles(graph(package)) == []
