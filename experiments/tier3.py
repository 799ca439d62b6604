"""The tier-3 experiment (paper §6.3; SPEC §7 tier 3): narrative coherence and transfer to an unrelated arena C.

Read top to bottom: config → train in A and in B (tier 2's runner) → carry the state into arena C → play C → metrics.

For every seed, two agents with the same initial persona — the same method, the same base policy, the same seed
family — train with tier 2's runner (``experiments.commons_run.run_tier2``, the focal set-up: the learner in seat 0 of
the commons among the arena's scripted population), one in arena A (peer punishment) and one in arena B (none), so
they accumulate different histories. Each then carries its state into arena C (``envs.aquifer``, farms pumping an
aquifer: nothing of A/B on the surface): the scars agent its audit ledger (a verified copy; every carried scar stays
in force) and — unless ``ground_scars`` is off — the carried scars that *ground* in C through the worlds' abstract
vocabulary (``envs.vocabulary``: class predicates and abstract variables), admitted by the schema store with the
source scar named as provenance; a baseline its memory (``memory_state``), as text. Both play ``episodes_c`` seasons-
long episodes of C in the learner's seat among C's scripted farms, on the same C seeds and policy-sampling streams, so
only the carried state differs between them.

Metrics (``experiments.identity``): style continuity (JS of the agent's C utterances against its initial imprint and
its training-arena utterances), task-behaviour continuity (the decision profile on the abstract vocabulary, C against
the training arena), trajectory individuation (a scikit-learn classifier attributes each C trajectory's history,
held out by seed, with a permutation test) and, for scars, the Prop. 3 drift of the carried scars on C's off-failure
decisions against their bounds. Two controls can make the classifier fail: *identical histories* (the A-trained
agent's state played twice in C, one copy labelled B) and *no memory* (an agent that carries nothing).

``run_tier3`` runs one method; ``run_tier3_to_dir`` also writes its files and returns the summary (what a sweep
needs); ``run_tier3_table`` runs several methods and the no-memory control and writes the comparison table.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import scars.agents.builtin  # noqa: F401  (registers the built-in methods and backends)
from scars.agents.api import Agent
from scars.agents.memory.base import MemoryMechanism
from scars.agents.policies.embedded import SimulatedLMConfig
from scars.agents.registry import BACKENDS, METHODS, MethodSpec
from scars.agents.runtime.ledger import Ledger, ledger_files, parse_anchor
from scars.agents.runtime.scar import Provenance, Scar
from scars.disequilibrium.composite import DisequilibriumConfig
from scars.disequilibrium.trustgate import TrustGateConfig
from scars.envs.api import ProtocolWorld, WorldCard, method_turn
from scars.envs.aquifer import aquifer_v0
from scars.envs.aquifer.adapter import AquiferAdapter
from scars.envs.aquifer.aquifer_v0 import (
    engine_action_choice,
    engine_info,
    engine_observation,
    surface_engine_action,
)
from scars.envs.commons import commons_v0
from scars.envs.commons.adapter import CommonsAdapter
from scars.envs.commons.habits import HarvesterHabits, habit_prior
from scars.envs.commons.populations import parse_population
from scars.envs.vocabulary import ground
from scars.experiments.arena_rule_set import ArenaRuleSets, arena_rule_set
from scars.experiments.commons_run import run_tier2
from scars.experiments.commons_seats import SeatState
from scars.experiments.config import NO_MEMORY, Tier3Config
from scars.experiments.enforcement import enforcement_check
from scars.experiments.guarantees import GuaranteeMonitor
from scars.experiments.identity import (
    FEATURE_NAMES,
    decision_profile,
    drift_against_bound,
    extraction_point,
    individuation,
    mean_with_ci,
    profile_distance,
    style_continuity,
    trajectory_features,
)
from scars.experiments.loop import Step, decide
from scars.experiments.stats import pooled_ratio
from scars.experiments.stopping import RunStop
from scars.experiments.tier2_report import write_tier2
from scars.synthesis.dsl import Action, canonical_text
from scars.synthesis.errors import ConfigError

LEARNER_C = "farm_0"
"""The learner's seat in arena C (its scripted co-players take the others)."""
FAILURE_FAMILIES: Mapping[str, str] = {"over_draw": "over_extraction", "aquifer_dry": "resource_collapse"}
"""C's verifier ids → the failure family they are, so that a scar learned from A's or B's failure of that family is
*on*-failure in C's matching states (the Prop. 3 drift is measured only on the others). A's and B's ids are mapped in
``_families``."""


@dataclass
class Trajectory:
    """One agent's play of arena C, with what it carried and what its training arena showed of it."""

    seed: int
    history: str
    """The label the classifier must recover: ``A`` or ``B`` (for the identical-history control, the copy of the
    A-trained agent is labelled ``B``)."""
    points_c: list[tuple[float, float]] = field(default_factory=list)
    utterances_c: list[str] = field(default_factory=list)
    points_training: list[tuple[float, float]] = field(default_factory=list)
    utterances_training: list[str] = field(default_factory=list)
    decisions: int = 0
    scar_masked_decisions: int = 0
    grounded_masked_decisions: int = 0
    transfer_masked_decisions: int = 0
    """Decisions at which a carried scar or its grounding masked an action."""
    overreach_decisions: int = 0
    """Decisions at which a carried scar (or its grounding) masked something."""
    overreach_mass: float = 0.0
    """Summed over those decisions: π_0's mass on the masked actions C's verifier finds safe."""
    learned_in_c: int = 0
    """Scars the agent admitted in C from C's own failures (not transferred)."""
    sanctions: int = 0
    sanction_opportunities: int = 0
    survived: int = 0
    carried_scars: int = 0
    enforcement: dict[str, Any] = field(default_factory=dict)
    """The enforcement invariant over its decisions in C (``experiments.enforcement``) and in its training runs."""
    grounded: list[dict[str, Any]] = field(default_factory=list)
    not_portable: list[dict[str, Any]] = field(default_factory=list)
    drift: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    rule_sets: ArenaRuleSets = field(default_factory=ArenaRuleSets)
    """Its rule sets in force in C against C's safe-yield norm (issue 40), clusters = its episodes of C."""

    def features(self) -> np.ndarray:
        return trajectory_features(
            self.points_c,
            masked_decisions=self.scar_masked_decisions,
            decisions=self.decisions,
            sanctions=self.sanctions,
            sanction_opportunities=self.sanction_opportunities,
            utterances=self.utterances_c,
        )


