"""The code examples of the documentation: every fenced ``python`` block of README.md and docs/**/*.md, and the
output a page states for it.

A page states a block's output by following it with a paragraph that is exactly ``prints`` and a fenced ``text``
block: the block's standard output must equal that text, line for line. A page's blocks run in order in one
namespace (as a reader runs them one after another), in a fresh temporary working folder.

``python -m support.doc_examples PAGE…`` (with ``tests`` on the path) runs the pages in one interpreter and prints
one JSON object: page → list of {"line", "expected", "stdout", "error"}.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    code: str
    expected: str | None


def documentation_pages(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown page of the site."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def examples(path: Path, root: Path = ROOT) -> list[Example]:
    """The page's ``python`` blocks, each with the output the page states for it (None: it states none)."""
    text = path.read_text(encoding="utf-8")
    blocks = list(FENCE.finditer(text))
    found = []
    for i, block in enumerate(blocks):
        if block.group(1) != "python":
            continue
        expected = None
        if i + 1 < len(blocks) and blocks[i + 1].group(1) == "text":
            between = text[block.end() : blocks[i + 1].start()].strip()
            if between == "prints":
                expected = blocks[i + 1].group(2)
        line = text.count("\n", 0, block.start()) + 1
        found.append(Example(path.relative_to(root).as_posix(), line, block.group(2), expected))
    return found


def run_page(items: list[Example]) -> list[dict]:
    """Run one page's examples in order in one namespace; the output and error of each."""
    namespace: dict = {"__name__": "__main__"}
    results = []
    for item in items:
        out = io.StringIO()
        error = None
        with contextlib.redirect_stdout(out):
            try:
                exec(compile(item.code, f"{item.page}:{item.line}", "exec"), namespace)
            except BaseException:
                error = traceback.format_exc(limit=-3)
        results.append(
            {"line": item.line, "expected": item.expected, "stdout": out.getvalue(), "error": error}
        )
        if error:
            break
    return results


def main(pages: list[str]) -> None:
    report = {}
    start = Path.cwd()
    for page in pages:
        items = examples(ROOT / page)
        with tempfile.TemporaryDirectory() as work:
            os.chdir(work)
            try:
                report[page] = run_page(items)
            finally:
                os.chdir(start)
    sys.__stdout__.write(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
