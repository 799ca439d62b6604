"""The public library imports light: ``from scars.agents.runtime import …`` loads the project's own modules, the
standard library, numpy and lark — no simulator, solver, data-frame library, tracker or deep-learning framework —
and registers no environment. Its import time is a benchmark (``benchmarks/import_time.py``, BENCHMARKS.md),
not a timed test."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

ALLOWED_THIRD_PARTY = {"numpy", "lark", "regex"}
"""``regex``: lark imports it as its faster ``re`` when it is installed (transformers, an optional extra, brings it)."""
HEAVY = (
    "gymnasium",
    "pettingzoo",
    "ortools",
    "pandas",
    "pyarrow",
    "ray",
    "wandb",
    "torch",
    "sklearn",
    "matplotlib",
)
PROBE = """
import json, sys, time
started = time.perf_counter()
from scars.agents.runtime import Gate, open_gate, ScarBlocked, Verdict
seconds = time.perf_counter() - started
top = sorted({m.split(".")[0] for m in sys.modules} - set(sys.stdlib_module_names) - {"__main__"})
registered = "gymnasium" in sys.modules and "scars/Household-v0" in sys.modules["gymnasium"].registry
print(json.dumps({"seconds": seconds, "top": top, "registered": registered}))
"""


def _probe(code: str = PROBE) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def third_party(top: list[str]) -> set[str]:
    """The top-level modules outside the standard library and the project (private helpers such as ``_cffi`` or
    ``_distutils_hack``, installed by site customisation, are not packages a user imports)."""
    return {m for m in top if not m.startswith("_") and m != "scars"}


def test_the_check_fires_on_a_heavy_import():
    loaded = _probe(
        "import json, sys; import pandas\nprint(json.dumps({'top': sorted({m.split('.')[0] for m in sys.modules})}))"
    )
    assert "pandas" in third_party(loaded["top"]) - ALLOWED_THIRD_PARTY


def test_the_public_library_loads_only_the_project_the_standard_library_numpy_and_lark():
    loaded = _probe()
    assert third_party(loaded["top"]) <= ALLOWED_THIRD_PARTY, sorted(
        third_party(loaded["top"]) - ALLOWED_THIRD_PARTY
    )
    assert not loaded["registered"]


@pytest.mark.parametrize("heavy", HEAVY)
def test_no_heavy_dependency_is_loaded(heavy):
    assert heavy not in _probe()["top"]


def test_the_public_names_are_a_short_explicit_list():
    import scars.agents.runtime as runtime

    assert len(runtime.__all__) <= 20
    assert not {"ControlPlane", "Ledger", "SchemaStore"} & set(runtime.__all__)
    for name in runtime.__all__:
        assert getattr(runtime, name) is not None


LEARNER = (
    "scars.synthesis.mcts",
    "scars.synthesis.merge",
    "scars.synthesis.objective",
    "scars.disequilibrium",
)


def _modules_after(code: str) -> set[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_package_loads_its_names_lazily_and_the_gate_loads_no_learner_nor_numpy():
    assert not {
        m for m in _modules_after("import scars.agents.runtime") if m.startswith("scars.agents.runtime.")
    }
    loaded = _modules_after(
        "from scars.agents.runtime import Gate, open_gate, AccommodationConfig\nAccommodationConfig()"
    )
    assert "scars.agents.runtime.gate" in loaded
    assert not {m for m in loaded for p in LEARNER if m == p or m.startswith(p + ".")}
    assert "numpy" not in loaded


def test_the_first_accommodated_failure_loads_the_learner(tmp_path):
    opened = (
        "from scars.agents.runtime import open_gate, Verdict\n"
        f"gate = open_gate({str(tmp_path / 'ledger.sqlite')!r}, core=[])\n"
        "@gate.tool\ndef refund(amount: int) -> str:\n    return 'ok'\n"
        "refund(20)\n"
    )
    assert "scars.synthesis.mcts" not in _modules_after(opened + "gate.close()")
    loaded = _modules_after(
        opened
        + "print(gate.report_failure({}, ('refund', {'amount': 5000}), Verdict('limit', '', 'f')).result())\n"
        "gate.close()"
    )
    assert {"scars.synthesis.mcts", "scars.disequilibrium.composite"} <= loaded
