"""Loading pygit2 without reading the system's CA bundle: ~10 ms off every process that uses git.

Why it exists: ``import pygit2`` builds ``pygit2.settings`` (``Settings()``), which hands
``ssl.get_default_verify_paths()`` to libgit2 (``GIT_OPT_SET_SSL_CERT_LOCATIONS``); libgit2 then
starts OpenSSL and loads the whole CA bundle file (``/etc/ssl/certs/ca-certificates.crt``, ~140
certificates parsed): 9–12 ms of the ~50 ms the import takes here, in every ``rewind`` command
that opens a repository, every spawned bridge and every watcher (measured: ``import pygit2``
61–62 ms with the bundle, 50–53 ms without, medians of 21 processes). rewind-ledger never talks
to a network: it only reads and writes the local repository, so the bundle is never used.

What it does: :func:`install` (called by ``ledger/git/__init__.py``, before any module of the git
layer can import pygit2) puts a finder at the front of ``sys.meta_path`` that answers only for
``pygit2``, once. While pygit2's ``__init__`` runs, ``ssl.get_default_verify_paths`` returns the
same paths without the bundle *file*: the certificate *directory* stays, which OpenSSL reads
lazily, a certificate at a time, only when a TLS peer is verified. So TLS through libgit2 would
still verify against the system's certificates; only the up-front parse is gone.

Invariants:
- Nothing is imported until pygit2 is (this module needs only :mod:`sys`); the finder removes
  itself at its first use, and finds pygit2 through the finders after it, so the module loaded is
  exactly the one Python would load.
- Where the system has no certificate directory, or pygit2 was imported before (a test, a
  program embedding the package), pygit2 is loaded exactly as it would be without this module.
- The patched ``ssl.get_default_verify_paths`` is put back when pygit2's import ends, also when
  it fails. The import lock for pygit2 is held meanwhile; no other code in a ``rewind`` process
  asks ``ssl`` for its paths (it never opens a TLS connection).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing itself costs ~2 ms, and this module is loaded by every process
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType


class _Pygit2Finder:
    """A ``sys.meta_path`` finder for ``pygit2`` alone, used once."""

    @classmethod
    def find_spec(
        cls, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "pygit2":
            return None
        _remove()
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None  # not installed: the import fails as it would have
        loader = spec.loader
        exec_module: Callable[[ModuleType], None] | None = getattr(loader, "exec_module", None)
        if loader is None or exec_module is None:
            return spec
        try:
            # An attribute of this one loader instance (pygit2's own SourceFileLoader).
            loader.exec_module = _without_bundle(exec_module)
        except AttributeError:  # a loader that takes no attributes: loaded as it would be
            pass
        return spec


def _without_bundle(exec_module: Callable[[ModuleType], None]) -> Callable[[ModuleType], None]:
    def run(module: ModuleType) -> None:
        import ssl

        real = ssl.get_default_verify_paths
        paths = real()
        if not paths.capath:  # no directory to fall back on: libgit2 needs one of the two
            exec_module(module)
            return

        def directory_only() -> ssl.DefaultVerifyPaths:
            # typeshed says str; at run time a missing file is None, as here.
            return paths._replace(cafile=None)  # type: ignore[arg-type]

        ssl.get_default_verify_paths = directory_only
        try:
            exec_module(module)
        finally:
            ssl.get_default_verify_paths = real

    return run


def _remove() -> None:
    try:
        sys.meta_path.remove(_Pygit2Finder)
    except ValueError:
        pass


def install() -> None:
    """Load pygit2 without its CA bundle when it is first imported (see the module's text)."""
    if "pygit2" in sys.modules or _Pygit2Finder in sys.meta_path:
        return
    sys.meta_path.insert(0, _Pygit2Finder)
