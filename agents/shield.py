"""Scars as a shield for a learner (issue 29; Alshiekh et al. 2018's shield, Huang & Ontañón 2022's masking).

``ScarShield(view)`` wraps any single-agent RL view whose slots are a decision's actions (``envs.rl.MaskedView``:
``HouseholdRLView``) and hands the learner the mask admissible ∧ ¬H ∧ ¬S_t — the view's ``action_masks()`` (and, with
``dict_obs``, ``observation["action_mask"]``) narrowed by the scars agent's control plane: the core schema H and the
scars S_t it has learned, online, from the learner's *own executed, verified* violations, by the same machinery as
every scars run (accommodation → temporary mask → MCTS synthesis → ILP merge, ``agents.scars_agent.ScarsAgent``).
Every decision that changes the mask — each failure, temporary mask, admission, merge, revocation — is an event of
the agent's ledger (``ledger_path``).

Shields (``SHIELDS``):

- ``none``: the view's mask (admissible only): the unshielded control.
- ``scars``: admissible ∧ ¬H ∧ ¬S_t, S_t learned from the verdicts in ``Feedback`` only. The agent sees the world
  through ``envs.api.ProtocolWorld`` with no what-if oracle, inside ``method_turn``: a question to the world's verifier
  raises ``ProtocolError``.
- ``blocklist``: the hard-blocklist control (``ScarsAgentConfig.for_ablation("hard_blocklist")``): exactly the failed
  action in exactly its situation, forever, no synthesis.
- ``oracle``: admissible ∧ ¬H ∧ ¬A_unsafe(q), the world's verifier asked about every admissible action before the
  learner chooses — the paper's complete verifier, through the protocol's counterfactual oracle
  (``ProtocolWorld(oracle="counterfactual")``, which counts every question: ``verifier_calls``). The only shield
  that reads the verifier.

A learner that does not read masks may still pick a masked slot: the shield then executes the world's fallback a⊥ in
its place (``info["shield_replaced"]``), so the shield's promise holds during learning for any learner. When every
slot is masked the learner is offered a⊥'s slot alone.

``ParallelScarShield(view)`` does the same for every seat of a shared-resource arena's RL view
(``envs.rl.ResourceRLView``): one scars agent, one ledger, per seat.

Both refuse an action outside their ``Discrete`` space with one ``WorldError`` (``envs.rl.view.slot_index``: no
coercion; a masked slot inside the space is the only thing replaced). This module names no world: a shield reads the
view through the protocols of ``envs.rl.view`` (``MaskedView``, ``SeatedView``) and its agent sees the world through
the adapter the caller hands in (``adapter=`` / ``adapters=``; by default the view's own). ``ScarShield`` records its
settings as Gymnasium's wrappers do (``RecordConstructorArgs``; a shield its spec recreates has its own agent and a
temporary ledger) and finds its view inside ``gym.make``'s wrappers, so
``check_env(ScarShield(gym.make("scars/HouseholdRL-v0")))`` passes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper

from scars.agents.runtime.control import ControlPlane
from scars.agents.scars_agent import ScarsAgent, ScarsAgentConfig
from scars.envs.api import Decision, Feedback, ProtocolWorld, WorldAdapter, method_turn
from scars.envs.rl.view import MaskedView, SeatAdapter, SeatedView, slot_index
from scars.synthesis.dsl import Action, canonical_text
from scars.synthesis.errors import ConfigError, WorldError

SHIELDS: tuple[str, ...] = ("none", "scars", "oracle", "blocklist")
FALLBACK = Action("fallback", "no_op")


def _masked_view(env: gym.Env) -> MaskedView | None:
    """The ``MaskedView`` ``env`` is or wraps (``gym.make("scars/HouseholdRL-v0")`` puts Gymnasium's checkers
    around the view), None if there is none."""
    while True:
        if isinstance(env, MaskedView):
            return env
        if not isinstance(env, gym.Wrapper):
            return None
        env = env.env


class ScarShield(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """A learner's shield over a ``MaskedView`` (module docstring)."""

    def __init__(
        self,
        env: gym.Env,
        *,
        shield: str = "scars",
        ledger_path: str | Path | None = None,
        seed: int = 0,
        config: ScarsAgentConfig | None = None,
        search_iterations: int = 120,
        share_with: ScarShield | None = None,
        adapter: WorldAdapter | None = None,
    ) -> None:
        """``share_with``: another shield of the same learner (one of its vectorised envs) whose scars agent — S_t,
        its ledger, its decision clock — this one uses too: a learner has one S_t, learned from all its envs.
        ``adapter``: the world as the shield's agent sees it (``envs.api.WorldAdapter``); by default the view's own
        (``MaskedView.adapter``) — the shield names no world."""
        # The spec records the settings only: a shield it recreates has its own scars agent, a temporary ledger (a
        # ledger has one writer) and the view's adapter; wrappers above deep-copy the spec, and an adapter or a
        # shared shield (with its open ledger) is not data.
        gym.utils.RecordConstructorArgs.__init__(
            self, shield=shield, seed=seed, config=config, search_iterations=search_iterations
        )
        gym.Wrapper.__init__(self, env)
        if shield not in SHIELDS:
            raise ConfigError(f"shield = {shield!r} is not one of {SHIELDS}")
        view = _masked_view(env)
        if view is None:
            raise ConfigError(
                f"ScarShield wraps an RL view whose slots are a decision's actions (envs.rl.MaskedView), got "
                f"{type(env).__name__}"
            )
        if adapter is not None and not isinstance(adapter, WorldAdapter):
            raise ConfigError(f"adapter must be an envs.api.WorldAdapter, got {type(adapter).__name__}")
        self.view: MaskedView = view
        self.shield = shield
        world = self.adapter = adapter if adapter is not None else view.adapter
        self.agent: ScarsAgent | None = None
        self.oracle: ProtocolWorld | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._owner = share_with is None
        self._clock: list[int] = [0] if share_with is None else share_with._clock
        if share_with is not None and share_with.shield != shield:
            raise ConfigError(f"a {shield!r} shield cannot share the {share_with.shield!r} shield's state")
        if share_with is not None and share_with.agent is not None:
            self.agent = share_with.agent
            ledger_path = share_with.ledger_path
        elif shield in ("scars", "blocklist"):
            if ledger_path is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="scar-shield-")
                ledger_path = Path(self._tmp.name) / "ledger.jsonl"
            ablation = "none" if shield == "scars" else "hard_blocklist"
            cfg = config or ScarsAgentConfig.for_ablation(ablation, search_iterations=search_iterations)
            self.agent = ScarsAgent(
                cfg, world=ProtocolWorld(world, oracle="none"), ledger_path=ledger_path, seed=seed
            )
        elif shield == "oracle":
            self.oracle = ProtocolWorld(world, oracle="counterfactual")
            self._core = ControlPlane(core=world.card.core, classes=world.card.classes)
        self.ledger_path = None if ledger_path is None else Path(ledger_path)
        self._decision: Decision | None = None
        # the decision clock's reading at the current decision (−1: before the first reset)
        self._decision_t = -1
        self._mask = np.zeros(0, dtype=bool)
        self.masked_total = 0
        """Admissible slots the shield has removed from the learner's choice, summed over decisions."""
        self.replaced = 0
        """Masked slots a learner picked anyway (a⊥ was executed instead)."""

    # ------------------------------------------------------------------ the mask

    @property
    def verifier_calls(self) -> int:
        """Questions the shield asked the world's verifier (the oracle shield only; 0 for every other)."""
        return self.oracle.verifier_calls if self.oracle is not None else 0

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()

    def _fallback_slot(self, decision: Decision) -> int | None:
        command = self.adapter.command(decision, FALLBACK)
        for i, a in enumerate(decision.actions):
            if a.text == command:
                return i
        return None

    def _current(self) -> Decision:
        """The decision the learner is at (built when first needed: the ``none`` shield rarely needs one)."""
        if self._decision is None:
            self._decision = self.view.decision(t=self._decision_t)
        return self._decision

    def _govern(self) -> None:
        base = np.asarray(self.view.action_masks(), dtype=bool)
        self._decision, self._decision_t = None, self._clock[0]
        self._clock[0] += 1
        mask = base
        if self.agent is not None or self.oracle is not None:
            decision = self._current()
            n = len(decision.actions)
            with method_turn():
                if self.agent is not None:
                    governed = self.agent.govern(decision, np.zeros(n))
                    # an action is masked exactly when some rule fired on it (``Governed``): most decisions none
                    blocked = np.asarray(governed.masked, dtype=bool) if governed.fired else None
                else:
                    assert self.oracle is not None
                    core = self._core.govern(decision.context, decision.actions, np.zeros(n), decision.t)
                    blocked = np.asarray(core.masked, dtype=bool) | np.array(
                        [
                            a.is_control and bool(self.oracle.check(decision.context, a))
                            for a in decision.actions
                        ],
                        dtype=bool,
                    )
            if blocked is not None and blocked.any():  # else the view's mask is the shield's
                mask = base.copy()
                mask[:n] &= ~blocked
        if not mask.any():
            slot = self._fallback_slot(self._current())
            if slot is not None:
                mask = mask.copy() if mask is base else mask
                mask[slot] = True
            else:
                mask = base  # nothing safe and no a⊥ among the slots: the shield abstains here
        if mask is not base:
            self.masked_total += int(base.sum() - mask.sum())
        self._mask = mask

    def _observation(self, obs: Any) -> Any:
        if self.view.dict_obs:
            return {**obs, "action_mask": self._mask.astype(np.int8)}
        return obs

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._govern()
        if self.agent is not None:
            with method_turn():
                self.agent.begin_episode(self._decision)
        info["action_mask"] = self._mask.copy()
        return self._observation(obs), info

    def step(self, action: Any):
        if self._decision_t < 0:
            raise WorldError("step() called before reset()")
        slot = slot_index(action, self.action_space)
        replaced = not self._mask[slot]
        if replaced:
            self.replaced += 1
            fallback = self._fallback_slot(self._current())
            slot = fallback if fallback is not None else slot
        agent = self.agent
        decision = self._current() if agent is not None else None  # taken before the step changes the view
        obs, reward, terminated, truncated, info = self.env.step(slot)
        if agent is not None and decision is not None and slot < len(decision.actions):
            feedback = Feedback(
                decision=decision,
                action=decision.actions[slot],
                chosen=slot,
                logits=(0.0,) * len(decision.actions),
                observation=str(obs) if not isinstance(obs, dict | np.ndarray) else "",
                reward=float(reward),
                verdicts=self.adapter.verdicts(self.view.last_info),
                won=bool(info.get("won", False)),
            )
            with method_turn():
                agent.observe(feedback)
                if terminated or truncated:
                    agent.end_episode(bool(info.get("won", False)))
        self._govern()
        info["action_mask"] = self._mask.copy()
        info["shield_replaced"] = replaced
        return self._observation(obs), reward, terminated, truncated, info

    def scars(self) -> tuple[str, ...]:
        """The texts of the scars in force (S_t), for the report."""
        if self.agent is None:
            return ()
        return tuple(canonical_text(s.rule) for s in self.agent.store.scars)

    def close(self) -> None:
        if self.agent is not None and self._owner:
            with method_turn():
                self.agent.close()
        self.agent = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        super().close()


