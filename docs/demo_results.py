"""Refresh the demo's tables the tier pages include: ``python docs/demo_results.py runs/demo-<time>``.

Copies the ``results.md`` of a ``scars demo`` folder (tier 1 at its top, ``tier2/``, ``tier3/``) into
``docs/results/tier{1,2,3}.md`` — headings moved down two levels so they sit inside a tier page, images copied
beside them — and writes ``docs/results/demo.md`` (the run's commit, seed and time from its ``provenance.json``). The
tier pages include these files (``--8<--``), so the figures they show are the run's, never retyped.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
SOURCES = {"tier1": Path("results.md"), "tier2": Path("tier2/results.md"), "tier3": Path("tier3/results.md")}
IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")


def converted(text: str, tier: str, source_dir: Path, out: Path) -> str:
    """The page's Markdown with headings two levels down and its images copied to ``out`` as ``<tier>_<name>``."""

    def image(match: re.Match) -> str:
        name = f"{tier}_{Path(match.group(2)).name}"
        shutil.copyfile(source_dir / match.group(2), out / name)
        return f"![{match.group(1)}](../results/{name})"

    text = re.sub(r"^(#{1,4}) ", lambda m: "#" * (len(m.group(1)) + 2) + " ", text, flags=re.M)
    return IMAGE.sub(image, text)


def refresh(demo: Path, out: Path = DOCS / "results") -> list[Path]:
    """Write the tier files and ``demo.md`` from the demo folder ``demo``; returns the files written."""
    provenance = json.loads((demo / "provenance.json").read_text(encoding="utf-8"))
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for tier, rel in SOURCES.items():
        source = demo / rel
        target = out / f"{tier}.md"
        target.write_text(
            converted(source.read_text(encoding="utf-8"), tier, source.parent, out), encoding="utf-8"
        )
        written.append(target)
    git = provenance.get("git", {})
    commit = git.get("commit", "unknown") if isinstance(git, dict) else str(git)
    config = provenance.get("config", {})
    note = out / "demo.md"
    note.write_text(
        f"`scars demo --seed {config.get('seed', 0)}`, started {provenance.get('started', 'unknown')}, "
        f"commit {str(commit)[:7]}\n",
        encoding="utf-8",
    )
    return [*written, note]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python docs/demo_results.py DEMO_FOLDER")
    for path in refresh(Path(sys.argv[1])):
        print(path)
