"""README.md is the five-minute page: at most 12 KB, and it starts with the two commands CI runs (.ci/run reads the
second line of its first ```bash block as the test command); everything else lives in docs/."""

from __future__ import annotations

import re
import subprocess

from support.doc_examples import ROOT

README = ROOT / "README.md"
COMMANDS = [
    "python3.11 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/scars demo",
    "python3.11 -m venv .venv && . .venv/bin/activate && pip install -e '.[test,textworld]' "
    "&& pip install --no-deps alfworld==0.4.2 && python -m pytest",
]


def test_readme_is_at_most_12_kb():
    assert len(README.read_bytes()) <= 12 * 1024


def test_readme_starts_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    first_block = re.search(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)
    assert first_block.group(1) == "bash"
    assert first_block.group(2).splitlines() == COMMANDS
    before = text[: first_block.start()]
    assert [line for line in before.splitlines() if line and not line.startswith("<!--")] == [
        "# scars testbed"
    ]


def test_ci_reads_the_test_command_from_the_readme():
    script = (ROOT / ".ci" / "run").read_text()
    extract = re.search(r"test_cmd=\$\((.*)\)\n", script).group(1)
    done = subprocess.run(["bash", "-c", extract], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == COMMANDS[1]


def test_readme_links_resolve():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert targets
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()]
    assert missing == []
