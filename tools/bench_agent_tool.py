#!/usr/bin/env python3
"""Benchmark: the model's ``rewind`` tool (issue 36) at 100k files, inside a real bridge.

Why it exists: issue 36's target, "a ``restore`` or ``diff`` call of the tool at 100k files costs
≤ 50 ms inside the bridge". A call of the tool is one ``rewind_tool`` event on the bridge's pipe
(tools/pi-extension/rewind-tool.ts); this times that round trip on a real ``rewind serve
--stdio`` (driven as :class:`tests.bridgekit.FakePi` drives it: the session held in memory, the
bridge's ``session`` calls answered), and the bridge's own share of it (``REWIND_TRACE``: the
event's time in the bridge, less the time it waited for the host's replies).

Setup: a copy of a 100k-file repository (``--repo``, changed by the run: agent and user edits
are appended to a few files and taken back); the bridge runs with ``REWIND_SERVED=0`` (its own
change feed, no shared watcher) and a UI (so its feed starts, as in an interactive Pi). A
session of a few prompts, then a prompt whose first turn calls ``checkpoint``.

Each round: the user appends to one file (outside any turn: the user's work); a prompt whose
turn 0 has the agent append to ``k`` files (1 or 20, alternating), then turns that call the tool:
``diff`` (of the checkpoint), ``restore`` (to it), ``list``, ``checkpoint``; then, in the same
round, the agent's edits again and the reference the model would use without the tool: ``git
diff`` then ``git checkout -- <the k files>`` (two processes; the checkpoint's content of those
files is the index's, so the two paths end in the same files). Then the floors: ``ping``'s round
trip on the same bridge, and :func:`bench_floors.floors` (stat scan, ``git status``, a blob
write), with ``os.getloadavg()``.

The bridges: after the session is built, ``--bridges`` times a fresh bridge resumes the same
session (``session_start`` ``resume``), waits ``--settle`` seconds (the model calls the tool
after a prompt has started, not at once), and plays one round whose first tool call is timed
apart as the first call of a fresh bridge (``diff`` and ``restore`` first, in turn), then two
rounds (``k`` = 1 and 20) whose calls are the later ones. With ``--old DIR`` (another version's
``ledger`` package, e.g. ``git archive REV ledger | tar -x -C DIR``) its bridges alternate with
this checkout's on the same session and repository, and each table gives new/old.

Every restore is checked: the agent's files are back at the checkpoint, the user's file is left
alone and named. Medians over the bridges. Not a test: nothing asserts a time.

Usage::

    cp -a /tmp/bench-100k/feed-100000 /tmp/me-100k && rm -rf /tmp/me-100k/.git/pi-rewind/journal/*
    flock /work/reports/bench.lock python tools/bench_agent_tool.py --repo /tmp/me-100k \
        --bridges 10 --old /tmp/old-code
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench_floors import child_env, describe, floors, load, medians, precompile

TARGET_MS = 50.0
SIZES = (1, 20)
LABEL = "before the refactor"
USER_FILE = "d0095/s0000/f000.txt"


@dataclass
class Call:
    """One tool call: its round trip, and the bridge's share from the trace."""

    rtt: float
    bridge: float
    host: float


@dataclass
class Samples:
    calls: dict[str, list[Call]] = field(default_factory=dict)
    refs: dict[str, list[float]] = field(default_factory=dict)
    ping: list[float] = field(default_factory=list)

    def add(self, name: str, call: Call) -> None:
        self.calls.setdefault(name, []).append(call)

    def ref(self, name: str, ms: float) -> None:
        self.refs.setdefault(name, []).append(ms)


