"""``scars report`` (experiments/results_report.py): Markdown and a self-contained HTML page with the tier's tables
(n, CIs, paired differences), the ablation table with each ablation's own measures, plots and the d_t terms of a
run. The HTML page is opened in headless Chromium (Playwright driving Debian's chromium-headless-shell or
Playwright's own browser) and its tables and images must render; a parser-level check runs everywhere."""

from __future__ import annotations

import base64
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from rich.console import Console

from scars.experiments.cli import main
from scars.experiments.config import Tier1Config
from scars.experiments.results_report import ablation_table, rule_switches, write_report
from scars.experiments.runner import run_tier1_folder
from scars.experiments.sweep import _write_outputs
from scars.experiments.sweep_spec import SweepSpec, expand
from scars.experiments.tier1 import method_label

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sweep_folder(tmp_path_factory) -> Path:
    """A sweep folder written by the sweep's own writer from real tier-1 runs (scars, scars:soft_bias_only, rag ×
    2 seeds, 1 episode), without Ray (the Tune path is tested in test_sweep_tune.py)."""
    out = tmp_path_factory.mktemp("report") / "sweep"
    spec = SweepSpec(
        grid={"method": ["scars", "rag"], "ablation": ["none", "soft_bias_only"], "seed": [0, 1]},
        fixed={"episodes": 1, "schedule": "smoke", "search_iterations": 20},
        name="report-test",
    )
    rows = []
    for trial in expand(spec):
        result, _ = run_tier1_folder(trial.config, out / "runs" / trial.run_name)
        row = {"run_name": trial.run_name, "label": trial.label, **trial.fields, "status": "ok", "error": ""}
        scalars = {
            k: v for k, v in result.summary.items() if v is None or isinstance(v, bool | int | float | str)
        }
        rows.append(row | {k: v for k, v in scalars.items() if k not in row})  # as sweep.runs_frame does
    (out / "sweep.json").write_text(json.dumps({"identity": spec.identity, "spec": spec.to_dict()}))
    _write_outputs(spec, out, pd.DataFrame(rows), Console(quiet=True), False)
    return out


@pytest.fixture(scope="module")
def runs_report(tmp_path_factory) -> tuple[Path, Path]:
    """A report of a demo-style folder (every method's 20-odd-column metrics table), written to a folder elsewhere."""
    from scars.experiments.runner import run_many

    base = tmp_path_factory.mktemp("many")
    configs = [
        Tier1Config(method=m, episodes=2, schedule="smoke", max_steps=10) for m in ("scars", "rag", "voyager")
    ]
    run_many(configs, base / "demo", console=Console(quiet=True))
    return write_report([base / "demo"], base / "elsewhere" / "report")


