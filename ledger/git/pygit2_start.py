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

And the :mod:`ssl` module itself is not loaded (issue 34: ~14 ms of every such process, its
enums and the socket module; ``import pygit2`` 51–57 → 39–42 ms): pygit2 takes only
``DefaultVerifyPaths`` and ``get_default_verify_paths`` from it, so while pygit2 loads, a
stand-in module holds those two, computed as ``ssl.py`` computes them (``_ssl``'s OpenSSL paths,
the ``SSL_CERT_FILE``/``SSL_CERT_DIR`` environment first). The stand-in leaves
``sys.modules`` when pygit2's import ends; any other name asked of it loads the real module.
Where ssl was loaded before, the real module is patched as described above.

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
        if "ssl" not in sys.modules:
            stub = _paths_only_ssl()
            if stub is not None:
                # pygit2 takes two names from ssl; the module itself (~14 ms: its enums, the
                # socket module) is loaded only if something asks for more (_PathsOnlySsl).
                sys.modules.update(ssl=stub)
                try:
                    exec_module(module)
                finally:
                    _drop(stub)
                return
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


def _paths_only_ssl() -> ModuleType | None:
    """A stand-in for :mod:`ssl` while pygit2 loads: ``DefaultVerifyPaths`` and
    ``get_default_verify_paths`` as ssl defines them (from ``_ssl``, the environment overriding
    OpenSSL's built-in paths), the latter without the bundle file when a certificate directory
    exists; any other name loads the real module. ``None``: no ``_ssl`` (use the real path)."""
    try:
        import _ssl
        import os
        from collections import namedtuple
        from types import ModuleType
    except ImportError:
        return None

    verify_paths = namedtuple(  # type: ignore[name-match]  # ssl.py's name
        "DefaultVerifyPaths",
        "cafile capath openssl_cafile_env openssl_cafile openssl_capath_env openssl_capath",
    )

    def get_default_verify_paths() -> object:
        parts = _ssl.get_default_verify_paths()
        cafile = os.environ.get(parts[0], parts[1])
        capath = os.environ.get(parts[2], parts[3])
        found = verify_paths(
            cafile if os.path.isfile(cafile) else None,
            capath if os.path.isdir(capath) else None,
            *parts,
        )
        return found._replace(cafile=None) if found.capath else found

    class _PathsOnlySsl(ModuleType):
        def __getattr__(self, name: str) -> object:
            if name.startswith("__"):  # the import system asks for __path__ and the like
                raise AttributeError(name)
            # Anything else (another thread importing ssl meanwhile): the real module.
            _drop(self)
            import ssl

            return getattr(ssl, name)

    stub = _PathsOnlySsl("ssl")
    stub.DefaultVerifyPaths = verify_paths  # type: ignore[attr-defined]
    stub.get_default_verify_paths = get_default_verify_paths  # type: ignore[attr-defined]
    return stub


def _drop(stub: ModuleType) -> None:
    """Take the stand-in out of ``sys.modules``: only it (a real ``ssl`` loaded meanwhile
    stays). Through ``pop``/``update``: ledger/loaded_modules.py is the one reader of entries."""
    current = sys.modules.pop("ssl", None)
    if current is not None and current is not stub:
        sys.modules.update(ssl=current)


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