class Bench:
    def __init__(self, repo: Path, agent: Path, trace: Path) -> None:
        self.repo = repo
        self.agent = agent
        self.trace = trace
        names = subprocess.run(
            ["git", "ls-files", "-z", "d0090"], cwd=repo, capture_output=True, check=True
        ).stdout.split(b"\0")
        self.pool = [n.decode() for n in names if n.endswith(b".txt")][: max(SIZES)]
        self.original = {p: (repo / p).read_bytes() for p in self.pool}
        self.by_code: dict[str, Samples] = {}
        self.floor_samples: list[dict[str, float]] = []
        self.code = "new"
        self.pi: Any = None
        self.rounds = 0

    @property
    def samples(self) -> Samples:
        return self.by_code.setdefault(self.code, Samples())

    # --- the bridge ---------------------------------------------------------------------------

    def start(
        self,
        reason: str,
        entries: list[dict[str, Any]] | None = None,
        *,
        code: tuple[str, Path] = ("new", ROOT),
    ) -> None:
        """A bridge running ``code`` (``(name, the directory its ledger package is in)``)."""
        from tests.bridgekit import FakePi

        old = self.pi
        if old is not None:
            old.close()
        self.code = code[0]
        paths = [str(code[1]), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
        pi = FakePi(
            self.repo,
            self.agent,
            entries=entries,
            session_file=old.session_file if old is not None else None,
        )
        if old is not None:
            pi.header = old.header
            pi._ids = old._ids
        reply = pi.event("session_start", {"reason": reason})
        if reply.error is not None:
            raise SystemExit(f"session_start failed: {reply.error}")
        self.pi = pi

    def _trace_tail(self, lines: int) -> dict[str, Any]:
        """The trace's line for the event just answered (written right after its answer)."""
        import orjson

        for _ in range(2000):
            text = self.trace.read_bytes() if self.trace.exists() else b""
            for line in text.split(b"\n")[lines:]:
                if line.strip() and (found := orjson.loads(line))["event"] == "rewind_tool":
                    return found  # an earlier event's line may still come first
            time.sleep(0.001)
        raise SystemExit("the bridge's trace has no line for the tool's call")

    def _trace_lines(self) -> int:
        return self.trace.read_bytes().count(b"\n") if self.trace.exists() else 0

    def tool(self, payload: dict[str, Any]) -> tuple[dict[str, Any], Call]:
        """One call of the tool in the current turn, as Pi runs it (tests/integration/
        test_agent_rewind_tool.py's ``tool_call``), timed."""
        pi = self.pi
        lines = self._trace_lines()
        started = time.perf_counter()
        reply = pi.event("rewind_tool", payload)
        rtt = (time.perf_counter() - started) * 1000.0
        if reply.error is not None:
            raise SystemExit(f"rewind_tool {payload} failed: {reply.error}")
        traced = self._trace_tail(lines)
        assert traced["event"] == "rewind_tool", traced
        data = reply.result
        if data.get("refused"):
            raise SystemExit(f"rewind_tool {payload} refused: {data['text']}")
        pi._append(
            {
                "type": "message",
                "message": {
                    "role": "toolResult",
                    "toolCallId": f"call-{len(pi.entries)}",
                    "toolName": "rewind",
                    "content": [{"type": "text", "text": data["text"]}],
                    "details": data["details"],
                    "isError": False,
                    "timestamp": 3,
                },
            }
        )
        if "label" in data:
            pi._append(
                {
                    "type": "label",
                    "targetId": data["label"]["entryId"],
                    "label": data["label"]["label"],
                }
            )
        return data, Call(rtt, traced["ms"] - traced["hostMs"], traced["hostMs"])

    def turn(self, index: int) -> None:
        if index:
            self.pi.event("turn_start", {"turnIndex": index})
        self.pi.assistant(f"step {index}")

    def turn_end(self, index: int) -> None:
        self.pi.event("turn_end", {"turnIndex": index, "role": "assistant"})

    def begin(self, text: str) -> None:
        self.pi.event("before_agent_start", {"prompt": text})
        self.pi.event("turn_start", {"turnIndex": 0})
        self.pi.user(text)

    def end(self) -> None:
        self.pi.event("agent_end", {})

    # --- the session --------------------------------------------------------------------------

    def agent_edits(self, k: int) -> None:
        for path in self.pool[:k]:
            with open(self.repo / path, "ab") as f:
                f.write(f"agent edit, round {self.rounds}\n".encode())

    def user_edit(self) -> None:
        with open(self.repo / USER_FILE, "ab") as f:
            f.write(f"the user's line, round {self.rounds}\n".encode())

    def build(self, prompts: int) -> None:
        self.start("startup")
        time.sleep(3.0)  # the bridge's feed walks the tree and takes its base
        for n in range(prompts):
            path = self.repo / f"d0080/s00{n % 10:02d}/f000.txt"
            self.pi.prompt(
                f"prompt {n}", lambda p=path, n=n: p.write_text(p.read_text() + f"prompt {n}\n")
            )
        self.begin("refactor, carefully")
        self.turn(0)
        data, _ = self.tool({"action": "checkpoint", "label": LABEL})
        self.turn_end(0)
        self.end()
        print(f"  checkpoint {data['details']['point']['id']} after {prompts} prompts", flush=True)

    def check_restored(self, data: dict[str, Any], k: int) -> None:
        restored = sorted(f["path"] for f in data["details"]["restored"])
        left = [f["path"] for f in data["details"]["leftAlone"]]
        if restored != sorted(self.pool[:k]) or USER_FILE not in left:
            raise SystemExit(f"unexpected restore: restored {restored}, left alone {left}")
        for path in self.pool:
            if (self.repo / path).read_bytes() != self.original[path]:
                raise SystemExit(f"{path} is not back at the checkpoint")

    def round(self, k: int, *, first: str | None = None) -> None:
        """One round (see the module); ``first``: the action this fresh bridge calls first,
        timed as ``first <action>`` (the round's other calls are not kept)."""
        self.rounds += 1
        s = self.samples
        self.user_edit()
        self.begin(f"round {self.rounds}")
        self.turn(0)
        self.agent_edits(k)
        self.turn_end(0)
        keep = first is None
        order = ["diff", "restore"] if first != "restore" else ["restore"]
        for i, action in enumerate(order, start=1):
            self.turn(i)
            data, call = self.tool({"action": action, "point": LABEL})
            self.turn_end(i)
            if i == 1 and first is not None:
                s.add(f"first {action}, {k} file(s)", call)
            elif keep:
                s.add(f"{action}, {k} file(s)", call)
            if action == "diff":
                mine = [f["path"] for f in data["details"]["files"] if f["restores"]]
                if sorted(mine) != sorted(self.pool[:k]):
                    raise SystemExit(f"unexpected diff: {mine}")
            else:
                self.check_restored(data, k)
        if keep:
            self.turn(3)
            _, call = self.tool({"action": "list"})
            s.add("list", call)
            _, call = self.tool({"action": "checkpoint", "label": f"round {self.rounds}"})
            s.add("checkpoint", call)
            self.turn_end(3)
        self.end()
        if not keep:
            return
        # The reference: the agent's edits again (its own prompt), then what the model would do
        # without the tool.
        self.begin(f"round {self.rounds}, by hand")
        self.turn(0)
        self.agent_edits(k)
        self.turn_end(0)
        env = child_env()
        started = time.perf_counter()
        subprocess.run(["git", "diff"], cwd=self.repo, env=env, capture_output=True, check=True)
        middle = time.perf_counter()
        subprocess.run(
            ["git", "checkout", "--", *self.pool[:k]], cwd=self.repo, env=env, check=True
        )
        done = time.perf_counter()
        s.ref(f"diff, {k} file(s)", (middle - started) * 1000.0)
        s.ref(f"restore, {k} file(s)", (done - middle) * 1000.0)
        self.end()
        for path in self.pool:
            if (self.repo / path).read_bytes() != self.original[path]:
                raise SystemExit(f"git checkout did not bring {path} back")
        for _ in range(10):
            started = time.perf_counter()
            self.pi.event("ping", {})
            s.ping.append((time.perf_counter() - started) * 1000.0)
        self.floor_samples.append(floors(self.repo))


def _med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(by_code: dict[str, Samples], floor_samples: list[dict[str, float]]) -> None:
    floor = medians(floor_samples)
    print(f"\nfloors (medians of {len(floor_samples)} rounds): {describe(floor)}")
    print(f"{load()}")
    for code, s in by_code.items():
        print(
            f"\ncode: {code}   ping round trip {_med(s.ping):.2f} ms (median of {len(s.ping)})\n"
            f"  {'call':26s} {'n':>3s} {'round trip':>11s} {'in bridge':>10s} {'host':>7s}"
            f" {'reference':>10s} {'ratio':>6s} {'/stat scan':>10s}  target ≤{TARGET_MS:.0f} ms"
            + ("   vs new" if code != "new" else "")
        )
        for name, calls in sorted(s.calls.items()):
            rtt = _med([c.rtt for c in calls])
            inside = _med([c.bridge for c in calls])
            host = _med([c.host for c in calls])
            base = name.removeprefix("first ")
            ref = _med(s.refs.get(base, []))
            ratio = f"{rtt / ref:6.2f}" if ref == ref else "     -"
            refs = f"{ref:7.1f} ms" if ref == ref else "         -"
            target = ""
            if base.startswith(("diff", "restore")):
                target = "ok" if inside <= TARGET_MS else "MISSED"
            versus = ""
            if code != "new" and name in by_code.get("new", Samples()).calls:
                ours = _med([c.bridge for c in by_code["new"].calls[name]])
                versus = f"   new/{code} {ours / inside:5.2f}"
            print(
                f"  {name:26s} {len(calls):3d} {rtt:8.1f} ms {inside:7.1f} ms {host:4.1f} ms "
                f"{refs} {ratio} {rtt / floor['stat scan']:10.2f}  {target:6s}{versus}"
            )
        for name, values in sorted(s.refs.items()):
            print(f"  reference {name:16s}: {', '.join(f'{v:.0f}' for v in values)} ms")
    print(
        "\n(in bridge: the event's time in the bridge less its waits for the host (REWIND_TRACE);"
        "\n reference: `git diff` for a diff, `git checkout -- files` for a restore, processes;"
        "\n ratio: round trip / reference; /stat scan: round trip / the stat scan floor)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a 100k-file repository copy")
    parser.add_argument("--bridges", type=int, default=10, help="fresh bridges (per code)")
    parser.add_argument("--prompts", type=int, default=4, help="prompts before the checkpoint")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds after a fresh start")
    parser.add_argument(
        "--old",
        type=Path,
        help="a directory holding another version's ledger package: its bridges alternate "
        "with this checkout's on the same session (e.g. `git archive REV ledger | tar -x`)",
    )
    args = parser.parse_args(argv)
    precompile()
    codes: list[tuple[str, Path]] = [("new", ROOT)]
    if args.old is not None:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(args.old / "ledger")],
            env=child_env(),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        codes.append(("old", args.old.resolve()))
    with tempfile.TemporaryDirectory(prefix="bench-agent-tool-") as tmp:
        trace = Path(tmp) / "trace.jsonl"
        env = child_env(
            {"REWIND_SERVED": "0", "REWIND_TRACE": str(trace), "REWIND_AUTO_WATCH": "0"}
        )
        os.environ.clear()  # the bridge (FakePi) takes this environment
        os.environ.update(env)
        base_path = env.get("PYTHONPATH", "")
        bench = Bench(args.repo, Path(tmp) / "agent", trace)
        print(f"{load()}; repository {args.repo}; codes {codes}", flush=True)
        try:
            bench.build(args.prompts)
            for n in range(args.bridges * len(codes)):
                code = codes[n % len(codes)]
                os.environ["PYTHONPATH"] = base_path
                bench.start("resume", entries=list(bench.pi.entries), code=code)
                time.sleep(args.settle)
                first = "diff" if (n // len(codes)) % 2 == 0 else "restore"
                bench.round(20, first=first)
                for k in SIZES:  # later calls in the same bridge, with the reference and floors
                    bench.round(k)
                print(f"  bridge {n + 1} ({code[0]}, first {first}): {load()}", flush=True)
        finally:
            if bench.pi is not None:
                bench.pi.close()
        report(bench.by_code, bench.floor_samples)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
