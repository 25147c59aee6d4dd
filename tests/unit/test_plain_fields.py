"""Plain values that spell out ``_fields`` (the hot ones: made per file or per record) compare
and hash by every field: the tuple names each slot once, in the constructor's order."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap

import ledger
from ledger.plain import Plain


def _plain_classes() -> list[type[Plain]]:
    found: list[type[Plain]] = []
    root = ledger.__path__[0]
    for info in pkgutil.walk_packages(ledger.__path__, "ledger."):
        path = f"{root}/{info.name.removeprefix('ledger.').replace('.', '/')}"
        try:
            with open(f"{path}.py", encoding="utf-8") as source:
                text = source.read()
        except OSError:
            continue  # a package
        if "def _fields" not in text or "from ledger.plain import" not in text:
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Plain)
                and value.__module__ == info.name
                and "_fields" in vars(value)
            ):
                found.append(value)
    return found


def test_spelled_out_fields_name_every_slot_in_constructor_order() -> None:
    classes = _plain_classes()
    assert len(classes) >= 10  # the walk found them
    for cls in classes:
        tree = ast.parse(textwrap.dedent(inspect.getsource(vars(cls)["_fields"])))
        returned = next(node for node in ast.walk(tree) if isinstance(node, ast.Return))
        assert isinstance(returned.value, ast.Tuple), cls
        names = [
            element.attr for element in returned.value.elts if isinstance(element, ast.Attribute)
        ]
        parameters = list(inspect.signature(cls.__init__).parameters)[1:]
        assert names == parameters, cls
        assert sorted(names) == sorted(cls.__slots__), cls
