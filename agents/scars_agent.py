"""The scars agent: the Piagetian loop of paper §3–§4 around any base policy, in any world.

Assimilation: act under π_S(a|q,H) ∝ π_0(a|q,H)·exp(Φ_S(q,a)) — the schema store's control plane (core schema H ∪
active scars S_t ∪ temporary masks) governs the base logits. Disequilibrium: after each step the monitor computes
d_t = sigmoid(wᵀz) from the world's verdicts (z_V), the TrustGate-filtered punishments (z_R), the base policy's
proposals against H (z_C) and the drift of the agent's own utterances from its first ones (z_I). Accommodation:
when d_t > τ on a verified failure — or on a punishment the TrustGate lets through — the failure is cut to a
fragment by counterfactual checks, storm control masks the offending action at once and queues an MCTS synthesis
(in-process thread or Ray workers) on the recorded steps D_t. Equilibration: a finished synthesis that passes
ReplayPass is merged with S_t by the OR-Tools integer program; the schema store writes every decision to the
ledger and applies it to the plane; the temporary mask is lifted (hot swap). World-version changes retire the scars
whose validity scope no longer holds; verified successes a scar would have blocked, recorded after its admission,
revoke it. Everything world-specific comes from the world adapter (``envs.api``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from scars.agents.equilibrium import Equilibrator
from scars.agents.narrowing_book import NarrowedBatch, NarrowingBook
from scars.agents.policies.base import ContextItem
from scars.agents.registry import MethodSpec, register_method
from scars.agents.rule_writer import direct_patch
from scars.agents.run_record import RunRecord
from scars.agents.runtime.control import CORE_PREFIX, ControlPlane, Governed
from scars.agents.runtime.equilibration import prune, scar_from_synthesis
from scars.agents.runtime.events import verdict_evidence
from scars.agents.runtime.ledger import Event
from scars.agents.runtime.scar import Scar
from scars.agents.runtime.store import SchemaStore
from scars.agents.scheduling import AtStep, SynthesisScheduler
from scars.agents.storm import StormConfig, StormController, StormRequests
from scars.disequilibrium.composite import DisequilibriumConfig, DisequilibriumMonitor, Reading, StepRecord
from scars.disequilibrium.trustgate import TrustGate, TrustGateConfig
from scars.disequilibrium.verifier import HybridVerifier
from scars.envs.api import ORACLES, VERDICT_PROTOCOLS, Decision, Feedback, WorldAdapter
from scars.synthesis import (
    FragmentError,
    RecordedStep,
    SearchConfig,
    SynthesisResult,
    build_dataset,
    extract_fragment,
)
from scars.synthesis.dsl import canonical_text, description_length
from scars.synthesis.errors import ConfigError, LedgerIntegrityError
from scars.synthesis.failure import Failure, FailureSource
from scars.synthesis.fragments import Experience, ExperienceVerifier, Verifier
from scars.synthesis.narrowing import BlockedProposal, with_presumptions
from scars.synthesis.objective import ObjectiveWeights
from scars.synthesis.retirement import VerifiedSuccess

ABLATIONS: tuple[str, ...] = (
    "none",
    "no_mdl",  # drop the description-length term C from the objective
    "no_drift_loss",  # β3 = 0
    "no_ilp_merge",  # append admitted scars without merging or garbage collection
    "text_reflection_scar",  # synthesised rules go to the prompt as text instead of being enforced
    "llm_only_patch",  # the rule is generated directly (one proposal, no search) instead of by MCTS
    "soft_bias_only",  # finite negative bias instead of −∞
    "storm_only",  # control: storm control's temporary masks alone, no synthesis (how much of the gain is any mask)
    "hard_blocklist",  # control: block exactly the failing action in exactly that situation, forever, no synthesis
    "no_narrowing",  # a scar that blocked a lost task is never narrowed (issue 24's narrowing off)
    "no_contradiction",  # γ = 0: the z_C term of d_t weighs nothing (what z_C changes, issue 24 #6)
)
"""``none`` and the scars ablations and controls, in the order of the paper's table (§6.4); each is one
setting of ``ScarsAgentConfig.for_ablation``."""


@dataclass(frozen=True)
class ScarsAgentConfig:
    """Every knob of the scars agent; each §6.4 ablation is one setting (``for_ablation``)."""

    signal: DisequilibriumConfig = field(default_factory=DisequilibriumConfig)
    """Weights w = [α, β, γ, δ], threshold τ (and the optional gain/bias) of d_t; ``scars calibrate`` fits them."""
    trust: TrustGateConfig = field(default_factory=TrustGateConfig)
    """The TrustGate of z_R (norm check and source independence; ``enabled=False`` is the anti-collusion ablation)."""
    mask_mode: str = "hard"
    """hard (φ = −∞) or soft (Soft Bias Only ablation: a finite penalty)."""
    soft_bias: float = -5.0
    """The finite penalty per firing rule in soft mode."""
    enforce: bool = True
    """False: synthesised rules go to the prompt as text instead (Text-Reflection Scar ablation)."""
    search: str = "mcts"
    """mcts; "direct": one proposal written straight from the fragment, no search (LLM-only Patch ablation); or
    "none": no synthesis at all — storm control's temporary masks alone (the storm-only control)."""
    search_config: SearchConfig = field(default_factory=lambda: SearchConfig(num_simulations=400))
    """MCTS settings, including the objective's weights (No-MDL, No-Drift-Loss live there)."""
    merge_mode: str = "ilp"
    """ilp (OR-Tools merge + garbage collection) or append (No-ILP-Merge ablation)."""
    consolidate: bool = True
    """Offer the merge one rule in place of several narrower scars with the same mask (``synthesis.consolidate``:
    their guards anti-unified, e.g. per-type sink scars → an ``in_class`` rule) when it covers all their failures,
    masks no success recorded since the first of them, and costs less; the merge decides. Off under append."""
    narrow: bool = True
    """Narrowing (``synthesis.narrowing``): the proposals a scar blocked in an episode the agent then lost are
    presumed safe in the next synthesis of its told rule, which is started at once; a narrower rule that still
    covers every failure of the rule replaces the scar. A wrong guess then costs a repeat, not every later task. It
    starts earlier when a decision leaves the model no unmasked way forward (``NarrowingBook``: its re-planned step
    masked again, a scar refusing its new way again, every action masked): narrowing at once, in the same episode."""
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
    extract: bool = True
    """False: a failure is masked in its whole situation (the context without bookkeeping and the step counter),
    with no counterfactual extraction — with search "none" and masks that never lapse, the hard-blocklist control."""
    punishment_attribution: str = "verifier"
    """How a punishment that triggers accommodation is cut to a failure: ``verifier`` — by the counterfactual
    extraction of a verdict when the world's verifier flags the punished step (else as reported); ``context`` — the
    punished action in the whole context it was punished in, as reported (no causal attribution)."""
    min_counter_evidence: int = 1
    """Verified successes a scar must have blocked (recorded after its admission) before it is revoked (§4.5)."""
    verdicts: str = "executed"
    """The information protocol the agent runs under (README): under "executed" the world labels no unexecuted
    action, so a ``Feedback.unsafe`` label that arrives anyway is refused as evidence (counted, ``labels_refused``:
    a forged verdict without an executed action, docs/poisoning.md); under "state" labels are the verifier's and
    teach (``_accommodate_labels``)."""
    oracle: str = "none"
    """The information protocol's what-if oracle (docs/protocol.md): "none" — fragment extraction and D_t use only the
    verdicts the agent received (its ``ExperienceVerifier``); "counterfactual" — they ask the world's verifier about
    one-variable changes of a failure (the paper's extraction, §4.1), an option every method gets."""

    def __post_init__(self) -> None:
        if self.mask_mode not in ("hard", "soft"):
            raise ConfigError(f"mask_mode = {self.mask_mode!r}; expected 'hard' or 'soft'")
        if self.search not in ("mcts", "direct", "none"):
            raise ConfigError(f"search = {self.search!r}; expected 'mcts', 'direct' or 'none'")
        if self.merge_mode not in ("ilp", "append"):
            raise ConfigError(f"merge_mode = {self.merge_mode!r}; expected 'ilp' or 'append'")
        if self.executor not in ("inprocess", "ray"):
            raise ConfigError(f"executor = {self.executor!r}; expected 'inprocess' or 'ray'")
        if self.synthesis_latency_steps < 0:
            raise ConfigError(f"synthesis_latency_steps = {self.synthesis_latency_steps!r}; expected >= 0")
        if self.history < 10:
            raise ConfigError(f"history = {self.history!r}; expected at least 10 recorded steps")
        if self.punishment_attribution not in ("verifier", "context"):
            raise ConfigError(
                f"punishment_attribution = {self.punishment_attribution!r}; expected 'verifier' or 'context'"
            )
        if self.min_counter_evidence < 1:
            raise ConfigError(f"min_counter_evidence = {self.min_counter_evidence!r}; expected >= 1")
        if self.oracle not in ORACLES:
            raise ConfigError(f"oracle = {self.oracle!r}; expected one of {', '.join(ORACLES)}")
        if self.verdicts not in VERDICT_PROTOCOLS:
            raise ConfigError(f"verdicts = {self.verdicts!r}; expected one of {', '.join(VERDICT_PROTOCOLS)}")

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
        elif ablation == "storm_only":
            settings["search"] = "none"
        elif ablation == "hard_blocklist":
            settings["search"], settings["extract"] = "none", False
            forever = 10**9
            settings["storm"] = StormConfig(
                cooldown_steps=0,
                max_in_flight=1,
                temp_mask_ttl=forever,
                rejected_mask_ttl=forever,
                mask_scope="action_in_context",
            )
        elif ablation == "no_narrowing":  # a scar that blocked a lost task stays as wide as it was learned
            settings["narrow"] = False
        elif (
            ablation == "no_contradiction"
        ):  # γ = 0: z_C is read but weighs nothing (the other weights renormalised)
            base = overrides.pop("signal", None) or DisequilibriumConfig()
            alpha, beta, _, delta = base.weights
            total = alpha + beta + delta
            settings["signal"] = replace(base, weights=(alpha / total, beta / total, 0.0, delta / total))
        elif ablation == "soft_bias_only":
            settings["mask_mode"] = "soft"
            weights = replace(weights, mask_mode="soft")
        elif ablation != "none":
            raise ConfigError(f"unknown ablation {ablation!r}; known: {', '.join(ABLATIONS)}")
        search = SearchConfig(num_simulations=search_iterations, weights=weights)
        return cls(search_config=search, **settings, **overrides)


