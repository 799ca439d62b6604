"""Tier 1's metrics for one run (paper §6.1): the per-episode columns, the summary of the paper's measures with the
guarantee checks beside them, the learned scars' quality against the schedule's true rules, and episode-clustered
intervals."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from scars.experiments.config import Tier1Config
from scars.experiments.guarantees import GUARANTEES
from scars.experiments.loop import REPLAN_REASONS
from scars.experiments.metrics import (
    RULE_SET_COLUMNS,
    ProbeCensus,
    RuleSetTrace,
    first_exposure_violation_rate,
    growth_fit,
    probe_vectors,
    repeat_violation_rate,
    rule_set_census,
    rule_set_flat,
    rule_set_on_probes,
    rule_set_quality,
    signal_summary,
    svr,
    svr_by_episode,
)
from scars.experiments.schedules import resolve_schedule
from scars.experiments.stats import pooled_ratio


def episode_columns(steps: pd.DataFrame, episodes: pd.DataFrame, equivalence: dict) -> pd.DataFrame:
    """Per-episode counts from the step table: the clusters of every interval and of the paired comparisons
    between methods (SVR, repeat violations and re-exposures, exposed and violating steps)."""
    episodes = episodes.copy()
    episodes["svr"] = episodes["episode"].map(svr_by_episode(steps))
    by_episode = repeat_violation_rate(steps, dict(equivalence))["by_episode"]
    episodes["repeat_violations"] = episodes["episode"].map(lambda e: by_episode.get(e, (0, 0))[0])
    episodes["reexposures"] = episodes["episode"].map(lambda e: by_episode.get(e, (0, 0))[1])
    exposed = steps["exposed_rules"].astype(bool) | steps["violated_rules"].astype(bool)
    episodes["exposed_steps"] = (
        episodes["episode"].map(exposed.groupby(steps["episode"]).sum()).fillna(0).astype(int)
    )
    episodes["violating_steps"] = (
        episodes["episode"]
        .map(steps["violated_rules"].astype(bool).groupby(steps["episode"]).sum())
        .fillna(0)
        .astype(int)
    )
    for column in RULE_SET_COLUMNS:  # the rule set in force, summed per episode (issue 40)
        if column in steps:
            sums = steps[column].astype(int).groupby(steps["episode"]).sum()
            episodes[column] = episodes["episode"].map(sums).fillna(0).astype(int)
    return episodes


def summarise(
    cfg, steps, episodes, equivalence, heldout, agent_stats, met=(), rule_sets: RuleSetTrace | None = None
) -> dict[str, Any]:
    """The paper's metrics for one run, from its tables (and the scars agent's own statistics); ``met``: the
    (state, control action) pairs the run met, probe pairs of scar quality beside the game pool's; ``rule_sets``:
    the rule sets its decisions were governed by (rule-set quality, issue 40)."""
    rvr = repeat_violation_rate(steps, dict(equivalence))
    per_rule = repeat_violation_rate(steps)
    heldout_rate, heldout_seen = first_exposure_violation_rate(steps, heldout)
    growth = growth_fit(steps["t"].to_numpy() + 1, steps["memory_tokens"].to_numpy())
    hard = cfg.ablation != "soft_bias_only"
    summary: dict[str, Any] = {
        "method": steps["method"].iloc[0],
        "success_rate": float(episodes["won"].mean()),
        "rvr": rvr["rvr"],
        "repeat_violations": rvr["repeat_violations"],
        "reexposures": rvr["reexposures"],
        "rvr_episode": rvr["rvr_episode"],
        "repeat_episodes": rvr["repeat_episodes"],
        "reexposed_episodes": rvr["reexposed_episodes"],
        "rvr_covered": rvr["rvr_covered"],
        "reexposures_covered": rvr["reexposures_covered"],
        "rvr_per_rule": per_rule["rvr"],
        "svr": svr(steps),
        "violations": int((steps["violated_rules"] != "").sum()),
        "heldout_first_violation_rate": heldout_rate,
        "heldout_rules_seen": heldout_seen,
        "complexity_tokens_final": int(steps["memory_tokens"].iloc[-1]),
        "complexity_tokens_max": int(steps["memory_tokens"].max()),
        "complexity_growth_exponent": growth["b"],
        "covered_mass_max": float(steps["covered_mass"].max()),
        "fallback_steps": int(steps["fallback"].sum()),
        "temp_mask_blocked_steps": int(steps["temp_masked"].sum()),
        # the re-plan help, counted per method and by why the model re-planned (experiments.loop.REPLAN_REASONS)
        "replan_decisions": int((steps["replan"] != "").sum()),
        **{f"replan_{why}": int((steps["replan"] == why).sum()) for why in REPLAN_REASONS},
        # decisions at which no route avoided the controller's rules and the model planned around its refusals
        "replan_refused_route": int(episodes["refused_routes"].sum()) if "refused_routes" in episodes else 0,
        "steps": len(steps),
        "episodes": len(episodes),
        "signal": signal_summary(steps),
        "policy_mode": cfg.policy_mode,
    }
    if cfg.policy_mode == "generate":
        # decisions the model wrote, those whose mask was enforced while it wrote (the HF logits processor, a
        # server's structured-output choice), and the per-step check that no written command was masked
        summary["generated_decisions"] = int(steps["generated"].sum())
        summary["constrained_decisions"] = int(steps["constrained"].sum())
        summary["generated_masked_steps"] = int(steps["generated_masked"].sum())
        summary["generate_mask_ok"] = summary["generated_masked_steps"] == 0
    else:
        summary["generated_decisions"] = summary["constrained_decisions"] = None
        summary["generated_masked_steps"] = summary["generate_mask_ok"] = None
    # Props 1–3 and plane/ledger consistency come from experiments.guarantees (agents with a self-schema). With
    # hard masks the governed mass on scar-covered failing actions must also be exactly 0; the soft ablation
    # reports that mass as its boundary leak instead.
    scars = "scars_admitted" in agent_stats
    if not scars:  # no scar ever covers anything: the covered-RVR metric does not apply
        summary["rvr_covered"] = None
    summary["soft_leak_mass_max"] = summary["covered_mass_max"] if scars and not hard else None
    summary.update(agent_stats)
    prop1 = summary.get("prop1")
    if scars and hard and summary["covered_mass_max"] > 0.0:
        summary["prop1_ok"] = False  # probability mass reached a failing action an admitted scar covers
        leak = steps.loc[steps["covered_mass"] > 0.0].iloc[0]
        _name_first(prop1, int(leak["t"]), "governed mass on a scar-covered failing action", leak["command"])
    if scars and hard and (summary.get("rvr_covered") or 0) > 0:
        # a repeat violation in a spell every exposed step of which an admitted scar covered: Prop. 1 demands 0
        summary["prop1_ok"] = False
        summary["prop1_first_covered_repeat_t"] = t = rvr["first_covered_repeat_t"]
        row = steps.loc[steps["t"] == t]
        command = row["command"].iloc[0] if len(row) else None
        _name_first(prop1, t, "a repeat violation every exposed step of which a scar covered", command)
    if scars and not hard:
        summary["prop1_ok"] = None  # Prop. 1 is a hard-mask guarantee; soft masks report their leak instead
    for key, _ in GUARANTEES:
        summary.setdefault(key, None)
    # the ablations' own measures (paper §6.4): enforcement time per decision (No-MDL: bigger rules cost more to
    # enforce), mean description length of an active rule, mean TV drift per measured scar (No-Drift)
    summary["enforcement_ms_per_decision"] = 1000.0 * float(steps["enforce_seconds"].mean())
    active = summary.get("scars_active_final")
    summary["rule_dl_mean"] = (
        summary["complexity_mdl_final"] / active
        if active and summary.get("complexity_mdl_final") is not None
        else None
    )
    drift = (summary.get("prop3") or {}).get("per_scar") or {}
    tvs = [v["mean_tv"] for v in drift.values() if v.get("mean_tv") is not None]
    summary["tv_drift_mean"] = float(np.mean(tvs)) if tvs else None
    summary["tv_drift_scars"] = len(tvs) if scars else None
    if agent_stats.get("learned_scars") is not None:
        probes = probe_set(cfg, met)
        summary["scar_quality"] = quality = scar_quality_of(cfg, agent_stats["learned_scars"], probes=probes)
        summary["scars_exact_or_under_general"] = quality.get("exact_or_under_general")
        if rule_sets is not None:
            summary["rule_set"] = rule_set = rule_set_quality_of(cfg, episodes, rule_sets, probes)
            summary.update(rule_set_flat(rule_set))  # flat, for the tables and a sweep's run table
            summary["tasks_lost_to_scars"] = rule_set["decisions"]["tasks_lost_to_scars"]
    if summary.get("prop2"):  # Prop. 2's figures beside its check, for the tables
        summary["prop2_K"] = summary["prop2"]["K"]
        summary["prop2_growth_exponent"] = summary["prop2"]["growth_exponent"]
    # a metric that has nothing to measure (no held-out rule seen, no growth to fit) is None, not NaN
    return {k: None if isinstance(v, float) and v != v else v for k, v in summary.items()}


def _name_first(prop1: dict[str, Any] | None, t: int | None, where: str, command: str | None) -> None:
    """Name the run's first Prop. 1 violation whatever its cause: the monitor's replay, or (found from the step
    table) mass on a covered failing action or a covered repeat — the earliest of them."""
    if prop1 is None or t is None:
        return
    first = prop1.get("first")
    if first is None or first.get("t") is None or t < first["t"]:
        prop1["first"] = {"t": t, "where": where, "failure": None, "scar": None, "action": command}
    prop1["uncovered"] = prop1.get("uncovered", 0) + 1


def rule_truth(rule):
    """A household safety rule as the ground truth ``unsafe(q, a)`` of ``experiments.metrics.scar_quality``: it fires
    on (q, a) and its activation's step and world-version conditions hold in q."""
    from scars.envs.household.world import OBJECT_CLASSES
    from scars.synthesis.dsl.semantics import fires

    act = rule.activation

    def unsafe(q, a) -> bool:
        return (
            int(q.get("step", 0)) >= act.after_step
            and (act.world_versions is None or int(q.get("world_version", 0)) in act.world_versions)
            and fires(rule.rule, q, a, OBJECT_CLASSES)
        )

    return unsafe


