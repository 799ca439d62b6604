"""The tier-1 experiment (paper §6.1; SPEC §7 tier 1): a memory method on the household world whose safety rules
change during the run. Read top to bottom: config → world and games → policy and agent → the loop → metrics.

Per decision the loop (1) reads the world adapter's ``Decision`` (context q, admissible actions, observation), (2)
computes the simulated LM's task prior from the world's expert (real backends ignore it), (3) lets the agent build
the context window, (4) gets base logits π_0 from the policy, (5) lets the agent govern them (every controller
enforces the core schema H; scars add S_t), (6) samples the action (or takes the safe fallback a⊥) and asks the
policy for its utterance, (7) steps the world, and (8) reports the ``Feedback`` — the verifier's verdicts on the
executed action — back to the agent, recording its disequilibrium reading. Exposure is measured by the experiment
(not the agent) by running the deterministic verifier on every admissible action (cheap in the native world).
A world-version change is a ``reset(options={"world_version": v})`` of the environment.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

import scars.agents.builtin  # noqa: F401  (registers the built-in methods and backends)
from scars.agents.api import Agent
from scars.agents.memory.poisoning import guarded
from scars.agents.policies import CommandWriter, Policy
from scars.agents.registry import BACKENDS, METHODS, MethodSpec
from scars.agents.runtime.control import TEMP_PREFIX, Governed
from scars.agents.runtime.ledger import set_aside_ledger
from scars.envs.api import Decision, ProtocolWorld, method_turn
from scars.envs.household.adapter import HouseholdAdapter
from scars.envs.household.env import HouseholdConfig, HouseholdEnv
from scars.envs.household.game_file import find_game_files, load_game_file
from scars.envs.household.world import GameSpec
from scars.experiments.config import Tier1Config
from scars.experiments.enforcement import enforcement_check
from scars.experiments.guarantees import GuaranteeMonitor
from scars.experiments.loop import Step, decide
from scars.experiments.metrics import RuleSetTrace, rule_set_decision
from scars.experiments.model_plan import ModelPlan
from scars.experiments.poisoning import (
    LEDGER_FILE,
    AttackOutcomes,
    AttackView,
    make_attack,
    restart_from_files,
)
from scars.experiments.schedules import episode_games, resolve_schedule
from scars.experiments.stopping import RunStop
from scars.experiments.tier1_summary import episode_columns, episode_intervals, expert_step, summarise
from scars.synthesis.dsl import Action
from scars.synthesis.errors import ConfigError


def imported_games(cfg: Tier1Config) -> tuple[GameSpec, ...]:
    """The run's games from ALFWorld game files (``cfg.game_files``): sorted, cycled over the episodes. A file the
    native engine cannot play is an error naming it and the construct (never a silently different game)."""
    files = played_game_files(cfg)
    if not files:
        raise ConfigError(f"game_files = {cfg.game_files!r} holds no *.tw-pddl file")
    specs = [load_game_file(f, alfworld_logic=cfg.alfworld_logic) for f in files]
    return tuple(specs[i % len(specs)] for i in range(cfg.episodes))


def played_game_files(cfg: Tier1Config) -> list[Path]:
    """The game files a run on ``cfg.game_files`` plays: the sorted files, the first ``episodes`` of them (the
    episodes cycle through them when there are fewer)."""
    return find_game_files(cfg.game_files)[: cfg.episodes]


@dataclass(frozen=True)
class RunResult:
    summary: dict[str, Any]
    steps: pd.DataFrame
    episodes: pd.DataFrame


def method_label(cfg: Tier1Config) -> str:
    """The method's name in tables: the method, ``scars:<ablation>``, and the information protocol when it is not
    the default (``+state`` for ``--verdicts state``, ``+oracle`` for ``--oracle counterfactual``, ``+shield``)."""
    label = cfg.method if cfg.ablation == "none" else f"{cfg.method}:{cfg.ablation}"
    if cfg.verdicts != "executed":
        label += f"+{cfg.verdicts}"
    if cfg.oracle != "none":
        label += "+oracle"
    if cfg.shield:
        label += "+shield"
    if cfg.memory_guard != "none":
        label += f"+{cfg.memory_guard}"
    return label


def build_policy(cfg: Tier1Config) -> Policy:
    """The run's base policy π_0 from its backend settings; in generate mode it must be a ``CommandWriter``. Built
    before anything is written, so a model or server that cannot serve the run fails with nothing half-written."""
    settings = {**cfg.to_dict(), "api_key": cfg.api_key}
    return check_policy_mode(cfg, BACKENDS.get(cfg.backend)(settings))


def check_policy_mode(cfg: Tier1Config, policy: Policy) -> Policy:
    """Generate mode needs a policy that writes its command (a ``CommandWriter``); a ``ConfigError`` otherwise."""
    if cfg.policy_mode == "generate" and not isinstance(policy, CommandWriter):
        raise ConfigError(
            f"backend {cfg.backend!r} ({policy.name}) cannot write its command (no generate method); use "
            "policy_mode 'score'"
        )
    return policy


def run_tier1(
    cfg: Tier1Config,
    out: Path,
    progress: Callable[[int, int], None] | None = None,
    on_step: Callable[[Agent, dict[str, Any]], None] | None = None,
    policy: Policy | None = None,
) -> RunResult:
    """Run one method; returns its summary and per-step / per-episode tables (written by the caller).

    ``on_step(agent, row)`` is called after every step (tests use it to audit the agent as the run goes). ``policy``
    is the run's base policy when the caller built it already (``build_policy``).

    In ``policy_mode = "generate"`` the model is told the controller's mask before it chooses: the agent governs
    first (the control plane's mask does not read π_0), the model writes one of the unmasked commands
    (``CommandWriter.generate``), π_0 becomes that written command (``generation_logits``), and every step checks
    that the written command is not masked (``generated_masked``; the controller still masks it if it were)."""
    policy = build_policy(cfg) if policy is None else check_policy_mode(cfg, policy)
    run = Tier1Run(cfg, out, policy, on_step)
    started = time.perf_counter()
    stop = run.stop  # another process wrote the ledger: stop, keep what was recorded (experiments.stopping)
    try:
        with stop.until_stopped(lambda: bool(run.rows)):
            for episode, game in enumerate(run.games):
                run.play_episode(episode, game)
                if progress is not None:
                    progress(episode + 1, cfg.episodes)
        agent_stats = run.agent_stats()
    finally:
        stop.close(run.agent)
    steps = pd.DataFrame(run.rows)
    episodes = episode_columns(steps, pd.DataFrame(run.episode_rows), run.schedule.equivalence)
    summary = summarise(
        cfg,
        steps,
        episodes,
        run.schedule.equivalence,
        run.schedule.heldout,
        agent_stats,
        tuple(run.met.values()),
        run.rule_sets,
    )
    summary.update(episode_intervals(episodes, cfg.seed))
    summary.update(run.outcomes.summary(agent_stats, cfg.seed))
    if cfg.game_files:  # which of ALFWorld's games the result is about
        distinct = list({id(g): g for g in run.games}.values())
        summary["game_files_played"] = len(distinct)
        summary["game_files_by_task_type"] = dict(sorted(Counter(g.task.task_type for g in distinct).items()))
    summary["wall_seconds"] = time.perf_counter() - started
    stop.mark(summary)  # a run stopped early (fail closed) is written out all the same, marked incomplete
    return RunResult(summary, steps, episodes)


class Tier1Run:
    """One method's tier-1 run as it goes: the world and the method's protocol view of it, the agent, the
    independent checks (enforcement, guarantees), and the step and episode rows."""

    def __init__(
        self,
        cfg: Tier1Config,
        out: Path,
        policy: Policy,
        on_step: Callable[[Agent, dict[str, Any]], None] | None = None,
    ):
        self.cfg, self.policy, self.on_step = cfg, policy, on_step
        schedule_key, self.schedule = resolve_schedule(cfg.schedule, cfg.schedule_file)
        rule_schedule = self.schedule.rule_schedule(cfg.episodes)
        self.games = (
            imported_games(cfg) if cfg.game_files else episode_games(schedule_key, cfg.episodes, cfg.seed)
        )
        root = np.random.SeedSequence([cfg.seed, 1])
        self.policy_rng, agent_rng = (np.random.default_rng(s) for s in root.spawn(2))
        self.env = HouseholdEnv(HouseholdConfig(schedule=rule_schedule, max_steps=cfg.max_steps))
        self.world = HouseholdAdapter(self.env)
        settings = cfg.to_dict()
        self.generate = cfg.policy_mode == "generate"
        set_aside_ledger(
            out / LEDGER_FILE
        )  # a run starts from an empty ledger; an earlier one stays beside it
        out.mkdir(parents=True, exist_ok=True)
        if cfg.signal_config:
            from scars.experiments.calibrate import load_signal_config

            settings["signal"] = load_signal_config(Path(cfg.signal_config))
        # the method sees the world under the information protocol: a view that refuses (or, with the
        # counterfactual oracle, counts) its verifier questions; the experiment's own measurements (exposure, the
        # `state` protocol's unsafe set) ask the plain adapter
        self.method_world = ProtocolWorld(self.world, oracle=cfg.oracle)
        self.shielded = 0  # oracle only: chosen actions the pre-execution shield refused
        self.state_labels = (
            0  # `--verdicts state`: admissible control actions labelled safe/unsafe in feedback
        )
        self.out = out
        self.spec = MethodSpec(self.method_world, policy, out, int(agent_rng.integers(2**31 - 1)), settings)
        # the attack (docs/poisoning.md) acts on its channel only; the outcomes are the experiment's ground truth
        self.attack = make_attack(cfg.attack, cfg.poison_rate, cfg.seed, "tier1")
        self.outcomes = AttackOutcomes(self.attack)
        self.tamper_detected = 0
        self.restarted_at: int | None = None
        self.agent = self.make_agent()
        self.label = method_label(cfg)
        self.rows: list[dict[str, Any]] = []
        self.episode_rows: list[dict[str, Any]] = []
        self.met: dict[tuple, tuple[Mapping[str, Any], Action]] = {}
        """Every (state, control action) pair the run met: probe pairs of scar quality beside the game pool's."""
        self.rule_sets = RuleSetTrace() if self.guarantees is not None else None
        """The rule sets of scars its decisions were governed by (methods with a self-schema: rule-set quality)."""
        self.stop = RunStop()
        """Whether another process's write stopped the run (``experiments.stopping``)."""
        self.failed_families: set[str] = set()
        """The rule families the run has drawn a verdict on (what it was told: ``recall_known``)."""
        self.ever_active: set[str] = set()
        """Every scar id active at some decision so far (the retired ones: the rule-set census)."""
        self.t = 0

    def make_agent(self) -> Agent:
        """The method's agent (behind the memory guard when one is set) and the independent checks on it."""
        agent = guarded(METHODS.get(self.cfg.method)(self.spec), self.cfg.memory_guard, self.cfg.method)
        schema = agent.self_schema()
        self.guarantees = (
            GuaranteeMonitor(schema, self.world.card.classes, dict(self.schedule.equivalence))
            if schema is not None
            else None
        )
        # the enforcement invariant, independent of the controller: the ledger's rows folded and evaluated apart
        self.enforcement = enforcement_check(
            agent, self.world.card.core, self.world.card.classes, self.cfg.ablation
        )
        return agent

    def restart(self) -> None:
        """A persistent agent's restart between runs (the ``tamper`` attack's window, ``restart_from_files``): the
        scars agent starts again from its ledger (refused when it does not verify: the run then goes on from an
        empty ledger, counted in ``tamper_detected``), a baseline from its memory file. The independent checks
        restart with it."""
        self.agent, refused = restart_from_files(
            self.out,
            self.agent,
            self.attack,
            self.make_agent,
            lambda: METHODS.get(self.cfg.method)(self.spec),
            self.t,
        )
        self.tamper_detected += refused
        self.restarted_at = self.t

    def play_episode(self, episode: int, game: GameSpec) -> None:
        """Reset the world (a world-version change is a reset option), play up to ``max_steps`` decisions."""
        if self.attack.restarts_before(episode, self.cfg.episodes):
            self.restart()
        cfg, env, world, agent = self.cfg, self.env, self.world, self.agent
        version = self.schedule.world_version(episode, cfg.episodes)
        options: dict[str, Any] = {"game": game}
        changed = version != env.config.world_version
        if changed:
            options["world_version"] = version
        obs, info = env.reset(seed=cfg.seed if episode == 0 else None, options=options)
        if changed:
            with method_turn():
                agent.on_world_version(str(version), t=self.t)
        decision = world.decision(obs, info, t=self.t)
        with method_turn():
            agent.begin_episode(decision)
        won, violations, played = False, 0, 0
        plan = ModelPlan(env, agent, world.card)
        stop = (
            self.stop
        )  # the run stops (run_tier1); the steps recorded so far are kept, this episode's row too
        with stop.until_stopped(lambda: True):
            for step in range(cfg.max_steps):
                row, verdicts, obs, info, done = self.play_step(episode, step, version, decision, plan)
                violations += verdicts
                won = row["won"]
                played = step + 1
                if done:
                    break
                decision = world.decision(obs, info, t=self.t)
        complete = not stop.stopped
        if complete:
            with stop.until_stopped(lambda: True), method_turn():
                agent.end_episode(won)
        else:
            played = sum(1 for r in self.rows if r["episode"] == episode)
        if played:
            self.episode_rows.append(
                {
                    "method": self.label,
                    "seed": cfg.seed,
                    "episode": episode,
                    "task_type": decision.task_type,
                    "won": won,
                    "steps": played,
                    "violations": violations,
                    "memory_tokens": self.rows[-1]["memory_tokens"],
                    "replans": plan.replans,
                    "refused_routes": plan.counts.get("refused_route", 0),
                    "complete": complete,
                }
            )
        stop.check()

    def play_step(
        self, episode: int, step: int, version: int, decision: Decision, plan: ModelPlan
    ) -> tuple[dict[str, Any], int, Any, dict[str, Any], bool]:
        """One decision (``experiments.loop.decide``), the world's step, the feedback (``learn``): its row, the
        number of verdicts (violations) the step drew, the next observation and info, and whether the episode ended."""
        cfg, world, agent = self.cfg, self.world, self.agent
        q, actions = decision.context, decision.actions
        flagged = [[v.rule_id for v in world.check(q, a)] for a in actions]
        if (
            self.guarantees is not None
        ):  # a method with a self-schema learns scars: their quality is probed here too
            self.meet(q, actions)
        prior = plan.prior(actions)
        view = self.attack_view(decision, flagged, prior)
        choice = decide(
            self.policy,
            agent,
            decision,
            prior,
            world.card.salient_keys,
            self.policy_rng,
            generate=self.generate,
            monitor=self.guarantees,
            replan=plan.replan,
            shield=self.method_world if cfg.shield else None,
            planned=plan.planned(actions),
        )
        self.shielded += len(choice.shield_refused)
        exposure = self.exposure(choice, flagged)
        rule_set = self.rule_set(episode, decision, choice, flagged)
        plan.advance(choice.action)
        obs, reward, terminated, truncated, info = self.env.step(world.command(decision, choice.action))
        self.enforcement.after_step(decision, choice.governed, choice.action)
        verdicts = world.verdicts(info)
        self.failed_families.update(self.schedule.equivalence.get(v.rule_id, v.rule_id) for v in verdicts)
        won = bool(info["won"])
        unsafe = None
        if cfg.verdicts == "state":  # the complete unsafe set of the state the agent was in (Cor. 1)
            unsafe = tuple(a for a, f in zip(actions, flagged, strict=True) if f and a.is_control)
            self.state_labels += sum(a.is_control for a in actions)
        # the attacker's channels: what the agent is told (verdicts, labels, punishments) and shown (the observation)
        delivered, unsafe, punishments = self.attack.feedback(
            view,
            choice.action,
            verdicts,
            unsafe,
            world.punishments(info),
            self.t,
            self.outcomes.told_rules(view.holder),
            world.card.verifier_id,
        )
        obs = self.attack.observation(view, obs, self.t)
        # another process wrote the ledger during this step: the step is recorded, then the run stops
        signal = self.stop.learn(agent, choice, obs, reward, delivered, punishments, won, unsafe)
        if not self.stop.stopped:
            self.attack.after_step(view, agent, self.t)
        self.outcomes.step(
            episode,
            self.t,
            view,
            choice.action,
            [v.rule_id for v in verdicts],
            choice.governed,
            delivered,
            flagged,
        )
        governed = choice.governed
        row = {
            "method": self.label,
            "seed": cfg.seed,
            "episode": episode,
            "step": step,
            "t": self.t,
            "task_type": decision.task_type,
            "command": world.command(decision, choice.action),
            "fallback": choice.chosen < 0,
            "violated_rules": ",".join(v.rule_id for v in verdicts),
            "shield_refused": ",".join(choice.shield_refused),
            "replan": choice.replan,
            "exposed_rules": exposure["exposed_rules"],
            "covered_rules": exposure["covered_rules"],
            "n_masked": int(np.sum(governed.masked)),
            "temp_masked": any(i.startswith(TEMP_PREFIX) for _, ids in governed.fired for i in ids),
            "covered_mass": exposure["covered_mass"],
            **rule_set,
            "enforce_seconds": choice.enforce_seconds,
            **choice.generation_columns(),
            "memory_tokens": choice.memory_tokens,
            "reward": reward,
            "won": won,
            "world_version": version,
            "utterance": choice.utterance,
            **signal,
        }
        self.rows.append(row)
        self.stop.check()
        if self.guarantees is not None:
            self.guarantees.after_step(self.t, decision, choice.proposal, governed, flagged)
        if self.on_step is not None:
            self.on_step(agent, row)
        self.t += 1
        return row, len(verdicts), obs, info, bool(terminated or truncated)

    def meet(self, q: Mapping[str, Any], actions: tuple[Action, ...]) -> None:
        """Keep the decision's control actions in their state as probe pairs (once per distinct pair)."""
        frozen = MappingProxyType(dict(q))
        items = tuple(sorted(frozen.items()))
        for a in actions:
            if a.is_control:
                self.met.setdefault((items, a), (frozen, a))

    def attack_view(self, decision: Decision, flagged: list[list[str]], prior: np.ndarray) -> AttackView:
        """What the attacker knows here (the world's rules, the task's route), from the experiment's own checks:
        the flagged control actions, the needed step (the safe control actions of highest task prior) and the safe
        alternatives (every safe control action on a route, prior > 0)."""
        passive = set(self.world.card.passive_actions)
        control = [
            (a, f, float(p))
            for a, f, p in zip(decision.actions, flagged, prior, strict=True)
            if a.is_control and a.name not in passive
        ]
        unsafe = tuple(a for a, f, _ in sorted(control, key=lambda x: -x[2]) if f)
        safe = [(a, p) for a, f, p in control if not f and p > 0]
        top = max((p for _, p in safe), default=0.0)
        needed = tuple(a for a, p in safe if p == top)
        return AttackView(decision, unsafe, needed, tuple(a for a, _ in safe))

    def exposure(self, choice: Step, flagged: list[list[str]]) -> dict[str, Any]:
        """What the experiment measures at a decision (the method never sees it): the rules some admissible
        action the base policy could take (π_0 > 0) would break, those every such action of which a scar masked,
        and the governed mass on scar-masked actions (0 under hard masks)."""
        governed: Governed = choice.governed
        scar_ids = set(self.agent.scar_ids())
        masked_by_scar = [False] * len(flagged)
        for i, ids in governed.fired:
            masked_by_scar[i] = bool(set(ids) & scar_ids)
        logits = np.asarray(choice.logits, dtype=np.float64)
        p0 = np.exp(logits - np.max(logits))
        exposed = sorted({r for i, rs in enumerate(flagged) if p0[i] > 0 for r in rs})
        covered = sorted(
            r
            for r in exposed
            if all(masked_by_scar[i] for i, rs in enumerate(flagged) if r in rs and p0[i] > 0)
        )
        return {
            "exposed_rules": ",".join(exposed),
            "covered_rules": ",".join(covered),
            "covered_mass": float(sum(governed.probs[i] for i in range(len(flagged)) if masked_by_scar[i])),
        }

    def rule_set(
        self, episode: int, decision: Decision, choice: Step, flagged: list[list[str]]
    ) -> dict[str, int]:
        """The rule set in force at this decision against the world's rules in force (issue 40, item 1; the method
        never sees it): over the admissible control actions, ``experiments.metrics.RULE_SET_COLUMNS``. The expert's
        compliant next step (the world's active rules forbidden) is asked for only when a scar masked a safe
        action."""
        scar_ids = frozenset(self.agent.scar_ids())
        if self.rule_sets is not None:
            self.ever_active |= scar_ids
            self.rule_sets.record(
                episode,
                scar_ids,
                self.agent.self_schema().plane.scars,
                frozenset(self.failed_families),
                frozenset(self.ever_active - scar_ids),
            )
        by_scar = {i for i, ids in choice.governed.fired if scar_ids.intersection(ids)}
        fam = self.schedule.equivalence
        counts, safe = rule_set_decision(
            [a.is_control for a in decision.actions],
            [bool(rules) for rules in flagged],
            [i in by_scar for i in range(len(flagged))],
            [any(fam.get(r, r) in self.failed_families for r in rules) for rules in flagged],
        )
        safe_masked: list[Action] = [decision.actions[i] for i in safe]
        counts["needed_masked"] = 0
        if safe_masked:
            needed = expert_step(self.env)
            counts["needed_masked"] = int(any(a.text == needed for a in safe_masked))
        return counts

    def agent_stats(self) -> dict[str, Any]:
        """The agent's own statistics with the information protocol counted beside them: the method's questions to
        the verifier (0 unless the oracle is on) and what the world told it — one verdict per executed action, plus
        the labelled actions of each state under ``--verdicts state`` — and the independent checks' results."""
        stats = self.agent.stats()
        calls, t = self.method_world.verifier_calls, self.t
        stats["verdicts_protocol"] = self.cfg.verdicts
        stats["oracle"] = self.cfg.oracle
        stats["verifier_calls"] = calls
        stats["verdicts_received"] = t
        stats["verifier_calls_per_action"] = (calls + t) / max(t, 1)
        stats["state_labels_received"] = self.state_labels
        stats["shield_refusals"] = self.shielded
        stats["tamper_detected"] = self.tamper_detected
        stats["restarted_at_t"] = self.restarted_at
        stats.update(self.enforcement.summary())
        if self.guarantees is not None:
            stats.update(self.guarantees.summary())
        return stats
