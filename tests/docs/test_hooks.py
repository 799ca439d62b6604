"""docs/hooks.py: a page dropped into docs/ without a nav entry still reaches the navigation (section "Studies"),
and the import root griffe reads is laid out as scars/<folder> links."""

from __future__ import annotations

import importlib.util

from support.doc_examples import ROOT

spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
hooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hooks)


def test_unlisted_pages_are_appended_under_studies_with_their_titles(tmp_path):
    (tmp_path / "index.md").write_text("# Home\n")
    (tmp_path / "poisoning.md").write_text("Intro line\n\n# Poisoning the `memory`\n")
    (tmp_path / "comparison.md").write_text("no heading\n")
    (tmp_path / "tiers").mkdir()
    (tmp_path / "tiers" / "tier1.md").write_text("# Tier 1\n")
    nav = [{"Home": "index.md"}, {"Tiers": [{"Tier 1": "tiers/tier1.md"}]}]
    assert hooks.extended_nav(tmp_path, nav) == [
        *nav,
        {"Studies": [{"Comparison": "comparison.md"}, {"Poisoning the memory": "poisoning.md"}]},
    ]
    with_section = [*nav, {"Studies": [{"Poisoning": "poisoning.md"}]}]
    assert hooks.extended_nav(tmp_path, with_section)[-1] == {
        "Studies": [{"Poisoning": "poisoning.md"}, {"Comparison": "comparison.md"}]
    }
    assert hooks.extended_nav(tmp_path, [*with_section, "comparison.md"]) == [*with_section, "comparison.md"]


def test_the_site_nav_lists_every_page_of_the_repository_or_the_hook_adds_it():
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)["nav"]
    listed = hooks.listed_pages(nav)
    assert all((ROOT / "docs" / page).is_file() for page in listed), listed
    every = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    every = {page for page in every if not page.startswith("results/")}  # included into the tier pages
    added = {rel for _, rel in hooks.unlisted_pages(ROOT / "docs", nav)}
    assert listed | added == every


def test_the_import_root_links_every_top_level_folder(tmp_path):
    root = hooks.lay_out_import_root(tmp_path)
    for name in hooks.PACKAGES:
        assert (root / "scars" / name / "__init__.py").resolve() == (ROOT / name / "__init__.py").resolve()
    hooks.lay_out_import_root(tmp_path)  # idempotent