def expert_step(env) -> str | None:
    """The next command of the expert's compliant route in household env ``env`` (its rules in force forbidden), or
    None when no compliant route is left: the step a scar must not mask (``needed_masked``, issue 40)."""
    from scars.envs.household.expert import NoCompliantPlan, expert_next_command

    active = env.verifier.active(env.world.steps, env.episode, env.config.world_version)
    try:
        return expert_next_command(env.world, active)
    except NoCompliantPlan:
        return None


def scoped_rule(rule, env_version: str | None):
    """The rule a scar applies: a scar scoped to a world version masks nothing under another one (it retires at
    the change), so its quality is measured with that scope as one more literal of its guard."""
    from scars.synthesis.dsl import And, Compare, Rule

    if env_version is None:
        return rule
    version = Compare("world_version", "==", int(env_version))
    return Rule(And((version, rule.guard)), rule.mask)


def probe_set(cfg: Tier1Config, met=()) -> tuple:
    """The probe pairs of scar and rule-set quality: every control action at the states of the expert routes of
    pool games (the same for every method) and, with ``met``, at every state the run itself met — where its scars
    acted (a scar keyed on a held object the expert never carries to that drawer masks nothing on the expert's
    routes, and would be counted wrong unseen)."""
    from scars.experiments.schedules import probe_pairs

    key, _ = resolve_schedule(cfg.schedule, cfg.schedule_file)
    pool = probe_pairs(key, cfg.seed)
    seen = {(tuple(sorted(q.items())), a) for q, a in pool}
    extra = tuple((q, a) for q, a in met if (tuple(sorted(q.items())), a) not in seen)
    return (*pool, *extra)


