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
import shutil
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
from scars.agents.policies import CommandWriter
from scars.agents.policies.embedded import SimulatedLMConfig
from scars.agents.registry import BACKENDS, METHODS, MethodSpec
from scars.agents.runtime.ledger import SCAR_ADMITTED, Ledger, ledger_files
from scars.agents.runtime.scar import Scar
from scars.disequilibrium.composite import DisequilibriumConfig
from scars.disequilibrium.trustgate import TrustGateConfig
from scars.envs.api import ProtocolWorld, method_turn
from scars.envs.commons import commons_v0
from scars.envs.commons.adapter import CommonsAdapter
from scars.envs.commons.commons_v0 import EpisodeRecord, context_of
from scars.envs.commons.dynamics import sustainable_catch
from scars.envs.commons.habits import HABIT_PRESETS, habit_prior
from scars.envs.commons.metrics import episode_metrics, month_table
from scars.envs.commons.norms import NormVerifier
from scars.envs.commons.populations import Population
from scars.envs.commons.rollout import build_population
from scars.experiments.config import Tier2Config
from scars.experiments.enforcement import EnforcementCheck, enforcement_check
from scars.experiments.guarantees import GuaranteeMonitor
from scars.experiments.loop import Step, decide, learn
from scars.experiments.metrics import signal_summary
from scars.experiments.report import write_json
from scars.experiments.stats import pooled_ratio
from scars.synthesis.dsl import Action, canonical_text
from scars.synthesis.dsl.semantics import fires
from scars.synthesis.errors import ConfigError, LedgerError

LEARNER = "learner"
"""The kind of a seat that holds the run's learning method (the others hold scripted kinds)."""
STATE_FILE = "tier2_state.json"
"""The carried-state manifest a run writes into its folder (what ``transfer_from`` reads)."""
MEMORY_FILE = "memory.json"


@dataclass(frozen=True)
class SeatState:
    """What one learning seat carries out of a run, and into a transfer (``Tier2Config.transfer_from``).

    seat:        the seat's name (``agent_0`` … ``agent_4``).
    method:      the method label (``scars``, ``scars:no_mdl``, ``rag`` …).
    ledger_path: the scars agent's audit ledger (its self-schema: every scar, failure and decision), or None.
    ledger_head: the ledger's head anchor ``COUNT:HASH`` at the end of the run (re-verify against it), or None.
    memory_path: a baseline's memory (``MemoryMechanism.memory_state`` as JSON), or None.
    memory:      that memory state itself (empty for scars).
    t_end:       the seat's decision count at the end of the run (a transfer continues from it, so temporary masks
                 and scopes keep their meaning).
    fresh:       the seat is a fresh outsider (GovSim's newcomer, new in every run): its state is its last run's and
                 a transfer does not carry it.
    """

    seat: str
    method: str
    ledger_path: str | None
    ledger_head: str | None
    memory_path: str | None
    memory: Mapping[str, Any]
    t_end: int
    fresh: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "seat": self.seat,
            "method": self.method,
            "ledger_path": self.ledger_path,
            "ledger_head": self.ledger_head,
            "memory_path": self.memory_path,
            "t_end": self.t_end,
            "fresh": self.fresh,
        }


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


def population(cfg: Tier2Config) -> Population:
    """The scripted population behind the seats: ``cfg.population``, else the arena's default — whose last seat, in
    the outsider variant, is the outsider, scripted as ``greedy``."""
    spec = cfg.population
    if not spec and cfg.outsider_month:
        kinds = build_population(cfg.arena, None, target=cfg.focal_seat).kinds
        spec = ",".join((*kinds[:-1], "greedy"))
    return build_population(cfg.arena, spec or None, target=cfg.focal_seat)


