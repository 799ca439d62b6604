"""``scars run tier3 …``: train in arenas A and B with tier 2's runner, carry the state into arena C, measure identity
continuity, trajectory individuation and cross-domain drift (``experiments.tier3``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from experiments.commands._checks import FINITE_FLOAT, check_output_dir, check_url, parse_seeds
from experiments.commands.run import run
from experiments.config import ABLATIONS, BACKENDS, EXECUTORS, METHODS
from synthesis.errors import ScarsError

METHOD_CHOICES = (*METHODS, "no_memory", "all")


@run.command("tier3")
@click.option(
    "--method",
    type=click.Choice(METHOD_CHOICES),
    default="scars",
    show_default=True,
    help="Memory method; no_memory is the control that carries nothing; all = the six methods and no_memory "
    "(one table).",
)
@click.option(
    "--ablation", type=click.Choice(ABLATIONS), default="none", show_default=True, help="Scars ablation."
)
@click.option("--seeds", default="0-4", show_default=True, help="Seeds, e.g. 0-4 or 0,2,5 (at least two).")
@click.option(
    "--train-runs",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Tier-2 runs in each of A and B.",
)
@click.option(
    "--train-months",
    type=click.IntRange(min=1),
    default=12,
    show_default=True,
    help="Months per training run.",
)
@click.option(
    "--episodes-c",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Episodes played in arena C.",
)
@click.option(
    "--seasons-c", type=click.IntRange(min=1), default=10, show_default=True, help="Seasons per episode of C."
)
@click.option(
    "--population-c",
    default="coop:2,greedy:1",
    show_default=True,
    help="Arena C's three scripted farms (kind:count; coop, greedy, noisy, retaliator).",
)
@click.option(
    "--overuse-verdicts/--no-overuse-verdicts",
    default=True,
    show_default=True,
    help="Every extraction above the fair share is a verdict at once (off: only a collapse; learning before a "
    "collapse then comes from punishment, which arena A has and B has not).",
)
@click.option(
    "--ground/--no-ground",
    default=True,
    show_default=True,
    help="Admit in C the carried scars that ground through the abstract vocabulary.",
)
@click.option(
    "--permutations",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Permutations of the individuation test.",
)
@click.option(
    "--backend", type=click.Choice(BACKENDS), default="embedded", show_default=True, help="Base policy."
)
@click.option("--model-path", default="", help="Local HuggingFace model directory (backend=hf).")
@click.option(
    "--server-url",
    default="http://127.0.0.1:8000",
    show_default=True,
    callback=lambda ctx, param, value: check_url(value),
    help="OpenAI-compatible server base URL (backend=openai).",
)
@click.option("--server-model", default="", help="Model name on the server (backend=openai).")
@click.option(
    "--policy-mode",
    type=click.Choice(("score", "generate")),
    default="score",
    show_default=True,
    help="score, or generate (backend hf or openai: the model writes its action, told the scars mask first).",
)
@click.option(
    "--temperature", type=FINITE_FLOAT, default=0.7, show_default=True, help="Simulated LM temperature."
)
@click.option("--embedder", type=click.Choice(("hashing", "minilm")), default="hashing", show_default=True)
@click.option("--tau", type=FINITE_FLOAT, default=0.55, show_default=True, help="Disequilibrium threshold τ.")
@click.option("--executor", type=click.Choice(EXECUTORS), default="inprocess", show_default=True)
@click.option("--search-iterations", type=click.IntRange(min=1), default=120, show_default=True)
@click.option(
    "--wandb/--no-wandb", default=False, show_default=True, help="Log to Weights & Biases (offline)."
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("runs/tier3"),
    show_default=True,
    help="Output directory.",
)
def tier3(method: str, seeds: str, ground: bool, out: Path, **fields) -> None:
    """Tier 3: per seed, one agent trained in arena A and one in arena B (tier 2's runner, focal seat) carry their
    state into arena C (an aquifer); writes summary.json, agents/steps tables, results.md and plots into OUT."""
    from rich.console import Console

    from experiments.tier3 import NO_MEMORY, Tier3Config, run_tier3_table, table_markdown

    check_output_dir(out)
    try:
        seed_list = parse_seeds(seeds)
        names = (*METHODS, NO_MEMORY) if method == "all" else (method,)
        configs = [
            Tier3Config(
                method=name,
                seeds=seed_list,
                ground_scars=ground,
                # with --method all the ablation applies to scars; the baselines run as they are
                **(fields if method != "all" or name == "scars" else fields | {"ablation": "none"}),
            )
            for name in names
        ]
    except ScarsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    console = Console(stderr=True)
    with console.status("tier 3") as status:
        summaries = run_tier3_table(
            configs, out, progress=lambda message: status.update(f"tier 3 — {message}")
        )
    click.echo(table_markdown(summaries))
    click.echo(f"results: {out / 'results.md'}")