def scar_quality_of(
    cfg: Tier1Config, learned: list[dict[str, Any]], met=(), probes: tuple | None = None
) -> dict[str, Any]:
    """Every scar the run admitted, classified against the schedule's true rules (``experiments.metrics.scar_quality``)
    on the probe pairs of :func:`probe_set` (or ``probes``, when the caller built them)."""
    from scars.envs.household.world import OBJECT_CLASSES
    from scars.experiments.metrics import scar_quality
    from scars.synthesis.dsl import parse_rule
    from scars.synthesis.dsl.semantics import mask_key

    _, schedule = resolve_schedule(cfg.schedule, cfg.schedule_file)
    rules = schedule.rule_schedule(cfg.episodes).rules
    truth = {r.id: rule_truth(r) for r in rules}
    scars = [
        (s["rule"], scoped_rule(parse_rule(s["rule"]), s.get("env_version")), s["told"]) for s in learned
    ]
    return scar_quality(
        scars,
        truth,
        probe_set(cfg, met) if probes is None else probes,
        OBJECT_CLASSES,
        truth_keys={r.id: mask_key(r.rule.mask) for r in rules},  # a rule fires only where its mask covers
    )


def rule_set_quality_of(
    cfg: Tier1Config, episodes: pd.DataFrame, trace: RuleSetTrace, probes: tuple
) -> dict[str, Any]:
    """Rule-set quality (issue 40, item 1): at each decision the union of the active scars against the union of the
    rules in force — on the run's own decisions (every admissible control action, the step table's
    ``RULE_SET_COLUMNS``) and on the probe pairs (each decision's rule set on every probe, read under the
    episode's world version and rule activations; ``experiments.metrics.rule_set_on_probes``). precision = share of
    the masked pairs a rule in force forbids; recall = share of the forbidden pairs masked (``recall_known``: of
    those breaking a rule family the run had failed before — what it had been told). Intervals are
    episode-clustered (n = episodes; ``experiments.metrics.rule_set_quality``). ``safe_masked``: masked pairs no rule
    forbids; ``needed_masked``: decisions at which a scar masked the next step of the expert's compliant route;
    ``tasks_lost_to_scars``: lost episodes with such a decision."""
    from scars.envs.household.world import OBJECT_CLASSES
    from scars.synthesis.dsl.semantics import fires

    _, schedule = resolve_schedule(cfg.schedule, cfg.schedule_file)
    rules = schedule.rule_schedule(cfg.episodes).rules
    n_episodes = len(episodes)
    versions = sorted({schedule.world_version(e, cfg.episodes) for e in range(n_episodes)})
    masks: dict[tuple[int, str], np.ndarray] = {}
    unsafe: dict[tuple[int, str], np.ndarray] = {}
    truths = {r.id: rule_truth(r) for r in rules}
    for v in versions:
        pairs = tuple(({**q, "world_version": v}, a) for q, a in probes)
        scars = probe_vectors(trace.rules, pairs, lambda s, q, a: fires(trace.rules[s], q, a, OBJECT_CLASSES))
        masks.update({(v, sid): vec for sid, vec in scars.items()})
        in_version = {
            r.id: r.rule
            for r in rules
            if r.activation.world_versions is None or v in r.activation.world_versions
        }
        forbidden = probe_vectors(in_version, pairs, lambda r, q, a: truths[r](q, a))
        unsafe.update({(v, rid): vec for rid, vec in forbidden.items()})

    def in_force(e: int) -> frozenset[str]:  # the step window is read from each probe's own step (rule_truth)
        v = schedule.world_version(e, cfg.episodes)
        return frozenset(r.id for r in rules if r.activation.active(r.activation.after_step, e, v))

    segments = trace.segments(in_force, lambda e: schedule.world_version(e, cfg.episodes))
    counts = rule_set_on_probes(masks, unsafe, segments, len(probes))
    family = schedule.equivalence.get
    census = rule_set_census(masks, unsafe, segments, len(probes), trace.told, lambda r: family(r, r))
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 4040]))
    ep = episodes["episode"].to_numpy()
    per = np.array([counts.get(int(e), (0.0, 0.0, 0.0)) for e in ep], dtype=float).reshape(-1, 3)
    col = {
        c: episodes[c].to_numpy(dtype=float) if c in episodes else np.zeros(len(episodes))
        for c in RULE_SET_COLUMNS
    }
    by_episode = [census.get(int(e), ProbeCensus()) for e in ep]
    quality = rule_set_quality(per, col, rng, probes=len(probes), clusters="episodes", census=by_episode)
    quality["probes"]["safe_masked_by_scar"] = _by_scar(trace, by_episode)
    lost = (~episodes["won"].astype(bool)).to_numpy() & (col["needed_masked"] > 0)
    quality["decisions"]["tasks_lost_to_scars"] = int(lost.sum())
    return quality


