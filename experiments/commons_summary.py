"""Tier 2's metrics for one configuration (paper §6.2): the month and run tables, tier-2 RVR, the inappropriate
scars by the arena's ground truth, and the summary — GovSim's suite with run-clustered intervals, the learners'
own measures and the guarantee checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from scars.envs.commons.dynamics import sustainable_catch
from scars.envs.commons.metrics import episode_metrics, month_table
from scars.envs.commons.norms import NormVerifier
from scars.experiments.commons_seats import LEARNER
from scars.experiments.config import Tier2Config
from scars.experiments.guarantees import GUARANTEES
from scars.experiments.metrics import signal_summary
from scars.experiments.stats import pooled_ratio
from scars.synthesis.dsl import Action, canonical_text
from scars.synthesis.dsl.semantics import fires


def months_table(cfg: Tier2Config, records) -> pd.DataFrame:
    frames = []
    for run, record in enumerate(records):
        table = month_table(record)
        table.insert(0, "run", run)
        table.insert(0, "method", cfg.method_label)
        frames.append(table)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def runs_table(cfg: Tier2Config, records, rvr: Mapping[str, Any], kinds) -> pd.DataFrame:
    """GovSim's metrics per run, and the learners' own: their over-usage counts, gain, gain lost below the fair
    share, punishments received (justified / unjustified by the norm verifier)."""
    learner_idx = [i for i, k in enumerate(kinds) if k == LEARNER]
    rows = []
    for run, record in enumerate(records):
        m = episode_metrics(record)
        dyn = record.config.dynamics
        verifier = NormVerifier(dyn)
        outsider = len(record.agents) - 1 if record.config.outsider_month else None
        over = gain = lost = 0.0
        justified = unjustified = 0
        over_count = seat_months = learner_months = 0
        outsider_over = outsider_months = outsider_justified = 0
        for t, month in enumerate(record.months, start=1):
            h = month.harvest
            share = h.sustainable_share  # f(t)/|I(t)|
            fair = float(np.floor(share))
            if t <= m["survival_time"]:
                over_count += sum(c > share for c in h.catches)
                seat_months += h.group_size
                learner_months += sum(h.present[i] for i in learner_idx)
                if outsider is not None and h.present[outsider]:
                    outsider_months += 1
                    outsider_over += h.catches[outsider] > share
            for i in learner_idx:
                if not h.present[i]:
                    continue
                catch = h.catches[i]
                over += catch > share
                gain += catch
                lost += max(0.0, fair - catch)
            for p in month.punishments:
                target = record.agents.index(p.target)
                judged = verifier.judge_punishment(p).justified
                outsider_justified += target == outsider and judged
                if target in learner_idx:
                    if judged:
                        justified += 1
                    else:
                        unjustified += 1
        rows.append(
            {
                "method": cfg.method_label,
                "seed": cfg.seed,
                "run": run,
                "survival_time": m["survival_time"],
                "survived": bool(m["survived"]),
                "total_gain": m["total_gain"],
                "efficiency": m["efficiency"],
                "equality": m["equality"],
                "over_usage": m["over_usage"],
                "over_count": over_count,
                "seat_months": seat_months,
                "cooperative_yield": m["cooperative_yield"],
                "punishments": m["punishments"],
                "justified_punishments": m["justified_punishments"],
                "learner_over_count": int(over),
                "learner_seat_months": learner_months,
                "outsider_over_count": outsider_over,
                "outsider_seat_months": outsider_months,
                "outsider_punished_justified": outsider_justified,
                "learner_gain": gain / max(len(learner_idx), 1),
                "learner_gain_lost": lost / max(len(learner_idx), 1),
                "learner_punished_justified": justified,
                "learner_punished_unjustified": unjustified,
            }
        )
    runs = pd.DataFrame(rows)
    runs["repeat_over"] = runs["run"].map(lambda r: rvr["by_run"].get(r, (0, 0))[0])
    runs["reexposures"] = runs["run"].map(lambda r: rvr["by_run"].get(r, (0, 0))[1])
    return runs


def tier2_rvr(steps: pd.DataFrame) -> dict[str, Any]:
    """Tier-2 RVR per learning seat: after the seat's first verified over-harvest (a request above f(t)/|I|) or
    first punishment the norm verifier validated, every later harvest decision is a re-exposure (some admissible
    request would over-harvest) and an over-harvest there is a repeat. Pooled over seats; ``by_run``: (repeats,
    re-exposures) per run (the clusters of its interval). A fresh outsider's runs are separate agents
    (``incarnation``): what one learned does not arm the next."""
    by_run: dict[int, list[int]] = {}
    repeats = exposures = 0
    key = "incarnation" if "incarnation" in steps else "seat"
    for _, seat_steps in steps.sort_values("t", kind="stable").groupby(key, sort=True):
        armed = False
        for row in seat_steps.itertuples():
            if row.phase == "harvest":
                if armed:
                    exposures += 1
                    repeats += bool(row.over)
                    cell = by_run.setdefault(int(row.run), [0, 0])
                    cell[0] += bool(row.over)
                    cell[1] += 1
                if row.over:
                    armed = True
            if row.justified_received:
                armed = True
    return {
        "rvr": repeats / exposures if exposures else None,
        "repeat_over": repeats,
        "reexposures": exposures,
        "by_run": {k: tuple(v) for k, v in by_run.items()},
    }


def inappropriate_scars(
    rules, template: Mapping[str, Any], dyn, classes, group_sizes: tuple[int, ...] | None = None
) -> list[str]:
    """Scars that forbid a harvest at or below the fair share ⌊f(h)/|I|⌋ at a pool level h where that harvest is
    sustainable — decided by the arena's ground truth over every pool level 1..capacity and every group size |I| the
    run had (``group_sizes``; default: every seat) — the context is a recorded harvest context with the pool level,
    f(t), the group size and the share set to those values."""
    sizes = group_sizes or (dyn.num_agents,)
    bad = []
    for rule in rules:
        for n in sizes:
            if _forbids_a_fair_harvest(rule, template, dyn, classes, n):
                bad.append(canonical_text(rule))
                break
    return bad


def _forbids_a_fair_harvest(rule, template: Mapping[str, Any], dyn, classes, group_size: int) -> bool:
    for h in range(1, dyn.capacity + 1):
        f = sustainable_catch(h, dyn)
        fair = int(np.floor(f / group_size))
        if fair < 1:
            continue
        q = dict(template) | {
            "pool_resource_level": h,
            "sustainable_catch": f,
            "sustainable_share": f / group_size,
            "num_agents": group_size,
        }
        if any(fires(rule, q, Action.tool("harvest", amount=a), classes) for a in range(1, fair + 1)):
            return True
    return False


def _interval(num, den, seed: int, salt: int) -> dict[str, Any]:
    rng = np.random.default_rng(np.random.SeedSequence([seed, salt]))
    return pooled_ratio(num, den, rng).to_json()


def summarise(cfg, records, steps, runs, learners, agent_stats, kinds, admitted, rvr) -> dict[str, Any]:
    """The tier-2 metrics of one configuration: GovSim's suite over the runs (pooled counts; 95% run-clustered
    bootstrap intervals, n = runs), cooperative yield, punishments, the learners' over-usage and tier-2 RVR, the
    scars this run admitted (a transferred ledger's earlier admissions are not counted) and the inappropriate ones
    by ground truth, the rules active at the end, active-schema tokens, and the Props checks."""
    n_runs = len(runs)
    ones = np.ones(n_runs)
    s = cfg.seed
    summary: dict[str, Any] = {
        "method": cfg.method_label,
        "setup": cfg.setup,
        "arena": cfg.arena,
        "gates": cfg.gates,
        "transfer": bool(cfg.transfer_from),
        "outsider_month": cfg.outsider_month or None,
        "runs": n_runs,
        "months": cfg.months,
        "learning_seats": sum(k == LEARNER for k in kinds),
        "survival_rate": float(runs["survived"].mean()),
        "survival_rate_ci": _interval(runs["survived"].astype(float), ones, s, 1),
        "survival_time_mean": float(runs["survival_time"].mean()),
        "survival_time_ci": _interval(runs["survival_time"].astype(float), ones, s, 2),
        "gain_mean": float(runs["total_gain"].mean()),
        "efficiency_mean": float(runs["efficiency"].mean()),
        "efficiency_ci": _interval(runs["efficiency"], ones, s, 3),
        "equality_mean": float(runs["equality"].mean()),
        "over_usage": float(runs["over_count"].sum() / runs["seat_months"].sum()),
        "over_usage_ci": _interval(runs["over_count"], runs["seat_months"], s, 4),
        "cooperative_yield_mean": float(runs["cooperative_yield"].mean()),
        "cooperative_yield_ci": _interval(runs["cooperative_yield"], ones, s, 5),
        "learner_over_usage": (
            float(runs["learner_over_count"].sum() / runs["learner_seat_months"].sum())
            if runs["learner_seat_months"].sum() > 0
            else None
        ),
        "learner_over_usage_ci": _interval(runs["learner_over_count"], runs["learner_seat_months"], s, 6),
        "outsider_over_usage": (
            float(runs["outsider_over_count"].sum() / runs["outsider_seat_months"].sum())
            if runs["outsider_seat_months"].sum() > 0
            else None
        ),
        "outsider_over_usage_ci": _interval(runs["outsider_over_count"], runs["outsider_seat_months"], s, 9),
        "outsider_punished_justified": int(runs["outsider_punished_justified"].sum()),
        "outsider_seat_months": int(runs["outsider_seat_months"].sum()),
        "learner_gain_mean": float(runs["learner_gain"].mean()),
        "learner_gain_lost_mean": float(runs["learner_gain_lost"].mean()),
        "learner_gain_lost_ci": _interval(runs["learner_gain_lost"], ones, s, 7),
        "punishments": int(runs["punishments"].sum()),
        "justified_punishments": int(runs["justified_punishments"].sum()),
        "learner_punished_justified": int(runs["learner_punished_justified"].sum()),
        "learner_punished_unjustified": int(runs["learner_punished_unjustified"].sum()),
        "rvr": rvr["rvr"],
        "repeat_over": rvr["repeat_over"],
        "reexposures": rvr["reexposures"],
        "rvr_ci": _interval(runs["repeat_over"], runs["reexposures"], s, 8)
        if "repeat_over" in runs
        else None,
        "memory_tokens_final": int(steps["memory_tokens"].iloc[-1]) if not steps.empty else 0,
        "memory_tokens_max": int(steps["memory_tokens"].max()) if not steps.empty else 0,
        "verifier_calls": int(sum(a.get("verifier_calls", 0) for a in agent_stats.values())),
        "policy_mode": cfg.policy_mode,
        "generated_decisions": int(steps["generated"].sum()) if "generated" in steps else 0,
        "constrained_decisions": int(steps["constrained"].sum()) if "constrained" in steps else 0,
        "generated_masked_steps": int(steps["generated_masked"].sum()) if "generated_masked" in steps else 0,
    }
    if cfg.policy_mode == "generate":  # the per-step check, summed: no written command was ever masked
        summary["generate_mask_ok"] = summary["generated_masked_steps"] == 0
    dyn = records[0].config.dynamics
    group_sizes = tuple(sorted({m.harvest.group_size for r in records for m in r.months}))
    scars_admitted = 0
    inappropriate: list[str] = []
    active: list[str] = []
    props: dict[str, list] = {k: [] for k, _ in GUARANTEES if k != "generate_mask_ok"}
    for seat, learner in learners.items():
        stats = agent_stats[seat]
        for key in props:
            if key in stats:
                props[key].append(stats[key])
        if seat not in admitted:
            continue
        scars_admitted += len(admitted[seat])
        active += list(stats.get("active_rules", []))
        inappropriate += inappropriate_scars(
            admitted[seat], learner.template, dyn, learner.adapter.card.classes, group_sizes
        )
    has_schema = bool(admitted)
    summary["scars_admitted"] = scars_admitted if has_schema else None
    summary["inappropriate_scars"] = len(inappropriate) if has_schema else None
    summary["inappropriate_rules"] = sorted(set(inappropriate))
    summary["active_rules"] = sorted(set(active))
    for key, values in props.items():  # a check holds when it holds on every seat; None: not applicable
        known = [v for v in values if v is not None]
        summary[key] = None if not known else all(known)
    summary["signal"] = signal_summary(steps) if not steps.empty else None
    summary["per_seat"] = {
        seat: {k: v for k, v in stats.items() if isinstance(v, int | float | bool | str) or v is None}
        for seat, stats in agent_stats.items()
    }
    return {k: None if isinstance(v, float) and v != v else v for k, v in summary.items()}
