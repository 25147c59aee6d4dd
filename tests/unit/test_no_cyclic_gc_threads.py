"""The collector pause of session parsing is shared by threads (ledger/session/parse.py).

A bridge parses sessions on several threads at once: the startup sweep's session scan (retention
is on by default) beside the events' own reads, and a watcher's hosted sessions and served
commands side by side. Each parse pauses the cyclic collector (``no_cyclic_gc``). A pause that
remembered "was it on?" per thread could leave the collector off for the rest of the process: a
thread that read "off" (another thread's pause) and disabled it only after that other thread had
switched it back on never switched it on again. Measured before the fix: two threads entering
the pause 3,000 times each left the collector off in 4 of 20 runs.

These tests build both interleavings with real threads and events, not timing.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator

import pytest

from ledger.session import parse
from ledger.session.parse import no_cyclic_gc

WAIT_S = 30.0


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()  # never leave the test process without its collector


def _inside(entered: threading.Event, leave: threading.Event) -> Callable[[], None]:
    def run() -> None:
        with no_cyclic_gc():
            entered.set()
            assert leave.wait(WAIT_S)

    return run


def test_the_collector_stays_paused_while_any_thread_parses_and_resumes_after_the_last() -> None:
    a_in, a_out, b_in, b_out = (threading.Event() for _ in range(4))
    a = threading.Thread(target=_inside(a_in, a_out))
    b = threading.Thread(target=_inside(b_in, b_out))
    a.start()
    try:
        assert a_in.wait(WAIT_S)
        b.start()
        assert b_in.wait(WAIT_S)
        a_out.set()  # the first thread leaves while the second still parses
        a.join(WAIT_S)
        assert not gc.isenabled(), "a thread still parses: the collector stays paused"
    finally:
        a_out.set()
        b_out.set()
        a.join(WAIT_S)
        b.join(WAIT_S)
    assert gc.isenabled(), "the last thread out turns the collector back on"


class _SteppedGc:
    """``gc`` as ``no_cyclic_gc`` sees it, where the second thread's ``isenabled()`` answers
    only once the first thread has left its pause: the interleaving that left the collector
    off for good (the second thread read "off", the first switched it on, the second then
    switched it off and, having read "off", never on again)."""

    def __init__(
        self, second: threading.Thread, progress: threading.Event, first_left: threading.Event
    ) -> None:
        self._second = second
        self._progress = progress
        self._first_left = first_left

    def isenabled(self) -> bool:
        enabled = gc.isenabled()
        if threading.current_thread() is self._second:
            self._progress.set()
            # The first thread leaves now, between this answer and the caller's disable().
            assert self._first_left.wait(WAIT_S)
        return enabled

    def disable(self) -> None:
        gc.disable()

    def enable(self) -> None:
        gc.enable()


def test_a_thread_that_starts_parsing_as_another_finishes_never_leaves_the_collector_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a_in, a_out, a_left, b_in, b_out = (threading.Event() for _ in range(5))
    progress = threading.Event()
    """Set when the second thread asks the collector's state, or else once it is inside."""

    def first() -> None:
        _inside(a_in, a_out)()
        a_left.set()

    def second() -> None:
        with no_cyclic_gc():
            b_in.set()
            progress.set()
            assert b_out.wait(WAIT_S)

    a = threading.Thread(target=first)
    b = threading.Thread(target=second)
    monkeypatch.setattr(parse, "gc", _SteppedGc(b, progress, a_left))
    a.start()
    try:
        assert a_in.wait(WAIT_S)
        b.start()
        assert progress.wait(WAIT_S)
        a_out.set()
        assert a_left.wait(WAIT_S)
        assert b_in.wait(WAIT_S)
        b_out.set()
        b.join(WAIT_S)
    finally:
        a_out.set()
        b_out.set()
        a.join(WAIT_S)
        b.join(WAIT_S)
    assert not a.is_alive() and not b.is_alive()
    assert gc.isenabled(), "no thread parses any more: the collector must be on"