def _arena_info(info: dict) -> dict:
    """A seat's info as the arena wrote it (the view's ``action_mask`` is not part of the DSL context)."""
    return {k: v for k, v in info.items() if k != "action_mask"}


class ParallelScarShield(BaseParallelWrapper):
    """The shield for every seat of a shared-resource arena (``envs.rl.ResourceRLView`` over ``commons_v0`` or
    ``aquifer_v0``): each seat's mask is its admissible ∧ ¬H ∧ ¬S_t, S_t learned by its own scars agent from its own
    verified violations (the arena's verifier with over-use verdicts: a request above the sustainable share) and the
    punishments the TrustGate lets through; each seat's decisions go to its own ledger
    (``ledger_dir/ledger-<seat>.jsonl``). ``oracle`` asks the arena's verifier through the protocol's counterfactual
    oracle; ``blocklist`` and ``none`` as in :class:`ScarShield`. A masked slot a learner picks anyway is replaced
    by slot 0, the passive choice of every phase (rest, silence, punish nobody)."""

    def __init__(
        self,
        env: Any,
        *,
        shield: str = "scars",
        ledger_dir: str | Path | None = None,
        seed: int = 0,
        search_iterations: int = 120,
        adapters: Mapping[str, SeatAdapter] | None = None,
    ) -> None:
        """``adapters``: each seat's world adapter (``envs.rl.view.SeatAdapter``), handed in by the caller; by default
        the view's own with over-use verdicts (``SeatedView.seat_adapters()``) — the shield names no world."""
        super().__init__(env)
        if shield not in SHIELDS:
            raise ConfigError(f"shield = {shield!r} is not one of {SHIELDS}")
        if not isinstance(env, SeatedView):
            raise ConfigError(
                f"ParallelScarShield wraps a seated RL view (envs.rl.view.SeatedView: envs.rl.ResourceRLView), got "
                f"{type(env).__name__}"
            )
        self.view: SeatedView = env
        self.shield = shield
        seats = dict(env.seat_adapters(overuse_verdicts=True) if adapters is None else adapters)
        for seat in env.possible_agents:
            if not isinstance(seats.get(seat), SeatAdapter):
                raise ConfigError(
                    f"adapters[{seat!r}] must be an envs.rl.view.SeatAdapter (a WorldAdapter with reset(episode)), "
                    f"got {type(seats.get(seat)).__name__}; the seats are {env.possible_agents}"
                )
        self.adapters = seats
        self._tmp: tempfile.TemporaryDirectory | None = None
        if ledger_dir is None and shield in ("scars", "blocklist"):
            self._tmp = tempfile.TemporaryDirectory(prefix="scar-shield-")
            ledger_dir = self._tmp.name
        self.agents_by_seat: dict[str, ScarsAgent] = {}
        self.oracles: dict[str, ProtocolWorld] = {}
        self._cores: dict[str, ControlPlane] = {}
        for i, seat in enumerate(env.possible_agents):
            world = self.adapters[seat]
            if shield in ("scars", "blocklist"):
                ablation = "none" if shield == "scars" else "hard_blocklist"
                self.agents_by_seat[seat] = ScarsAgent(
                    ScarsAgentConfig.for_ablation(ablation, search_iterations=search_iterations),
                    world=ProtocolWorld(world, oracle="none"),
                    ledger_path=Path(str(ledger_dir)) / f"ledger-{seat}.jsonl",
                    seed=seed * 1000 + i,
                    agent_id=seat,
                )
            elif shield == "oracle":
                self.oracles[seat] = ProtocolWorld(world, oracle="counterfactual")
                self._cores[seat] = ControlPlane(core=world.card.core, classes=world.card.classes)
        self._decisions: dict[str, Decision] = {}
        self._masks: dict[str, np.ndarray] = {}
        self._t = 0
        self._episode = -1
        self.masked_total = 0
        self.replaced = 0

    @property
    def verifier_calls(self) -> int:
        return sum(o.verifier_calls for o in self.oracles.values())

    def action_mask(self, agent: str) -> np.ndarray:
        return self._masks[agent].copy()

    def _govern(self, observations: dict, infos: dict) -> None:
        for seat, obs in observations.items():
            if seat not in infos or seat not in self.view.agents:
                continue
            base = self.view.action_mask(seat)
            decision = self._decisions[seat] = self.adapters[seat].decision(
                obs, _arena_info(infos[seat]), t=self._t
            )
            n = len(decision.actions)
            blocked = np.zeros(n, dtype=bool)
            with method_turn():
                if seat in self.agents_by_seat:
                    blocked = np.asarray(
                        self.agents_by_seat[seat].govern(decision, np.zeros(n)).masked, dtype=bool
                    )
                elif seat in self.oracles:
                    core = self._cores[seat].govern(
                        decision.context, decision.actions, np.zeros(n), decision.t
                    )
                    oracle = self.oracles[seat]
                    blocked = np.asarray(core.masked, dtype=bool) | np.array(
                        [a.is_control and bool(oracle.check(decision.context, a)) for a in decision.actions],
                        dtype=bool,
                    )
            mask = base.copy()
            mask[:n] &= ~blocked
            if not mask.any():
                mask[0] = True  # slot 0: the passive choice of every phase
            self.masked_total += int(base.sum() - mask.sum())
            self._masks[seat] = mask
            obs["action_mask"] = mask.astype(np.int8)
            infos[seat]["action_mask"] = mask
        self._t += 1

    def reset(self, seed: int | None = None, options: dict | None = None):
        observations, infos = self.env.reset(seed=seed, options=options)
        self._episode += 1
        for adapter in self.adapters.values():
            adapter.reset(self._episode)
        self._govern(observations, infos)
        with method_turn():
            for seat, agent in self.agents_by_seat.items():
                if seat in self._decisions:
                    agent.begin_episode(self._decisions[seat])
        return observations, infos

    def step(self, actions: dict):
        chosen: dict[str, int] = {}
        for seat, action in actions.items():
            slot = slot_index(action, self.view.action_space(seat), who=seat)
            if seat in self._masks and not self._masks[seat][slot]:
                self.replaced += 1
                slot = 0
            chosen[seat] = slot
            decision = self._decisions.get(seat)
            if decision is not None and slot < len(decision.actions):
                self.adapters[seat].command(decision, decision.actions[slot])  # the stage the verifier judges
        observations, rewards, terminated, truncated, infos = self.env.step(chosen)
        with method_turn():
            for seat, agent in self.agents_by_seat.items():
                decision, slot = self._decisions.get(seat), chosen.get(seat)
                if decision is None or slot is None or slot >= len(decision.actions) or seat not in infos:
                    continue
                adapter, info = self.adapters[seat], _arena_info(infos[seat])
                agent.observe(
                    Feedback(
                        decision=decision,
                        action=decision.actions[slot],
                        chosen=slot,
                        logits=tuple(0.0 for _ in decision.actions),
                        observation="",
                        reward=float(rewards.get(seat, 0.0)),
                        verdicts=adapter.verdicts(info),
                        punishments=adapter.punishments(info),
                    )
                )
                if terminated.get(seat) or truncated.get(seat):
                    agent.end_episode(False)
        self._govern(observations, infos)
        return observations, rewards, terminated, truncated, infos

    def scars(self) -> dict[str, tuple[str, ...]]:
        """Each seat's scars in force."""
        return {
            s: tuple(canonical_text(x.rule) for x in a.store.scars) for s, a in self.agents_by_seat.items()
        }

    def close(self) -> None:
        with method_turn():
            for agent in self.agents_by_seat.values():
                agent.close()
        self.agents_by_seat = {}
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        super().close()