@dataclass(frozen=True)
class Tier3Result:
    """summary: the metrics; agents: one row per (seed, history) agent; steps: one row per decision in C."""

    summary: dict[str, Any]
    agents: pd.DataFrame
    steps: pd.DataFrame


# ------------------------------------------------------------------------------------------ training (tier 2)
def _training_view(result, seat: str, capacity: int) -> tuple[list[tuple[float, float]], list[str]]:
    """The decision profile points and utterances of the learner's training seat, from tier 2's step table."""
    steps = result.steps
    if steps.empty:
        return [], []
    mine = steps[steps["seat"] == seat]
    harvest = mine[(mine["phase"] == "harvest") & (mine["share"] > 0)]
    points = [
        (float(p) / capacity, float(a or 0) / float(s))
        for p, a, s in zip(harvest["pool"], harvest["amount"], harvest["share"], strict=True)
    ]
    utterances = [u for u in mine.get("utterance", pd.Series(dtype=str)).tolist() if isinstance(u, str) and u]
    return points, utterances


def _install_ledger(source: Path, folder: Path, anchor: str | None) -> None:
    """A verified copy of the carried ledger (with its head file and key) in the C folder; the source is untouched.
    The source must verify against the head its training run recorded and end there (fail closed: a damaged ledger
    travels nowhere, and neither does one extended after training, whose rules training did not learn)."""
    with Ledger(source, read_only=True) as audit:
        report = audit.verify(anchor=anchor)
        count = audit.head()[0]
    if not report.ok:
        raise ConfigError(f"carried ledger {str(source)!r} fails verification: {report.reason}")
    if anchor is not None and count != parse_anchor(anchor)[0]:
        raise ConfigError(
            f"carried ledger {str(source)!r} has {count} events but its training run ended at event "
            f"{parse_anchor(anchor)[0]}: it was extended after training; carry the ledger training wrote"
        )
    folder.mkdir(parents=True, exist_ok=True)
    for f in ledger_files(source):
        if f.exists():
            shutil.copy2(f, folder / f.name.replace(source.name, "ledger.sqlite"))


def _families(store) -> dict[str, str]:
    """Failure families across worlds: C's verdict ids and A's/B's (the commons adapter's) onto one name each. A scar
    learned from punishments (θ = ``punished:…``) enforces the norm TrustGate's norm verifier checked them against —
    the sustainability norm, so its family is over-extraction too."""
    families = dict(FAILURE_FAMILIES) | {
        "over_harvest": "over_extraction",
        "resource_collapse": "resource_collapse",
    }
    for scar in store.scars:
        for item in scar.evidence:
            theta = str(item.get("theta", ""))
            if theta.startswith("punished:"):
                families[theta] = "over_extraction"
    return families


# ---------------------------------------------------------------------------------------------- arena C
def _ground_carried(
    agent: Agent, source: WorldCard, target: WorldCard, trajectory: Trajectory, t: int
) -> set[str]:
    """Admit the carried scars that ground in C (``envs.vocabulary``); record the ones that do not, with why."""
    store = agent.self_schema()
    if store is None:
        return set()
    grounded_ids: set[str] = set()
    carried = tuple(store.scars)
    for scar in carried:
        g = ground(scar.rule, source, target)
        if not g.portable:
            trajectory.not_portable.append(
                {"scar": scar.id, "rule": canonical_text(scar.rule), "reason": g.reason}
            )
            continue
        settings = dict(scar.provenance.synthesiser_settings)
        theta = next((str(item["theta"]) for item in scar.evidence if "theta" in item), "")
        for rule in g.rules:
            new = Scar(
                rule,
                # the failure family it was learned from travels with it (Prop. 3 is measured off that family)
                evidence=(
                    {
                        "grounded_from": scar.id,
                        "source_world": source.id,
                        "tool_class": g.tool_class,
                        "theta": theta,
                    },
                ),
                provenance=Provenance(
                    verifier_id=target.verifier_id,
                    synthesiser="scars.envs.vocabulary.ground",
                    # the source scar's drift budget (and its own L_drift) stays its bound in C (Prop. 3)
                    synthesiser_settings=tuple(sorted(settings.items())),
                ),
            )
            if new.id in grounded_ids or any(s.id == new.id for s in store.scars):
                continue
            allowed, _ = store.may_admit(new)
            if not allowed:
                continue
            store.admit(new, reason=f"grounded from {scar.id} ({source.id}) in {target.id} at t={t}")
            grounded_ids.add(new.id)
            trajectory.grounded.append(
                {"scar": new.id, "from": scar.id, "rule": canonical_text(rule), "class": g.tool_class}
            )
    return grounded_ids


