"""Every example under examples/ runs (so CI runs them) and shows what it claims: blocked calls refused, allowed
ones through, the ledger verified. Examples that need an optional extra are skipped without it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = {
    "quickstart.py": (
        (),
        [],  # its whole output is the one docs/runtime.md states (test_the_quick_start_does_what_the_docs_show)
    ),
    "vllm_logits.py": ((), ["generated: ls /tmp -> ('shell', {'cmd': 'ls'})"]),
    "openai_middleware.py": (
        ("openai",),
        ["returned calls: ['get_weather', 'safe_refusal']", "c0 -> sunny in Oslo"],
    ),
    "mcp_gate.py": (
        ("mcp",),
        ["offered: ['read_file', 'crash']", "delete_file: ERROR refused", "fail closed"],
    ),
    "hf_logits.py": (("torch", "transformers"), ["it generated: search cats"]),
}


def test_every_example_is_listed():
    assert {p.name for p in (ROOT / "examples").glob("*.py")} == {*EXAMPLES, "mcp_upstream.py"}


SLOW = {
    "hf_logits.py",
    "mcp_gate.py",
}  # 10-17 s (torch import; three Python processes): CI's slow run has them


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in sorted(EXAMPLES)]
)
def test_the_example_runs_and_shows_what_it_claims(name):
    needs, expected = EXAMPLES[name]
    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for line in expected:
        assert line in done.stdout, (line, done.stdout)


def test_the_docs_quick_start_is_the_example():
    code = (ROOT / "examples" / "quickstart.py").read_text().split("\n", 2)[2].strip("\n")
    assert "```python\n" + code + "\n```" in (ROOT / "docs" / "runtime.md").read_text()


def test_the_quick_start_does_what_the_docs_show():
    """The behaviour, not its wording: the refund over the limit that was reported is refused before the tool runs,
    the others go through, H refuses the guest, and the admitted rule is the one printed and the one in force."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=ROOT,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    admitted = lines[3].split("| admitted: ", 1)[1]
    assert lines[:3] == ["refunded 20 on A1", "refunded 35 on A2", "refunded 5000 on A3"]
    assert admitted == 'if action.amount == 5000 then forbid_tool_arg("refund", "order", "A3")'
    assert lines[4].startswith("blocked: tool call 'refund' blocked")  # the same refund again: refused
    assert lines[5:7] == ["refunded 40 on A4", "refunded 5001 on A5"]  # the instance, not the limit
    assert lines[7].startswith("guest: tool call 'refund' blocked") and "H:" in lines[7]
    assert lines[8] == f"ledger verifies: True | active scars: {[admitted]!r}"
    assert len(lines) == 9
