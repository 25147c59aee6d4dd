#!/usr/bin/env python3
"""Benchmark: what our extension adds to a later ``pi -p`` run, measured inside Pi.

Why it exists: issue 34's target "later ``pi -p`` runs (hosted by the watcher) ≤ +30 ms over no
extension". A whole run takes ~0.9-1 s and Pi's own start varies by ±40 ms from run to run, so
whole-run medians (``tools/bench_first_pi.py --later``) cannot tell +30 from +50 without hundreds
of runs. Inside one run it can be told exactly: Pi calls each event's handlers one extension after
another, in load order, and waits for each. Two marker extensions, one loaded before ours and one
after, note when each handler starts (and when each module loads); the difference between them is
the time Pi spent in ours, event by event, in the same run. Beside them, runs with the two markers
alone (no extension of ours) give Pi's own exit after ``session_shutdown``, so that the time our
connection's close adds there is counted too.

Added per run = (our module's load and set-up: marker after − marker before, less the same in the
markers-only run, where Pi loads the second marker alone between them) + the union over
events of [before, after] (a union: Pi's print mode emits ``session_shutdown`` while the last
events are still queued, and our handler waits for them) + (Pi's exit after the last
``session_shutdown`` handler − the same without ours). Printed as
medians per part, with the bridge's own time for the same events (``REWIND_TRACE``) as the floor
of the waits: what remains above it is the pipe, the extension and Pi's event loop.

Setup per tree: every watcher of the repository stopped, one first run that starts the watcher and
one that waits for its first full scan (not measured), then ``--runs`` measured runs, each after
:data:`LATER_PAUSE_S` (a person's next prompt; the watcher's idle-time verification is over then),
each a prompt with two tool turns that write a file (as ``tools/bench_first_pi.py``). The
markers-only runs are interleaved with them. ``--compare OLD_CHECKOUT`` repeats it for an older tree
(``git archive <commit>`` unpacked and compiled: its extension and its bridge).

Not a test: nothing here asserts a time. Run it under the bench lock, with no other load.

Usage: python tools/bench_pi_inside.py REPO [--runs 10] [--compare OLD_CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench_first_pi import LATER_PAUSE_S, no_watcher, run_pi

from tests.e2e.pikit import ensure_pi, pi_args, pi_env, turns, write

EVENTS = (
    "session_start",
    "before_agent_start",
    "turn_start",
    "tool_call",
    "tool_result",
    "turn_end",
    "agent_end",
    "session_shutdown",
)

MARKER = """import { appendFileSync } from "node:fs";
const file = process.env.BENCH_MARKS ?? "/dev/null";
function mark(what: string): void {
\tappendFileSync(file, `NAME ${what} ${performance.timeOrigin + performance.now()}\\n`);
}
mark("load");
export default function (pi: any): void {
\tmark("factory");
\tfor (const event of EVENTS) pi.on(event, () => { mark(event); return undefined; });
\tprocess.on("exit", () => mark("exit"));
}
"""


def write_markers(where: Path) -> tuple[Path, Path]:
    """The two marker extensions, ``before`` and ``after``."""
    paths = []
    for name in ("before", "after"):
        path = where / f"mark-{name}.ts"
        path.write_text(MARKER.replace("NAME", name).replace("EVENTS", json.dumps(list(EVENTS))))
        paths.append(path)
    return paths[0], paths[1]


def read_marks(path: Path) -> dict[tuple[str, str], list[float]]:
    marks: dict[tuple[str, str], list[float]] = defaultdict(list)
    for line in path.read_text().splitlines():
        who, what, at = line.split()
        marks[(who, what)].append(float(at))
    return marks


def one_run(
    cli: Path, repo: Path, tree: Path | None, agent: Path, markers: tuple[Path, Path], tag: str
) -> tuple[dict[tuple[str, str], list[float]], float, list[dict[str, object]]]:
    """One ``pi -p`` run with the markers around ``tree``'s extension (none: markers alone):
    its marks, its wall time in ms, and the bridge's trace lines of the run."""
    work = agent.parent
    marks, trace = work / f"marks-{tag}.log", work / "trace.jsonl"
    marks.unlink(missing_ok=True)
    before_lines = len(trace.read_text().splitlines()) if trace.exists() else 0
    argv = [*pi_args(cli, extension=False), "-e", str(markers[0])]
    if tree is not None:
        argv += ["-e", str(tree / "tools" / "pi-extension" / "rewind-ledger.ts")]
    argv += ["-e", str(markers[1])]
    env = {
        **pi_env(agent),
        "BENCH_MARKS": str(marks),
        "REWIND_TRACE": str(trace),
        "PYTHONPATH": str(tree or ROOT),
    }
    prompt = f"inside {tag} " + turns(
        [write(f"bench/inside-{tag}-a.txt", "a\n")], [write(f"bench/inside-{tag}-b.txt", "b\n")]
    )
    ms = run_pi([*argv, "-p", prompt], repo, env)
    lines = trace.read_text().splitlines()[before_lines:] if trace.exists() else []
    return read_marks(marks), ms, [json.loads(line) for line in lines]


