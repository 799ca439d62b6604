"""``scars runtime``: scars-runtime, the library that gates any framework's tool calls (docs/runtime.md).

scars runtime bench agentdojo --suite banking|slack|travel|workspace|all --out DIR [--seed N] [--limit N]
                              [--model NAME] [--overwrite]
"""

from __future__ import annotations

from pathlib import Path

import click

from scars.experiments.commands._checks import claim_output, overwrite_option

SUITE_CHOICES = ("banking", "slack", "travel", "workspace", "all")


@click.group("runtime")
def runtime() -> None:
    """scars-runtime: measurements of the library that gates any framework's tool calls."""


@runtime.group("bench")
def bench() -> None:
    """Benchmarks of the gate on other projects' benchmarks."""


@bench.command("agentdojo")
@click.option(
    "--suite", type=click.Choice(SUITE_CHOICES), required=True, help="The AgentDojo suite, or all four."
)
@click.option(
    "--out", type=click.Path(path_type=Path, file_okay=False), required=True, help="The results folder."
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="The cases' order and the synthesis seeds.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="Only the first N cases of each suite's order (a quick look; the figures need every case).",
)
@click.option(
    "--model",
    default=None,
    metavar="NAME",
    help="A real model through AgentDojo's own LLM pipeline instead of the offline compromised agent: a name of "
    "AgentDojo's ModelsEnum (its API key in the provider's environment variable, e.g. OPENAI_API_KEY), or "
    "local:MODEL_ID for an OpenAI-compatible local server. Untested here (no model on this machine).",
)
@overwrite_option
def agentdojo(
    suite: str, out: Path, seed: int, limit: int | None, model: str | None, overwrite: bool
) -> None:
    """The gate on AgentDojo's prompt-injection cases against no defence, a ground-truth tool allow-list and a
    blind-written Progent-style static policy (issue 42): results.md, summary.json, cases.json, learning_curve.png and
    the gates' ledgers in OUT."""
    from scars.agents.runtime.adapters import agentdojo as _adapter  # noqa: F401 - the extra, or one clear error
    from scars.experiments.agentdojo_bench import bench as run_bench
    from scars.experiments.agentdojo_bench import check_model, suite_names

    if model is not None:
        check_model(model)
    claim_output(out, overwrite)
    run_bench(suite_names(suite), out, seed=seed, limit=limit, model=model, progress=click.echo)
    for name in ("results.md", "summary.json", "cases.json", "learning_curve.png"):
        click.echo(f"agentdojo: {out / name}")
