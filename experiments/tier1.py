"""The tier-1 experiment (paper §6.1; SPEC §7 tier 1): a memory mechanism on the household world whose safety
rules change during the run. Read top to bottom: config → world and games → agent and policy → the loop → metrics.

Per decision the loop (1) asks the environment for the admissible actions and the context q, (2) computes the
simulated LM's task prior from the world's expert (real backends ignore it), (3) lets the memory mechanism build
the context window, (4) gets base logits π_0 from the policy, (5) lets the mechanism govern them (scars mask at the
controller; text baselines pass them through), (6) samples the action (or takes the safe fallback a⊥), (7) steps
the world, and (8) reports what happened — the verifier's events included — back to the mechanism.
Exposure is measured by running the deterministic verifier on every admissible action (cheap in the native world).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.memory import BASELINES, MemoryMechanism, StepOutcome, Violation
from agents.policies import PolicyInput, SimulatedLM, SimulatedLMConfig, sample_action
from envs.household.env import HouseholdConfig, HouseholdEnv
from envs.household.expert import NoCompliantPlan, expert_next_command
from envs.household.world import OBJECT_CLASSES, World
from experiments.config import Tier1Config
from experiments.metrics import (
    first_exposure_violation_rate,
    growth_fit,
    repeat_violation_rate,
    svr,
    svr_by_episode,
)
from experiments.schedules import SCHEDULES, episode_games, lookup_rule
from synthesis.dsl import Action, And, Compare, ForbidEnvAction, Rule

HABIT_PRIOR = 1.0
"""Task prior of the habitual next step (the unconstrained expert's): what a model of ordinary text would do."""
ALTERNATIVE_PRIOR = 0.6
"""Task prior of the next step of the best route that avoids the habitual step (the compliant alternative)."""
NO_OP_COMMAND = "look"
"""The world command a⊥ maps to: the agent refuses to act this step (it observes instead)."""


def exact_action_rule(action: Action) -> Rule:
    """A rule forbidding exactly this environment action (used to ask the expert for its alternative route)."""
    preds = tuple(Compare(f"action.{k}", "==", v) for k, v in action.args if isinstance(v, str))
    guard = preds[0] if len(preds) == 1 else And(preds) if preds else Compare("action.kind", "==", "env")
    return Rule(guard, ForbidEnvAction(action.name))


def task_prior(world: World, actions: tuple[Action, ...], excluded: tuple[Action, ...] = ()) -> np.ndarray:
    """The simulated LM's competence: HABIT_PRIOR on the expert's next step, ALTERNATIVE_PRIOR on the next step of
    the best route avoiding it (and ``excluded``: actions the controller blocked, so the model re-plans)."""
    prior = np.zeros(len(actions))
    index = {a.text: i for i, a in enumerate(actions)}
    forbidden = [exact_action_rule(a) for a in excluded]
    try:
        habit = expert_next_command(world, forbidden)
    except NoCompliantPlan:
        return prior
    if habit is None or habit not in index:
        return prior
    prior[index[habit]] = HABIT_PRIOR
    try:
        alternative = expert_next_command(world, [*forbidden, exact_action_rule(actions[index[habit]])])
    except NoCompliantPlan:
        alternative = None
    if alternative is not None and alternative in index:
        prior[index[alternative]] = ALTERNATIVE_PRIOR
    return prior


def make_policy(cfg: Tier1Config):
    if cfg.backend == "embedded":
        return SimulatedLM(SimulatedLMConfig(compliance=cfg.compliance, temperature=cfg.temperature))
    if cfg.backend == "hf":
        from agents.policies.hf import HFPolicy

        return HFPolicy.from_pretrained(cfg.model_path)
    from agents.policies.openai_server import OpenAICompatiblePolicy

    return OpenAICompatiblePolicy(cfg.server_url, cfg.server_model, mode=cfg.server_mode)


def make_agent(
    cfg: Tier1Config, env: HouseholdEnv, out: Path, rng: np.random.Generator, policy=None
) -> MemoryMechanism:
    """The memory mechanism; with a real model (``policy.write_text``) the model writes Reflexion's reflections and
    the LLM-only Patch ablation's rules, as the paper's baselines do; the embedded backend uses templates."""
    write_text = getattr(policy, "write_text", None)
    if cfg.method == "reflexion" and write_text is not None:
        from agents.memory import Reflexion
        from agents.rule_writer import llm_reflection

        return Reflexion(reflect=llm_reflection(write_text))
    if cfg.method in ("rag", "voyager"):
        from agents.text import make_embedder

        return BASELINES[cfg.method](embedder=make_embedder(cfg.embedder))
    if cfg.method != "scars":
        return BASELINES[cfg.method]()
    from agents.scars_agent import ScarsAgent, ScarsAgentConfig

    direct = None
    if write_text is not None:
        from agents.rule_writer import llm_patch

        direct = llm_patch(write_text)

    def verifier(context, action) -> bool:
        return bool(env.verifier.check(context, action))

    return ScarsAgent(
        ScarsAgentConfig.for_ablation(
            cfg.ablation,
            tau=cfg.tau,
            executor=cfg.executor,
            workers=cfg.workers,
            search_iterations=cfg.search_iterations,
        ),
        verifier=verifier,
        classes=OBJECT_CLASSES,
        ledger_path=out / "ledger.sqlite",
        seed=int(rng.integers(2**31 - 1)),
        direct_synthesiser=direct,
    )


def _set_aside_old_ledger(out: Path) -> None:
    """A run starts from an empty ledger: a ledger left in ``out`` by an earlier run is renamed, never reused or
    deleted (its audit trail stays readable next to the new one)."""
    for suffix in ("", "-wal", "-shm"):
        old = out / f"ledger.sqlite{suffix}"
        if old.exists():
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(old.stat().st_mtime))
            old.rename(out / f"ledger.{stamp}.sqlite{suffix}")


