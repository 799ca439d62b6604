"""MkDocs hooks of the documentation site (``mkdocs.yml``: ``hooks: [docs/hooks.py]``).

- The API reference reads the sources with griffe (mkdocstrings), which looks packages up by folder: the five
  top-level folders are installed as ``scars.<name>`` (pyproject's package-dir), a mapping griffe cannot follow, so
  the import root is laid out as ``build/api/scars/<name>`` symlinks to the folders before the build.
- A page under ``docs/`` that ``nav`` does not list is still in the site's navigation: it is appended to the section
  ``Studies`` (titled by its first heading), so a page added by dropping a Markdown file into ``docs/`` needs no edit
  of ``mkdocs.yml``. List it in ``nav`` to give it a place of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agents", "disequilibrium", "envs", "experiments", "synthesis")
API_ROOT = ROOT / "build" / "api"
EXTRA_SECTION = "Studies"
# included into pages (``--8<--``), not pages themselves; mkdocs.yml excludes them too
INCLUDED_ONLY = ("results/",)


def lay_out_import_root(api_root: Path = API_ROOT) -> Path:
    """``api_root/scars/<package>`` → ``ROOT/<package>`` for every top-level folder; returns ``api_root``."""
    scars = api_root / "scars"
    scars.mkdir(parents=True, exist_ok=True)
    for name in PACKAGES:
        link = scars / name
        if link.is_symlink() and link.resolve() == (ROOT / name).resolve():
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(ROOT / name, target_is_directory=True)
    return api_root


def listed_pages(nav: list) -> set[str]:
    """Every page file a ``nav`` value names (nested sections included)."""
    pages: set[str] = set()
    for item in nav:
        if isinstance(item, str):
            pages.add(item)
        elif isinstance(item, dict):
            for value in item.values():
                if isinstance(value, str):
                    pages.add(value)
                elif isinstance(value, list):
                    pages |= listed_pages(value)
    return pages


def page_title(path: Path) -> str:
    """The page's first ``# heading``, else its file name."""
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"#\s+(.+?)\s*#*\s*$", line)
        if match:
            return re.sub(r"`([^`]*)`", r"\1", match.group(1))
    return path.stem.replace("_", " ").capitalize()


def unlisted_pages(docs_dir: Path, nav: list) -> list[tuple[str, str]]:
    """(title, path) of the Markdown pages under ``docs_dir`` that ``nav`` does not list, sorted by path."""
    listed = listed_pages(nav)
    found = sorted(p.relative_to(docs_dir).as_posix() for p in docs_dir.rglob("*.md"))
    found = [rel for rel in found if not rel.startswith(INCLUDED_ONLY)]
    return [(page_title(docs_dir / rel), rel) for rel in found if rel not in listed]


def extended_nav(docs_dir: Path, nav: list) -> list:
    """``nav`` with the unlisted pages appended to the section ``Studies`` (created if absent)."""
    extra = [{title: rel} for title, rel in unlisted_pages(docs_dir, nav)]
    if not extra:
        return nav
    nav = list(nav)
    for index, item in enumerate(nav):
        if isinstance(item, dict) and EXTRA_SECTION in item and isinstance(item[EXTRA_SECTION], list):
            nav[index] = {EXTRA_SECTION: [*item[EXTRA_SECTION], *extra]}
            return nav
    return [*nav, {EXTRA_SECTION: extra}]


def on_startup(command, dirty, **kwargs):
    lay_out_import_root()


def on_config(config, **kwargs):
    if config.get("nav"):
        config["nav"] = extended_nav(Path(config["docs_dir"]), config["nav"])
    return config