def waits(marks: dict[tuple[str, str], list[float]]) -> dict[str, float]:
    """Per part, the time Pi spent in the extension between the markers (ms)."""
    parts = {"load": marks[("after", "load")][0] - marks[("before", "load")][0]}
    for event, i, start, end in windows(marks):
        parts[f"{event}[{i}]"] = end - start
    return parts


def windows(marks: dict[tuple[str, str], list[float]]) -> list[tuple[str, int, float, float]]:
    """Each event's ``(event, k, start, end)``: from the first marker's handler to the second's."""
    found = []
    for event in EVENTS:
        pairs = zip(marks[("before", event)], marks[("after", event)], strict=False)
        for i, (start, end) in enumerate(pairs):
            found.append((event, i, start, end))
    return found


def in_ours(marks: dict[tuple[str, str], list[float]]) -> float:
    """The time Pi spent in our extension's event handlers (ms): the union of their windows.
    A union, not a sum: Pi 0.73.1's print mode emits ``session_shutdown`` while the last
    ``turn_end`` and ``agent_end`` are still queued, and our shutdown handler waits for them
    (tools/pi-extension/rewind-ledger.ts), so its window holds theirs; summed, they would be
    counted twice."""
    spans = sorted((start, end) for _, _, start, end in windows(marks))
    total, reach = 0.0, float("-inf")
    for start, end in spans:
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def exit_after_shutdown(marks: dict[tuple[str, str], list[float]], ended_at: float) -> float:
    """From the end of every extension's ``session_shutdown`` (the second marker's, which Pi
    calls after ours) to the process's end as this script saw it (ms, wall clock)."""
    return ended_at - marks[("after", "session_shutdown")][0]


def measure(
    name: str, tree: Path, args: argparse.Namespace, cli: Path, markers: tuple[Path, Path]
) -> dict[str, list[float]]:
    no_watcher(args.repo)
    work = Path(tempfile.mkdtemp(prefix=f"bench-pi-inside-{name.replace(' ', '-')}-"))
    agent, bare = work / "agent", work / "bare" / "agent"
    for warm in range(2):  # starts the watcher; then waits for its first full scan
        one_run(cli, args.repo, tree, agent, markers, f"warm{warm}")
        time.sleep(LATER_PAUSE_S)
    rows: dict[str, list[float]] = defaultdict(list)
    for k in range(args.runs):
        bare_marks, _, _ = one_run(cli, args.repo, None, bare, markers, f"bare{k}")
        bare_exit = exit_after_shutdown(bare_marks, time.time() * 1000)
        # Between the markers' loads Pi also loads the second marker: its share, taken from
        # the markers-only run, is not ours.
        bare_load = waits(bare_marks)["load"]
        time.sleep(LATER_PAUSE_S)
        marks, ms, trace = one_run(cli, args.repo, tree, agent, markers, f"run{k}")
        ours_exit = exit_after_shutdown(marks, time.time() * 1000)
        parts = waits(marks)
        parts["load"] -= bare_load
        for part, value in parts.items():
            rows[part].append(value)
        rows["exit after session_shutdown, over markers alone"].append(ours_exit - bare_exit)
        added = parts["load"] + in_ours(marks) + ours_exit - bare_exit
        rows["added (load + union of waits + exit)"].append(added)
        rows["the bridge's own time (trace)"].append(sum(float(str(e["ms"])) for e in trace))
        rows["whole run"].append(ms)
        print(
            f"  {name} run {k}: added {rows['added (load + union of waits + exit)'][-1]:.1f} ms",
            flush=True,
        )
        time.sleep(LATER_PAUSE_S)
    no_watcher(args.repo)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--compare", type=Path, default=None)
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.pop("REWIND_AUTO_WATCH", None)  # the default: the first bridge starts a watcher
    cli = ensure_pi()
    markers = write_markers(Path(tempfile.mkdtemp(prefix="bench-pi-inside-markers-")))
    trees = {"this tree": ROOT}
    if args.compare is not None:
        trees["compare"] = args.compare.resolve()
    results = {name: measure(name, tree, args, cli, markers) for name, tree in trees.items()}
    one, five, fifteen = os.getloadavg()
    print(
        f"\n== later pi -p runs, hosted by the watcher: what our extension adds inside Pi,"
        f" {args.repo} (medians of {args.runs}; load {one:.2f} {five:.2f} {fifteen:.2f})"
    )
    names = list(results)
    parts = [p for p in results[names[0]] if all(p in results[n] for n in names)]
    print(f"{'part':<50}" + "".join(f"{n:>14}" for n in names))
    for part in parts:
        values = [statistics.median(results[n][part]) for n in names]
        if max(abs(v) for v in values) < 0.05 and "[" in part:
            continue  # an event we do nothing with (tool_call, tool_result)
        print(f"{part:<50}" + "".join(f"{v:11.1f} ms" for v in values))
    print("target: added ≤ 30 ms (issue 34, later runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
