"""Rule-set quality of scars in tiers 2 and 3 at the demo's scale (issue 40, item 1): the numbers of docs/tiers/tier2.md
and docs/tiers/tier3.md.

    python benchmarks/rule_set_tiers.py [--seeds 0-2] [--out runs/rule_set_tiers]
    python benchmarks/rule_set_tiers.py --cost [--repeats 5]
    python benchmarks/rule_set_tiers.py --cost-train [--repeats 3]   (needs the ``rl`` extra)

``--cost``: what measuring costs a tier-2 run (the demo's scars configuration, seed 0), the measure on and off,
interleaved in one process so load affects both, with the seconds spent inside it (per decision and at the summary).
``--cost-train``: the same for a short ``scars train`` (MaskablePPO, scars shield, 2,048 timesteps, 2 envs).

Tier 2: ``scars demo``'s tier-2 configuration for scars (five homogeneous seats of arena A, 3 runs of 12 months) per
seed. Tier 3: ``scars demo``'s tier-3 configuration for scars (seeds together; trained in A and B, one episode of C
each). Each run's summary holds its own ``rule_set`` (``experiments.arena_rule_set``); this script prints them and
pools them over the seeds: precision and recall as Σ/Σ over the clusters of every seed (tier 2: (seed, run); tier 3:
the C episodes), with a cluster-bootstrap 95% interval and n.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from scars.experiments.commons_run import run_tier2
from scars.experiments.config import Tier2Config
from scars.experiments.stats import pooled_ratio
from scars.experiments.tier3 import demo_configs, run_tier3


def _refuse(message: str) -> None:
    """Bad input: one line, exit code 2."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    try:
        return list(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        _refuse(f"--seeds {text!r} is not a seed or a range like 0-2")
    return []


def _cell(iv) -> str:
    if iv.estimate is None:
        return "n/a"
    ci = "" if iv.low is None else f" [{iv.low:.3f}, {iv.high:.3f}]"
    return f"{iv.estimate:.3f}{ci} (n = {iv.clusters} clusters; {iv.numerator:.0f} / {iv.denominator:.0f})"


def pooled(rule_sets: list[dict], seed: int) -> dict[str, str]:
    """Precision and recall over every cluster of ``rule_sets`` (probes: ``by_episode``; decisions: ``by_cluster``)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 4041]))
    out = {}
    for where, key in (("probes", "by_episode"), ("decisions", "by_cluster")):
        rows = np.array([row for r in rule_sets for row in r[where][key]], dtype=float).reshape(-1, 3)
        out[f"precision ({where})"] = _cell(pooled_ratio(rows[:, 1], rows[:, 0], rng))
        out[f"recall ({where})"] = _cell(pooled_ratio(rows[:, 1], rows[:, 2], rng))
    d = [r["decisions"] for r in rule_sets]
    out["masked safe (decisions)"] = str(sum(x["safe_masked"] for x in d))
    out["needed step masked"] = str(sum(x["needed_masked"] for x in d))
    out["asked below the share"] = str(sum(x["short_by_scars"] for x in d))
    return out


def _timed(fn, inside: dict[str, float], key: str):
    """``fn``, adding the seconds each call takes to ``inside[key]``."""

    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            inside[key] += time.perf_counter() - t

    return wrapper


def cost(repeats: int) -> None:
    """The tier-2 run with the measure on and off, interleaved (off: the accumulator records nothing and the summary
    has no rule set), and the seconds spent inside the measure when on."""
    import scars.experiments.commons_run as commons_run
    from scars.experiments.arena_rule_set import ArenaRuleSets

    decide, counts, summary = (
        ArenaRuleSets.decide,
        ArenaRuleSets.counts,
        commons_run.Tier2Run.rule_set_summary,
    )
    inside = {"per decision": 0.0, "summary": 0.0}

    seconds: dict[str, list[float]] = {"on": [], "off": []}
    for _ in range(repeats):
        for mode in ("on", "off"):
            on = mode == "on"
            ArenaRuleSets.decide = (
                _timed(decide, inside, "per decision") if on else (lambda self, *a, **k: None)
            )
            ArenaRuleSets.counts = _timed(counts, inside, "summary")
            commons_run.Tier2Run.rule_set_summary = summary if on else (lambda self: {})
            with tempfile.TemporaryDirectory() as d:
                t = time.perf_counter()
                run_tier2(Tier2Config(method="scars", runs=3, seed=0), Path(d))
                seconds[mode].append(time.perf_counter() - t)
    ArenaRuleSets.decide, ArenaRuleSets.counts, commons_run.Tier2Run.rule_set_summary = (
        decide,
        counts,
        summary,
    )
    for mode, values in seconds.items():
        print(
            f"measure {mode}: median {np.median(values):.3f} s per run (n = {repeats}: {[round(v, 3) for v in values]})"
        )
    print(", ".join(f"inside the measure, {k}: {v / repeats:.3f} s per run" for k, v in inside.items()))


def cost_train(repeats: int) -> None:
    """A short MaskablePPO run under the scars shield with the measure on and off, interleaved (off: nothing recorded,
    no ``rule_set`` in the summary), and the seconds inside it when on (at the decisions; the summary's probe
    counts)."""
    from scars.experiments.config import TrainConfig
    from scars.experiments.train import ShieldRuleSets, run_training

    at, taken, summary = ShieldRuleSets.at, ShieldRuleSets.taken, ShieldRuleSets.summary
    inside = {"per decision": 0.0, "summary": 0.0}

    cfg = TrainConfig(
        timesteps=2048,
        num_envs=2,
        n_steps=256,
        batch_size=64,
        n_epochs=2,
        eval_episodes=3,
        checkpoint_every=2048,
        search_iterations=20,
        shield="scars",
    )
    seconds: dict[str, list[float]] = {"on": [], "off": []}
    for _ in range(repeats):
        for mode in ("on", "off"):
            on = mode == "on"
            ShieldRuleSets.at = _timed(at, inside, "per decision") if on else (lambda self, *a, **k: None)
            ShieldRuleSets.taken = (
                _timed(taken, inside, "per decision") if on else (lambda self, *a, **k: None)
            )
            ShieldRuleSets.summary = _timed(summary, inside, "summary") if on else (lambda self, *a, **k: {})
            with tempfile.TemporaryDirectory() as d:
                t = time.perf_counter()
                run_training(cfg, Path(d) / "run", echo=lambda *_: None)
                seconds[mode].append(time.perf_counter() - t)
    ShieldRuleSets.at, ShieldRuleSets.taken, ShieldRuleSets.summary = at, taken, summary
    for mode, values in seconds.items():
        print(
            f"measure {mode}: median {np.median(values):.2f} s per run (n = {repeats}: {[round(v, 2) for v in values]})"
        )
    print(", ".join(f"inside the measure, {k}: {v / repeats:.2f} s per run" for k, v in inside.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0-2")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--cost", action="store_true", help="time the measure on and off in tier 2, interleaved"
    )
    parser.add_argument("--cost-train", action="store_true", help="the same for a short scars train run")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.cost_train:
        if args.repeats < 1:
            _refuse(f"--repeats {args.repeats} must be >= 1")
        cost_train(args.repeats)
        return
    if args.cost:
        if args.repeats < 1:
            _refuse(f"--repeats {args.repeats} must be >= 1")
        cost(args.repeats)
        return
    seeds = _seeds(args.seeds)
    if len(seeds) < 2:  # tier 3 attributes histories held out by seed
        _refuse(f"--seeds {args.seeds!r} must name at least two seeds, e.g. 0-2")
    out = args.out or Path(tempfile.mkdtemp(prefix="rule_set_tiers-"))
    started = time.perf_counter()
    tier2 = []
    for seed in seeds:
        summary = run_tier2(
            Tier2Config(method="scars", runs=3, seed=seed), out / "tier2" / f"s{seed}"
        ).summary
        tier2.append(summary["rule_set"])
        print(
            f"tier 2 seed {seed}: precision probes {summary['rule_set_precision_probes']:.3f}, recall probes "
            f"{summary['rule_set_recall_probes']:.3f}, precision decisions {summary['rule_set_precision_decisions']:.3f}, "
            f"recall decisions {summary['rule_set_recall_decisions']:.3f} (n = {summary['runs']} runs)"
        )
    cfg = next(c for c in demo_configs(seeds[0]) if c.method == "scars")
    if len(seeds) != len(cfg.seeds):
        cfg = type(cfg)(**{**cfg.to_dict(), "seeds": tuple(seeds)})
    tier3 = run_tier3(cfg, out / "tier3").summary["rule_set"]
    print(f"\nwall {time.perf_counter() - started:.0f} s; seeds {seeds}\n")
    rows = {
        "tier 2 (clusters = (seed, run))": pooled(tier2, seeds[0]),
        "tier 3, arena C (clusters = C episodes)": pooled([tier3], seeds[0]),
    }
    header = list(next(iter(rows.values())))
    print("| | " + " | ".join(header) + " |")
    print("| --- |" + " --- |" * len(header))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(row[h] for h in header) + " |")


if __name__ == "__main__":
    main()
