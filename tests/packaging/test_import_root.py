"""The installed code has one import root, ``scars``: the five top-level folders become ``scars.agents``,
``scars.envs``, ``scars.disequilibrium``, ``scars.synthesis`` and ``scars.experiments``, so a user's own ``agents``
(or ``envs``, ``experiments``, ``synthesis``) package neither shadows the testbed's nor is shadowed by it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("agents", "disequilibrium", "envs", "experiments", "synthesis")


def test_every_package_folder_is_installed_under_the_one_import_root():
    """pyproject lists its packages by hand (a package-dir mapping cannot be found automatically): a folder with an
    ``__init__.py`` that is missing from the list would silently be left out of the wheel."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        "scars." + ".".join(p.parent.relative_to(ROOT).parts)
        for folder in FOLDERS
        for p in (ROOT / folder).rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert set(config["packages"]) == on_disk
    assert config["package-dir"] == {f"scars.{f}": f for f in FOLDERS}
    for folder in FOLDERS:
        assert (ROOT / folder / "py.typed").is_file(), folder


def test_no_module_imports_the_folders_by_their_bare_names():
    """Every import names the root (``from scars.agents …``): a bare ``from agents …`` would resolve to whatever
    ``agents`` package is first on the user's path."""
    import ast

    offenders = []
    for folder in (*FOLDERS, "tests", "benchmarks", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and node.level == 0
                    else []
                )
                offenders += [
                    f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in FOLDERS
                ]
    assert offenders == []


def test_the_wheel_installs_beside_a_user_package_named_agents(tmp_path):
    """Build the wheel, install it (no dependencies: they come from this venv's site-packages) into a folder of its
    own, next to a user project with its own ``agents`` and ``envs`` packages, and import both in one interpreter
    started without ``site`` (so the editable install of this checkout is not on the path)."""
    wheel_dir, target, user = tmp_path / "wheel", tmp_path / "installed", tmp_path / "user"
    source = tmp_path / "source"  # a copy: building in place would write build/ into the checkout
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(".venv", ".git", "build", "runs", "*.egg-info", "__pycache__", "tests"),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheel_dir), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheel_dir.glob("scars_testbed-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.split("/")[0] in FOLDERS], "a bare top-level package was installed"
    assert "scars/envs/household/core_schema.dsl" in names and "scars/agents/py.typed" in names
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    for package in ("agents", "envs"):
        (user / package).mkdir(parents=True)
        (user / package / "__init__.py").write_text(f"OWNER = 'user {package}'\n")
    probe = (
        "import agents, envs\n"
        "from scars.agents.runtime import open_gate\n"
        "import scars.envs.household, scars.agents.runtime as rt\n"
        "assert agents.OWNER == 'user agents' and envs.OWNER == 'user envs', (agents, envs)\n"
        f"assert rt.__file__.startswith({str(target)!r}), rt.__file__\n"
        "import gymnasium as gym\n"
        "gym.make('scars/Household-v0').reset(seed=0)\n"
        "print('ok')\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(user), str(target), sysconfig.get_paths()["purelib"]]),
    }
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe], cwd=user, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