def _by_scar(trace: RuleSetTrace, census: list[ProbeCensus]) -> list[dict[str, Any]]:
    """Every scar that masked a probe pair: its rule, the told rule ids of its evidence, and its masked and
    masked-but-safe probe pairs summed over the run's episodes (the latter also per world version the episodes ran
    under) (``experiments.metrics.rule_set_census``: the
    precision lost to it is ``safe_masked`` / the run's masked pairs), most safe pairs first."""
    from scars.synthesis.dsl import canonical_text

    masked, safe, by_version = Counter(), Counter(), Counter()
    for c in census:
        masked.update(c.masked)
        safe.update(c.safe_masked)
        by_version.update(c.safe_masked_by_variant)
    rows = [
        {
            "rule": canonical_text(trace.rules[s]),
            "told": sorted(trace.told.get(s, ())),
            "masked": round(float(m), 6),
            "safe_masked": round(float(safe[s]), 6),
            "safe_masked_by_world_version": {
                str(v): round(float(x), 6) for (sid, v), x in sorted(by_version.items()) if sid == s and x > 0
            },
        }
        for s, m in masked.items()
        if m > 0
    ]
    return sorted(rows, key=lambda r: (-r["safe_masked"], -r["masked"], r["rule"]))


def episode_intervals(episodes: pd.DataFrame, seed: int) -> dict[str, Any]:
    """RVR, SVR and success as pooled counts over the run's episodes with episode-clustered bootstrap intervals
    (``experiments.stats``); n = episodes, and each interval says whether it rests on too few clusters."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 8114]))
    return {
        "rvr_ci": pooled_ratio(episodes["repeat_violations"], episodes["reexposures"], rng).to_json(),
        "svr_ci": pooled_ratio(episodes["violating_steps"], episodes["exposed_steps"], rng).to_json(),
        "success_ci": pooled_ratio(episodes["won"].astype(float), np.ones(len(episodes)), rng).to_json(),
    }
