"""Every code example of README.md and the docs site runs, and prints exactly what its page says it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support.doc_examples import ROOT, Example, documentation_pages, examples, run_page

PAGES = [p for p in documentation_pages() if examples(p)]
SLOW_PAGES = {"docs/sweeps.md"}
"""Pages whose examples start Ray (a Tune sweep, ~20 s): CI's slow run executes them."""


def run_pages(pages: list[str]) -> dict:
    """The pages' examples in one fresh interpreter (so no test's imports or registrations leak into them)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests"))
    done = subprocess.run(
        [sys.executable, "-m", "support.doc_examples", *pages],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def ran() -> dict:
    return run_pages(
        [p.relative_to(ROOT).as_posix() for p in PAGES if p.relative_to(ROOT).as_posix() not in SLOW_PAGES]
    )


def check_page(results: list[dict], page: str) -> None:
    items = examples(ROOT / page)
    assert len(results) == len(items), results[-1]["error"]
    for item, result in zip(items, results, strict=True):
        assert result["error"] is None, f"{page}:{item.line}\n{result['error']}"
        if item.expected is not None:
            assert result["stdout"] == item.expected, f"{page}:{item.line}"


def test_the_pages_with_examples_are_the_expected_ones():
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert {"README.md", "docs/runtime.md", "docs/dsl.md", "docs/getting_started.md"} <= names
    assert {"docs/worlds/household.md", "docs/worlds/commons.md", "docs/worlds/aquifer.md"} <= names


@pytest.mark.parametrize(
    "page",
    [p.relative_to(ROOT).as_posix() for p in PAGES if p.relative_to(ROOT).as_posix() not in SLOW_PAGES],
)
def test_every_example_of_the_page_runs_and_prints_what_the_page_states(ran, page):
    check_page(ran[page], page)


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(SLOW_PAGES))
def test_every_example_of_a_slow_page_runs_and_prints_what_the_page_states(page):
    check_page(run_pages([page])[page], page)


def test_the_checker_fails_on_a_wrong_stated_output_and_on_an_error():
    wrong = Example("x.md", 1, "print(1 + 1)\n", "3\n")
    assert run_page([wrong])[0]["stdout"] != wrong.expected
    failing = run_page([Example("x.md", 1, "raise ValueError('no')\n", None)])
    assert "ValueError: no" in failing[0]["error"]


def test_a_stated_output_is_the_text_block_after_prints_only(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "```python\nprint('a')\n```\n\nprints\n\n```text\na\n```\n\n"
        "```python\nprint('b')\n```\n\nsee also\n\n```text\nunrelated\n```\n"
    )
    found = examples(page, root=tmp_path)
    assert [e.expected for e in found] == ["a\n", None]