@pytest.fixture(scope="module")
def report(sweep_folder, tmp_path_factory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("out")
    result = CliRunner().invoke(main, ["report", str(sweep_folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out / "report.md", out / "report.html"


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.images, self.headers = 0, [], []
        self._in_th = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables += 1
        if tag == "img":
            self.images.append(dict(attrs)["src"])
        self._in_th = tag == "th"

    def handle_data(self, data):
        if self._in_th:
            self.headers.append(data.strip())


def test_the_html_is_self_contained_with_tables_and_valid_images(report):
    markdown, page = report
    parsed = _Collect()
    parsed.feed(page.read_text())
    assert parsed.tables >= 3  # aggregate, pooled counts with paired differences, ablations
    assert len(parsed.images) >= 3
    for src in parsed.images:
        assert src.startswith("data:image/png;base64,")  # inline: nothing to fetch
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG)
    assert "Δ RVR vs scars" in parsed.headers
    assert any("leak mass" in h for h in parsed.headers)
    text = markdown.read_text()
    assert "(n=2)" in text and "report_assets/" in text and "d_t and its four terms" in text


def test_the_report_links_only_images_copied_beside_it(runs_report):
    markdown, _ = runs_report
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown.read_text())
    assert any("rvr_success" in link for link in links), links
    for link in links:
        assert link.startswith("report_assets/") and (markdown.parent / link).is_file(), link


def test_headings_show_no_backticks_and_few_seeds_are_flagged(report):
    markdown, page = report
    html_text = page.read_text()
    for heading in re.findall(r"<h[1-6]>(.*?)</h[1-6]>", html_text):
        assert "`" not in heading, heading
    assert "<code>report-test</code>" in html_text
    text = markdown.read_text()
    assert "⚠ Fewer than 3 seeds" in text and " ⚠ (n=2)" in text


def test_the_ablation_table_has_each_ablations_measure_with_n(sweep_folder):
    runs = pd.read_parquet(sweep_folder / "runs.parquet")
    table = ablation_table(runs).set_index("label")
    assert list(table.index) == ["scars", "scars:soft_bias_only"]
    leak = next(c for c in table.columns if c.startswith("leak mass"))
    assert table.loc["scars", leak] == "n/a (n=0)"  # hard masks leak nothing: undefined, not 0
    assert "(n=2)" in table.loc["scars:soft_bias_only", leak]
    enforcement = next(c for c in table.columns if c.startswith("enforcement ms"))
    assert "(n=2)" in table.loc["scars", enforcement]


def test_rule_switches_follow_the_schedule():
    assert rule_switches("paper", 36)  # the paper schedule switches rules during the run
    assert all(0 < e < 36 for e in rule_switches("paper", 36))
    assert rule_switches("nope", 10) == []


def test_a_runner_folder_reports_too(tmp_path):
    out = tmp_path / "demo"
    for cfg in (Tier1Config(method="scars", episodes=2, schedule="smoke", search_iterations=40),):
        run_tier1_folder(cfg, out / method_label(cfg))
    result = CliRunner().invoke(
        main, ["run", "tier1", "--method", "rag", "--episodes", "2", "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 0, result.output
    markdown, page = write_report([tmp_path / "r"], tmp_path / "rep")
    assert "Metrics per method" in markdown.read_text() and page.read_text().count("<table") >= 1
    bad = CliRunner().invoke(
        main, ["report", str(tmp_path / "r"), "--run", "nope", "--out", str(tmp_path / "x")]
    )
    assert bad.exit_code == 2 and "'nope'" in bad.output


def _chromium() -> str | None:
    for name in ("chromium-headless-shell", "chromium", "chromium-browser"):
        found = shutil.which(name) or (
            Path("/usr/lib/chromium") / name if (Path("/usr/lib/chromium") / name).exists() else None
        )
        if found:
            return str(found)
    return None


def test_the_html_renders_in_headless_chromium(report, runs_report):
    """Opened at 1,400 px wide, every table renders, every image loads, and no table is wider than its container
    (cells wrap; a table still too wide would scroll inside its box, never past the page)."""
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[report]' (Playwright)")
    executable = _chromium()
    measured = []
    with playwright.sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=executable) if executable else p.chromium.launch()
        except Exception as exc:  # no browser: neither Debian's chromium nor `playwright install chromium`
            pytest.skip(f"no headless Chromium available: {exc}")
        try:
            for _, page_path in (report, runs_report):
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(page_path.resolve().as_uri())
                tables = page.eval_on_selector_all(
                    "table",
                    """els => els.map(e => [e.rows.length, e.getBoundingClientRect().height,
                        e.getBoundingClientRect().width, e.parentElement.clientWidth,
                        e.rows[0].cells.length])""",
                )
                images = page.eval_on_selector_all(
                    "img", "els => els.map(e => [e.complete, e.naturalWidth, e.naturalHeight])"
                )
                page_width = page.evaluate("document.documentElement.scrollWidth")
                measured.append((tables, images, page_width))
        finally:
            browser.close()
    (tables, images, width), (run_tables, _, run_width) = measured
    assert len(tables) >= 3 and all(rows >= 2 and height > 0 for rows, height, *_ in tables)
    assert len(images) >= 3 and all(done and w > 100 and h > 100 for done, w, h in images)
    assert max(columns for *_, columns in run_tables) >= 20  # the wide metrics table is in the test
    for _rows, _height, table_width, container, columns in tables + run_tables:
        assert table_width <= container + 1, (columns, table_width, container)
    assert width <= 1400 and run_width <= 1400  # nothing runs past the page


@pytest.mark.parametrize(
    ("kind", "name", "content"),
    [
        ("runs", "summary.json", "{not json"),
        ("runs", "summary.json", "[1, 2]"),
        ("runs", "summary.json", '{"scars": 3}'),
        ("sweep", "sweep.json", "garbage"),
        ("sweep", "sweep.json", '["a", "list"]'),
        ("sweep", "sweep.json", '{"identity": 5}'),
        ("sweep", "runs.parquet", "not parquet"),
    ],
)
def test_a_damaged_result_file_is_one_line_naming_it(tmp_path, kind, name, content):
    """Issue 28: every reader of a result file validates its shape and says which file is damaged."""
    import pandas as pd
    from click.testing import CliRunner

    from scars.experiments.cli import main

    folder = tmp_path / "results"
    folder.mkdir()
    if kind == "runs":
        pd.DataFrame({"episode": [0], "method": ["scars"]}).to_parquet(folder / "episodes.parquet")
        (folder / "summary.json").write_text("{}")
    else:
        pd.DataFrame({"run_name": ["a"], "status": ["ok"]}).to_parquet(folder / "runs.parquet")
        pd.DataFrame({"label": ["scars"]}).to_parquet(folder / "aggregate.parquet")
        (folder / "sweep.json").write_text('{"identity": {"grid": {}, "fixed": {}}}')
    (folder / name).write_text(content)
    result = CliRunner().invoke(main, ["report", str(folder), "--out", str(tmp_path / "report")])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "damaged result file" in lines[0] and name in lines[0], result.stderr


def test_a_results_table_cell_states_one_check():
    """Issue 41 #8: the demo's results.md printed "✗ VIOLATED" under Prop. 3 when the configured ε bound held and only
    scars' own L_drift bounds were exceeded. The Prop. 3 column is the paper's check; the own bound has its column."""
    from scars.experiments.report import markdown_table

    table = markdown_table({"scars": {"prop3_ok": True, "prop3_own_bound_exceeded": 2}})
    header, _, row = table.splitlines()
    cells = dict(
        zip(
            [h.strip() for h in header.strip("|").split("|")],
            [c.strip() for c in row.strip("|").split("|")],
            strict=True,
        )
    )
    assert cells["Prop.3"] == "✓" and cells["scars above own L_drift bound"] == "2"
    assert "VIOLATED" not in row
