"""``scars/Household-v0`` needs no import the user has to guess: the id with its module works in a fresh
interpreter (Gymnasium 1.x imports the module named before the colon; it loads no plugins by entry point, so the
short id alone cannot work before ``scars.envs.household`` is imported — which the docs say beside it)."""

from __future__ import annotations

import subprocess
import sys


def fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_module_qualified_id_works_in_a_fresh_interpreter():
    done = fresh(
        "import gymnasium as gym\n"
        "env = gym.make('scars.envs.household:scars/Household-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "assert isinstance(obs, str) and info['admissible_commands'], info\n"
        "env2 = gym.make('scars/Household-v0')  # registered now\n"
        "print(env.spec.id, env2.spec.id)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["scars/Household-v0", "scars/Household-v0"]


def test_the_short_id_before_any_import_is_gymnasiums_namespace_error():
    done = fresh("import gymnasium as gym\ngym.make('scars/Household-v0')\n")
    assert done.returncode != 0 and "NamespaceNotFound" in done.stderr
