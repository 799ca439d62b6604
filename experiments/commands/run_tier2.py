"""``scars run tier2 …`` (one configuration), ``scars run tier2-collusion …`` (the anti-collusion table),
``scars run tier2-transfer …`` (the transfer table) and ``scars run tier2-outsider …`` (GovSim's outsider variant):
every field of ``Tier2Config`` is an option of the first."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from scars.experiments.commands._checks import (
    check_output_dir,
    claim_output,
    exit_if_stopped,
    overwrite_option,
    parse_seeds,
)
from scars.experiments.commands.options import config_options, seeds_option
from scars.experiments.config import METHODS, Tier2Config
from scars.synthesis.errors import ConfigError, ScarsError

_GATES = click.option(
    "--gates",
    type=click.Choice(["on", "off"]),
    default="on",
    show_default=True,
    help=Tier2Config.field_docs()["gates"],
)


_CONDITIONS = ("search_iterations", "oracle", "share_hint", "derived_context")
_study_options = config_options(Tier2Config, only=("months", *_CONDITIONS))
"""The options the §6.2 studies share, from ``Tier2Config``: months per run, the MCTS budget, the what-if oracle,
and GovSim's conditions (the share hint of the observation text, the derived quantities of the DSL context)."""
GOVSIM_OUTSIDER_MONTHS = 15
"""GovSim's outsider variant runs 15 rounds (``fish_perturbation_outsider.yaml``: ``max_num_rounds: 15``)."""


def _out_option(default: str):
    out = click.option(
        "--out",
        type=click.Path(path_type=Path),
        default=Path(default),
        show_default=True,
        help="Output directory (a non-empty one is refused unless --overwrite).",
    )
    return lambda fn: out(overwrite_option(fn))


def _config(fields: dict) -> Tier2Config:
    fields = dict(fields)
    if "gates" in fields:
        fields["gates"] = fields["gates"] == "on"
    return Tier2Config(**fields)


def _fail(exc: Exception) -> None:
    click.echo(f"error: {' '.join(str(exc).split())}", err=True)
    sys.exit(2)


@click.command("tier2")
@config_options(Tier2Config, skip=("gates",))
@_GATES
@_out_option("runs/tier2")
def tier2(out: Path, overwrite: bool, **fields) -> None:
    """One method in the commons arena (homogeneous or focal set-up): writes summary.json, steps/months/runs
    tables (Parquet + CSV), results.md, plots (resource, harvest vs f(t), karma), the carried state of every
    learning seat (scars ledger, baseline memory) into OUT. With --transfer-from DIR each learning seat starts from
    DIR's carried state (a missing or unverifiable ledger is refused and nothing is written)."""
    from rich.console import Console

    from scars.experiments.commons_seats import load_carried
    from scars.experiments.tier2 import run_tier2_to_dir

    check_output_dir(out)
    try:
        cfg = _config(fields)
        load_carried(cfg)  # fail closed before anything is written
        claim_output(out, overwrite)
        console = Console(stderr=True)
        with console.status(f"{cfg.run_name}: run 0/{cfg.runs}") as status:
            summary = run_tier2_to_dir(
                cfg, out, progress=lambda done, total: status.update(f"{cfg.run_name}: run {done}/{total}")
            )
    except ScarsError as exc:
        _fail(exc)
    click.echo(
        f"{cfg.method_label}: survival {summary['survival_rate']:.2f} (n={summary['runs']} runs), "
        f"over-usage {summary['over_usage']:.3f}, cooperative yield {summary['cooperative_yield_mean']:.3f}, "
        f"scars admitted {summary['scars_admitted']}, inappropriate {summary['inappropriate_scars']}"
    )
    for rule in summary.get("active_rules", []):
        click.echo(f"  active scar: {rule}")
    from scars.experiments.guarantees import broken_guarantees

    broken = broken_guarantees(summary)
    if broken:
        click.secho(f"GUARANTEE VIOLATED: {', '.join(broken)} — see summary.json", fg="red", bold=True)
    click.echo(f"results: {out / 'results.md'}")
    exit_if_stopped({cfg.method_label: summary})


