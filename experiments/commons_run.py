"""One run of learning seats in the GovSim-style commons arena (paper §6.2; SPEC §7 tier 2): memory methods as agents.

Read top to bottom: config → arena and seats → policy and agents → the loop → metrics. Five seats share a pool
(``envs.commons``); each seat holds a learning agent (the scars agent, a baseline, a control or an ablation, through
the one ``agents.api.Agent`` interface) or a scripted population member. *Homogeneous*: all five seats learn with
the same method (as GovSim evaluates one LLM); *focal*: one learner among the scripted population.

A month is three steps — harvest, discussion, punishment (arena A and the malicious arena) — and every live seat acts
at every step. For a learning seat the loop (1) reads the seat's ``CommonsAdapter`` decision (the DSL context, the
phase's admissible DSL actions: ``harvest`` with its amount, ``punish`` with its target, ``say`` turns), (2) asks the
world for the commons base policy's habit prior (``envs.commons.habits``: the embedded simulated LM's model of an LLM
harvester; a real backend ignores it and reads the prompt), (3) lets the agent build its context window, (4) gets
base logits π_0 from the policy and (5) lets the agent govern them (H for every method; scars add S_t), (6) samples
(or takes the safe fallback a⊥), (7) steps the arena, and (8) reports the ``Feedback`` — the verifier's verdicts on the
executed harvest (over-usage against f(t)/|I| and collapse: z_V) and the punishments received with their provenance
(z_R through TrustGate + NormVerifier + source independence) — back to the agent. The learners keep their memory across
the runs; ``transfer_from`` starts them from another run's carried state (counterfactual social transfer).

``run_tier2`` is the public entry point (tier 2's protocol, ``experiments.tier2``, and tier 3's training in arenas A
and B both run seats through it); ``experiments.tier2_report.write_tier2`` writes its result.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import scars.agents.builtin  # noqa: F401  (registers the built-in methods and backends)
from scars.agents.api import Agent
from scars.agents.memory.base import MemoryMechanism
from scars.agents.memory.poisoning import guarded
from scars.agents.policies import CommandWriter
from scars.agents.policies.embedded import SimulatedLMConfig
from scars.agents.registry import BACKENDS, METHODS, MethodSpec
from scars.agents.runtime.ledger import SCAR_ADMITTED
from scars.agents.runtime.scar import Scar
from scars.disequilibrium.composite import DisequilibriumConfig
from scars.disequilibrium.trustgate import TrustGateConfig
from scars.envs.api import ProtocolWorld, method_turn
from scars.envs.commons import commons_v0
from scars.envs.commons.adapter import CommonsAdapter
from scars.envs.commons.commons_v0 import EpisodeRecord, context_of
from scars.envs.commons.habits import HABIT_PRESETS, habit_prior
from scars.experiments.arena_rule_set import ArenaRuleSets, arena_rule_set
from scars.experiments.commons_seats import (
    LEARNER,
    MEMORY_FILE,
    STATE_FILE,
    SeatState,
    check_transfer,
    fresh_outsider,
    fresh_seat_dir,
    install_ledger,
    population,
    seat_kinds,
)
from scars.experiments.commons_summary import months_table, runs_table, summarise, tier2_rvr
from scars.experiments.config import Tier2Config
from scars.experiments.enforcement import EnforcementCheck, enforcement_check
from scars.experiments.guarantees import GuaranteeMonitor
from scars.experiments.loop import Step, decide
from scars.experiments.poisoning import AttackOutcomes, AttackView, make_attack, restart_from_files
from scars.experiments.report import write_json
from scars.experiments.stopping import RunStop
from scars.synthesis.errors import ConfigError


@dataclass(frozen=True)
class Tier2Result:
    """One tier-2 run's outcome.

    summary: the metrics (GovSim's suite with n and CIs, cooperative yield, punishments, scars, tier-2 RVR, Props).
    steps:   one row per learning seat's decision.
    months:  one row per (run, month): stock, f(t), requests, catches, punishments, karma.
    runs:    one row per run: GovSim's metrics and the learners' own.
    seats:   each learning seat's carried state (``SeatState``), in seat order.
    """

    summary: dict[str, Any]
    steps: pd.DataFrame
    months: pd.DataFrame
    runs: pd.DataFrame
    seats: tuple[SeatState, ...]


@dataclass
class _Learner:
    seat: str
    seat_dir: Path
    """Where its ledger or memory lives: ``out/agent_i``, or ``out/agent_i/run_k`` for a fresh outsider's run k."""
    adapter: CommonsAdapter
    world: ProtocolWorld
    agent: Agent
    rng: np.random.Generator
    monitor: GuaranteeMonitor | None
    enforcement: EnforcementCheck
    spec: MethodSpec
    """What its agent is built from (a restart from its files builds it again)."""
    t: int = 0
    tamper_detected: int = 0
    """Restarts at which its files were refused (the ``tamper`` attack detected: the ledger did not verify)."""
    template: Mapping[str, Any] | None = None
    """A harvest-phase context of this seat (its first), for the ground-truth check of its scars."""

    @property
    def label(self) -> str:
        """The incarnation's name: the seat, or ``agent_i/run_k`` for a fresh outsider's run k."""
        return self.seat if self.seat_dir.name == self.seat else f"{self.seat}/{self.seat_dir.name}"


def _pending_row(cfg: Tier2Config, run: int, learner: _Learner, choice: Step) -> dict[str, Any]:
    """A learning seat's step-table row from its decision (the world's answer is added after the step)."""
    decision, action, governed = choice.decision, choice.action, choice.governed
    q = decision.context
    share = learner.adapter.norms.share(int(q["pool_resource_level"]), int(q["num_agents"]))  # q may be raw
    amount = int(action.arg("amount", 0) or 0) if action.name == "harvest" else 0
    scar_ids = set(learner.agent.scar_ids())
    masked_by_scar = any(bool(set(ids) & scar_ids) for _, ids in governed.fired)
    return {
        "method": cfg.method_label,
        "seed": cfg.seed,
        "run": run,
        "month": int(q["month"]),
        "phase": str(q["phase"]),
        "seat": learner.seat,
        "incarnation": learner.label,
        "t": decision.t,
        "action": action.name,
        "amount": amount if q["phase"] == "harvest" else None,
        "target": action.arg("target") if action.name == "punish" else None,
        "pool": int(q["pool_resource_level"]),
        "share": share,
        "over": bool(q["phase"] == "harvest" and amount > share),
        "fallback": choice.fallback,
        "n_masked": int(np.sum(governed.masked)),
        "scar_masked": masked_by_scar,
        "scars_active": len(scar_ids),
    }


def run_tier2(
    cfg: Tier2Config,
    out: Path,
    progress: Callable[[int, int], None] | None = None,
    stop: RunStop | None = None,
) -> Tier2Result:
    """Run one tier-2 configuration; returns its ``Tier2Result`` (tables written by ``write_tier2``).

    ``out`` receives each learning seat's own folder (``out/agent_i/ledger.sqlite`` for scars, ``memory.json``
    for a baseline) — the state ``Tier2Result.seats`` names and a later run's ``transfer_from`` reads.
    ``cfg.transfer_from`` is checked before anything is written: a missing or unverifiable ledger is refused.
    ``progress(done, total)`` is called after every run.

    Another process writing a learning seat's ledger stops the run at the next decision (``experiments.stopping``):
    every step recorded until then is in the tables, the stopped run's months too, and the summary is marked
    ``complete: false`` with ``stopped``. ``stop``: the caller's, when the run is part of a larger one (tier 3's
    training), which then stops too."""
    carried = check_transfer(cfg, out)
    arena = Tier2Run(cfg, out, carried, stop or RunStop())
    stop = arena.stop
    try:
        arena.seat_learners()
        started = time.perf_counter()
        with stop.until_stopped(lambda: bool(arena.rows)):
            for run in range(cfg.runs):
                arena.play_run(run)
                if progress is not None:
                    progress(run + 1, cfg.runs)
        for label, learner in arena.incarnations.items():
            if label not in arena.agent_stats:
                arena.account(label, learner)
        wall = time.perf_counter() - started
    finally:
        for learner in arena.learners.values():
            stop.close(learner.agent)
    return arena.result(wall)


class Tier2Run:
    """One tier-2 configuration as it goes: the arena, the scripted seats, the learning seats (every incarnation of
    each: one per seat, and one per run for a fresh outsider), and the step rows and month records."""

    def __init__(self, cfg: Tier2Config, out: Path, carried: dict[str, SeatState], stop: RunStop):
        self.cfg, self.out, self.carried = cfg, out, carried
        self.kinds, roots, _ = seat_kinds(cfg)
        root_ss = np.random.SeedSequence([cfg.seed, 2])
        env_ss, policy_ss, agent_ss, scripted_ss = root_ss.spawn(4)
        self.env = env = commons_v0.parallel_env(
            scenario=cfg.scenario,
            arena=cfg.arena,
            num_months=cfg.months,
            allocation=cfg.allocation,
            agent_roots=roots,
            max_request=cfg.max_request,
            language=cfg.language,
            outsider_month=cfg.outsider_month or None,
        )
        severity = env.config.punishment_severity
        self.settings = settings = cfg.to_dict()
        settings["trust"] = TrustGateConfig(saturating_drop=cfg.z_r_saturation * severity, enabled=cfg.gates)
        settings["signal"] = DisequilibriumConfig(tau=cfg.tau)
        self.policy = BACKENDS.get(cfg.backend)(settings)
        self.generate = cfg.policy_mode == "generate"
        if self.generate and not isinstance(self.policy, CommandWriter):
            raise ConfigError(
                f"backend {cfg.backend!r} cannot write its command (no generate method); use policy_mode 'score'"
            )
        lm = SimulatedLMConfig(temperature=cfg.temperature)
        # the habit prior is the log of the habits' distribution at the embedded policy's scale
        self.scale = lm.task_gain / lm.temperature
        self.habits = {  # the outsider seat has the outsider's persona and habits; every other seat the run's
            seat: HABIT_PRESETS[cfg.outsider_habits if seat == env.outsider else cfg.habits]
            for seat in env.possible_agents
        }
        pop = population(cfg)
        self.scripted = {
            f"agent_{i}": pop.behaviours[i] for i, kind in enumerate(self.kinds) if kind != LEARNER
        }
        self.scripted_rng = np.random.default_rng(scripted_ss)
        out.mkdir(parents=True, exist_ok=True)
        self.learners: dict[str, _Learner] = {}
        self.policy_rngs = policy_ss.spawn(len(self.kinds))
        self.agent_seeds = agent_ss.spawn(len(self.kinds))
        self.run_seeds = env_ss.spawn(cfg.runs)
        self.fresh = fresh_outsider(cfg, self.kinds)  # the seat that arrives new every run, or None
        self.fresh_seeds: list[tuple[np.random.SeedSequence, np.random.SeedSequence]] = []
        # every incarnation of every learning seat, in order: one per seat, and one per run for a fresh outsider
        self.incarnations: dict[str, _Learner] = {}
        self.agent_stats: dict[str, dict[str, Any]] = {}
        self.admitted: dict[str, list] = {}
        self.rows: list[dict[str, Any]] = []
        self.records: list[EpisodeRecord] = []
        # the attack (docs/poisoning.md) acts on every learning seat's channel; the outcomes are the experiment's
        self.attack = make_attack(cfg.attack, cfg.poison_rate, cfg.seed, "tier2")
        self.outcomes = AttackOutcomes(self.attack)
        self.rule_sets = ArenaRuleSets()  # each learning seat's rule set against the norm (issue 40)
        self.stop = stop
        """Whether another process's write to a learning seat's ledger stopped the run (``experiments.stopping``)."""

    def make_learner(
        self, seat: str, seat_dir: Path, agent_seed, policy_seed, state: SeatState | None
    ) -> _Learner:
        """A learning seat's incarnation: its adapter, its protocol view, its agent (with carried memory), and the
        independent checks on it."""
        cfg = self.cfg
        seat_dir.mkdir(parents=True, exist_ok=True)
        adapter = CommonsAdapter(
            self.env,
            seat,
            overuse_verdicts=cfg.overuse_verdicts,
            share_hint=cfg.share_hint,
            derived_context=cfg.derived_context,
        )
        world = ProtocolWorld(adapter, oracle=cfg.oracle)  # the information protocol (README)
        spec = MethodSpec(
            world,
            self.policy,
            seat_dir,
            int(agent_seed.generate_state(1)[0] % (2**31 - 1)),
            self.settings | {"agent_id": seat},
        )
        agent = self.build_agent(spec)
        if state is not None and isinstance(agent, MemoryMechanism):
            agent.load_memory_state(state.memory)
        monitor, enforcement = self.checks(agent, adapter)
        t = 0 if state is None else state.t_end
        return _Learner(
            seat,
            seat_dir,
            adapter,
            world,
            agent,
            np.random.default_rng(policy_seed),
            monitor,
            enforcement,
            spec,
            t=t,
        )

    def build_agent(self, spec: MethodSpec) -> Agent:
        """The method's agent (behind the memory guard when one is set)."""
        return guarded(METHODS.get(self.cfg.method)(spec), self.cfg.memory_guard, self.cfg.method)

    def checks(
        self, agent: Agent, adapter: CommonsAdapter
    ) -> tuple[GuaranteeMonitor | None, EnforcementCheck]:
        """The independent checks on an agent: the guarantees monitor (an agent with a self-schema) and the
        enforcement invariant."""
        schema = agent.self_schema()
        monitor = GuaranteeMonitor(schema, adapter.card.classes) if schema is not None else None
        return monitor, enforcement_check(agent, adapter.card.core, adapter.card.classes, self.cfg.ablation)

    def restart(self, learner: _Learner) -> None:
        """A persistent learning seat's restart between two runs (the ``tamper`` attack's window,
        ``restart_from_files``): its agent starts again from its folder — the scars agent from its ledger (refused
        when it does not verify: the seat goes on from an empty ledger, counted in ``tamper_detected``), a baseline
        from its memory file. Its policy stream, decision count and adapter carry on; the checks restart with it."""
        learner.agent, refused = restart_from_files(
            learner.seat_dir,
            learner.agent,
            self.attack,
            lambda: self.build_agent(learner.spec),
            lambda: METHODS.get(self.cfg.method)(learner.spec),
            learner.t,
            learner.label,
        )
        learner.tamper_detected += refused
        learner.monitor, learner.enforcement = self.checks(learner.agent, learner.adapter)

    def seat_learners(self) -> None:
        """Every learning seat from an empty folder (or its carried ledger); a fresh outsider is built per run."""
        for i, kind in enumerate(self.kinds):
            if kind != LEARNER:
                continue
            seat = f"agent_{i}"
            fresh_seat_dir(self.out / seat)
            if seat == self.fresh:
                continue  # built at the start of every run
            state = self.carried.get(seat)
            if state is not None and state.ledger_path:
                install_ledger(Path(state.ledger_path), self.out / seat)
            self.learners[seat] = self.incarnations[seat] = self.make_learner(
                seat, self.out / seat, self.agent_seeds[i], self.policy_rngs[i], state
            )
        if self.fresh is not None:  # one agent seed and one policy seed per run for the newcomer
            index = self.env.possible_agents.index(self.fresh)
            self.fresh_seeds = list(
                zip(
                    self.agent_seeds[index].spawn(self.cfg.runs),
                    self.policy_rngs[index].spawn(self.cfg.runs),
                    strict=True,
                )
            )

    def account(self, label: str, learner: _Learner) -> None:
        """What an incarnation did (its stats and the scars it admitted in this run), read before it closes."""
        store = learner.agent.self_schema()
        if store is not None:  # the scars this run admitted (a carried ledger's earlier events are not)
            state = self.carried.get(learner.seat)
            since = int(state.ledger_head.split(":")[0]) if state and state.ledger_head else 0
            self.admitted[label] = [
                Scar.from_json(e.payload).rule
                for e in store.ledger.events(after=since)
                if e.type == SCAR_ADMITTED
            ]
        stats = learner.agent.stats()
        stats["verifier_calls"] = learner.world.verifier_calls
        stats["tamper_detected"] = learner.tamper_detected
        if learner.monitor is not None:
            stats.update(learner.monitor.summary())
        stats.update(learner.enforcement.summary())
        self.agent_stats[label] = stats

    def play_run(self, run: int) -> None:
        """One run of ``cfg.months`` months: every live seat acts at every step of every month."""
        env, learners = self.env, self.learners
        observations, infos = env.reset(seed=int(self.run_seeds[run].generate_state(1)[0]))
        states = {s: b.initial_state() for s, b in self.scripted.items()}
        begun: set[str] = set()  # the learners in the group this run (the outsider joins late, or never)
        fresh = self.fresh
        if self.attack.restarts_before(run, self.cfg.runs):  # between two runs: the files at rest
            for seat, learner in learners.items():
                if seat != fresh:  # the newcomer has no files of earlier runs to restart from
                    self.restart(learner)
        if fresh is not None:  # GovSim's newcomer: a new agent, with no memory of earlier runs
            if fresh in learners:
                retired = learners.pop(fresh)
                self.account(retired.label, retired)
                retired.agent.close()
            learners[fresh] = self.make_learner(
                fresh, self.out / fresh / f"run_{run}", *self.fresh_seeds[run], None
            )
            self.incarnations[learners[fresh].label] = learners[fresh]
        for learner in learners.values():
            learner.adapter.reset(run)
        with self.stop.until_stopped(
            lambda: True
        ):  # a stopped run's months are kept, then the stop goes on up
            self.play_months(run, observations, infos, states, begun)
        record = env.episode_record()
        if self.stop.stopped:
            if record.months:
                self.records.append(record)
            self.stop.check()
        self.records.append(record)
        survived = len(record.months) == self.cfg.months and not record.months[-1].harvest.collapsed
        for seat, learner in learners.items():  # in seat order (a set's order is not reproducible)
            if seat in begun:
                with self.stop.until_stopped(lambda: True), method_turn():
                    learner.agent.end_episode(survived)
        self.stop.check()

    def play_months(
        self,
        run: int,
        observations: dict[str, Any],
        infos: dict[str, Any],
        states: dict[str, Any],
        begun: set[str],
    ) -> None:
        """Run ``run``'s months until the arena ends: every live seat acts at every step."""
        env, learners = self.env, self.learners
        while env.agents:
            for seat in env.agents:  # a learner's episode begins at its first decision in the group
                learner = learners.get(seat)
                if learner is None or seat in begun:
                    continue
                begun.add(seat)
                if learner.template is None:
                    learner.template = context_of(infos[seat])
                with method_turn():
                    learner.agent.begin_episode(
                        learner.adapter.decision(observations[seat], infos[seat], t=learner.t)
                    )
            actions: dict[str, Any] = {}
            pending: dict[str, Step] = {}
            for seat in env.agents:
                if seat in self.scripted:
                    actions[seat], states[seat] = self.scripted[seat].step(
                        observations[seat], infos[seat], states[seat], self.scripted_rng
                    )
                    continue
                pending[seat] = choice = self.decide(seat, observations[seat], infos[seat])
                actions[seat] = learners[seat].world.command(choice.decision, choice.action)
            observations, rewards, _, _, infos = env.step(actions)
            for seat, choice in pending.items():  # every executed action is recorded, then a stop goes on up
                self.feedback(run, learners[seat], choice, float(rewards[seat]), infos[seat])
            self.stop.check()

    def decide(self, seat: str, observation: Any, info: dict[str, Any]) -> Step:
        """A learning seat's decision (``experiments.loop.decide``) under the habit prior of its persona."""
        learner = self.learners[seat]
        decision = learner.adapter.decision(observation, info, t=learner.t)
        prior = habit_prior(
            self.habits[seat],
            observation,
            info,
            decision.actions,
            scale=self.scale,
            universalization=self.cfg.share_hint == "universalization",
        )
        return decide(
            self.policy,
            learner.agent,
            decision,
            prior,
            learner.world.card.salient_keys,
            learner.rng,
            generate=self.generate,
            monitor=learner.monitor,
        )

    def feedback(
        self, run: int, learner: _Learner, choice: Step, reward: float, info: dict[str, Any]
    ) -> None:
        """The world's answer to a learning seat's executed action: the checks, the ``Feedback`` (``learn``), its
        step row."""
        learner.enforcement.after_step(choice.decision, choice.governed, choice.action)
        decision = choice.decision
        verdicts = learner.world.verdicts(info)
        punishments = learner.world.punishments(info)
        flagged = [[v.rule_id for v in learner.adapter.check(decision.context, a)] for a in decision.actions]
        self.rule_sets.decide(  # the scars active at the decision, before the feedback can admit one
            learner.label,
            run,
            learner.adapter,
            learner.agent,
            decision,
            choice.governed.fired,
            choice.action,
            flagged,
        )
        unsafe = None
        if self.cfg.verdicts == "state":  # the complete unsafe set of the decision (the experiment asks)
            unsafe = tuple(a for a, f in zip(decision.actions, flagged, strict=True) if a.is_control and f)
        view = self.attack_view(learner, decision, flagged)
        verdicts_true, punishments_true = verdicts, punishments  # the world's, for the tables
        verdicts, unsafe, punishments = self.attack.feedback(
            view,
            choice.action,
            verdicts,
            unsafe,
            punishments,
            decision.t,
            self.outcomes.told_rules(view.holder),
            learner.adapter.card.verifier_id,
        )
        signal = self.stop.learn(  # refused (another process wrote its ledger): recorded, then the run stops
            learner.agent,
            choice,
            self.attack.observation(view, str(info.get("mayor_report", "")), decision.t),
            reward,
            verdicts,
            punishments,
            False,
            unsafe,
        )
        if not self.stop.stopped:
            self.attack.after_step(view, learner.agent, decision.t)
        self.outcomes.step(
            (run, int(decision.context["month"])),
            decision.t,
            view,
            choice.action,
            [v.rule_id for v in verdicts_true],
            choice.governed,
            verdicts,
            flagged,
        )
        row = _pending_row(self.cfg, run, learner, choice)
        row.update(choice.generation_columns())
        row["memory_tokens"] = choice.memory_tokens
        row["verdicts"] = ",".join(v.rule_id for v in verdicts_true)
        row["punished_by"] = ",".join(p.punisher for p in punishments_true)
        row["justified_received"] = sum(
            learner.adapter.norms.judge(p.punished_action, p.context) for p in punishments_true
        )
        if row["verdicts"] or row["justified_received"]:  # told the norm (tier-2 RVR's arming)
            self.rule_sets.tell(learner.label)
        row["reward"] = reward
        row["utterance"] = choice.utterance
        row.update(signal)
        self.rows.append(row)
        if learner.monitor is not None:  # a foreign event it sees stops the run after this step
            with self.stop.until_stopped(lambda: True):
                learner.monitor.after_step(decision.t, decision, choice.proposal, choice.governed, flagged)
        learner.t += 1

    def rule_set_summary(self) -> dict[str, Any]:
        """The learning seats' rule sets in force against the arena's norm (``experiments.arena_rule_set``; n = runs,
        each run's seats one cluster): ``rule_set`` and the flat ``rule_set_*`` keys; nothing for a method without
        scars."""
        if not self.rule_sets.measured:
            return {}
        quality, flat = arena_rule_set(
            [self.rule_sets.counts(range(len(self.records)))], self.cfg.seed, "runs"
        )
        return {"rule_set": quality, **flat}

    def detection_stats(self) -> dict[str, Any]:
        """The seats' own flags of the attack, summed over the learning seats."""
        return _summed(self.agent_stats, self.attack.detection_stats)

    def attack_view(self, learner: _Learner, decision, flagged: list[list[str]]) -> AttackView:
        """What the attacker knows at a learning seat's decision (the sustainability norm is public): the
        harvests the norm flags, smallest first, and the positive harvests within the sustainable share (needed and
        safe). An attack promotes the first: the smallest over-share harvest ("just a little more than your share"),
        the step a memory can plausibly talk an agent into — the largest one, promoted before, is never taken by any
        method, so its attack success was 0 by construction."""
        actions = decision.actions
        unsafe = sorted(
            (a for a, f in zip(actions, flagged, strict=True) if a.is_control and f),
            key=lambda a: float(a.arg("amount", 0) or 0),
        )
        needed = tuple(
            a
            for a, f in zip(actions, flagged, strict=True)
            if a.name == "harvest" and not f and float(a.arg("amount", 0) or 0) > 0
        )
        return AttackView(decision, tuple(unsafe), needed, needed, learner.seat, learner.label)

    def result(self, wall: float) -> Tier2Result:
        """The tables, the summary and each learning seat's carried state (also written as the run's manifest)."""
        cfg, records = self.cfg, self.records
        seats = _carried_state(cfg, self.out, self.learners, self.agent_stats, self.fresh)
        steps = pd.DataFrame(self.rows)
        months = months_table(cfg, records)
        rvr = (
            tier2_rvr(steps)
            if not steps.empty
            else {"rvr": None, "repeat_over": 0, "reexposures": 0, "by_run": {}}
        )
        runs = runs_table(cfg, records, rvr, self.kinds)
        summary = summarise(
            cfg, records, steps, runs, self.incarnations, self.agent_stats, self.kinds, self.admitted, rvr
        )
        summary.update(self.outcomes.summary(self.detection_stats(), cfg.seed))
        summary.update(self.rule_set_summary())
        summary["wall_seconds"] = wall
        summary["months_per_second"] = float(sum(len(r.months) for r in records) / wall) if wall > 0 else None
        self.stop.mark(summary)
        write_json(
            self.out / STATE_FILE, {"config": cfg.to_dict(), "seats": [seat.to_json() for seat in seats]}
        )
        return Tier2Result(summary, steps, months, runs, seats)


def _summed(stats: Mapping[str, Mapping[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    """The learning seats' counts of ``keys`` summed (a key no seat reports is left out)."""
    out: dict[str, Any] = {}
    for key in keys:
        values = [s[key] for s in stats.values() if s.get(key) is not None]
        if values:
            out[key] = sum(int(v) for v in values)
    return out


def _carried_state(
    cfg, out: Path, learners: Mapping[str, _Learner], stats, fresh: str | None
) -> tuple[SeatState, ...]:
    """Each learning seat's state at the end of the run (a fresh outsider's: its last run's, which a transfer does
    not carry — the newcomer arrives new there too)."""
    seats = []
    for seat, learner in learners.items():
        agent = learner.agent
        label = learner.label
        ledger = ledger_head = memory_path = None
        memory: dict[str, Any] = {}
        if agent.self_schema() is not None:
            ledger = str(learner.seat_dir / "ledger.sqlite")
            ledger_head = stats[label].get("ledger_head")
        if isinstance(agent, MemoryMechanism):
            memory = agent.memory_state()
            path = learner.seat_dir / MEMORY_FILE
            path.write_text(json.dumps(memory, indent=1, sort_keys=True), encoding="utf-8")
            memory_path = str(path)
        seats.append(
            SeatState(
                seat, cfg.method_label, ledger, ledger_head, memory_path, memory, learner.t, seat == fresh
            )
        )
    return tuple(seats)