def seat_kinds(cfg: Tier2Config) -> tuple[tuple[str, ...], tuple[str, ...], int | None]:
    """(kind per seat — ``LEARNER`` or a scripted kind —, provenance root per seat, the coalition's target)."""
    pop = population(cfg)
    if cfg.setup == "homogeneous":
        kinds = (LEARNER,) * len(pop.kinds)
        return kinds, tuple(f"agent_{i}" for i in range(len(kinds))), None
    kinds = list(pop.kinds)
    if kinds[cfg.focal_seat] == "malicious":
        raise ConfigError(
            f"focal_seat = {cfg.focal_seat} holds a malicious seat in population {pop.spec!r}; the learner must "
            "take an honest seat"
        )
    kinds[cfg.focal_seat] = LEARNER
    roots = list(pop.roots)
    roots[cfg.focal_seat] = f"agent_{cfg.focal_seat}"
    return tuple(kinds), tuple(roots), pop.target


def fresh_outsider(cfg: Tier2Config, kinds) -> str | None:
    """The seat that arrives new in every run: the outsider (the last seat, ``commons_v0``'s convention), when the
    variant is on, the seat holds a learner and ``cfg.outsider_fresh``."""
    last = len(kinds) - 1
    if not cfg.outsider_month or not cfg.outsider_fresh or kinds[last] != LEARNER:
        return None
    return f"agent_{last}"