def play_c(
    cfg: Tier3Config,
    seed: int,
    history: str,
    state: SeatState | None,
    training: tuple[list[tuple[float, float]], list[str]],
    folder: Path,
    stop: RunStop | None = None,
    on_step: Callable[[Agent, dict[str, Any]], None] | None = None,
) -> Trajectory:
    """The carried agent plays ``cfg.episodes_c`` episodes of arena C in seat ``LEARNER_C`` (module docstring).

    Every stream derives from ``seed`` alone (not from the history), so the A- and B-trained agents of a seed meet
    the same aquifers, the same co-players and the same sampling noise. Another process writing the agent's ledger
    ends the play at the next decision (``stop``, ``experiments.stopping``): the trajectory holds the decisions
    recorded until then. ``on_step(agent, row)`` is called after every decision (tests audit the run with it)."""
    stop = stop or RunStop()
    trajectory = Trajectory(seed, history, points_training=training[0], utterances_training=training[1])
    root = np.random.SeedSequence([seed, 3])
    env_ss, policy_ss, agent_ss, scripted_ss = root.spawn(4)
    env = aquifer_v0.parallel_env(num_months=cfg.seasons_c)
    train_cfg = cfg.train_config("A", seed)
    adapter = AquiferAdapter(env, LEARNER_C, overuse_verdicts=train_cfg.overuse_verdicts)
    world = ProtocolWorld(adapter, oracle=train_cfg.oracle)  # the information protocol (README)
    source = CommonsAdapter(commons_v0.parallel_env(), "agent_0").card
    settings = train_cfg.to_dict()
    settings["trust"] = TrustGateConfig(
        saturating_drop=train_cfg.z_r_saturation * env.config.punishment_severity, enabled=train_cfg.gates
    )
    settings["signal"] = DisequilibriumConfig(tau=cfg.tau)
    settings["agent_id"] = LEARNER_C
    policy = BACKENDS.get(cfg.backend)(settings)
    generate = cfg.policy_mode == "generate"
    lm = SimulatedLMConfig(temperature=cfg.temperature)
    scale = lm.task_gain / lm.temperature
    habits = HarvesterHabits()
    population = parse_population(cfg.population_c)
    farms = [f for f in env.possible_agents if f != LEARNER_C]
    scripted = dict(zip(farms, population.behaviours, strict=True))
    scripted_rng = np.random.default_rng(scripted_ss)
    policy_rng = np.random.default_rng(policy_ss)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    if state is not None and state.ledger_path:
        _install_ledger(Path(state.ledger_path), folder, state.ledger_head)
    t = 0 if state is None else state.t_end
    if cfg.method == NO_MEMORY:
        agent: Agent = MemoryMechanism(adapter.card)
    else:
        spec = MethodSpec(world, policy, folder, int(agent_ss.generate_state(1)[0] % (2**31 - 1)), settings)
        agent = METHODS.get(cfg.method)(spec)
        if state is not None and isinstance(agent, MemoryMechanism):
            agent.load_memory_state(state.memory)
    try:
        schema = agent.self_schema()
        carried_ids = set() if schema is None else {s.id for s in schema.scars}
        trajectory.carried_scars = len(carried_ids)
        grounded_ids = (
            _ground_carried(agent, source, adapter.card, trajectory, t) if cfg.ground_scars else set()
        )
        transferred = carried_ids | grounded_ids  # the rest of S_t in C is learned in C
        monitor = GuaranteeMonitor(schema, adapter.card.classes, _families(schema)) if schema else None
        enforcement = enforcement_check(agent, adapter.card.core, adapter.card.classes, cfg.ablation)
        episode_seeds = env_ss.spawn(cfg.episodes_c)
        with stop.until_stopped(lambda: True):  # the decisions recorded until a stop are kept
            for episode in range(cfg.episodes_c):
                observations, infos = env.reset(seed=int(episode_seeds[episode].generate_state(1)[0]))
                adapter.reset(episode)
                states = {f: b.initial_state() for f, b in scripted.items()}
                with method_turn():
                    agent.begin_episode(adapter.decision(observations[LEARNER_C], infos[LEARNER_C], t=t))
                seasons = 0
                while env.agents:
                    actions: dict[str, Any] = {}
                    pending: Step | None = None
                    for farm in env.agents:
                        if farm in scripted:
                            move, states[farm] = scripted[farm].step(
                                engine_observation(observations[farm]),
                                engine_info(infos[farm]),
                                states[farm],
                                scripted_rng,
                            )
                            actions[farm] = surface_engine_action(move)
                            continue
                        decision = adapter.decision(observations[farm], infos[farm], t=t)
                        # the base policy's habits are world knowledge of a common-pool harvester: read under C's names
                        engine_actions = tuple(
                            Action.from_dict(engine_action_choice(a.to_dict())) for a in decision.actions
                        )
                        prior = habit_prior(
                            habits,
                            engine_observation(observations[farm]),
                            engine_info(infos[farm]),
                            engine_actions,
                            scale=scale,
                            universalization=False,
                        )
                        pending = decide(
                            policy,
                            agent,
                            decision,
                            prior,
                            adapter.card.salient_keys,
                            policy_rng,
                            generate=generate,
                            monitor=monitor,
                        )
                        actions[farm] = world.command(decision, pending.action)
                    observations, rewards, _, _, infos = env.step(actions)
                    if pending is None:
                        continue
                    decision, action, governed, logits = (
                        pending.decision,
                        pending.action,
                        pending.governed,
                        pending.logits,
                    )
                    utterance = pending.utterance
                    info = infos.get(LEARNER_C, {})
                    verdicts = world.verdicts(info) if info else ()
                    punishments = world.punishments(info) if info else ()
                    flagged = [
                        [v.rule_id for v in adapter.check(decision.context, a)] for a in decision.actions
                    ]
                    trajectory.rule_sets.decide(  # the scars active at the decision, before the feedback
                        LEARNER_C, episode, adapter, agent, decision, governed.fired, action, flagged
                    )
                    if verdicts or any(
                        adapter.norms.judge(p.punished_action, p.context) for p in punishments
                    ):
                        trajectory.rule_sets.tell(LEARNER_C)
                    stop.learn(  # refused (another process wrote the ledger): recorded, then the play stops
                        agent,
                        pending,
                        str(info.get("water_report", "")),
                        float(rewards.get(LEARNER_C, 0.0)),
                        verdicts,
                        punishments,
                        False,
                    )
                    scar_ids = set(agent.scar_ids())
                    fired_ids = {i for _, ids in governed.fired for i in ids}
                    # overreach: the base policy's mass on actions C's verifier finds safe that a carried scar masked —
                    # what Prop. 3 cannot see where every decision offers some unsafe action (on-failure everywhere)
                    by_transfer = [i for i, ids in governed.fired if set(ids) & transferred]
                    if by_transfer:
                        p0 = np.exp(np.asarray(logits, dtype=np.float64) - np.max(logits))
                        p0 /= p0.sum()
                        trajectory.overreach_decisions += 1
                        trajectory.overreach_mass += float(sum(p0[i] for i in by_transfer if not flagged[i]))
                    stage = str(decision.context["stage"])
                    point = extraction_point(decision.context, decision.actions, action, adapter.card)
                    trajectory.decisions += 1
                    trajectory.scar_masked_decisions += bool(fired_ids & scar_ids)
                    trajectory.grounded_masked_decisions += bool(fired_ids & grounded_ids)
                    trajectory.transfer_masked_decisions += bool(fired_ids & transferred)
                    if point is not None:
                        trajectory.points_c.append(point)
                    if stage == "fines":
                        trajectory.sanction_opportunities += 1
                        trajectory.sanctions += action.name == "fine"
                        seasons += 1
                    if utterance:
                        trajectory.utterances_c.append(utterance)
                    trajectory.rows.append(
                        {
                            "method": cfg.method_label,
                            "seed": seed,
                            "history": history,
                            "episode": episode,
                            "season": int(decision.context["season"]),
                            "stage": stage,
                            "t": t,
                            "action": action.name,
                            "volume": action.arg("volume") if action.name == "pump" else None,
                            "level": int(decision.context["aquifer_level"]),
                            "safe_share": float(decision.context["safe_yield_share"]),
                            "level_fraction": None if point is None else point[0],
                            "extraction_shares": None if point is None else point[1],
                            "fallback": pending.fallback,
                            **pending.generation_columns(),
                            "n_masked": int(np.sum(governed.masked)),
                            "scar_masked": bool(fired_ids & scar_ids),
                            "grounded_masked": bool(fired_ids & grounded_ids),
                            "transfer_masked": bool(fired_ids & transferred),
                            "verdicts": ",".join(v.rule_id for v in verdicts),
                            "fined_by": ",".join(p.punisher for p in punishments),
                            "utterance": utterance,
                        }
                    )
                    enforcement.after_step(decision, governed, action)
                    if monitor is not None and not stop.stopped:
                        monitor.after_step(t, decision, logits, governed, flagged)
                    if on_step is not None:
                        on_step(agent, trajectory.rows[-1])
                    t += 1
                    stop.check()
                survived = seasons == cfg.seasons_c
                trajectory.survived += survived
                with method_turn():
                    agent.end_episode(survived)
        trajectory.enforcement = dict(enforcement.summary())
        if monitor is not None:
            # Prop. 3 across domains: the carried scars (and their groundings) only, not the scars learned in C
            per_scar = monitor.summary()["prop3"]["per_scar"]
            trajectory.drift = {sid: v for sid, v in per_scar.items() if sid in transferred}
            trajectory.learned_in_c = len({s.id for s in schema.scars} - transferred)
    finally:
        stop.close(agent)
    return trajectory


