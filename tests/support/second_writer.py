"""A real second writer of a run's ledger (issue 41 #4): ``scars ledger retire`` in a process of its own, for the
tests that a foreign write stops a run at the next decision (tiers 1, 2 and 3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def retire_from_another_process(ledger_path: Path | str, scar_id: str) -> None:
    """Retire ``scar_id`` in the ledger at ``ledger_path`` from another process (the CLI), which must succeed."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
    }
    done = subprocess.run(
        [sys.executable, "-m", "scars.experiments.cli", "ledger", "retire", str(ledger_path), scar_id]
        + ["--reason", "retired by another process"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
