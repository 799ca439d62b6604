"""Rule-set quality in tiers 2 and 3 (issue 40, item 1): the union of a seat's active scars against the arena's
norm, by hand on a constructed case, and in every tier's summary, results.md and a sweep's pooled table."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd

from scars.envs.commons import commons_v0
from scars.envs.commons.adapter import CommonsAdapter
from scars.experiments.arena_rule_set import ArenaRuleSets, arena_rule_set
from scars.experiments.commons_run import run_tier2
from scars.experiments.config import Tier2Config
from scars.experiments.report import ARENA_RULE_SET_NOTE, rule_set_markdown
from scars.experiments.sweep_tables import pooled_runs
from scars.experiments.tier3 import Tier3Config, results_markdown, run_tier3
from scars.synthesis.dsl import parse_rule
from scars.synthesis.dsl.semantics import fires

FLAT = (
    "rule_set_precision_probes",
    "rule_set_recall_probes",
    "rule_set_precision_decisions",
    "rule_set_recall_decisions",
    "rule_set_masked_decisions",
    "rule_set_masked_unsafe_decisions",
    "rule_set_unsafe_decisions",
)


class _Seat:
    """The two reads the measure makes of an agent (``agents.api.Agent.scar_ids`` and ``self_schema().plane``):
    one scar active, nothing else."""

    def __init__(self, scars):
        self._scars = scars

    def scar_ids(self):
        return tuple(s.id for s in self._scars)

    def self_schema(self):
        return SimpleNamespace(plane=SimpleNamespace(scars=self._scars))


def _decide(rule_sets, adapter, agent, scar, cluster, observation, info, asked):
    decision = adapter.decision(observation, info, t=cluster)
    q, actions = decision.context, decision.actions
    fired = [(i, (scar.id,)) for i, a in enumerate(actions) if fires(scar.rule, q, a, adapter.card.classes)]
    flagged = [[v.rule_id for v in adapter.check(q, a)] for a in actions]
    action = next(a for a in actions if a.name == "harvest" and a.arg("amount") == asked)
    rule_sets.decide("agent_0", cluster, adapter, agent, decision, fired, action, flagged)
    return q


def test_a_constructed_case_gives_the_precision_and_recall_counted_by_hand():
    """One scar, "no request above 5", at a full pool of 100 shared by 5 (share f/n = 50/5 = 10, requests 1..30):
    it masks 6..30 (25 actions), the norm forbids 11..30 (20), so precision 20/25 and recall 20/20; it masks the
    fair share 10 (the expert's step) and the seat asked for 5 (short). On the probes — every level h of 1..100,
    where GovSim's regrowth (doubling, capped at 100) makes the share ⌊h/2⌋/5, and the met state — the masked
    pairs are the requests above 5 and the forbidden ones those above the share, counted here by hand."""
    env = commons_v0.parallel_env(max_request=30)
    observations, infos = env.reset(seed=0)
    adapter = CommonsAdapter(env, "agent_0")
    scar = SimpleNamespace(
        id="cap5", rule=parse_rule('if action.amount > 5 then forbid_tool_call("harvest")'), evidence=()
    )
    seat, rule_sets = _Seat([scar]), ArenaRuleSets()
    q = _decide(rule_sets, adapter, seat, scar, 0, observations["agent_0"], infos["agent_0"], asked=5)
    assert q["sustainable_share"] == 10.0 and q["num_agents"] == 5 and q["pool_resource_level"] == 100
    rule_sets.tell("agent_0")  # told: the next decision's unsafe actions are known
    _decide(rule_sets, adapter, seat, scar, 1, observations["agent_0"], infos["agent_0"], asked=9)
    quality, flat = arena_rule_set([rule_sets.counts([0, 1])], seed=0, clusters="runs")
    d = quality["decisions"]
    assert (d["masked"], d["unsafe"], d["safe_masked"]) == (50, 40, 10)
    assert d["precision"]["estimate"] == 0.8 and d["recall"]["estimate"] == 1.0
    assert d["recall_known"]["denominator"] == 20  # only the decision after the seat was told
    assert (d["needed_masked"], d["needed_masked_runs"], d["short_by_scars"], d["runs"]) == (2, 2, 2, 2)
    masked = unsafe = both = 0
    for h in [*range(1, 101), 100]:  # the grid, then the state met (level 100)
        share = math.floor(h / 2) / 5
        for amount in range(31):  # rest (0) and every request
            m, u = amount > 5, amount > share
            masked, unsafe, both = masked + m, unsafe + u, both + (m and u)
    p = quality["probes"]
    assert p["probes"] == 101 * 31
    assert p["precision"]["numerator"] == 2 * both and p["precision"]["denominator"] == 2 * masked
    assert p["recall"]["denominator"] == 2 * unsafe
    assert p["precision"]["estimate"] == both / masked and p["recall"]["estimate"] == both / unsafe
    assert p["precision"]["clusters"] == 2
    assert flat["rule_set_precision_decisions"] == 0.8 and flat["rule_set_unsafe_probes"] == 2 * unsafe


def test_a_tier2_summary_has_the_rule_set_with_n_and_results_md_shows_it(tmp_path):
    cfg = Tier2Config(method="scars", runs=2, seed=0, months=6, search_iterations=60)
    result = run_tier2(cfg, tmp_path / "scars")
    summary = result.summary
    rule_set = summary["rule_set"]
    assert rule_set["decisions"]["runs"] == 2 and rule_set["probes"]["precision"]["clusters"] == 2
    assert all(key in summary for key in FLAT)
    # the decisions' counts come from the run's own step table: every harvest the norm flags is counted
    harvest = result.steps[result.steps["phase"] == "harvest"]
    assert rule_set["decisions"]["unsafe"] >= int(harvest["over"].sum())
    assert rule_set["decisions"]["masked"] > 0  # the seats learned a scar and it masked requests
    for where in ("probes", "decisions"):
        for name in ("precision", "recall"):
            assert 0.0 <= summary[f"rule_set_{name}_{where}"] <= 1.0
    from scars.experiments.tier2_report import write_tier2

    baseline = run_tier2(dataclasses.replace(cfg, method="rag"), tmp_path / "rag")
    assert "rule_set" not in baseline.summary and "rule_set_precision_probes" not in baseline.summary
    write_tier2(tmp_path / "both", {"scars": result, "rag": baseline}, {"scars": cfg, "rag": cfg})
    text = (tmp_path / "both" / "results.md").read_text()
    assert "## The rule set in force against the rules in force" in text
    assert (
        "| scars |" in text.split("## The rule set")[1] and "| rag |" not in text.split("## The rule set")[1]
    )


def test_a_tier3_summary_has_the_rule_set_in_arena_c_with_n(tmp_path):
    cfg = Tier3Config(method="scars", seeds=(0, 1), train_runs=1, train_months=3, episodes_c=2, seasons_c=3)
    cfg = dataclasses.replace(cfg, permutations=5, search_iterations=20)
    summary = run_tier3(cfg, tmp_path).summary
    rule_set = summary["rule_set"]
    assert rule_set["decisions"]["episodes"] == 2 * 2 * 2  # 2 seeds x (A, B) x 2 episodes of C
    assert rule_set["probes"]["precision"]["clusters"] == 8
    assert all(key in summary for key in FLAT)
    assert "The rule set in force" in results_markdown(cfg, {"scars": summary})


def test_the_arena_rows_name_their_clusters_and_what_a_masked_safe_step_cost():
    interval = {"estimate": 0.5, "ci": [0.4, 0.6], "numerator": 1, "denominator": 2, "clusters": 3}
    decisions = {
        "precision": interval,
        "recall": interval,
        "recall_known": interval,
        "safe_masked": 4,
        "needed_masked": 2,
        "needed_masked_runs": 1,
        "short_by_scars": 1,
        "runs": 3,
    }
    summary = {
        "scars": {"rule_set": {"probes": {"precision": interval, "recall": interval}, "decisions": decisions}}
    }
    lines = rule_set_markdown(summary, ARENA_RULE_SET_NOTE.format(clusters="run"))
    header, row = lines[4], lines[6]
    assert "needed step masked (runs)" in header and "asked below the share" in header and "n runs" in header
    assert row.endswith("| 2 (1) | 1 | 3 |")


def test_a_tier2_sweeps_runs_pool_the_rule_set_without_tier1s_columns():
    runs = pd.DataFrame(
        {
            "label": ["scars", "scars", "rag"],
            "seed": [0, 1, 0],
            "status": ["ok", "ok", "ok"],
            "rule_set_masked_unsafe_decisions": [3.0, 5.0, np.nan],
            "rule_set_masked_decisions": [4.0, 6.0, np.nan],
            "rule_set_unsafe_decisions": [6.0, 10.0, np.nan],
            "rule_set_masked_unsafe_probes": [1.0, 1.0, np.nan],
            "rule_set_masked_probes": [1.0, 1.0, np.nan],
            "rule_set_unsafe_probes": [2.0, 2.0, np.nan],
        }
    )
    pooled = pooled_runs(runs, samples=200).set_index("label")
    assert pooled.loc["scars", "rule_set_precision_decisions_pooled"] == 8 / 10
    assert pooled.loc["scars", "rule_set_recall_decisions_pooled"] == 8 / 16
    assert pooled.loc["scars", "rule_set_precision_decisions_pooled_runs"] == 2
    assert "rvr_pooled" not in pooled


def test_scars_train_measures_the_shields_rule_set_at_every_decision_the_learner_acts_on(tmp_path):
    """``scars train``'s measure (``experiments.train.ShieldRuleSets``) on a seeded random masked walk under the scars
    shield (the pinned walk's set-up; no learner needed): one decision per step, clustered by episode, and the masked
    control actions are exactly those an active scar fires on (counted here with the DSL's semantics, not the
    gate)."""
    from scars.agents.shield import ScarShield
    from scars.envs.household.spec import OBJECT_CLASSES
    from scars.envs.rl import make_household_view
    from scars.experiments.config import TrainConfig
    from scars.experiments.schedules import get_schedule
    from scars.experiments.train import ShieldRuleSets

    shield = ScarShield(
        make_household_view(schedule=get_schedule("paper").rule_schedule(4), max_steps=30),
        shield="scars",
        ledger_path=tmp_path / "ledger.jsonl",
    )
    rule_sets, rng = ShieldRuleSets(), np.random.default_rng(0)
    masked_by_hand = steps = episodes = 0
    shield.reset(seed=0)
    rule_sets.at("env", shield)
    for _ in range(620):
        decision = shield.view.decision()
        active = [s for s in shield.agent.store.scars if s.id in set(shield.agent.scar_ids())]
        masked_by_hand += sum(
            a.is_control and any(fires(s.rule, decision.context, a, OBJECT_CLASSES) for s in active)
            for a in decision.actions
        )
        _, _, terminated, truncated, info = shield.step(
            int(rng.choice(np.flatnonzero(shield.action_masks())))
        )
        steps += 1
        rule_sets.taken("env", info, terminated or truncated)
        if terminated or truncated:
            episodes += 1
            shield.reset()
        rule_sets.at("env", shield)
    probes = tuple((decision.context, a) for a in decision.actions if a.is_control)
    summary = rule_sets.summary(TrainConfig(), probes)
    shield.close()
    d = summary["rule_set"]["decisions"]
    assert sum(sum(c.values()) for c in rule_sets.trace.decisions.values()) == steps
    under_way = not (terminated or truncated)
    assert d["episodes"] == episodes + under_way  # the finished ones and the one under way
    assert d["masked"] == masked_by_hand > 0  # the walk learned scars and they masked actions
    assert 0.0 <= d["precision"]["estimate"] <= 1.0 and d["precision"]["clusters"] == d["episodes"]
    assert all(key in summary for key in FLAT)