# ------------------------------------------------------------------------------------------ one method
def run_tier3(
    cfg: Tier3Config,
    out: Path,
    progress: Callable[[str], None] | None = None,
    on_step: Callable[[Agent, dict[str, Any]], None] | None = None,
) -> Tier3Result:
    """Train in A and B, carry into C, play C — for every seed — and compute the tier-3 metrics of one method.

    Another process writing an agent's ledger (in training or in C) stops the whole run at the next decision
    (``experiments.stopping``): a stopped training run is written out in its folder as tier 2 writes one, the
    trajectories played until then are the result, and the summary is marked ``complete: false`` with ``stopped``.
    ``on_step(agent, row)`` is called after every decision in C."""
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    capacity = commons_v0.parallel_env().config.dynamics.capacity
    trajectories: list[Trajectory] = []
    controls: list[Trajectory] = []
    training_enforcement: list[bool | None] = []  # the invariant in every training run (tier 2's check)
    training_masks: list[bool | None] = []  # generate mode's check in every training run
    stop = RunStop()
    with stop.until_stopped(lambda: True):
        for seed in cfg.seeds:
            trained: dict[str, tuple[SeatState | None, tuple]] = {}
            for arena in ("A", "B"):
                if cfg.method == NO_MEMORY:
                    trained[arena] = (None, ([], []))
                    continue
                if progress is not None:
                    progress(f"seed {seed}: training in arena {arena}")
                train_cfg, train_out = cfg.train_config(arena, seed), out / f"seed_{seed}" / f"train_{arena}"
                result = run_tier2(train_cfg, train_out, stop=stop)
                if stop.stopped:  # written out as tier 2 writes a stopped run; nothing is carried from it
                    write_tier2(
                        train_out, {train_cfg.method_label: result}, {train_cfg.method_label: train_cfg}
                    )
                    stop.check()
                training_enforcement.append(result.summary.get("enforcement_ok"))
                training_masks.append(result.summary.get("generate_mask_ok"))
                seat = result.seats[0]
                trained[arena] = (seat, _training_view(result, seat.seat, capacity))
            for arena in ("A", "B"):
                if progress is not None:
                    progress(f"seed {seed}: the {arena}-trained agent plays arena C")
                state, training = trained[arena]
                folder = out / f"seed_{seed}" / f"c_from_{arena}"
                trajectories.append(play_c(cfg, seed, arena, state, training, folder, stop, on_step))
                stop.check()
            # identical histories: the A-trained agent's state, played again in C, labelled B
            state, training = trained["A"]
            controls.append(next(t for t in trajectories if t.seed == seed and t.history == "A"))
            if progress is not None:
                progress(f"seed {seed}: identical-history control")
            folder = out / f"seed_{seed}" / "c_identical"
            controls.append(play_c(cfg, seed, "B", state, training, folder, stop, on_step))
            stop.check()
    summary = summarise(cfg, trajectories, controls)
    in_c = [t.enforcement for t in (*trajectories, *controls) if t.enforcement]
    summary["enforcement_decisions"] = sum(e["enforcement_decisions"] for e in in_c)
    summary["enforcement_violations"] = sum(e["enforcement_violations"] for e in in_c)
    summary["enforcement_first"] = next(
        (e["enforcement_first"] for e in in_c if e["enforcement_first"]), None
    )
    summary["enforcement_ok"] = summary["enforcement_violations"] == 0 and all(
        ok is not False for ok in training_enforcement
    )
    summary["wall_seconds"] = time.perf_counter() - started
    agents_table = pd.DataFrame([_agent_row(cfg, t) for t in trajectories])
    steps = pd.DataFrame([r for t in trajectories for r in t.rows])
    # generate mode's per-step check, summed over C's decisions (a masked written command is recorded, never run)
    written = int(steps["generated_masked"].sum()) if "generated_masked" in steps else 0
    generate = cfg.policy_mode == "generate"
    summary["generated_masked_steps"] = written if generate else None
    summary["generate_mask_ok"] = (
        (written == 0 and all(ok is not False for ok in training_masks)) if generate else None
    )
    stop.mark(summary)
    return Tier3Result(summary, agents_table, steps)


