"""The archive manifest codec: any manifest survives encode → decode unchanged (Hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.errors import CorruptArchiveError, HostileArchiveError
from ledger.portable.archive import Manifest, SessionMember, check_member_name

shas = st.text("0123456789abcdef", min_size=40, max_size=40)
texts = st.text(max_size=40)
members = st.builds(
    SessionMember,
    file=st.integers(0, 50).map(lambda n: f"sessions/{n}.jsonl"),
    id=texts,
    name=texts,
    cwd=st.none() | texts,
    parent_session=st.none() | texts,
    original_path=texts,
    sha256=shas,
    size=st.integers(0, 2**40),
)
manifests = st.builds(
    Manifest,
    session_id=texts,
    original_cwd=st.none() | texts,
    original_repo=texts,
    repository_head=st.none() | shas,
    exported_at=texts,
    ledger_version=texts,
    sessions=st.lists(members, min_size=1, max_size=4),
    snapshots=st.lists(shas, max_size=5),
    missing_snapshots=st.lists(shas, max_size=3),
    bundle_sha256=shas,
    bundle_size=st.integers(0, 2**40),
)


@given(manifests)
def test_a_manifest_round_trips_through_its_json(manifest: Manifest) -> None:
    assert Manifest.decode(manifest.encode()) == manifest


@pytest.mark.parametrize(
    "data", [b"", b"[]", b'{"format":"other"}', b'{"format":"rewind-session-archive","version":9}']
)
def test_a_foreign_or_future_manifest_is_refused(data: bytes) -> None:
    with pytest.raises(CorruptArchiveError):
        Manifest.decode(data)


@pytest.mark.parametrize(
    "name", ["../x", "sessions/../../x", "/etc/passwd", "C:evil", "sessions/a.jsonl", "x.txt"]
)
def test_member_names_outside_the_format_are_hostile(name: str) -> None:
    with pytest.raises(HostileArchiveError):
        check_member_name(name)
