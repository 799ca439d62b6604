"""The scars agent: the Piagetian loop of paper §3–§4 around any base policy.

Assimilation: act under π_S(a|q,H) ∝ π_0(a|q,H)·exp(Φ_S(q,a)) — the control plane (core schema H ∪ active scars S_t ∪
temporary masks) governs the base logits. Disequilibrium: after each step the monitor computes d_t = sigmoid(wᵀz)
from the verifier's events (and, in the social arena, the TrustGate-filtered punishments). Accommodation: when d_t > τ
on a verified failure, the failure is cut to a fragment E = (q, F, θ) by counterfactual checks, storm control masks
the offending action at once and queues an MCTS synthesis (in-process thread or Ray workers) on the recorded
steps D_t. Equilibration: a finished synthesis that passes ReplayPass is merged with S_t by the OR-Tools integer
program; every admission, retirement and decision is appended to the audit ledger, the control plane is rebuilt
from the ledger's projection, and the temporary mask is lifted (hot swap). World-version changes retire the scars
whose validity scope no longer holds; their evidence stays in the ledger.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from agents.equilibration import equilibrate, prune
from agents.memory.base import PERSONA, MemoryMechanism, StepOutcome
from agents.policies.base import ContextItem
from agents.rule_writer import direct_patch
from agents.runtime.control import ControlPlane, Governed
from agents.runtime.ledger import Ledger
from agents.runtime.scar import Provenance, Scar, Scope
from agents.storm import StormConfig, StormController
from disequilibrium.composite import DisequilibriumConfig, DisequilibriumMonitor, StepRecord
from synthesis import (
    FragmentError,
    InProcessExecutor,
    RecordedStep,
    SearchConfig,
    SynthesisResult,
    build_dataset,
    drift_measures,
    extract_fragment,
)
from synthesis.dsl import Rule, canonical_text, description_length
from synthesis.dsl.semantics import Classes, fires
from synthesis.errors import ConfigError
from synthesis.objective import ObjectiveWeights

Verifier = Callable[[Mapping[str, Any], Any], bool]


@dataclass(frozen=True)
class ScarsAgentConfig:
    """Every knob of the scars agent; each §6.4 ablation is one setting (``for_ablation``)."""

    tau: float = 0.55
    """Disequilibrium threshold (paper's d_t ∈ [0.5, 0.731))."""
    weights: tuple[float, float, float, float] = (0.25, 0.25, 0.25, 0.25)
    """[α, β, γ, δ] for [z_V, z_R, z_C, z_I]."""
    mask_mode: str = "hard"
    """hard (φ = −∞) or soft (Soft Bias Only ablation: a finite penalty)."""
    soft_bias: float = -5.0
    """The finite penalty per firing rule in soft mode."""
    enforce: bool = True
    """False: synthesised rules go to the prompt as text instead (Text-Reflection Scar ablation)."""
    search: str = "mcts"
    """mcts, or "direct": one proposal written straight from the fragment, no search (LLM-only Patch ablation)."""
    search_config: SearchConfig = field(default_factory=lambda: SearchConfig(num_simulations=400))
    """MCTS settings, including the objective's weights (No-MDL, No-Drift-Loss live there)."""
    merge_mode: str = "ilp"
    """ilp (OR-Tools merge + garbage collection) or append (No-ILP-Merge ablation)."""
    executor: str = "inprocess"
    """inprocess (a background thread) or ray (root-parallel workers)."""
    workers: int = 2
    """Root-parallel trees (one per Ray worker)."""
    synthesis_latency_steps: int = 3
    """Steps the agent keeps acting while a synthesis runs in the background. The result is collected exactly this
    many steps after submission (waiting for it if the search is slower), so a run is reproducible however fast
    the machine is; the temporary mask protects the agent meanwhile (§4.2)."""
    history: int = 800
    """Recorded steps kept for building D_t (older steps only survive as ledger evidence)."""
    storm: StormConfig = field(
        default_factory=lambda: StormConfig(
            cooldown_steps=0, max_in_flight=1, temp_mask_ttl=200, mask_scope="action_in_context"
        )
    )
    """Storm control: temporary masks, bounded queue, rate limit."""
    fallback: str = "no_op"
    """a⊥ when every control action is masked."""
    core: tuple[Rule, ...] = ()
    """The read-only core schema H."""
    bookkeeping: tuple[str, ...] = ("episode", "game_seed", "rule_set_version")
    """Context keys that name the run, not the world (episode counter, game id, a hash of the hidden rule set).
    The verifier may depend on them (a rule switched on "from episode k"), so counterfactual attribution finds them
    causal; a scar conditioned on them would only restate *when* it was learned, so they are cut from fragments."""

    def __post_init__(self) -> None:
        if self.mask_mode not in ("hard", "soft"):
            raise ConfigError(f"mask_mode = {self.mask_mode!r}; expected 'hard' or 'soft'")
        if self.search not in ("mcts", "direct"):
            raise ConfigError(f"search = {self.search!r}; expected 'mcts' or 'direct'")
        if self.merge_mode not in ("ilp", "append"):
            raise ConfigError(f"merge_mode = {self.merge_mode!r}; expected 'ilp' or 'append'")
        if self.executor not in ("inprocess", "ray"):
            raise ConfigError(f"executor = {self.executor!r}; expected 'inprocess' or 'ray'")
        if self.synthesis_latency_steps < 0:
            raise ConfigError(f"synthesis_latency_steps = {self.synthesis_latency_steps!r}; expected >= 0")
        if self.history < 10:
            raise ConfigError(f"history = {self.history!r}; expected at least 10 recorded steps")

    @classmethod
    def for_ablation(
        cls, ablation: str = "none", *, search_iterations: int = 400, **overrides: Any
    ) -> ScarsAgentConfig:
        """The paper's full agent ("none") or one of the six §6.4 ablations, as one setting each."""
        weights = ObjectiveWeights()
        settings: dict[str, Any] = {}
        if ablation == "no_mdl":
            weights = ObjectiveWeights.no_mdl()
        elif ablation == "no_drift_loss":
            weights = replace(weights, beta3=0.0)
        elif ablation == "no_ilp_merge":
            settings["merge_mode"] = "append"
        elif ablation == "text_reflection_scar":
            settings["enforce"] = False
        elif ablation == "llm_only_patch":
            settings["search"] = "direct"
        elif ablation == "soft_bias_only":
            settings["mask_mode"] = "soft"
            weights = replace(weights, mask_mode="soft")
        elif ablation != "none":
            raise ConfigError(f"unknown ablation {ablation!r}")
        search = SearchConfig(num_simulations=search_iterations, weights=weights)
        return cls(search_config=search, **settings, **overrides)


class ScarsAgent(MemoryMechanism):
    """Memory mechanism that governs the base policy's logits with synthesised scars (paper §3.1)."""

    name = "scars"

    def __init__(
        self,
        config: ScarsAgentConfig,
        *,
        verifier: Verifier,
        classes: Classes | None = None,
        ledger_path: Path | str,
        seed: int = 0,
        direct_synthesiser: Callable[..., SynthesisResult] | None = None,
    ):
        """``direct_synthesiser``: what writes the rule in the LLM-only Patch ablation (``search="direct"``) — the
        template ``direct_patch`` by default, ``agents.rule_writer.llm_patch(model.write_text)`` with a real model."""
        self.config = config
        self.direct_synthesiser = direct_synthesiser or direct_patch
        self.verifier = verifier
        self.classes = classes
        Path(ledger_path).parent.mkdir(parents=True, exist_ok=True)
        self.ledger = Ledger(ledger_path)
        self.control = self._control_plane()
        # H alone: what governs the policy when synthesised rules only reach the prompt (Text-Reflection Scar)
        self.core_plane = ControlPlane(core=config.core, classes=classes, fallback=config.fallback)
        self.monitor = DisequilibriumMonitor(
            DisequilibriumConfig(weights=config.weights, tau=config.tau), core=config.core, classes=classes
        )
        self.executor = self._make_executor()
        self.storm = StormController(self.control, self._submit, config.storm, ledger=self.ledger)
        self.seeds = np.random.SeedSequence(seed)
        self.history: deque[RecordedStep] = deque(maxlen=config.history)
        self.text_rules: list[str] = []  # Text-Reflection Scar: synthesised rules shown as text
        self.t = 0
        self.world_version = 0
        self.synthesis_log: list[dict[str, Any]] = []
        self.merge_log: list[dict[str, Any]] = []
        self.prop3: list[dict[str, Any]] = []
        self.complexity: list[tuple[int, float, int, float]] = []  # (t, C(S_t), K_t, C_max so far): Prop. 2
        self.failure_rules: set[str] = set()
        self.failures: dict[str, tuple[Mapping[str, Any], tuple]] = {}  # every verified failure: id -> (q, F)

    # ------------------------------------------------------------------ construction
    def _control_plane(self) -> ControlPlane:
        return self.ledger.control_plane(
            core=self.config.core,
            classes=self.classes,
            mode=self.config.mask_mode,
            soft_bias=self.config.soft_bias,
            fallback=self.config.fallback,
        )

    def _make_executor(self):
        if self.config.executor == "ray":
            from synthesis import RayExecutor

            return RayExecutor(num_workers=self.config.workers)
        return InProcessExecutor(num_trees=self.config.workers)

    # ------------------------------------------------------------------ the MemoryMechanism interface
    def window(self, observation, context):
        return (
            ContextItem("persona", PERSONA),
            *(ContextItem("rule", f"Learned rule: {text}", polarity=-1) for text in self.text_rules),
        )

    def scar_ids(self) -> tuple[str, ...]:
        return self.control.active_ids

    def govern(self, context, actions, logits, step) -> Governed:
        self.t = step
        if not self.config.enforce:  # Text-Reflection Scar: only H is enforced; scars live in the prompt
            return self.core_plane.govern(context, actions, logits, step)
        return self.control.govern(context, actions, logits, step)

    def memory_texts(self, observation="", context=None) -> list[str]:
        """The active scars as printed rules; the prompt's rule texts when they are not enforced."""
        if not self.config.enforce:
            return list(self.text_rules)
        texts = [canonical_text(s.rule) for s in self.control.scars]
        return texts

    def observe(self, outcome: StepOutcome) -> None:
        if outcome.chosen < 0 or not outcome.actions:
            self._poll()
            return
        violated = bool(outcome.violations)
        record = RecordedStep(
            outcome.context,
            outcome.actions,
            outcome.logits,
            outcome.chosen,
            violated,
            outcome.episode,
            outcome.step,
        )
        self.history.append(record)
        events = tuple({"type": "rule_violation", "rule": v.rule_id} for v in outcome.violations)
        reading = self.monitor.observe(
            StepRecord(step=self.t, context=outcome.context, action=outcome.action, events=events)
        )
        if violated:
            self.failure_rules.update(v.rule_id for v in outcome.violations)
            if outcome.action.is_control:
                self.failures[f"{outcome.episode}:{outcome.step}"] = (record.context, (outcome.action,))
            self.ledger.observe_failure(
                {
                    "episode": outcome.episode,
                    "step": outcome.step,
                    "t": self.t,
                    "action": outcome.action.to_dict(),
                    "rules": [v.rule_id for v in outcome.violations],
                    "d_t": reading.d,
                }
            )
        if violated and reading.crossed and outcome.action.is_control:
            try:
                fragment = extract_fragment(
                    record, self.verifier, self.classes, theta=outcome.violations[0].rule_id
                )
            except FragmentError:
                fragment = None
            if fragment is not None:
                fragment = replace(
                    fragment, q={k: v for k, v in fragment.q.items() if k not in self.config.bookkeeping}
                )
            if fragment is not None:
                self.storm.on_disequilibrium(self.t, outcome.action, outcome.context, fragment)
        self._poll()

    def on_world_version(self, version: int, *, step: int) -> None:
        """Scope retirement (SPEC §5): scars valid only under another world version leave the control plane; the
        decision and its reasons go to the ledger through ``agents.equilibration.prune``."""
        self.world_version = version
        prune(self.ledger, env_version=str(version), step=step, classes=self.classes)
        self._rebuild()

    def end_episode(self, won: bool) -> None:
        self._poll()

    def close(self) -> None:
        # drain: finish syntheses in flight so the ledger and statistics are complete
        for _, future in self.storm.in_flight():
            with contextlib.suppress(Exception):  # a crashed search is reported through poll below
                future.result(timeout=120)
        self._poll()
        if hasattr(self.executor, "shutdown"):
            self.executor.shutdown()
        self.ledger.close()

    # ------------------------------------------------------------------ accommodation
    def _submit(self, fragment):
        data = build_dataset(self.history, self.verifier, fragment)
        current = tuple(s.rule for s in self.control.scars)
        seed = self.seeds.spawn(1)[0]
        if self.config.search == "direct":
            handle = _Done(
                self.direct_synthesiser(
                    data, fragment, current, self.config.core, self.classes, self.config.search_config
                )
            )
        else:
            handle = self.executor.submit(
                data, fragment, current, self.config.core, self.classes, self.config.search_config, seed=seed
            )
        return _AtStep(handle, self.t + self.config.synthesis_latency_steps, lambda: self.t)

    def _poll(self) -> None:
        for done in self.storm.poll(self.t):
            result: SynthesisResult | None = done.result
            entry = {
                "t": self.t,
                "ticket": done.ticket,
                "error": repr(done.error) if done.error else None,
                "admitted": bool(result and result.admitted),
                "rule": result.text if result else None,
                "nodes": result.nodes_expanded if result else 0,
                "seconds": result.wall_seconds if result else 0.0,
            }
            self.synthesis_log.append(entry)
            if result is None or not result.admitted or result.rule is None:
                self.storm.on_synthesis_rejected(done.ticket)
                continue
            scar = self._scar_from(result, done)
            if not self.config.enforce:
                self.text_rules.append(result.text)
                self.storm.on_synthesis_rejected(
                    done.ticket
                )  # nothing enforced: the temporary mask lapses too
                continue
            self._equilibrate(scar)
            if scar.id in self.control:
                self.storm.on_scar_admitted(scar, step=self.t, ticket=done.ticket)
            else:
                self.storm.on_synthesis_rejected(done.ticket)

    def _scar_from(self, result: SynthesisResult, done) -> Scar:
        fragment = done.fragment
        q = dict(fragment.q)
        version = q.get("world_version")
        failed = fragment.F[0]
        return Scar(
            rule=result.rule,
            evidence=(
                {
                    "theta": fragment.theta,
                    "q": {k: v for k, v in q.items()},
                    "F": [a.to_dict() for a in fragment.F],
                    "source_steps": [list(s) for s in fragment.source_steps],
                    "failed": failed.text,
                },
            ),
            provenance=Provenance(
                source_episode=fragment.source_steps[0][0] if fragment.source_steps else None,
                source_step=fragment.source_steps[0][1] if fragment.source_steps else None,
                verifier_id="household.Verifier",
                synthesiser="mcts" if self.config.search == "mcts" else "direct",
                synthesiser_settings=(
                    ("num_simulations", self.config.search_config.num_simulations),
                    ("workers", self.config.workers),
                    ("merge_mode", self.config.merge_mode),
                ),
                seed=None,
                synthesised_at_us=time.time_ns() // 1000,
            ),
            # the scope is the world version only when the counterfactual checks found it causal (§4.1)
            scope=Scope(env_version=None if version is None else str(version)),
        )

    def _equilibrate(self, new: Scar) -> None:
        """S_{t+1} = ILP-Merge(S_t ∪ {ΔS*}); ``agents.equilibration`` writes every decision to the ledger and the
        control plane is rebuilt from the ledger's projection."""
        # Coverage is owed to every recorded failure some in-scope candidate resolves — the whole run's failures,
        # not just the recent window: retiring a rule must not forget a failure (§4.5). Failures only resolved by
        # scars retired for scope have no candidate left and drop out with them.
        candidates = [*self.control.scars, new]
        failures = {k: v for k, v in self.failures.items() if any(_fires_any(candidates, v, self.classes))}
        before = tuple(s.rule for s in self.control.scars)
        report = equilibrate(
            self.ledger,
            [new],
            failures,
            [(step.context, step.actions) for step in self.history],
            self.classes,
            self.config.search_config.weights.lambdas,
            merge_mode=self.config.merge_mode,
        )
        result = report.result
        self.merge_log.append(
            {
                "t": self.t,
                "candidates": len(self.control.scars) + 1,
                "active": len(result.active),
                "retired": list(report.retired),
                "refused_resurrection": list(report.refused_resurrection),
                "optimal": result.optimal,
                "seconds": result.wall_seconds,
                "uncovered": len(result.uncovered),
            }
        )
        self._rebuild()
        self._check_prop3(before, tuple(s.rule for s in self.control.scars))

    def _check_prop3(self, before: Sequence[Rule], after: Sequence[Rule]) -> None:
        """Prop. 3 on the recorded off-failure contexts: E TV(π', π) ≤ sqrt(L_drift / 2) with L_drift the KL."""
        q_safe = [
            s
            for s in self.history
            if not s.violated and not any(self.verifier(s.context, a) for a in s.actions)
        ]
        if not q_safe:
            return
        weights = self.config.search_config.weights
        tv, kl = drift_measures(before, after, q_safe, self.classes, weights.mask_mode, weights.soft_bias)
        self.prop3.append(
            {
                "t": self.t,
                "tv": tv,
                "kl": kl,
                "bound": float(np.sqrt(kl / 2)),
                "ok": tv <= np.sqrt(kl / 2) + 1e-9,
            }
        )

    def _rebuild(self) -> None:
        """Reload the control plane from the ledger projection, keeping the temporary masks in force."""
        plane = self.control
        active = {s.id: s for s in self.ledger.active_scars()}
        for sid in list(plane.active_ids):
            if sid not in active:
                plane.remove(sid)
        for sid, scar in active.items():
            if sid not in plane:
                plane.add(scar)
        costs = [description_length(s.rule) for s in plane.scars]
        c_max = max([*costs, *(c for *_, c in self.complexity[-1:])], default=0.0)
        self.complexity.append((self.t, sum(costs), len(self.failure_rules), c_max))

    # ------------------------------------------------------------------ statistics for the run summary
    def stats(self) -> dict[str, Any]:
        synth = [e for e in self.synthesis_log if e["error"] is None]
        seconds = [e["seconds"] for e in synth]
        nodes = [e["nodes"] for e in synth]
        storm = self.storm.stats()
        costs = [c for _, c, _, _ in self.complexity]
        # Prop. 2: at every change of S_t, C(S_t) ≤ K_t·C_max (K_t distinct failure patterns seen so far)
        prop2_ok = (
            all(c <= k * c_max + 1e-9 for _, c, k, c_max in self.complexity) if self.complexity else None
        )
        return {
            "scars_active_final": len(self.control.active_ids),
            "scars_admitted": sum(1 for e in self.ledger.events() if e.type == "scar_admitted"),
            "scars_retired": sum(
                1 for e in self.ledger.events() if e.type in ("scar_retired", "scar_revoked")
            ),
            "syntheses": len(self.synthesis_log),
            "syntheses_admitted": sum(e["admitted"] for e in self.synthesis_log),
            "synthesis_median_seconds": float(np.median(seconds)) if seconds else None,
            "synthesis_median_nodes": float(np.median(nodes)) if nodes else None,
            "merge_median_seconds": float(np.median([m["seconds"] for m in self.merge_log]))
            if self.merge_log
            else None,
            "merge_all_optimal": all(m["optimal"] for m in self.merge_log) if self.merge_log else None,
            "temp_masks_set": storm.temp_masks_set,
            "storm_max_queue": storm.max_queue_seen,
            "storm_dropped": storm.dropped,
            "complexity_mdl_final": costs[-1] if costs else 0.0,
            "failure_patterns": len(self.failure_rules),
            "prop2_ok": prop2_ok,
            "prop3_ok": all(p["ok"] for p in self.prop3) if self.prop3 else None,
            "prop3_max_tv": max((p["tv"] for p in self.prop3), default=None),
            "ledger_verified": self.ledger.verify().ok,
            "active_rules": [canonical_text(s.rule) for s in self.control.scars],
        }


class _AtStep:
    """A background synthesis whose result is collected at a fixed step (reproducible asynchrony)."""

    def __init__(self, handle, ready_at: int, clock: Callable[[], int]):
        self.handle, self.ready_at, self.clock = handle, ready_at, clock

    def done(self) -> bool:
        return self.clock() >= self.ready_at

    def result(self, timeout=None):
        return self.handle.result(None)  # collected at its step: wait for the search however long it takes


class _Done:
    """An already-finished synthesis (the direct, search-free proposal)."""

    def __init__(self, result):
        self._result = result

    def done(self) -> bool:
        return True

    def result(self, timeout=None):
        return self._result


def _fires_any(rules, failure, classes):
    q, actions = failure
    return [any(fires(r.rule, q, a, classes) for r in rules) for a in actions]