def _agent_row(cfg: Tier3Config, t: Trajectory) -> dict[str, Any]:
    style = style_continuity(t.utterances_c, t.utterances_training)
    behaviour = profile_distance(decision_profile(t.points_c), decision_profile(t.points_training))
    return {
        "method": cfg.method_label,
        "seed": t.seed,
        "history": t.history,
        "js_imprint": style["js_imprint"],
        "js_training": style["js_training"],
        "utterances_c": style["n_c"],
        "utterances_training": style["n_training"],
        "profile_distance": behaviour["distance"],
        "shared_bins": behaviour["shared_bins"],
        "extraction_c": float(np.mean([y for _, y in t.points_c])) if t.points_c else None,
        "extraction_training": float(np.mean([y for _, y in t.points_training]))
        if t.points_training
        else None,
        "decisions_c": t.decisions,
        "scar_masked_decisions": t.scar_masked_decisions,
        "grounded_masked_decisions": t.grounded_masked_decisions,
        "transfer_masked_decisions": t.transfer_masked_decisions,
        "learned_in_c": t.learned_in_c,
        "overreach_decisions": t.overreach_decisions,
        "overreach_mass": t.overreach_mass,
        "carried_scars": t.carried_scars,
        "grounded_scars": len(t.grounded),
        "not_portable_scars": len(t.not_portable),
        "episodes_survived": t.survived,
        **{f"f_{name}": value for name, value in zip(FEATURE_NAMES, t.features(), strict=True)},
    }


def summarise(
    cfg: Tier3Config, trajectories: Sequence[Trajectory], controls: Sequence[Trajectory]
) -> dict[str, Any]:
    rng = np.random.default_rng([min(cfg.seeds), 33])
    rows = [_agent_row(cfg, t) for t in trajectories]
    features = np.array([t.features() for t in trajectories])
    labels = [t.history for t in trajectories]
    seeds = [t.seed for t in trajectories]
    control_features = np.array([t.features() for t in controls])
    per_scar: dict[str, Any] = {}
    for t in trajectories:
        for sid, value in t.drift.items():
            per_scar[f"{t.seed}:{t.history}:{sid}"] = value
    grounded = [g for t in trajectories for g in t.grounded]
    not_portable = [g for t in trajectories for g in t.not_portable]
    # rule-set quality in C (issue 40): clusters = every carried agent's episodes of C
    rule_set, flat = arena_rule_set(
        [t.rule_sets.counts(range(cfg.episodes_c)) for t in trajectories if t.rule_sets.measured],
        min(cfg.seeds),
        "episodes",
    )
    return {
        "method": cfg.method_label,
        "config": cfg.to_dict(),
        "agents": len(trajectories),
        "style_continuity": {
            "js_imprint": mean_with_ci([r["js_imprint"] for r in rows], rng),
            "js_training": mean_with_ci([r["js_training"] for r in rows], rng),
        },
        "behaviour_continuity": {
            "profile_distance": mean_with_ci([r["profile_distance"] for r in rows], rng)
        },
        "extraction_c": mean_with_ci([r["extraction_c"] for r in rows], rng),
        "individuation": individuation(features, labels, seeds, permutations=cfg.permutations),
        "identical_history_control": individuation(
            control_features,
            [t.history for t in controls],
            [t.seed for t in controls],
            permutations=cfg.permutations,
        ),
        "drift": drift_against_bound(per_scar),
        "overreach": pooled_ratio(
            [t.overreach_mass for t in trajectories], [t.overreach_decisions for t in trajectories], rng
        ).to_json(),
        "transfer": {
            "carried_scars": int(sum(t.carried_scars for t in trajectories)),
            "grounded_scars": len(grounded),
            "not_portable_scars": len(not_portable),
            "decisions_c": int(sum(t.decisions for t in trajectories)),
            "grounded_masked_decisions": int(sum(t.grounded_masked_decisions for t in trajectories)),
            "transfer_masked_decisions": int(sum(t.transfer_masked_decisions for t in trajectories)),
            "learned_in_c": int(sum(t.learned_in_c for t in trajectories)),
            "scar_masked_decisions": int(sum(t.scar_masked_decisions for t in trajectories)),
            "grounded": grounded,
            "not_portable": not_portable,
        },
        "episodes_survived": {
            "survived": int(sum(t.survived for t in trajectories)),
            "episodes": cfg.episodes_c * len(trajectories),
        },
        **({"rule_set": rule_set, **flat} if rule_set is not None else {}),
    }


