"""ledger/git/pygit2_start.py: pygit2 is loaded without parsing the system's CA bundle (~10 ms
of every process that opens a repository), and loads as it always did where that cannot be
done. Each case runs in a fresh interpreter: pygit2 loads once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_PROBE = (
    "import json, ssl, sys\n"
    "import ledger.git, pygit2\n"
    "paths = ssl.get_default_verify_paths()\n"
    "print(json.dumps({'file': pygit2.settings.ssl_cert_file, 'dir': pygit2.settings.ssl_cert_dir,"
    " 'cafile_after': paths.cafile, 'capath_after': paths.capath,"
    " 'finder_left': any(type(f).__name__ == '_Pygit2Finder' or getattr(f, '__name__', '') =="
    " '_Pygit2Finder' for f in sys.meta_path)}))\n"
)


def _probe(env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def _system_paths(env: dict[str, str]) -> tuple[str | None, str | None]:
    code = "import ssl; p = ssl.get_default_verify_paths(); print(p.cafile or ''); print(p.capath or '')"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    cafile, capath = (out.stdout.split("\n") + ["", ""])[:2]
    return cafile or None, capath or None


def test_libgit2_gets_the_certificate_directory_only_and_ssl_is_put_back() -> None:
    env = dict(os.environ)
    cafile, capath = _system_paths(env)
    if capath is None:
        pytest.skip("this system has no certificate directory to hand libgit2")
    probe = _probe(env)
    assert probe["file"] is None  # the bundle file was never given to libgit2 to parse
    assert probe["dir"] == capath
    assert probe["cafile_after"] == cafile and probe["capath_after"] == capath
    assert probe["finder_left"] is False


def test_without_a_certificate_directory_pygit2_loads_as_it_always_did(tmp_path: object) -> None:
    env = {**os.environ, "SSL_CERT_DIR": "/nonexistent/certs"}
    cafile, capath = _system_paths(env)
    assert capath is None
    probe = _probe(env)
    assert probe["file"] == cafile
    assert probe["finder_left"] is False


_PROBE_WITHOUT_SSL = (
    "import json, sys\n"
    "import ledger.git, pygit2\n"
    "loaded = 'ssl' in sys.modules\n"
    "import ssl\n"
    "paths = ssl.get_default_verify_paths()\n"
    "print(json.dumps({'file': pygit2.settings.ssl_cert_file, 'dir': pygit2.settings.ssl_cert_dir,"
    " 'ssl_loaded_by_pygit2': loaded, 'real_ssl': hasattr(ssl, 'SSLContext'),"
    " 'cafile_after': paths.cafile, 'capath_after': paths.capath}))\n"
)


def _probe_without_ssl(env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE_WITHOUT_SSL],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_pygit2_loads_without_the_ssl_module_and_ssl_loads_whole_after() -> None:
    # Nothing in a rewind process imports ssl before pygit2: its two names come from a
    # stand-in (~14 ms less per process), and a later import of ssl gets the real module.
    env = dict(os.environ)
    cafile, capath = _system_paths(env)
    probe = _probe_without_ssl(env)
    assert probe["ssl_loaded_by_pygit2"] is False
    assert probe["real_ssl"] is True
    assert (probe["cafile_after"], probe["capath_after"]) == (cafile, capath)
    if capath is None:
        assert probe["file"] == cafile
    else:
        assert probe["file"] is None and probe["dir"] == capath


def test_without_a_certificate_directory_and_without_ssl_loaded_the_bundle_is_given() -> None:
    env = {**os.environ, "SSL_CERT_DIR": "/nonexistent/certs"}
    cafile, capath = _system_paths(env)
    assert capath is None
    probe = _probe_without_ssl(env)
    assert probe["ssl_loaded_by_pygit2"] is False
    assert probe["file"] == cafile