def _names(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    """Comma-separated names from ``allowed`` (or ``all``); an unknown one is a ConfigError listing them."""
    if text.strip() == "all":
        return allowed
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise ConfigError(
            f"unknown {what} {', '.join(unknown) or text!r}; known: {', '.join(allowed)} (or all)"
        )
    return names


@click.command("tier2-collusion")
@click.option(
    "--method", type=click.Choice(METHODS), default="scars", show_default=True, help="The focal learner."
)
@config_options(Tier2Config, only=("ablation",))
@click.option(
    "--habits",
    type=click.Choice(["govsim", "sustainable"]),
    default="sustainable",
    show_default=True,
    help="The focal seat's habits (sustainable: what the coalition punishes is mostly a correct harvest).",
)
@click.option(
    "--punishment-attribution",
    type=click.Choice(["verifier", "context"]),
    default="verifier",
    show_default=True,
    help=Tier2Config.field_docs()["punishment_attribution"],
)
@seeds_option("Independent trajectories, e.g. 0-4 or 0,3,7-9.")
@click.option("--runs", type=click.IntRange(min=1), default=6, show_default=True, help="Runs per trajectory.")
@_study_options
@_out_option("runs/tier2-collusion")
def tier2_collusion(
    method,
    ablation,
    habits,
    punishment_attribution,
    seeds,
    runs,
    out: Path,
    overwrite: bool,
    **study,
) -> None:
    """The anti-collusion test (§6.2): a focal learner in the malicious arena with TrustGate + NormVerifier on and
    off; the table of inappropriate scars, gain lost and yield with n and 95% CIs in OUT/collusion.md."""
    from scars.experiments.tier2_studies import run_collusion

    check_output_dir(out)
    seed_list = parse_seeds(seeds)
    try:
        base = Tier2Config(
            method=method,
            ablation=ablation,
            habits=habits,
            punishment_attribution=punishment_attribution,
            runs=runs,
            **study,
        )
        claim_output(out, overwrite)
        run_collusion(base, seed_list, out, progress=lambda line: click.echo(line, err=True))
    except ScarsError as exc:
        _fail(exc)
    click.echo((out / "collusion.md").read_text(encoding="utf-8"))


@click.command("tier2-transfer")
@click.option(
    "--methods", default="all", show_default=True, help=f"Comma-separated, or all: {', '.join(METHODS)}."
)
@seeds_option()
@click.option(
    "--runs-a", type=click.IntRange(min=1), default=5, show_default=True, help="Training runs in arena A."
)
@click.option("--runs-b", type=click.IntRange(min=1), default=5, show_default=True, help="Runs in arena B.")
@config_options(Tier2Config, only=("setup",))
@_study_options
@_out_option("runs/tier2-transfer")
def tier2_transfer(methods, seeds, runs_a, runs_b, setup, out: Path, overwrite: bool, **study) -> None:
    """Counterfactual social transfer (§6.2): each method trains in arena A, then plays arena B with and without
    its A state; the table of B's cooperative yield, over-usage and survival (paired differences, 95% CIs) in
    OUT/transfer.md."""
    from scars.experiments.tier2_studies import run_transfer

    check_output_dir(out)
    seed_list = parse_seeds(seeds)
    try:
        names = _names(methods, METHODS, "method")
        base = Tier2Config(setup=setup, **study)
        claim_output(out, overwrite)
        run_transfer(
            base, names, seed_list, runs_a, runs_b, out, progress=lambda line: click.echo(line, err=True)
        )
    except ScarsError as exc:
        _fail(exc)
    click.echo((out / "transfer.md").read_text(encoding="utf-8"))


@click.command("tier2-outsider")
@click.option(
    "--methods", default="all", show_default=True, help=f"Comma-separated, or all: {', '.join(METHODS)}."
)
@seeds_option()
@click.option("--runs", type=click.IntRange(min=1), default=10, show_default=True, help="Runs per seed.")
@click.option(
    "--outsider-month",
    type=click.IntRange(min=2),
    default=4,
    show_default=True,
    help="The month the outsider joins (GovSim: 4, after three months of four agents).",
)
@config_options(Tier2Config, only=("setup",))
@click.option(
    "--outsider-fresh/--no-outsider-fresh",
    default=True,
    show_default=True,
    help=Tier2Config.field_docs()["outsider_fresh"],
)
@click.option(
    "--months",
    type=click.IntRange(min=2),
    default=GOVSIM_OUTSIDER_MONTHS,
    show_default=True,
    help="Months per run (GovSim's outsider variant: 15 rounds).",
)
@config_options(Tier2Config, only=_CONDITIONS)
@_out_option("runs/tier2-outsider")
def tier2_outsider(
    methods,
    seeds,
    runs,
    outsider_month,
    setup,
    outsider_fresh,
    months,
    out: Path,
    overwrite: bool,
    **study,
) -> None:
    """GovSim's outsider variant: each method plays arena A with every seat from month 1 and with the last seat (a
    newcomer with the outsider persona) joining at OUTSIDER_MONTH, on the same arenas; the table of survival, yield
    (paired difference), over-usage and the outsider's own over-usage with n and 95% CIs in OUT/outsider.md."""
    from scars.experiments.tier2_studies import run_outsider

    check_output_dir(out)
    seed_list = parse_seeds(seeds)
    try:
        names = _names(methods, METHODS, "method")
        base = Tier2Config(
            setup=setup,
            runs=runs,
            months=months,
            **study,
            outsider_fresh=outsider_fresh,
            outsider_month=outsider_month,  # validated against months here; each run sets its own
        )
        claim_output(out, overwrite)
        run_outsider(
            base, names, seed_list, outsider_month, out, progress=lambda line: click.echo(line, err=True)
        )
    except ScarsError as exc:
        _fail(exc)
    click.echo((out / "outsider.md").read_text(encoding="utf-8"))


TIER2_COMMANDS = (tier2, tier2_collusion, tier2_transfer, tier2_outsider)
"""The tier-2 commands of the ``scars run`` group (``experiments.commands.run`` adds them)."""


def tier2_demo(out: Path, seed: int, runs: int = 3, tracking=None) -> dict:
    """``scars demo``'s tier-2 section: every method of the comparison as five homogeneous seats of arena A for ``runs`` runs each;
    one combined table, results.md and plots in ``out``; with ``tracking`` on, one W&B run per method
    (``experiments.tier2.log_tier2``). Returns the summaries."""
    from scars.experiments.commons_run import run_tier2
    from scars.experiments.tier2 import log_tier2
    from scars.experiments.tier2_report import write_tier2

    results, configs = {}, {}
    for method in METHODS:
        cfg = Tier2Config(method=method, runs=runs, seed=seed)
        results[method] = run_tier2(cfg, out / method)
        configs[method] = cfg
    summaries = write_tier2(
        out, results, configs, title=f"Tier-2 demo: {len(METHODS)} methods, five homogeneous seats, arena A"
    )
    if tracking is not None:
        for method, result in results.items():
            log_tier2(configs[method], out / method, result, tracking)
    return summaries