def config_from_fields(fields_: Mapping[str, Any]) -> Tier3Config:
    known = {f.name for f in fields(Tier3Config)}
    return Tier3Config(**{k: v for k, v in fields_.items() if k in known})


# ---------------------------------------------------------------------------------------------- output
def _ci_cell(block: Mapping[str, Any], digits: int = 2) -> str:
    if block.get("mean") is None:
        return f"n/a (n={block.get('n', 0)})"
    ci = block.get("ci")
    interval = "" if ci is None else f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    return f"{block['mean']:.{digits}f}{interval} (n={block['n']})"


def _accuracy_cell(ind: Mapping[str, Any]) -> str:
    if ind.get("accuracy") is None:
        return f"n/a (n={ind.get('n_trajectories', 0)})"
    ci = ind.get("ci")
    interval = "" if ci is None else f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return f"{ind['accuracy']:.2f}{interval} (n={ind['n_trajectories']}, p={ind['p_value']:.3f})"


def _drift_cell(drift: Mapping[str, Any]) -> str:
    if drift.get("max_mean_tv") is None:
        return "n/a"
    verdict = "ok" if drift["ok"] else f"{drift['exceeds_bound']} exceed"
    return (
        f"{drift['max_mean_tv']:.3f} ≤ {drift['bound']:.3f}? {verdict} "
        f"({drift['scars_measured']} scars, {drift['decisions']} decisions)"
    )


def _overreach_cell(block: Mapping[str, Any]) -> str:
    if block.get("estimate") is None:
        return "n/a"
    ci = block.get("ci")
    interval = "" if ci is None else f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return f"{block['estimate']:.2f}{interval} ({int(block['denominator'])} decisions)"


def table_markdown(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    """The tier-3 table: continuity, individuation (and its identical-history control), drift, transfer."""
    head = (
        "| method | style JS vs imprint ↓ | style JS vs training ↓ | behaviour distance ↓ | individuation accuracy "
        "| identical-history control | drift: max mean TV vs bound | safe mass carried scars blocked in C "
        "| scars carried / grounded / decisions a carried scar masked in C |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    lines = []
    for label, s in summaries.items():
        tr = s["transfer"]
        transfer = (
            f"{tr['carried_scars']} / {tr['grounded_scars']} / {tr['transfer_masked_decisions']} of "
            f"{tr['decisions_c']} decisions"
        )
        lines.append(
            f"| {label} | {_ci_cell(s['style_continuity']['js_imprint'])} | "
            f"{_ci_cell(s['style_continuity']['js_training'])} | "
            f"{_ci_cell(s['behaviour_continuity']['profile_distance'])} | {_accuracy_cell(s['individuation'])} | "
            f"{_accuracy_cell(s['identical_history_control'])} | {_drift_cell(s['drift'])} | "
            f"{_overreach_cell(s['overreach'])} | {transfer} |"
        )
    return head + "\n".join(lines) + "\n"


def results_markdown(cfg: Tier3Config, summaries: Mapping[str, Mapping[str, Any]]) -> str:
    from scars.experiments.report import ARENA_RULE_SET_NOTE, rule_set_markdown

    seeds = ", ".join(map(str, cfg.seeds))
    rule_set = rule_set_markdown(
        summaries, ARENA_RULE_SET_NOTE.format(clusters="episode of arena C (of one carried agent)")
    )
    return (
        "# Tier 3: identity continuity and trajectory individuation in arena C\n\n"
        f"Seeds {seeds}; per seed one agent trained in arena A and one in arena B ({cfg.train_runs} tier-2 runs of "
        f"{cfg.train_months} months, focal seat), then {cfg.episodes_c} episodes of arena C (aquifer, "
        f"{cfg.seasons_c} seasons, co-players {cfg.population_c}); backend {cfg.backend}; over-usage verdicts: "
        f"{cfg.overuse_verdicts}; scars grounded in C: {cfg.ground_scars}.\n\n"
        "Continuity: mean over agents with a seed-clustered 95% bootstrap interval and n (lower = more continuous). "
        "Individuation: held-out-by-seed accuracy of attributing each C trajectory's history (A or B), 95% "
        f"seed-clustered interval, n trajectories and the permutation-test p-value ({cfg.permutations} permutations); "
        "chance is 0.5. The identical-history control plays the A-trained agent twice (one copy labelled B): it must "
        "be at chance. Drift: Prop. 3 on C's off-failure decisions, the largest mean TV(π_S, π_S∖σ) of a carried scar "
        "against the tightest sqrt(ε/2). Safe mass blocked: where a carried scar masked something in C, the base "
        "policy's probability on the masked actions C's verifier finds safe (pooled over those decisions, "
        "seed-clustered interval) — the over-reach Prop. 3 cannot see where every decision offers an unsafe action."
        "\n\n" + table_markdown(summaries) + ("\n" + "\n".join(rule_set) if rule_set else "")
    )


def plot_continuity(summaries: Mapping[str, Mapping[str, Any]], path: Path) -> Path:
    """Style JS (vs imprint, vs training) and behaviour distance per method, with 95% intervals and n."""
    from scars.experiments.report import plt, save_figure

    methods = list(summaries)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), constrained_layout=True)
    panels = (
        ("style_continuity", "js_imprint", "Style: JS(C ‖ initial imprint) ↓", "JS divergence (bits)"),
        ("style_continuity", "js_training", "Style: JS(C ‖ training arena) ↓", "JS divergence (bits)"),
        (
            "behaviour_continuity",
            "profile_distance",
            "Behaviour: profile distance C vs training ↓",
            "|Δ| fair shares",
        ),
    )
    for ax, (group, key, title, ylabel) in zip(axes, panels, strict=True):
        for i, m in enumerate(methods):
            block = summaries[m][group][key]
            if block["mean"] is None:
                ax.text(i, 0.01, "n/a", ha="center", fontsize=8)
                continue
            ci = block["ci"]
            err = None if ci is None else [[block["mean"] - ci[0]], [ci[1] - block["mean"]]]
            ax.bar(
                i, block["mean"], color="#c0392b" if m.startswith("scars") else "#7f8c8d", yerr=err, capsize=3
            )
            ax.text(i, -0.14, f"n={block['n']}", ha="center", fontsize=7, transform=ax.get_xaxis_transform())
        ax.set_xticks(range(len(methods)), methods, rotation=35, ha="right")
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(ylabel)
    return save_figure(fig, path)


