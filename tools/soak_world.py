"""The soak's world (tools/bench_soak.py): a seeded fake repository and the agent's and the
user's changes to it, prompt after prompt.

Why it exists apart: the soak drives and measures; this only builds and changes files, and
other benches or one-off investigations (the watcher's memory, docs/soak.md) can reuse it.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

PER_DIR = 20
WORDS = (  # noqa: SIM905 (one line, not 32)
    "def return self value index items result path data config error open close read write for "
    "while if else import from class None True False list dict str int async await"
).split()

# --- the work tree --------------------------------------------------------------------------


def text(rng: random.Random, lines: int) -> str:
    return "".join(
        f"{' ' * (4 * rng.randint(0, 2))}{' '.join(rng.choices(WORDS, k=rng.randint(2, 9)))}\n"
        for _ in range(lines)
    )


def build_tree(work: Path, files: int, rng: random.Random) -> list[str]:
    """``files`` text files of 10–60 lines, ``PER_DIR`` per directory, plus a 1 MB binary."""
    paths = []
    for i in range(files):
        d = f"src/m{i // (PER_DIR * 40):03d}/p{(i // PER_DIR) % 40:02d}"
        if i % PER_DIR == 0:
            (work / d).mkdir(parents=True, exist_ok=True)
        rel = f"{d}/f{i % PER_DIR:02d}.txt"
        (work / rel).write_text(text(rng, rng.randint(10, 60)))
        paths.append(rel)
    (work / "assets").mkdir()
    (work / "assets" / "blob.bin").write_bytes(rng.randbytes(1 << 20))
    (work / ".gitignore").write_text("*.log\nbuild/\n")
    return paths


class Mutator:
    """The agent's (and the user's) changes to the tree, seeded; keeps the list of text files."""

    def __init__(self, work: Path, paths: list[str], rng: random.Random, gen_every: int) -> None:
        self.work, self.paths, self.rng, self.gen_every = work, paths, rng, gen_every
        self.counter = 0
        self.generation = 0
        self.gen_pending = False
        self.avoid: set[int] = set()
        """Prompts with no generated turn: those a checkpoint's restore goes back over."""

    def _take(self) -> str:
        i = self.rng.randrange(len(self.paths))
        self.paths[i], self.paths[-1] = self.paths[-1], self.paths[i]
        return self.paths.pop()

    def edit(self, rel: str) -> None:
        path = self.work / rel
        lines = path.read_text().splitlines(keepends=True)
        at = self.rng.randrange(len(lines) + 1)
        if lines and at < len(lines) and self.rng.random() < 0.7:
            lines[at] = text(self.rng, 1)
        else:
            lines.insert(at, text(self.rng, self.rng.randint(1, 4)))
        path.write_text("".join(lines))

    def turn(self, prompt: int) -> None:
        rng = self.rng
        for rel in rng.sample(self.paths, min(len(self.paths), rng.randint(1, 10))):
            self.edit(rel)
        if rng.random() < 0.30:
            for _ in range(rng.randint(1, 3)):
                self.counter += 1
                d = Path(rng.choice(self.paths)).parent
                rel = f"{d}/n{self.counter}.txt"
                (self.work / rel).write_text(text(rng, rng.randint(5, 40)))
                self.paths.append(rel)
        if rng.random() < 0.10 and len(self.paths) > 10:
            (self.work / self._take()).unlink()
        if rng.random() < 0.08 and len(self.paths) > 10:
            old = self._take()
            self.counter += 1
            new = f"{Path(rng.choice(self.paths)).parent}/r{self.counter}.txt"
            (self.work / old).rename(self.work / new)
            self.paths.append(new)
        if rng.random() < 0.02:
            (self.work / "assets" / "blob.bin").write_bytes(rng.randbytes(1 << 20))
        if self.gen_every and prompt % self.gen_every == 0:
            self.gen_pending = True
        # Never within the prompts a checkpoint's restore goes back over: its time would then be
        # that of 400 files; the turn comes right after the checkpoint instead.
        if self.gen_pending and prompt not in self.avoid:
            self.gen_pending = False
            self.generated()

    def generated(self) -> None:
        """A turn that writes 400 files (a code generator): the previous generation replaced."""
        self.generation += 1
        gen = self.work / "gen"
        shutil.rmtree(gen, ignore_errors=True)
        for i in range(400):
            d = gen / f"g{i // 50}"
            if i % 50 == 0:
                d.mkdir(parents=True)
            body = text(random.Random(i), 20)  # mostly the same as last time, as generators are
            (d / f"model{i:03d}.txt").write_text(f"// generation {self.generation}\n{body}")

    def user_edit(self) -> None:
        self.edit(self.rng.choice(self.paths))