class ScarsAgent:
    """The ``agents.api.Agent`` that governs the base policy's logits with synthesised scars (paper §3.1)."""

    name = "scars"

    def __init__(
        self,
        config: ScarsAgentConfig,
        *,
        world: WorldAdapter,
        ledger_path: Path | str,
        seed: int = 0,
        agent_id: str | None = None,
        direct_synthesiser: Callable[..., SynthesisResult] | None = None,
    ):
        """``direct_synthesiser``: what writes the rule in the LLM-only Patch ablation (``search="direct"``) — the
        template ``direct_patch`` by default, ``agents.rule_writer.llm_patch(model.write_text, card)`` with a real
        model. ``agent_id``: this agent's name in a multi-agent world (whose punishments it reads)."""
        self.config = config
        self.world = world
        self.card = card = world.card
        self.seed = seed
        self.direct_synthesiser = direct_synthesiser or direct_patch
        Path(ledger_path).parent.mkdir(parents=True, exist_ok=True)
        self.store = SchemaStore(
            ledger_path,
            core=card.core,
            classes=card.classes,
            mode=config.mask_mode,
            soft_bias=config.soft_bias,
            fallback=config.fallback,
        )
        # the head this agent committed at its last verified episode end: the next verification's anchor (a
        # carried ledger's is checked on the first episode end against the chain itself)
        self._verified_head: tuple[int, str] | None = None
        # H alone: what governs the policy when synthesised rules only reach the prompt (Text-Reflection Scar)
        self.core_plane = ControlPlane(core=card.core, classes=card.classes, fallback=config.fallback)
        norm = world.norm_verifier
        trust_gate = None
        if norm is not None or not (config.trust.enabled and config.trust.verify_norms):
            trust_gate = TrustGate(norm, config.trust)
        self.monitor = DisequilibriumMonitor(
            config.signal,
            agent_id=agent_id,
            verifier=HybridVerifier(judge=world.judge),
            trust_gate=trust_gate,
            core=card.core,
            classes=card.classes,
        )
        self.scheduler = SynthesisScheduler(
            executor=config.executor,
            workers=config.workers,
            latency_steps=config.synthesis_latency_steps,
            seed=seed,
            clock=lambda: self.t,
        )
        self.synthesis_log = self.scheduler.log
        self.storm = StormController(config.storm, classes=card.classes)
        # the recorded steps, the verified failures and the values met (``history`` and ``failures`` are its)
        self.run_record = RunRecord(history=config.history, bookkeeping=card.bookkeeping)
        self.history = self.run_record.history
        self.failures = self.run_record.failures
        # what extraction and D_t may ask: the verdicts received, or (an option) the world's what-if oracle — one
        # object for the run, since synthesis memoises a deterministic verifier's answers
        self.evidence = ExperienceVerifier(frozenset(card.bookkeeping))
        self._verifier: Verifier = self._ask_world if config.oracle == "counterfactual" else self.evidence
        self._core_forbidden: tuple[int, tuple[bool, ...]] = (-1, ())
        self._nothing_forbidden: dict[int, tuple[bool, ...]] = {}
        self.text_rules: list[str] = []  # Text-Reflection Scar: synthesised rules shown as text
        self.t = 0
        self.failure_rules: set[str] = set()
        self._failure_events: dict[str, Event] = {}  # failure id -> its failure_observed event (the verdict)
        self.accommodations = {"verdict": 0, "punishment": 0, "label": 0}
        self.labelled_failures = 0  # --verdicts state: labelled, unexecuted unsafe actions taken as failures
        self.labels_refused = 0  # labels that arrived under the executed protocol: refused as evidence
        self.punishments_rejected = 0  # punishments the TrustGate's norm check refused (z_R never saw them)
        # narrowing: the blocked proposals and the narrowing syntheses in flight
        self.narrowing = NarrowingBook(enabled=config.narrow, bookkeeping=card.bookkeeping)
        self.narrowings = self.narrowing.counts
        # admission, narrowing's retirements and revocation through the store (its merge log, admission times and
        # the successes not yet checked as counter-evidence are read by the statistics and tests as the agent's)
        self.equilibrium = Equilibrator(
            self.store,
            classes=card.classes,
            lambdas=config.search_config.weights.lambdas,
            merge_mode=config.merge_mode,
            consolidate=config.consolidate,
            min_counter_evidence=config.min_counter_evidence,
            narrowing=self.narrowing,
        )
        self.successes = self.equilibrium.successes
        self.admitted_at = self.equilibrium.admitted_at
        self.merge_log = self.equilibrium.merge_log
        self._verdict_texts: dict[
            str, str
        ] = {}  # failure id -> the verdict's text (a re-attribution reads it)

    # ---------------------------------------------------------------------------------- the Agent protocol
    def begin_episode(self, decision: Decision) -> None:
        """Nothing to reset: the self-schema persists across episodes."""

    def window(self, decision: Decision) -> tuple[ContextItem, ...]:
        return (
            ContextItem("persona", self.card.persona),
            *(ContextItem("rule", f"Learned rule: {text}", polarity=-1) for text in self.text_rules),
        )

    def scar_ids(self) -> tuple[str, ...]:
        return self.store.plane.active_ids if self.config.enforce else ()

    def self_schema(self) -> SchemaStore:
        return self.store

    def govern(self, decision: Decision, logits: np.ndarray) -> Governed:
        self.t = decision.t
        # Text-Reflection Scar: only H is enforced
        plane = self.store.plane if self.config.enforce else self.core_plane
        governed = plane.govern(decision.context, decision.actions, logits, decision.t)
        # which actions H forbids here (z_C reads it; the controller has just evaluated H)
        n = len(decision.actions)
        if governed.fired:
            core = [False] * n
            for i, ids in governed.fired:
                core[i] = any(x.startswith(CORE_PREFIX) for x in ids)
            self._core_forbidden = (decision.t, tuple(core))
        else:  # nothing fired (most decisions): one shared all-False tuple per number of actions
            none = self._nothing_forbidden.get(n)
            if none is None:
                none = self._nothing_forbidden[n] = (False,) * n
            self._core_forbidden = (decision.t, none)
        self.narrowing.on_govern(decision, logits, governed, self.store.plane)
        return governed

    def memory_texts(self, decision: Decision) -> list[str]:
        """The active scars as printed rules; the prompt's rule texts when they are not enforced."""
        if not self.config.enforce:
            return list(self.text_rules)
        return [canonical_text(s.rule) for s in self.store.scars]

    def observe(self, feedback: Feedback) -> Reading:
        """One step's accommodation. Its ledger events (failure, temporary masks, a merge) are one group commit:
        durable when this returns, before the next decision is governed."""
        with self.store.group():
            return self._observe(feedback)

    def _observe(self, feedback: Feedback) -> Reading:
        d = feedback.decision
        self.t = d.t
        action = feedback.action
        record = None
        if action.is_control:
            self.evidence.record(d.context, action, feedback.violated, (d.episode, d.step))
        unsafe = feedback.unsafe
        if unsafe is not None and self.config.verdicts != "state":
            self.labels_refused += len(unsafe)  # no verifier labels unexecuted actions under this protocol
            unsafe = None
        if unsafe is not None:
            self.evidence.record_state(d.context, d.actions, unsafe, (d.episode, d.step))
        if feedback.chosen >= 0:
            record = RecordedStep(
                d.context, d.actions, feedback.logits, feedback.chosen, feedback.violated, d.episode, d.step
            )
            self.run_record.record(record)
        # z_C reads what the model first proposed, before the masks made it re-plan
        first = feedback.logits if feedback.proposal is None else feedback.proposal
        if (
            isinstance(first, tuple)
            and first
            and math.isfinite(first[0])
            and first.count(first[0]) == len(first)
        ):
            # every logit equal (a learner whose policy the agent does not see): the softmax is 1/n each, exactly
            proposal = tuple(zip(d.actions, [1.0 / len(first)] * len(first), strict=True))
        else:
            base = np.asarray(first, dtype=np.float64)
            probs = np.exp(base - base.max()) if len(base) else base
            proposal = tuple(zip(d.actions, (probs / probs.sum()).tolist(), strict=True)) if len(base) else ()
        reading = self.monitor.observe(
            StepRecord(
                step=d.t,
                context=d.context,
                action=action,
                output=feedback.utterance,
                events=tuple({"type": "rule_violation", "rule": v.rule_id} for v in feedback.verdicts),
                punishments=feedback.punishments,
                proposal=proposal,
                core_forbidden=self._core_forbidden[1] if self._core_forbidden[0] == d.t else None,
            )
        )
        if feedback.violated and action.is_control:
            self.failure_rules.update(v.rule_id for v in feedback.verdicts)
            source = FailureSource(self.card.id, d.episode, d.step, self.card.verifier_id)
            failure = Failure(d.context, (action,), feedback.verdicts[0].rule_id, source)
            self.failures.append(failure)
            event = self.store.record_failure(failure, d_t=reading.d, z=list(reading.z.as_tuple()))
            self._failure_events[failure.id] = event
            if reading.crossed and record is not None:
                text = " ".join(v.message for v in feedback.verdicts if v.rule_id == failure.theta)
                self._accommodate(record, failure, "verdict", text)
        elif record is not None and action.is_control:
            version = d.context.get("world_version")
            self.equilibrium.note_success(
                d.t,
                VerifiedSuccess(
                    d.context,
                    action,
                    True,
                    self.card.verifier_id,
                    f"{d.episode}:{d.step}",
                    None if version is None else str(version),
                ),
            )
        if reading.trust is not None:
            self.punishments_rejected += len(reading.trust.rejected_by_norm)
        if reading.crossed and reading.trust is not None and reading.trust.counted_drop > 0:
            self._accommodate_punishment(feedback, reading)
        if unsafe and feedback.chosen >= 0 and self.config.oracle == "none":
            self._accommodate_labels(feedback, reading)
        at_once = self.narrowing.at_once((d.episode, d.step))
        if (
            at_once
        ):  # the scars left the model no unmasked way forward: narrowing now, not at the episode's end
            self._narrow(at_once, "at_once")
        self._poll()
        return reading

    def _accommodate_labels(self, feedback: Feedback, reading: Reading) -> None:
        """A state verifier that teaches (``--verdicts state``): a labelled unsafe action of a state the agent visited
        is a verified failure (D⁻) though not executed. When no rule of the plane masks it there, it is recorded
        (its own step in the history, chosen = the labelled action, its own failure id) and accommodation starts
        from it as from a verdict — the label is the verifier's, so z_V for it is 1 and no threshold is waited for.
        Its told rule is the action's kind and name (labels name no rule)."""
        d = feedback.decision
        executed = feedback.action
        plane = self.store.plane
        for a in feedback.unsafe or ():
            if not a.is_control or a == executed or a not in d.actions:
                continue
            if plane.fired_rules(d.context, a, d.t):
                continue  # already masked here: nothing new to learn
            index = d.actions.index(a)
            record = RecordedStep(d.context, d.actions, feedback.logits, index, True, d.episode, d.step)
            self.history.append(record)
            source = FailureSource(
                f"{self.card.id}|label:{a.text or a.name}", d.episode, d.step, "state_label"
            )
            failure = Failure(d.context, (a,), f"label:{a.kind}:{a.name}", source)
            self.failures.append(failure)
            event = self.store.record_failure(failure, d_t=reading.d, z=list(reading.z.as_tuple()))
            self._failure_events[failure.id] = event
            self.labelled_failures += 1
            self._accommodate(record, failure, "label")

    def on_world_version(self, version: str, *, t: int) -> None:
        """Scope retirement (SPEC §5): scars valid only under another world version leave the control plane; the
        decision and its reasons go to the ledger through the schema store."""
        self.t = t
        prune(self.store, env_version=str(version), step=t, classes=self.card.classes)

    def end_episode(self, won: bool) -> None:
        with self.store.group():  # the episode end's revocations and admissions: one group commit
            self.equilibrium.revoke_refuted()
            if not won:
                rest = self.narrowing.lost()
                if rest:
                    self._narrow(rest, "at_episode_end")
            self.narrowing.new_episode()
            self._poll()
        self._verify_ledger()

    def _narrow(self, blocked: Sequence[BlockedProposal], when: str) -> None:
        """Each told rule whose scars blocked the model's proposals (``blocked``: in a lost episode, or up to a
        decision that left it no way forward) gets those proposals as presumptions and a new synthesis now, from
        its newest failure (``synthesis.narrowing``). ``when``: ``at_episode_end`` or ``at_once`` (counted)."""
        rules = self.narrowing.told_rules(blocked, self.store.scars)
        for theta, sids in sorted(rules.items()):
            newest = next((f for f in reversed(self.failures) if f.theta == theta), None)
            record = None if newest is None else self.run_record.recorded(newest)
            if newest is None or record is None or self.narrowing.is_pending(newest.id):
                continue
            # re-attributed with what the agent knows now (a variable constant at the failure may vary by now)
            fragment = self._extract(record, newest, self._verdict_texts.get(newest.id, ""))
            if fragment is None:
                continue
            self.run_record.owe(fragment)
            self.narrowing.started(fragment.id, sids, when)
            decision = self.storm.on_resynthesis(self.t, fragment, context=record.context)
            self._carry_out(decision.requests)
            if decision.outcome != "queued":
                # a full queue merged or dropped it: no synthesis of its own will come back, and the wide scar's
                # batch must not wait for one forever
                self._take_narrowed(self.narrowing.not_run(fragment.id))

    def _presumed_by_narrowing(self, theta: str, record: RecordedStep | None = None) -> tuple:
        """The told rule's blocked proposals (lost episodes) as presumptions, from its newest recorded failure
        (``synthesis.narrowing.blocked_presumptions``); empty when it has none or the failure left the history."""
        if not self.narrowing.has_blocked(theta):
            return ()
        if record is None:
            newest = self.run_record.newest(theta)
            record = None if newest is None else self.run_record.recorded(newest)
        if record is None:
            return ()
        return self.narrowing.presumptions(theta, record.context, self.run_record.recorded_failures(theta))

    def _blocked_for(self, fragment: Failure) -> Failure:
        """The fragment with its told rule's blocked proposals as presumptions (``synthesis.narrowing``)."""
        if not self.narrowing.has_blocked(fragment.theta):
            return fragment
        return with_presumptions(
            fragment, self._presumed_by_narrowing(fragment.theta, self.run_record.recorded(fragment))
        )

    def _verify_ledger(self) -> None:
        """Ledger integrity in-run (fail closed): at every episode end the whole chain is recomputed and checked
        against the head this agent itself committed at the previous episode end (an anchor the file cannot
        rewrite); a ledger that fails stops the run with one line naming the first bad event."""
        report = self.store.ledger.verify(anchor=self._verified_head)
        if not report.ok:
            raise LedgerIntegrityError(
                f"{self.store.ledger.path}: the ledger fails verification at event {report.first_bad_seq} "
                f"({report.reason}); the run stops (fail closed)"
            )
        self._verified_head = (report.count, report.head_hash)  # the head of the chain just verified

    def close(self) -> None:
        # drain: finish syntheses in flight so the ledger and statistics are complete
        for _, future in self.storm.in_flight():
            with contextlib.suppress(Exception):  # a crashed search is reported through poll below
                future.result(timeout=120)
        try:
            with self.store.group():
                self._poll()
        finally:  # also when the last results cannot be written (a ledger another process wrote: fail closed)
            self.scheduler.shutdown()
            self.store.close()

    # ---------------------------------------------------------------------------------- accommodation
    def _ask_world(self, context: Mapping[str, Any], action) -> bool:
        """The world's what-if oracle on (q, a) as a ``synthesis`` Verifier (``--oracle counterfactual`` only; the
        world raises ``ProtocolError`` otherwise)."""
        return bool(self.world.check(context, action))

    def _accommodate(
        self, record: RecordedStep, failure: Failure, trigger: str, verdict_text: str = ""
    ) -> None:
        if not self.config.extract:  # the hard blocklist: this action in this exact situation, no attribution
            situation = {k: v for k, v in failure.q.items() if k not in self.card.bookkeeping and k != "step"}
            self.accommodations[trigger] += 1
            decision = self.storm.on_disequilibrium(
                self.t, replace(failure, q=situation), context=record.context
            )
            self._carry_out(decision.requests)
            return
        fragment = self._extract(record, failure, verdict_text)
        if fragment is None:
            return
        self.run_record.owe(fragment)
        self.accommodations[trigger] += 1
        decision = self.storm.on_disequilibrium(self.t, fragment, context=record.context)
        self._carry_out(decision.requests)

    def _extract(self, record: RecordedStep, failure: Failure, verdict_text: str) -> Failure | None:
        """The failure cut to its fragment E = (q, F, θ) with what the agent knows now (None: no fragment)."""
        self._verdict_texts[failure.id] = verdict_text
        try:
            return extract_fragment(
                record,
                self._verifier,
                self.card.classes,
                theta=failure.theta,
                alternatives=self.run_record.alternatives(),
                source=failure.source,
                ignore=frozenset(self.card.bookkeeping),
                verdict_text=verdict_text,
                experience=self._experience(failure) if self.config.oracle == "none" else None,
            )
        except FragmentError:
            return None

    def _experience(self, failure: Failure) -> Experience:
        """What the agent executed and met (``RunRecord.experience``), successes strong from the rule's first
        verified failure on."""
        since = self._since(failure) or (failure.source.episode, failure.source.step)
        return self.run_record.experience(failure, since)

    def _since(self, fragment: Failure) -> tuple[int, int] | None:
        """(episode, step) of the first verified failure of the fragment's rule (successes from then on are strong
        evidence; earlier ones weak: the rule may have switched on in between). None with the oracle."""
        if (
            self.config.oracle != "none"
            or fragment.source.verifier_id.startswith("punished_by:")
            or fragment.quantities
        ):
            return None  # a punishment names no rule; a named quantity is attributed by its relation
        first = self.run_record.first_at(fragment.theta)
        return first if first is not None else (fragment.source.episode, fragment.source.step)

    def _accommodate_punishment(self, feedback: Feedback, reading: Reading) -> None:
        """Punishment alone can trigger accommodation (§3.2, §6.2): the punished action, in the context it was
        taken in, becomes the failure when d_t crosses τ and the TrustGate counted the punishment. The agent's
        recorded step of that action (if still in its history) joins D⁻ so the synthesis can mask it; when the
        world's verifier also flags that step, causal attribution cuts the failure from it by the same
        counterfactual extraction as a verdict's (§4.1: the causal variables and arguments, and the safe what-ifs),
        so the scar masks what made the action wrong rather than the whole situation it was punished in. When the
        verifier does not flag it (a punishment the gates would have rejected), the punished action in its context
        is the failure as reported."""
        counted = [p for cluster in reading.trust.clusters for p in cluster]  # type: ignore[union-attr]
        by_action: dict[tuple, list] = {}
        for p in counted:  # several punishers of one action: one failure
            if p.punished_action.is_control:
                a = p.punished_action
                by_action.setdefault((a.kind, a.name, a.args), []).append(p)
        d = feedback.decision
        for (kind, name, args), group in by_action.items():
            p = group[0]
            q = {k: v for k, v in p.context.items() if k not in self.card.bookkeeping}
            punishers = "+".join(sorted({x.punisher for x in group}))
            source = FailureSource(self.card.id, d.episode, d.step, f"punished_by:{punishers}")
            theta = f"punished:{punishers}"
            failure = Failure(q, (p.punished_action,), theta, source)
            context = p.context
            for i in range(len(self.history) - 1, -1, -1):
                step = self.history[i]
                taken = step.chosen_action
                if (taken.kind, taken.name, taken.args) == (kind, name, args):
                    if not step.violated:
                        self.history[i] = step = replace(step, violated=True)
                    if self.config.extract and self.config.punishment_attribution == "verifier":
                        with contextlib.suppress(
                            FragmentError
                        ):  # the verifier does not flag it: keep the raw one
                            failure = extract_fragment(
                                step,
                                self._verifier,
                                self.card.classes,
                                theta=theta,
                                alternatives=self.run_record.alternatives(),
                                source=source,
                                ignore=frozenset(self.card.bookkeeping),
                            )
                            context = step.context
                    break
            else:  # no longer in the history: the punished action alone stands for its step
                self.history.append(
                    RecordedStep(p.context, (p.punished_action,), (0.0,), 0, True, d.episode, d.step)
                )
            self.failures.append(failure)
            event = self.store.record_failure(failure, d_t=reading.d, z=list(reading.z.as_tuple()))
            self._failure_events[failure.id] = event
            self.accommodations["punishment"] += 1
            decision = self.storm.on_disequilibrium(self.t, failure, context=context)
            self._carry_out(decision.requests)

    def _carry_out(self, requests: StormRequests) -> None:
        """Storm control's requests, executed: masks through the store, syntheses on the executor."""
        for mask in requests.masks:
            self.store.mask_temporarily(
                mask.mask_id, mask.rule, until_step=mask.until_step, reason=mask.reason
            )
        for lift in requests.lifts:
            self.store.lift_mask(lift.mask_id, reason=lift.reason)
        for submit in requests.submits:
            self.storm.started(submit.ticket, self._submit(submit.failure))

    def _submit(self, fragment: Failure) -> AtStep:
        """The synthesis of a fragment, submitted on the scheduler: D_t from the recorded steps, S_t without the
        scars of the same told rule (from experience), collected ``synthesis_latency_steps`` decisions later."""
        seed = self.scheduler.seed()
        if self.config.search == "none":  # the storm-only control: no rule is ever proposed
            return self.scheduler.finished(None, seed)
        since = self._since(fragment)
        if since is not None and self.config.narrow:
            fragment = self._blocked_for(fragment)
        # from experience, one synthesis answers for one told rule (``RunRecord.steps_for``)
        steps = self.history if since is None else self.run_record.steps_for(fragment)
        data = build_dataset(steps, self._verifier, fragment, since=since)
        # From experience, the new rule answers for every failure of its rule (the told rule id), not only the
        # newest: the scars learned on earlier failures of that rule are left out of S_t for the search, so a sibling
        # failure widens the rule (two mugs: mugs), and the merge then retires the narrower scars it replaces.
        current = tuple(
            s.rule
            for s in self.store.scars
            if since is None or not any(e.get("theta") == fragment.theta for e in s.evidence)
        )
        core, classes, search = self.card.core, self.card.classes, self.config.search_config
        if self.config.search == "direct":
            result = self.direct_synthesiser(data, fragment, current, core, classes, search)
            return self.scheduler.finished(result, seed, data)
        return self.scheduler.submit(data, fragment, current, core, classes, search, seed=seed)

    def _poll(self) -> None:
        completed, requests = self.storm.poll(self.t)
        if requests:
            self._carry_out(requests)
        for done in completed:
            result: SynthesisResult | None = done.result
            if self.config.search == "none":  # storm only: nothing was synthesised; the mask lapses
                self.storm.on_synthesis_rejected(done.ticket, step=self.t)
                continue
            kind = "narrowing" if self.narrowing.is_pending(done.failure.id) else "failure"
            self.scheduler.collected(self.t, done.ticket, done.error, result, kind)
            if result is None or not result.admitted or result.rule is None:
                self.storm.on_synthesis_rejected(done.ticket, step=self.t)
                self._take_narrowed(self.narrowing.arrived(done.failure.id, None))
                continue
            if not self.config.enforce:
                self.text_rules.append(result.text)
                self.storm.on_synthesis_rejected(
                    done.ticket
                )  # nothing enforced: the temporary mask lapses too
                continue
            handle = done.future if isinstance(done.future, AtStep) else None
            scar = self._scar_from(result, done.failure, handle)
            if self.narrowing.is_pending(done.failure.id):
                self._take_narrowed(self.narrowing.arrived(done.failure.id, (scar, done.ticket)))
            else:
                self._admit(scar, done.ticket)

    def _admit(self, scar: Scar, ticket: int) -> None:
        """A synthesised scar merged with S_t; storm control lifts its temporary mask when it entered."""
        self.equilibrium.equilibrate(
            scar, t=self.t, failures=self.failures, history=self.history, presumed=self._presumed_by_narrowing
        )
        if scar.id in self.store.plane:
            self._carry_out(
                self.storm.on_scar_admitted(scar.rule, step=self.t, ticket=ticket, scar_id=scar.id)
            )
        elif self.storm.awaiting_admission(ticket):
            self.storm.on_synthesis_rejected(ticket, step=self.t)
        # else: a scar admitted while this result waited in a narrowing batch covered its failures and resolved it

    def _take_narrowed(self, batch: NarrowedBatch | None) -> None:
        """A wide scar's narrowing syntheses are all back (``batch``; None: none is, or it was not a narrowing
        synthesis): the new scars take over the wide scars' failures of their told rules, ``retire_narrowed``
        decides on the wide ones, and the new scars go to the merge."""
        if batch is None:
            return
        taken = [(self._takes_over(scar, batch.ready), ticket) for scar, ticket in batch.scars]
        self.equilibrium.retire_narrowed([scar for scar, _ in taken], frozenset(batch.ready))
        for scar, ticket in taken:
            self._admit(scar, ticket)

    def _takes_over(self, new: Scar, old: Sequence[str]) -> Scar:
        """The narrowed scar with the wide scars' failures of its own told rules in its evidence, each re-attributed
        from its recorded step with what the agent knows now (kept as it was once the step left the history): it owes
        them from now on, within its own scope (a failure the re-attribution ties to a world version is owed only
        until the world leaves it)."""
        thetas = {str(e["theta"]) for e in new.evidence if "theta" in e}
        have = {Failure.from_json(e).id for e in new.evidence if "q" in e and "F" in e}
        extra: list[dict[str, Any]] = []
        for scar in (s for s in self.store.scars if s.id in set(old)):
            for item in scar.evidence:
                if "q" not in item or "F" not in item or str(item.get("theta")) not in thetas:
                    continue
                failure = Failure.from_json(item)
                if failure.id in have:
                    continue
                have.add(failure.id)
                record = self.run_record.recorded(failure)
                again = (
                    None
                    if record is None
                    else self._extract(record, failure, self._verdict_texts.get(failure.id, ""))
                )
                event = self._failure_events.get(failure.id)
                if again is None:
                    extra.append(dict(item))
                elif event is not None:
                    extra.append(verdict_evidence(event, **again.to_json()))
                else:
                    extra.append(again.to_json())
        return replace(new, evidence=(*new.evidence, *extra)) if extra else new

    def _scar_from(self, result: SynthesisResult, fragment: Failure, handle: AtStep | None) -> Scar:
        search = self.config.search_config
        return scar_from_synthesis(
            result,
            fragment,
            classes=self.card.classes,
            data=None if handle is None else handle.data,
            failure_event=self._failure_events.get(fragment.id),
            seed=None if handle is None else int(handle.seed.generate_state(1)[0]),
            synthesiser="mcts" if self.config.search == "mcts" else "direct",
            settings={
                "drift_budget": search.weights.drift_budget,
                "executor": self.config.executor,
                "l_drift": None if result.score is None else result.score.l_drift,
                "max_predicates": search.max_predicates,
                "merge_mode": self.config.merge_mode,
                "num_simulations": search.num_simulations,
                "run_seed": self.seed,
                "workers": self.config.workers,
                "world": self.card.id,
            },
            verifier_id=self.card.verifier_id,
        )

    # ---------------------------------------------------------------------------------- statistics
    def stats(self) -> dict[str, Any]:
        synth = self.scheduler.stats(self.merge_log)
        storm = self.storm.stats()
        events = self.store.ledger.events()
        return {
            "scars_active_final": len(self.store.scars),
            "scars_admitted": sum(1 for e in events if e.type == "scar_admitted"),
            "scars_retired": sum(1 for e in events if e.type == "scar_retired"),
            "scars_revoked": sum(1 for e in events if e.type == "scar_revoked"),
            "syntheses": synth["syntheses"],
            "syntheses_admitted": synth["syntheses_admitted"],
            "accommodations_by_verdict": self.accommodations["verdict"],
            "accommodations_by_punishment": self.accommodations["punishment"],
            "accommodations_by_label": self.accommodations["label"],
            "labelled_failures": self.labelled_failures,
            "labels_refused": self.labels_refused,
            "punishments_rejected": self.punishments_rejected,
            "narrowing_lost_episodes": self.narrowings["lost_episodes_with_blocks"],
            "narrowing_syntheses": self.narrowings["syntheses"],
            # started at a decision whose scars left the model no unmasked way forward, or at a lost episode's end
            "narrowing_stuck_decisions": self.narrowings["stuck_decisions"],
            "narrowing_syntheses_at_once": self.narrowings["syntheses_at_once"],
            "narrowing_syntheses_at_episode_end": self.narrowings["syntheses_at_episode_end"],
            "narrowing_syntheses_not_run": self.narrowings["syntheses_not_run"],
            "narrowing_replaced": self.narrowings["replaced"],
            "narrowing_consolidations_refused": self.narrowings["consolidations_refused"],
            "synthesis_median_seconds": synth["synthesis_median_seconds"],
            "synthesis_median_nodes": synth["synthesis_median_nodes"],
            "synthesis_median_seconds_by_kind": synth["synthesis_median_seconds_by_kind"],
            "synthesis_wait_seconds": synth["synthesis_wait_seconds"],
            "synthesis_wait_share": synth["synthesis_wait_share"],
            "merge_median_seconds": float(np.median([m["seconds"] for m in self.merge_log]))
            if self.merge_log
            else None,
            "merge_all_optimal": all(m["optimal"] for m in self.merge_log) if self.merge_log else None,
            "temp_masks_set": storm.temp_masks_set,
            "storm_max_queue": storm.max_queue_seen,
            "storm_dropped": storm.dropped,
            "complexity_mdl_final": sum(description_length(s.rule) for s in self.store.scars),
            "failure_patterns": len(self.failure_rules),
            "ledger_verified": self.store.verify(),
            "ledger_head": self.store.anchor(),
            "active_rules": [canonical_text(s.rule) for s in self.store.scars],
            # every scar admitted in the run, with the told rule ids of its evidence (scar quality, item 7)
            "learned_scars": [
                {
                    "rule": canonical_text(scar.rule),
                    "told": sorted(
                        {str(x.get("theta", "")) for x in scar.evidence if isinstance(x, Mapping)}
                    ),
                    "active": scar.id in self.store.plane,
                    "env_version": scar.scope.env_version,
                }
                for scar in (Scar.from_json(e.payload) for e in events if e.type == "scar_admitted")
            ],
        }


@register_method("scars")
def make_scars(spec: MethodSpec) -> ScarsAgent:
    """The scars agent with the run's ablation and settings; with a real model, the model writes the LLM-only
    Patch ablation's rule."""
    s = spec.settings
    direct = None
    if spec.policy.writes_text:
        from scars.agents.rule_writer import llm_patch

        direct = llm_patch(spec.policy.write_text, spec.world.card)
    signal = s.get("signal") or DisequilibriumConfig(tau=s.get("tau", 0.55))
    config = ScarsAgentConfig.for_ablation(
        s.get("ablation", "none"),
        signal=signal,
        executor=s.get("executor", "inprocess"),
        workers=s.get("workers", 2),
        oracle=s.get("oracle", "none"),
        verdicts=s.get("verdicts", "executed"),
        search_iterations=s.get("search_iterations", 400),
        trust=s.get("trust") or TrustGateConfig(),
        punishment_attribution=s.get("punishment_attribution", "verifier"),
    )
    return ScarsAgent(
        config,
        world=spec.world,
        ledger_path=spec.run_dir / "ledger.sqlite",
        seed=spec.seed,
        agent_id=s.get("agent_id"),
        direct_synthesiser=direct,
    )