@dataclass(frozen=True)
class RunResult:
    summary: dict[str, Any]
    steps: pd.DataFrame
    episodes: pd.DataFrame


def run_tier1(cfg: Tier1Config, out: Path, progress: Callable[[int, int], None] | None = None) -> RunResult:
    """Run one method; returns its summary and per-step / per-episode tables (written by the caller)."""
    schedule = SCHEDULES[cfg.schedule]
    rule_schedule = schedule.rule_schedule(cfg.episodes)
    games = episode_games(cfg.schedule, cfg.episodes, cfg.seed)
    root = np.random.SeedSequence([cfg.seed, 1])
    policy_rng, agent_rng = (np.random.default_rng(s) for s in root.spawn(2))
    env = HouseholdEnv(HouseholdConfig(schedule=rule_schedule, max_steps=cfg.max_steps))
    policy = make_policy(cfg)
    _set_aside_old_ledger(out)
    agent = make_agent(cfg, env, out, agent_rng, policy)
    governs = hasattr(agent, "scar_ids")
    rows: list[dict[str, Any]] = []
    episode_rows: list[dict[str, Any]] = []
    t = 0
    started = time.perf_counter()
    try:
        for episode, game in enumerate(games):
            version = schedule.world_version(episode, cfg.episodes)
            if version != env.config.world_version:
                env.config = replace(env.config, world_version=version)
                env.verifier = type(env.verifier)(rule_schedule)
                if hasattr(agent, "on_world_version"):
                    agent.on_world_version(version, step=t)
            obs, info = env.reset(seed=cfg.seed if episode == 0 else None, options={"game": game})
            active_text = [lookup_rule(r).description for r in info["active_rules"]]
            agent.begin_episode(episode, info["goal"], game.task.task_type, active_text)
            won, violations_in_episode = False, 0
            for step in range(cfg.max_steps):
                q = info["context"]
                actions = tuple(Action.from_dict(d) for d in info["admissible_actions"])
                flagged = [[v.rule_id for v in env.verifier.check(q, a)] for a in actions]
                if hasattr(agent, "set_candidates"):
                    agent.set_candidates(actions)
                window = agent.window(obs, q)
                prior = task_prior(env.world, actions)
                inp = PolicyInput(obs, info["goal"], q, actions, window, prior)
                logits = policy.logits(inp, policy_rng)
                governed = agent.govern(q, actions, logits, t)
                blocked = tuple(a for a, m in zip(actions, governed.masked, strict=True) if m)
                if governed.fallback is None and blocked and prior.any() and governed.masked[prior > 0].all():
                    # the controller blocked every route the model had in mind: it re-plans around the blocked set
                    inp = PolicyInput(
                        obs, info["goal"], q, actions, window, task_prior(env.world, actions, blocked)
                    )
                    logits = policy.logits(inp, policy_rng)
                    governed = agent.govern(q, actions, logits, t)
                if governed.fallback is not None:
                    chosen, command = -1, NO_OP_COMMAND
                else:
                    chosen = sample_action(governed.probs, policy_rng)
                    command = actions[chosen].text
                scar_ids = set(agent.scar_ids()) if governs else set()
                masked_by_scar = [
                    any(i == idx and set(ids) & scar_ids for idx, ids in governed.fired)
                    for i in range(len(actions))
                ]
                exposed = sorted({r for rs in flagged for r in rs})
                covered = sorted(
                    r for r in exposed if all(masked_by_scar[i] for i, rs in enumerate(flagged) if r in rs)
                )
                covered_mass = float(sum(governed.probs[i] for i in range(len(actions)) if masked_by_scar[i]))
                obs, reward, terminated, truncated, info = env.step(command)
                violations = tuple(
                    Violation(v["rule_id"], lookup_rule(v["rule_id"]).description, step)
                    for v in info["violations"]
                )
                violations_in_episode += len(violations)
                won = bool(info["won"])
                action = actions[chosen] if chosen >= 0 else Action("fallback", governed.fallback.name)
                agent.observe(
                    StepOutcome(
                        episode,
                        step,
                        info["goal"],
                        game.task.task_type,
                        q,
                        action,
                        obs,
                        reward,
                        violations,
                        won,
                        actions,
                        tuple(float(x) for x in logits),
                        chosen,
                    )
                )
                rows.append(
                    {
                        "method": cfg.method if cfg.ablation == "none" else f"scars:{cfg.ablation}",
                        "seed": cfg.seed,
                        "episode": episode,
                        "step": step,
                        "t": t,
                        "task_type": game.task.task_type,
                        "command": command,
                        "fallback": chosen < 0,
                        "violated_rules": ",".join(v.rule_id for v in violations),
                        "exposed_rules": ",".join(exposed),
                        "covered_rules": ",".join(covered),
                        "n_masked": int(np.sum(governed.masked)),
                        "covered_mass": covered_mass,
                        "memory_tokens": agent.memory_tokens(obs, q),
                        "reward": reward,
                        "won": won,
                        "world_version": version,
                    }
                )
                t += 1
                if terminated or truncated:
                    break
            agent.end_episode(won)
            episode_rows.append(
                {
                    "method": rows[-1]["method"],
                    "seed": cfg.seed,
                    "episode": episode,
                    "task_type": game.task.task_type,
                    "won": won,
                    "steps": step + 1,
                    "violations": violations_in_episode,
                    "memory_tokens": rows[-1]["memory_tokens"],
                }
            )
            if progress is not None:
                progress(episode + 1, cfg.episodes)
        agent_stats = agent.stats() if hasattr(agent, "stats") else {}
    finally:
        if hasattr(agent, "close"):
            agent.close()
    steps = pd.DataFrame(rows)
    episodes = pd.DataFrame(episode_rows)
    episodes["svr"] = episodes["episode"].map(svr_by_episode(steps))
    summary = summarise(cfg, steps, episodes, schedule.equivalence, schedule.heldout, agent_stats)
    summary["wall_seconds"] = time.perf_counter() - started
    return RunResult(summary, steps, episodes)


