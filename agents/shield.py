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
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from scars.agents.runtime.control import ControlPlane
from scars.agents.scars_agent import ScarsAgent, ScarsAgentConfig
from scars.envs.api import Decision, Feedback, ProtocolWorld, method_turn
from scars.envs.rl.view import MaskedView
from scars.synthesis.dsl import Action, canonical_text
from scars.synthesis.errors import ConfigError

SHIELDS: tuple[str, ...] = ("none", "scars", "oracle", "blocklist")
FALLBACK = Action("fallback", "no_op")


class ScarShield(gym.Wrapper):
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
    ) -> None:
        """``share_with``: another shield of the same learner (one of its vectorised envs) whose scars agent — S_t,
        its ledger, its decision clock — this one uses too: a learner has one S_t, learned from all its envs."""
        super().__init__(env)
        if shield not in SHIELDS:
            raise ConfigError(f"shield = {shield!r} is not one of {SHIELDS}")
        if not isinstance(env, MaskedView):
            raise ConfigError(
                f"ScarShield wraps an RL view whose slots are a decision's actions (envs.rl.MaskedView), got "
                f"{type(env).__name__}"
            )
        self.view: MaskedView = env
        self.shield = shield
        world = env.adapter
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
        command = self.view.adapter.command(decision, FALLBACK)
        for i, a in enumerate(decision.actions):
            if a.text == command:
                return i
        return None

    def _govern(self) -> None:
        base = np.asarray(self.view.action_masks(), dtype=bool)
        decision = self._decision = replace(self.view.decision(), t=self._clock[0])
        self._clock[0] += 1
        n = len(decision.actions)
        blocked = np.zeros(n, dtype=bool)
        if self.agent is not None:
            with method_turn():
                governed = self.agent.govern(decision, np.zeros(n))
            blocked = np.asarray(governed.masked, dtype=bool)
        elif self.oracle is not None:
            with method_turn():
                core = self._core.govern(decision.context, decision.actions, np.zeros(n), decision.t)
                blocked = np.asarray(core.masked, dtype=bool) | np.array(
                    [a.is_control and bool(self.oracle.check(decision.context, a)) for a in decision.actions],
                    dtype=bool,
                )
        mask = base.copy()
        mask[:n] &= ~blocked
        if not mask.any():
            slot = self._fallback_slot(decision)
            if slot is not None:
                mask[slot] = True
            else:
                mask = base.copy()  # nothing safe and no a⊥ among the slots: the shield abstains here
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
        decision = self._decision
        assert decision is not None, "call reset() first"
        slot = int(action)
        replaced = slot < len(self._mask) and not self._mask[slot]
        if replaced:
            self.replaced += 1
            fallback = self._fallback_slot(decision)
            slot = fallback if fallback is not None else slot
        obs, reward, terminated, truncated, info = self.env.step(slot)
        if self.agent is not None and slot < len(decision.actions):
            feedback = Feedback(
                decision=decision,
                action=decision.actions[slot],
                chosen=slot,
                logits=tuple(0.0 for _ in decision.actions),
                observation=str(obs) if not isinstance(obs, dict | np.ndarray) else "",
                reward=float(reward),
                verdicts=self.view.adapter.verdicts(info),
                won=bool(info.get("won", False)),
            )
            with method_turn():
                self.agent.observe(feedback)
                if terminated or truncated:
                    self.agent.end_episode(bool(info.get("won", False)))
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
