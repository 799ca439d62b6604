"""``scars train …``: a learner on a world's RL view behind a shield, over seeds; ``scars train-curves``: the
learning curves of several such runs (one label each) with CIs over seeds."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from click.core import ParameterSource

from scars.experiments.commands._checks import check_output_dir, parse_seeds
from scars.experiments.commands.options import config_options, seeds_option
from scars.experiments.config import TrainConfig
from scars.synthesis.errors import ScarsError


@click.command("train")
@config_options(TrainConfig, skip=("seed",))
@seeds_option("Seeds: one run each, into OUT/seed<k>/ (e.g. 0-2 or 0,2,5).")
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Replay a run's config.json; options given on the command line override its fields.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Output folder. Default: a new folder runs/train-<world>-<learner>-<shield>-<UTC time>.",
)
@click.option("--resume", is_flag=True, help="Continue the runs in OUT from their latest checkpoints.")
@click.option("--overwrite", is_flag=True, help="Replace the results in an existing, non-empty --out folder.")
@click.pass_context
def train(
    ctx: click.Context,
    seeds: str,
    config_file: Path | None,
    out: Path | None,
    resume: bool,
    overwrite: bool,
    **fields,
) -> None:
    """Train LEARNER on WORLD behind SHIELD, one run per seed: each OUT/seed<k>/ gets config.json, episodes.csv,
    summary.json, checkpoints/ (and the scars shield's ledger); OUT gets curves.png (return, success, violations per
    episode, cumulative violations, CIs over seeds)."""
    from scars.experiments.provenance import claim_out, default_out, load_config
    from scars.experiments.train import plot_curves, run_training

    try:
        seed_list = parse_seeds(seeds)
        if config_file is not None:
            saved = load_config(config_file, TrainConfig)
            given = {
                k: v for k, v in fields.items() if ctx.get_parameter_source(k) == ParameterSource.COMMANDLINE
            }
            fields = {**fields, **saved, **given}
            if ctx.get_parameter_source("seeds") != ParameterSource.COMMANDLINE and "seed" in saved:
                seed_list = (int(saved["seed"]),)
        fields.pop("seed", None)
        configs = [TrainConfig(**fields, seed=s) for s in seed_list]
        first = configs[0]
        out = out or default_out("train", first.world, first.learner, first.shield)
        if resume:
            if not out.is_dir():
                raise click.BadParameter(f"{str(out)!r} is not a run folder to resume", param_hint="'--out'")
            configs = [
                TrainConfig(
                    **{
                        **load_config(out / f"seed{c.seed}" / "config.json", TrainConfig),
                        "timesteps": c.timesteps,
                    }
                )
                if (out / f"seed{c.seed}" / "config.json").is_file()
                else c
                for c in configs
            ]
        else:
            check_output_dir(out)
            claim_out(out, overwrite)
        folders = []
        for cfg in configs:
            folder = out / f"seed{cfg.seed}"
            click.echo(f"training {cfg.run_name} into {folder}")
            summary = run_training(cfg, folder, resume=resume, echo=click.echo)
            evaluation = summary.get("evaluation")
            if evaluation:
                p, g, r = evaluation["policy"], evaluation["policy_greedy"], evaluation["random"]
                click.echo(
                    f"seed {cfg.seed}: success {p['success']:.2f} (greedy {g['success']:.2f}) vs random masked "
                    f"{r['success']:.2f} "
                    f"(n={evaluation['n']} held-out games), violations during training "
                    f"{summary['training']['cumulative_violations']}"
                )
            suite = summary.get("govsim")
            if suite:
                click.echo(
                    f"seed {cfg.seed}: GovSim suite over n={suite['n']} episodes of the trained population: survival "
                    f"{suite['survival_rate']:.2f}, efficiency {suite['efficiency']:.2f}, equality "
                    f"{suite['equality']:.2f}, over-usage {suite['over_usage']:.2f}"
                )
            folders.append(folder)
        if (out / folders[0].name / "episodes.csv").is_file() and first.learner == "maskable-ppo":
            plot_curves(
                {first.shield: folders}, out / "curves.png", title=f"{first.run_name.rsplit('-s', 1)[0]}"
            )
            click.echo(f"curves: {out / 'curves.png'}")
    except ScarsError as exc:
        click.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(2)
    click.echo(f"runs: {out}")


@click.command("train-curves")
@click.argument(
    "runs", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, file_okay=False)
)
@click.option(
    "--out", type=click.Path(path_type=Path, dir_okay=False), required=True, help="The PNG to write."
)
def train_curves(runs: tuple[Path, ...], out: Path) -> None:
    """One figure of the learning curves of several `scars train` outputs (each RUN a folder of seed<k>/ runs; its
    label the runs' shield), with 95% bootstrap CIs over seeds; a JSON of the curves beside it."""
    from scars.experiments.provenance import load_config
    from scars.experiments.train import plot_curves, save_curves_table

    groups: dict[str, list[Path]] = {}
    for run in runs:
        for folder in sorted(p for p in run.iterdir() if (p / "episodes.csv").is_file()):
            label = load_config(folder / "config.json", TrainConfig)["shield"]
            groups.setdefault(label, []).append(folder)
    if not groups:
        raise click.BadParameter("no run folder with episodes.csv under the given RUNS", param_hint="RUNS")
    plot_curves(groups, out)
    save_curves_table(groups, out.with_suffix(".json"))
    click.echo(f"curves: {out}")


__all__ = ["train", "train_curves"]
