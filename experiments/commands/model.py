"""``scars model random …``: a randomly initialised causal LM in a local folder (and optionally a GGUF file), for
smoke runs of the real-model backends without downloading anything (optional extras ``hf`` and ``llamacpp``)."""

from __future__ import annotations

from pathlib import Path

import click

from scars.experiments.commands._checks import check_output_file, claim_output, overwrite_option


@click.group("model")
def model() -> None:
    """Local models for the real-model backends (nothing is downloaded)."""


@model.command("random")
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Folder to write the model into.")
@click.option(
    "--layers", type=click.IntRange(min=1, max=48), default=4, show_default=True, help="Transformer blocks."
)
@click.option(
    "--width", type=click.IntRange(min=8, max=4096), default=256, show_default=True, help="Hidden size."
)
@click.option(
    "--heads", type=click.IntRange(min=1, max=64), default=4, show_default=True, help="Attention heads."
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the weights.")
@click.option(
    "--gguf",
    type=click.Path(path_type=Path),
    default=None,
    help="Also export the model to this GGUF file (for llama.cpp servers; needs the 'llamacpp' extra).",
)
@overwrite_option
def random_model(
    out: Path, layers: int, width: int, heads: int, seed: int, gguf: Path | None, overwrite: bool
) -> None:
    """Write a random GPT-2 (LAYERS x WIDTH) with a byte-level BPE tokenizer trained here to OUT: a local model
    folder for `scars run tier1 --backend hf --model-path OUT`. Random weights: it exercises the real code paths at
    the cost of a real model of that size; it knows nothing."""
    from scars.experiments.models import export_gguf, write_random_causal_lm

    if gguf is not None:
        check_output_file(gguf, "--gguf")
    if width % heads:
        raise click.BadParameter(f"{width} is not a multiple of --heads {heads}", param_hint="'--width'")
    claim_output(out, overwrite)
    folder = write_random_causal_lm(out, layers=layers, width=width, heads=heads, seed=seed)
    click.echo(f"model: {folder}")
    if gguf is not None:
        click.echo(f"gguf: {export_gguf(folder, gguf)}")