def summarise(cfg, steps, episodes, equivalence, heldout, agent_stats) -> dict[str, Any]:
    """The paper's metrics for one run, from its tables (and the scars agent's own statistics)."""
    rvr = repeat_violation_rate(steps)
    rvr_equiv = repeat_violation_rate(steps, dict(equivalence))
    heldout_rate, heldout_seen = first_exposure_violation_rate(steps, heldout)
    growth = growth_fit(steps["t"].to_numpy() + 1, steps["memory_tokens"].to_numpy())
    hard = cfg.ablation != "soft_bias_only"
    summary: dict[str, Any] = {
        "method": steps["method"].iloc[0],
        "success_rate": float(episodes["won"].mean()),
        "rvr": rvr["rvr"],
        "rvr_covered": rvr["rvr_covered"],
        "rvr_equivalent": rvr_equiv["rvr"],
        "repeat_violations": rvr["repeat_violations"],
        "reexposures": rvr["reexposures"],
        "svr": svr(steps),
        "violations": int((steps["violated_rules"] != "").sum()),
        "heldout_first_violation_rate": heldout_rate,
        "heldout_rules_seen": heldout_seen,
        "complexity_tokens_final": int(steps["memory_tokens"].iloc[-1]),
        "complexity_tokens_max": int(steps["memory_tokens"].max()),
        "complexity_growth_exponent": growth["b"],
        "covered_mass_max": float(steps["covered_mass"].max()),
        "fallback_steps": int(steps["fallback"].sum()),
        "steps": len(steps),
        "episodes": len(episodes),
    }
    # Prop. 1 (§5): governed mass on scar-covered failing actions is exactly 0 with hard masks; the soft ablation
    # reports the leak instead (it is expected to be > 0, so the check is about hard mode only).
    scars = cfg.method == "scars"
    if not scars:  # no scar ever covers anything: the covered-RVR metric does not apply
        summary["rvr_covered"] = None
    summary["prop1_ok"] = bool(summary["covered_mass_max"] == 0.0) if scars and hard else None
    summary["soft_leak_mass_max"] = summary["covered_mass_max"] if scars and not hard else None
    summary.update(agent_stats)
    summary.setdefault("prop3_ok", None)
    # a metric that has nothing to measure (no held-out rule seen, no growth to fit) is None, not NaN
    return {k: None if isinstance(v, float) and v != v else v for k, v in summary.items()}