def load_carried(cfg: Tier2Config) -> dict[str, SeatState]:
    """The carried state ``cfg.transfer_from`` names, checked before anything is written (fail closed): the
    manifest must exist and name this method for every learning seat; a scars seat's ledger must exist and
    verify (against the head recorded at the end of its run); a baseline's memory file must parse."""
    if not cfg.transfer_from:
        return {}
    root = Path(cfg.transfer_from)
    manifest = root / STATE_FILE
    if not manifest.is_file():
        raise ConfigError(
            f"transfer_from = {str(root)!r} holds no {STATE_FILE} (not a `scars run tier2` folder)"
        )
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        states = {s["seat"]: s for s in data["seats"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{manifest}: not a tier-2 state manifest ({exc})") from None
    kinds, _, _ = seat_kinds(cfg)
    fresh = fresh_outsider(cfg, kinds)
    carried: dict[str, SeatState] = {}
    for i, kind in enumerate(kinds):
        seat = f"agent_{i}"
        if kind != LEARNER or seat == fresh:
            continue  # a scripted seat carries nothing; a fresh outsider arrives new here too
        state = states.get(seat)
        if state is not None and state.get("fresh"):
            raise ConfigError(
                f"transfer_from = {str(root)!r}: seat {seat} was a fresh outsider there (new every run) and carries "
                "no state; keep it fresh here too (outsider_fresh)"
            )
        if state is None or state.get("method") != cfg.method_label:
            found = None if state is None else state.get("method")
            raise ConfigError(
                f"transfer_from = {str(root)!r} carries no {cfg.method_label!r} state for seat {seat} (found {found!r})"
            )
        ledger = memory_path = None
        memory: dict[str, Any] = {}
        if state.get("ledger_path"):
            ledger = root / seat / "ledger.sqlite"
            if not ledger.is_file():
                raise ConfigError(f"transfer_from: seat {seat}'s ledger {str(ledger)!r} is missing")
            try:
                with Ledger(ledger, read_only=True) as audit:
                    report = audit.verify(anchor=state.get("ledger_head"))
            except (LedgerError, ConfigError) as exc:
                raise ConfigError(
                    f"transfer_from: seat {seat}'s ledger {str(ledger)!r} is unusable: {exc}"
                ) from None
            if not report.ok:
                raise ConfigError(
                    f"transfer_from: seat {seat}'s ledger {str(ledger)!r} fails verification: {report.reason}"
                )
        if state.get("memory_path"):
            memory_path = root / seat / MEMORY_FILE
            try:
                memory = json.loads(memory_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ConfigError(
                    f"transfer_from: seat {seat}'s memory {str(memory_path)!r} is unusable: {exc}"
                ) from None
        carried[seat] = SeatState(
            seat,
            cfg.method_label,
            None if ledger is None else str(ledger),
            state.get("ledger_head"),
            None if memory_path is None else str(memory_path),
            memory,
            int(state.get("t_end", 0)),
        )
    return carried


def _install_ledger(source: Path, seat_dir: Path) -> None:
    """Copy a carried ledger (with its head file and key) into the new run's seat folder: the source stays as it
    was — the new run extends its own copy."""
    seat_dir.mkdir(parents=True, exist_ok=True)
    for f in ledger_files(source):
        if f.exists():
            shutil.copy2(f, seat_dir / f.name.replace(source.name, "ledger.sqlite"))


def _fresh_seat_dir(seat_dir: Path) -> None:
    """A seat starts from an empty folder: an earlier run's ledger or memory there is set aside, never reused."""
    if not seat_dir.exists():
        return
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(seat_dir.stat().st_mtime))
    target, n = seat_dir.with_name(f"{seat_dir.name}.{stamp}"), 1
    while target.exists():  # two runs into one folder within a second
        target, n = seat_dir.with_name(f"{seat_dir.name}.{stamp}.{n}"), n + 1
    seat_dir.rename(target)


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
    t: int = 0
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
    share = float(q["sustainable_share"])
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
) -> Tier2Result:
    """Run one tier-2 configuration; returns its ``Tier2Result`` (tables written by ``write_tier2``).

    ``out`` receives each learning seat's own folder (``out/agent_i/ledger.sqlite`` for scars, ``memory.json``
    for a baseline) — the state ``Tier2Result.seats`` names and a later run's ``transfer_from`` reads.
    ``cfg.transfer_from`` is checked before anything is written: a missing or unverifiable ledger is refused.
    ``progress(done, total)`` is called after every run."""
    carried = check_transfer(cfg, out)
    kinds, roots, _ = seat_kinds(cfg)
    root_ss = np.random.SeedSequence([cfg.seed, 2])
    env_ss, policy_ss, agent_ss, scripted_ss = root_ss.spawn(4)
    env = commons_v0.parallel_env(
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
    settings = cfg.to_dict()
    settings["trust"] = TrustGateConfig(saturating_drop=cfg.z_r_saturation * severity, enabled=cfg.gates)
    settings["signal"] = DisequilibriumConfig(tau=cfg.tau)
    policy = BACKENDS.get(cfg.backend)(settings)
    generate = cfg.policy_mode == "generate"
    if generate and not isinstance(policy, CommandWriter):
        raise ConfigError(
            f"backend {cfg.backend!r} cannot write its command (no generate method); use policy_mode 'score'"
        )
    lm = SimulatedLMConfig(temperature=cfg.temperature)
    # the habit prior is the log of the habits' distribution at the embedded policy's scale
    scale = lm.task_gain / lm.temperature
    habits = {  # the outsider seat has the outsider's persona and habits; every other seat the run's
        seat: HABIT_PRESETS[cfg.outsider_habits if seat == env.outsider else cfg.habits]
        for seat in env.possible_agents
    }
    pop = population(cfg)
    scripted = {f"agent_{i}": pop.behaviours[i] for i, kind in enumerate(kinds) if kind != LEARNER}
    scripted_rng = np.random.default_rng(scripted_ss)
    out.mkdir(parents=True, exist_ok=True)
    learners: dict[str, _Learner] = {}
    policy_rngs = policy_ss.spawn(len(kinds))
    agent_seeds = agent_ss.spawn(len(kinds))
    fresh = fresh_outsider(cfg, kinds)  # the seat that arrives new every run, or None

    def make_learner(seat: str, seat_dir: Path, agent_seed, policy_seed, state: SeatState | None) -> _Learner:
        seat_dir.mkdir(parents=True, exist_ok=True)
        adapter = CommonsAdapter(
            env, seat, overuse_verdicts=cfg.overuse_verdicts, universalization=cfg.universalization
        )
        world = ProtocolWorld(adapter, oracle=cfg.oracle)  # the information protocol (README)
        spec = MethodSpec(
            world,
            policy,
            seat_dir,
            int(agent_seed.generate_state(1)[0] % (2**31 - 1)),
            settings | {"agent_id": seat},
        )
        agent = METHODS.get(cfg.method)(spec)
        if state is not None and isinstance(agent, MemoryMechanism):
            agent.load_memory_state(state.memory)
        schema = agent.self_schema()
        monitor = GuaranteeMonitor(schema, adapter.card.classes) if schema is not None else None
        t = 0 if state is None else state.t_end
        enforcement = enforcement_check(agent, adapter.card.core, adapter.card.classes, cfg.ablation)
        return _Learner(
            seat,
            seat_dir,
            adapter,
            world,
            agent,
            np.random.default_rng(policy_seed),
            monitor,
            enforcement,
            t=t,
        )

    # every incarnation of every learning seat, in order: one per seat, and one per run for a fresh outsider
    incarnations: dict[str, _Learner] = {}
    agent_stats: dict[str, dict[str, Any]] = {}
    admitted: dict[str, list] = {}

    def account(label: str, learner: _Learner) -> None:
        """What an incarnation did (its stats and the scars it admitted in this run), read before it closes."""
        store = learner.agent.self_schema()
        if store is not None:  # the scars this run admitted (a carried ledger's earlier events are not)
            state = carried.get(learner.seat)
            since = int(state.ledger_head.split(":")[0]) if state and state.ledger_head else 0
            admitted[label] = [
                Scar.from_json(e.payload).rule
                for e in store.ledger.events(after=since)
                if e.type == SCAR_ADMITTED
            ]
        stats = learner.agent.stats()
        stats["verifier_calls"] = learner.world.verifier_calls
        if learner.monitor is not None:
            stats.update(learner.monitor.summary())
        stats.update(learner.enforcement.summary())
        agent_stats[label] = stats

    try:
        for i, kind in enumerate(kinds):
            if kind != LEARNER:
                continue
            seat = f"agent_{i}"
            _fresh_seat_dir(out / seat)
            if seat == fresh:
                continue  # built at the start of every run
            state = carried.get(seat)
            if state is not None and state.ledger_path:
                _install_ledger(Path(state.ledger_path), out / seat)
            learners[seat] = incarnations[seat] = make_learner(
                seat, out / seat, agent_seeds[i], policy_rngs[i], state
            )
        if fresh is not None:  # one agent seed and one policy seed per run for the newcomer
            index = env.possible_agents.index(fresh)
            fresh_seeds = list(
                zip(agent_seeds[index].spawn(cfg.runs), policy_rngs[index].spawn(cfg.runs), strict=True)
            )
        rows: list[dict[str, Any]] = []
        records: list[EpisodeRecord] = []
        started = time.perf_counter()
        run_seeds = env_ss.spawn(cfg.runs)
        for run in range(cfg.runs):
            observations, infos = env.reset(seed=int(run_seeds[run].generate_state(1)[0]))
            states = {s: b.initial_state() for s, b in scripted.items()}
            begun: set[str] = set()  # the learners in the group this run (the outsider joins late, or never)
            if fresh is not None:  # GovSim's newcomer: a new agent, with no memory of earlier runs
                if fresh in learners:
                    retired = learners.pop(fresh)
                    account(retired.label, retired)
                    retired.agent.close()
                learners[fresh] = make_learner(fresh, out / fresh / f"run_{run}", *fresh_seeds[run], None)
                incarnations[learners[fresh].label] = learners[fresh]
            for learner in learners.values():
                learner.adapter.reset(run)
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
                    if seat in scripted:
                        actions[seat], states[seat] = scripted[seat].step(
                            observations[seat], infos[seat], states[seat], scripted_rng
                        )
                        continue
                    learner = learners[seat]
                    decision = learner.adapter.decision(observations[seat], infos[seat], t=learner.t)
                    prior = habit_prior(
                        habits[seat],
                        observations[seat],
                        infos[seat],
                        decision.actions,
                        scale=scale,
                        universalization=cfg.universalization,
                    )
                    pending[seat] = choice = decide(
                        policy,
                        learner.agent,
                        decision,
                        prior,
                        learner.world.card.salient_keys,
                        learner.rng,
                        generate=generate,
                        monitor=learner.monitor,
                    )
                    actions[seat] = learner.world.command(decision, choice.action)
                observations, rewards, _, _, infos = env.step(actions)
                for seat, choice in pending.items():
                    learner = learners[seat]
                    learner.enforcement.after_step(choice.decision, choice.governed, choice.action)
                    info = infos[seat]
                    decision = choice.decision
                    verdicts = learner.world.verdicts(info)
                    punishments = learner.world.punishments(info)
                    unsafe = None
                    if (
                        cfg.verdicts == "state"
                    ):  # the complete unsafe set of the decision (the experiment asks)
                        unsafe = tuple(
                            a
                            for a in decision.actions
                            if a.is_control and learner.adapter.check(decision.context, a)
                        )
                    signal = learn(
                        learner.agent,
                        choice,
                        str(info.get("mayor_report", "")),
                        float(rewards[seat]),
                        verdicts,
                        punishments,
                        False,
                        unsafe,
                    )
                    row = _pending_row(cfg, run, learner, choice)
                    row.update(choice.generation_columns())
                    row["memory_tokens"] = choice.memory_tokens
                    row["verdicts"] = ",".join(v.rule_id for v in verdicts)
                    row["punished_by"] = ",".join(p.punisher for p in punishments)
                    row["justified_received"] = sum(
                        learner.adapter.norms.judge(p.punished_action, p.context) for p in punishments
                    )
                    row["reward"] = float(rewards[seat])
                    row["utterance"] = choice.utterance
                    row.update(signal)
                    rows.append(row)
                    if learner.monitor is not None:
                        flagged = [
                            [v.rule_id for v in learner.adapter.check(decision.context, a)]
                            for a in decision.actions
                        ]
                        learner.monitor.after_step(
                            decision.t, decision, choice.logits, choice.governed, flagged
                        )
                    learner.t += 1
            record = env.episode_record()
            records.append(record)
            survived = len(record.months) == cfg.months and not record.months[-1].harvest.collapsed
            for seat, learner in learners.items():  # in seat order (a set's order is not reproducible)
                if seat in begun:
                    with method_turn():
                        learner.agent.end_episode(survived)
            if progress is not None:
                progress(run + 1, cfg.runs)
        for label, learner in incarnations.items():
            if label not in agent_stats:
                account(label, learner)
        wall = time.perf_counter() - started
    finally:
        for learner in learners.values():
            learner.agent.close()
    seats = _carried_state(cfg, out, learners, agent_stats, fresh)
    steps = pd.DataFrame(rows)
    months = _months_table(cfg, records)
    rvr = (
        tier2_rvr(steps)
        if not steps.empty
        else {"rvr": None, "repeat_over": 0, "reexposures": 0, "by_run": {}}
    )
    runs = _runs_table(cfg, records, rvr, kinds)
    summary = summarise(cfg, records, steps, runs, incarnations, agent_stats, kinds, admitted, rvr)
    summary["wall_seconds"] = wall
    summary["months_per_second"] = float(sum(len(r.months) for r in records) / wall) if wall > 0 else None
    write_json(out / STATE_FILE, {"config": cfg.to_dict(), "seats": [seat.to_json() for seat in seats]})
    return Tier2Result(summary, steps, months, runs, seats)


def check_transfer(cfg: Tier2Config, out: Path) -> dict[str, SeatState]:
    """The carried state ``cfg.transfer_from`` names, verified before anything is written (fail closed)."""
    if cfg.transfer_from and Path(cfg.transfer_from).resolve() == Path(out).resolve():
        raise ConfigError(
            f"transfer_from = {cfg.transfer_from!r} is the output folder; carry the state into another folder"
        )
    return load_carried(cfg)


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


def _months_table(cfg: Tier2Config, records) -> pd.DataFrame:
    frames = []
    for run, record in enumerate(records):
        table = month_table(record)
        table.insert(0, "run", run)
        table.insert(0, "method", cfg.method_label)
        frames.append(table)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _runs_table(cfg: Tier2Config, records, rvr: Mapping[str, Any], kinds) -> pd.DataFrame:
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
    props: dict[str, list] = {
        k: [] for k in ("enforcement_ok", "prop1_ok", "prop2_ok", "prop3_ok", "plane_ledger_ok")
    }
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
