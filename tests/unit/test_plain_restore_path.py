"""The cold restore/undo path's values as ledger/plain.py classes (issue 34: ~0.5-1.7 ms each as a
dataclass) keep their dataclasses' behaviour: fields that were ``compare=False``/``repr=False``
stay out of ``==``, hash and repr; the copies that replaced ``dataclasses.replace`` change only
what they name; a journal's JSON keeps its fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.engine.operations import RestoreReport
from ledger.git.capture.state import CaptureState
from ledger.git.restore.journal import Journal, RestoreIntent
from ledger.git.restore.plan import RestorePlan
from ledger.ledgerview import LedgerView
from ledger.plain import Plain
from ledger.presence import Presence
from ledger.settings import AUTO_WATCH_ENV, SnapshotSettings, settings_from_mapping

SHA = "a" * 40


def test_uncompared_fields_stay_out_of_equality_hash_and_repr() -> None:
    plain = RestorePlan("c", "t", "u", added=("x",))
    full = RestorePlan("c", "t", "u", added=("x",), writes=(("x", 0o100644, "b"),), bounded=True)
    assert plain == full and hash(plain) == hash(full)
    assert "writes" not in repr(full) and "bounded" not in repr(full)
    assert RestorePlan("c", "t", "u", added=("y",)) != plain
    assert RestoreReport("restore", "e", "t", plan=full) == RestoreReport("restore", "e", "t")
    assert "plan" not in repr(RestoreReport("restore", "e", "t", plan=full))
    stamped = CaptureState("f", _stamp_source=(["a"], ""))
    assert stamped == CaptureState("f") and "_stamp" not in repr(stamped)
    assert "_by_record" not in repr(LedgerView("s", None))
    owned = Journal("j", SHA, "t", SHA, "t", 1, path=Path("/x/j.json"), lock_fd=7)
    assert owned == Journal("j", SHA, "t", SHA, "t", 1)
    assert "path=PosixPath('/x/j.json')" in repr(owned) and "lock_fd" not in repr(owned)
    assert isinstance(owned, Plain)


def test_copies_change_only_what_they_name() -> None:
    plan = RestorePlan("c", "t", "u", writes=(("x", 0o100644, "b"),))
    bounded = plan.as_bounded()
    assert bounded.bounded and not plan.bounded and bounded.writes == plan.writes
    assert bounded.with_scan(None).bounded
    intent = RestoreIntent("s.jsonl", "e1", agent_dir="/a").with_operation("recover")
    assert intent == RestoreIntent("s.jsonl", "e1", "recover", "/a")
    presence = Presence("s", None, 1, None, None, "h", 5, stem="1-s-abc", pi_pid=9)
    busy = presence.with_turn(True, "fix it")
    assert (busy.busy, busy.title, busy.stem, busy.pi_pid, busy.lock) == (
        True,
        "fix it",
        "1-s-abc",
        9,
        True,
    )
    assert not presence.with_lock().busy
    settings = SnapshotSettings(max_untracked_file_bytes=5, auto_watch_seconds=0)
    changed = settings.replace(protected_dirs=(), first_capture_max_files=3)
    assert changed == SnapshotSettings(5, (), first_capture_max_files=3, auto_watch_seconds=0)


def test_journal_json_keeps_every_field_but_path_and_descriptor() -> None:
    journal = Journal("j", SHA, "t", SHA, "t", 1, session="s", path=Path("/x"), lock_fd=3)
    data = journal.to_json()
    assert list(data) == [
        *("id", "undo", "undo_tree", "target", "target_tree", "started_ms", "session"),
        *("entry", "operation", "state", "staging", "pid", "host", "failure", "recovering"),
        *("pid_start", "boot_id", "lock", "version"),
    ]
    assert data["session"] == "s" and data["version"] == 1


def test_settings_defaults_and_warnings_follow_each_sections_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(AUTO_WATCH_ENV, "0")
    assert SnapshotSettings().auto_watch_seconds == 0  # read per construction, as the factory
    warnings: list[str] = []
    snapshot = {"autoWatchSeconds": -1, "protectedDirs": "x", "maxUntrackedFileBytes": 1.5}
    settings = settings_from_mapping({"snapshot": snapshot}, warnings)
    assert settings.snapshot == SnapshotSettings()
    assert [w.split(":")[0] for w in warnings] == [
        "rewind.snapshot.maxUntrackedFileBytes",
        "rewind.snapshot.protectedDirs",
        "rewind.snapshot.autoWatchSeconds",
    ]
    assert warnings[-1].endswith("using the default 0")