def plot_individuation(summaries: Mapping[str, Mapping[str, Any]], path: Path) -> Path:
    """Individuation accuracy per method (and its identical-history control) with 95% intervals, chance at 0.5."""
    from scars.experiments.report import plt, save_figure

    methods = list(summaries)
    fig, ax = plt.subplots(figsize=(8, 3.8), constrained_layout=True)
    for i, m in enumerate(methods):
        for offset, key, colour, name in (
            (-0.2, "individuation", "#c0392b", "A vs B histories"),
            (0.2, "identical_history_control", "#95a5a6", "identical histories (control)"),
        ):
            ind = summaries[m][key]
            if ind.get("accuracy") is None:
                ax.text(i + offset, 0.02, "n/a", ha="center", fontsize=7)
                continue
            ci = ind["ci"]
            err = None if ci is None else [[ind["accuracy"] - ci[0]], [ci[1] - ind["accuracy"]]]
            ax.bar(
                i + offset,
                ind["accuracy"],
                width=0.38,
                color=colour,
                yerr=err,
                capsize=3,
                label=name if i == 0 else None,
            )
        n = summaries[m]["individuation"].get("n_trajectories", 0)
        ax.text(i, -0.14, f"n={n}", ha="center", fontsize=7, transform=ax.get_xaxis_transform())
    ax.axhline(0.5, color="black", linestyle="--", linewidth=0.8, label="chance")
    ax.set_xticks(range(len(methods)), methods, rotation=35, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("held-out accuracy (by seed)")
    ax.set_title("Trajectory individuation: which arena trained this agent?")
    ax.legend(fontsize=7, loc="upper right")
    return save_figure(fig, path)


def plot_confusion(summary: Mapping[str, Any], path: Path) -> Path | None:
    """The classifier's confusion matrix (rows: true history, columns: predicted) with its accuracy and CI."""
    from scars.experiments.report import plt, save_figure

    ind = summary["individuation"]
    if ind.get("confusion") is None:
        return None
    matrix = np.array(ind["confusion"])
    fig, ax = plt.subplots(figsize=(3.8, 3.4), constrained_layout=True)
    ax.imshow(matrix, cmap="Blues", vmin=0)
    for (r, c), v in np.ndenumerate(matrix):
        ax.text(c, r, str(v), ha="center", va="center", fontsize=11)
    ax.set_xticks([0, 1], ["A", "B"])
    ax.set_yticks([0, 1], ["A", "B"])
    ax.set_xlabel("predicted history")
    ax.set_ylabel("true history")
    ax.set_title(f"{summary['method']}: {_accuracy_cell(ind)}", fontsize=7)
    return save_figure(fig, path)


def write_tier3(result: Tier3Result, out: Path) -> dict[str, Any]:
    """summary.json, agents and steps tables (Parquet + CSV), results.md and the plots of one method."""
    from scars.experiments.report import write_json, write_table

    out.mkdir(parents=True, exist_ok=True)
    summary = result.summary
    write_table(result.agents, out / "agents")
    write_table(result.steps, out / "steps")
    plots = {
        "continuity": plot_continuity({summary["method"]: summary}, out / "continuity.png"),
        "individuation": plot_individuation({summary["method"]: summary}, out / "individuation.png"),
    }
    confusion = plot_confusion(summary, out / "confusion.png")
    if confusion is not None:
        plots["confusion"] = confusion
    summary["plots"] = {k: str(v) for k, v in plots.items()}
    write_json(out / "config.json", summary["config"])
    write_json(out / "summary.json", summary)
    from scars.experiments.report import atomic_write_text

    cfg = config_from_fields(summary["config"] | {"seeds": tuple(summary["config"]["seeds"])})
    atomic_write_text(out / "results.md", results_markdown(cfg, {summary["method"]: summary}))
    return summary


def _track(cfg: Tier3Config, out: Path, summary: Mapping[str, Any], tracking: Any = None) -> None:
    from scars.experiments.tracking import Tracker, TrackingSettings

    tracker = Tracker(
        tracking or TrackingSettings(enabled=cfg.wandb, project=cfg.wandb_project, group="tier3"),
        name=f"tier3-{cfg.method_label}",
        config=cfg.to_dict(),
        out=out,
        job_type=f"tier3/{cfg.method_label}",
        tags=(f"ablation:{cfg.ablation}", f"backend:{cfg.backend}", f"seeds:{len(cfg.seeds)}"),
        step_metric="episode",
    )
    if not tracker.enabled:
        return
    steps_path = out / "steps.parquet"
    if (
        steps_path.is_file()
    ):  # one chart point per episode of arena C played (x axis: episode, over seeds and histories)
        steps = pd.read_parquet(steps_path)
        keys = ["seed", "history", "episode"]
        for i, ((seed, history, _), g) in enumerate(steps.groupby(keys, sort=True)):
            pumps = g[g["volume"].notna()]
            tracker.log(
                {
                    "c_episode/seed": int(seed),
                    "c_episode/trained_in_b": float(history == "B"),
                    "c_episode/decisions": len(g),
                    "c_episode/extraction_decisions": len(pumps),
                    "c_episode/scar_masked_decisions": int(g["scar_masked"].sum()),
                    "c_episode/verdicts": int((g["verdicts"].astype(str) != "").sum()),
                    "c_episode/mean_volume": float(pumps["volume"].mean()) if len(pumps) else None,
                },
                step=i,
            )
    ind, style = summary["individuation"], summary["style_continuity"]
    tracker.log(
        {
            "tier3/individuation_accuracy": ind.get("accuracy"),
            "tier3/individuation_p": ind.get("p_value"),
            "tier3/identical_control_accuracy": summary["identical_history_control"].get("accuracy"),
            "tier3/js_imprint": style["js_imprint"]["mean"],
            "tier3/js_training": style["js_training"]["mean"],
            "tier3/profile_distance": summary["behaviour_continuity"]["profile_distance"]["mean"],
            "tier3/drift_max_mean_tv": summary["drift"]["max_mean_tv"],
        }
    )
    tracker.log_images({k: Path(v) for k, v in summary.get("plots", {}).items()})
    tracker.finish()


def run_tier3_to_dir(
    cfg: Tier3Config,
    out: Path,
    progress: Callable[[str], None] | None = None,
    *,
    tracking: Any = None,
) -> dict[str, Any]:
    """Run one tier-3 configuration into ``out`` — provenance.json first, config.json, summary.json last (the tier
    registry's run-folder contract) — and return its summary (what a sweep needs)."""
    import time

    from scars.experiments.provenance import write_provenance

    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    write_provenance(out, cfg.to_dict(), tier="tier3", started=started)
    result = run_tier3(cfg, out, progress)
    write_provenance(out, cfg.to_dict(), tier="tier3", started=started, ended=time.time())
    summary = write_tier3(result, out)
    _track(cfg, out, summary, tracking)
    return summary


def _register_tier3() -> None:
    """Tier 3 in the tier registry (``scars sweep --tier tier3``, ``scars paper``): one run is one method over
    all its seeds (training in A and B, then arena C), so the sweep varies methods and settings, not seeds."""
    from scars.experiments.config import METHODS
    from scars.experiments.tiers import Tier, ablation_on_a_baseline, register_tier

    def protocol(scale: str) -> tuple[dict[str, tuple], dict[str, Any]]:
        """Every method and the no-memory control; smoke: 3 seeds, 1 training run, 1 episode in C and a small
        search budget; full: 10 seeds at the defaults."""
        methods = (*METHODS, NO_MEMORY)
        if scale == "smoke":
            return (
                {"method": methods},
                {"seeds": (0, 1, 2), "train_runs": 1, "episodes_c": 1, "search_iterations": 40},
            )
        if scale == "full":
            return ({"method": methods}, {"seeds": tuple(range(10))})
        raise ConfigError(f"scale {scale!r} is not one of ('smoke', 'full')")

    register_tier(
        Tier(
            name="tier3",
            config=Tier3Config,
            run=lambda cfg, out, *, tracking=None, progress=None: run_tier3_to_dir(
                cfg, out, tracking=tracking
            ),
            label=lambda cfg: cfg.method_label,
            tags=lambda cfg: (f"ablation:{cfg.ablation}", f"seeds:{len(cfg.seeds)}"),
            protocol=protocol,
            skip=ablation_on_a_baseline,
            seed_field="seeds",
        )
    )


_register_tier3()


def run_tier3_table(
    configs: Sequence[Tier3Config],
    out: Path,
    progress: Callable[[str], None] | None = None,
    tracking: Any = None,
) -> dict[str, dict[str, Any]]:
    """Several methods (each in ``out/<label>``), then the comparison: ``summary.json``, ``results.md`` and plots.
    ``tracking``: the W&B settings every method's run logs with (``scars demo``: the demo's folder and group)."""
    from scars.experiments.report import atomic_write_text, write_json

    summaries: dict[str, dict[str, Any]] = {}
    for cfg in configs:
        label = cfg.method_label
        summaries[label] = run_tier3_to_dir(
            cfg,
            out / label.replace(":", "_"),
            None if progress is None else lambda m, lb=label: progress(f"{lb}: {m}"),
            tracking=tracking,
        )
    write_json(out / "summary.json", summaries)
    atomic_write_text(out / "results.md", results_markdown(configs[0], summaries))
    plot_continuity(summaries, out / "continuity.png")
    plot_individuation(summaries, out / "individuation.png")
    return summaries


def demo_configs(seed: int, wandb: bool = False) -> list[Tier3Config]:
    """The short tier-3 section of ``scars demo``: scars, one text baseline and the no-memory control, three seeds,
    a short training in A and B and one episode of C (seconds, not minutes; ``scars run tier3`` runs the full one)."""
    short = {
        "seeds": (seed, seed + 1, seed + 2),
        "train_runs": 1,
        "train_months": 6,
        "episodes_c": 1,
        "seasons_c": 6,
        "permutations": 50,
        "search_iterations": 60,
        "wandb": wandb,
    }
    return [Tier3Config(method=m, **short) for m in ("scars", "rag", NO_MEMORY)]
