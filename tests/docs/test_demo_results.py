"""docs/demo_results.py copies a demo folder's results into docs/results/ for the tier pages: headings two levels
down, images copied beside them, the run named from its provenance."""

from __future__ import annotations

import importlib.util
import json

from support.doc_examples import ROOT

spec = importlib.util.spec_from_file_location("demo_results", ROOT / "docs" / "demo_results.py")
demo_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(demo_results)


def test_a_demo_folder_becomes_the_included_files(tmp_path):
    demo = tmp_path / "demo"
    (demo / "tier2").mkdir(parents=True)
    (demo / "tier3").mkdir()
    (demo / "results.md").write_text("# Tier-1 results\n\n| a |\n| --- |\n| 1 |\n\n## Paired\n")
    (demo / "tier2" / "results.md").write_text("# Tier 2\n\n![resource](resource.png)\n")
    (demo / "tier2" / "resource.png").write_bytes(b"png")
    (demo / "tier3" / "results.md").write_text("# Tier 3\n")
    (demo / "provenance.json").write_text(
        json.dumps({"started": "2026-12-02T00:00:00+00:00", "git": {"commit": "abcdef0123"}, "config": {}})
    )
    out = tmp_path / "results"
    written = demo_results.refresh(demo, out)
    assert [p.name for p in written] == ["tier1.md", "tier2.md", "tier3.md", "demo.md"]
    assert (out / "tier1.md").read_text() == "### Tier-1 results\n\n| a |\n| --- |\n| 1 |\n\n#### Paired\n"
    assert (out / "tier2.md").read_text() == "### Tier 2\n\n![resource](../results/tier2_resource.png)\n"
    assert (out / "tier2_resource.png").read_bytes() == b"png"
    assert (
        out / "demo.md"
    ).read_text() == "`scars demo --seed 0`, started 2026-12-02T00:00:00+00:00, commit abcdef0\n"


def test_the_committed_tables_are_a_demo_run_s():
    note = (ROOT / "docs" / "results" / "demo.md").read_text()
    assert note.startswith("`scars demo --seed ") and "commit " in note
    tier1 = (ROOT / "docs" / "results" / "tier1.md").read_text()
    assert tier1.startswith("### Tier-1 results") and "| scars |" in tier1
