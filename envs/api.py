"""The world interface: what a world hands an agent, one shape for every world (paper §3; SPEC §1, §3, §7).

A world (a Gymnasium or PettingZoo environment) is made agent-facing by a ``WorldAdapter``. The adapter turns the
environment's observation and ``info`` into a :class:`Decision` (the DSL context q, the admissible control actions
as DSL ``Action`` s, the text observation, the task) and reads back what happened to the executed action: the
:class:`Verdict` s of the world's deterministic verifier and the reputation events (:class:`Punishment` s with
their provenance). Its :class:`WorldCard` says everything else an agent may know about the world — its name and
version (for provenance), the persona an agent is given, the read-only core schema H, the object/action classes used
for generalisation, which context keys are run bookkeeping, and which keys describe a situation to a text memory.

Nothing under ``agents/`` names a world's concepts: persona text, context keys, verifier ids and grammar hints come
from here. Worlds depend on ``synthesis.dsl`` only; ``disequilibrium`` and ``agents`` depend on this module.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from scars.synthesis.dsl import parse_rule
from scars.synthesis.dsl.ast import Action, Rule, Value
from scars.synthesis.dsl.semantics import Classes
from scars.synthesis.errors import ConfigError, DSLSyntaxError, ScarsError


@dataclass(frozen=True, slots=True)
class Verdict:
    """The world's verifier on the executed action: it broke ``rule_id`` (a deterministic handler's event, §3.2).

    One type for every world; a step with no verdicts passed the verifier.
    """

    rule_id: str
    message: str
    verifier_id: str


@dataclass(frozen=True, slots=True)
class Punishment:
    """A reputation event: ``punisher`` punished ``target`` for ``punished_action`` taken in ``context`` (§6.2).

    ``roots`` are the provenance roots the punishment traces back to (seed 002: corroboration needs independent
    roots); when empty, the punisher's ``coalition`` (if scripted into a colluding group) or the punisher itself is
    the root.
    """

    punisher: str
    target: str
    when: int
    punished_action: Action
    context: Mapping[str, Value] = field(default_factory=dict)
    karma_drop: float = 1.0
    coalition: str | None = None
    roots: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.karma_drop >= 0:
            raise ConfigError(f"karma_drop must be ≥ 0 (a drop, not a gain), got {self.karma_drop!r}")

    @property
    def effective_roots(self) -> frozenset[str]:
        if self.roots:
            return self.roots
        if self.coalition is not None:
            return frozenset({f"coalition:{self.coalition}"})
        return frozenset({f"agent:{self.punisher}"})


@runtime_checkable
class NormVerifier(Protocol):
    """Did ``punished_action``, taken in ``context``, break a norm of the world? (TrustGate's norm check, §3.2.)"""

    def judge(self, punished_action: Action, context: Mapping[str, Any]) -> bool: ...


@dataclass(frozen=True, slots=True)
class JudgeVerdict:
    passed: bool
    reason: str = ""


@runtime_checkable
class SemanticJudge(Protocol):
    """Where meaning is needed (the hybrid verifier's second stage, §3.2): an LLM judge plugs in here; ``judge``
    returns a verdict on the agent's text output, or ``None`` to abstain."""

    name: str

    def judge(self, output: str, context: Mapping[str, Any]) -> JudgeVerdict | None: ...


@dataclass(frozen=True)
class WorldCard:
    """What an agent may know about a world besides its observations (module docstring).

    name, version:   the world's identity for provenance (e.g. ``household`` / ``v0``).
    persona:         the system text every method's agent is given in this world.
    verifier_id:     the id of the world's deterministic verifier (recorded in every failure and scar).
    core:            the read-only core schema H: human-written rules of the patch DSL.
    classes:         equivalence classes of values (``in_class``) used for generalisation. Tool classes that
                     name what a tool does in any world (``extraction``, ``sanction``) are part of the abstract
                     vocabulary (``envs.vocabulary``) through which a scar can travel to another world.
    variables:       the abstract vocabulary of context variables and action arguments: feature name (``q`` key
                     or ``action.<arg>``) → the abstract variable it is (``resource_level``, ``extraction_amount``).
    salient_keys:    context keys that describe the situation (what a text memory files an experience under).
    schema_args:     action arguments that identify what an action is about (a schema memory's key fields).
    passive_actions: names of actions that only observe (they change nothing; skill libraries skip them).
    bookkeeping:     context keys that name the run, not the world (episode counter, game id, …): never causal.
    features:        a one-line description of the DSL features of this world (for model-written rules).
    glossary:        phrases the world's rule texts use for a state of a context variable, phrase → (variable,
                     value): "empty hands" → (``held_type``, ``"none"``). A verdict whose text holds the phrase names
                     that variable and the value under which the ruled action is allowed — what a reader of the
                     sentence understands. Public to every method, like the rest of the card.
    derived:         the context keys q carries that are computed from the raw state rather than read from it (the
                     commons' per-agent share f(t)/|I| and the group's sustainable catch f(t)): a declared switch of
                     the world (``derived_context``), empty when the context is raw state only (pool level, group
                     size, month …) and a relation such as "more than the share" must be found from those.
    """

    name: str
    version: str
    persona: str
    verifier_id: str
    core: tuple[Rule, ...] = ()
    classes: Classes = field(default_factory=dict)
    variables: Mapping[str, str] = field(default_factory=dict)
    salient_keys: tuple[str, ...] = ()
    schema_args: tuple[str, ...] = ()
    passive_actions: tuple[str, ...] = ()
    bookkeeping: tuple[str, ...] = ()
    features: str = ""
    glossary: Mapping[str, tuple[str, Value]] = field(default_factory=dict)
    derived: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.name}-{self.version}"


@dataclass(frozen=True)
class Decision:
    """One decision point of one agent: what every method sees (the information protocol's input side).

    ``rules_in_force`` is the world's own text of the rules in force — given only to methods that are told the
    rules by design (Static Persona); ``task_prior`` is the simulated LM's competence oracle (real backends ignore
    it). ``t`` counts the agent's decisions over the whole run.
    """

    observation: str
    task: str
    task_type: str
    context: Mapping[str, Value]
    actions: tuple[Action, ...]
    t: int
    episode: int
    step: int
    rules_in_force: tuple[str, ...] = ()


@dataclass(frozen=True)
class Feedback:
    """What happened after a decision: one type for every world and every method.

    ``chosen`` indexes ``decision.actions`` (−1: the safe fallback a⊥ was taken); ``logits`` are the base policy's
    π_0 over ``decision.actions`` (before governance); ``utterance`` is the agent's own text output at this step.
    """

    decision: Decision
    action: Action
    chosen: int
    logits: tuple[float, ...]
    observation: str
    reward: float
    verdicts: tuple[Verdict, ...] = ()
    punishments: tuple[Punishment, ...] = ()
    won: bool = False
    utterance: str = ""
    unsafe: tuple[Action, ...] | None = None
    """Under the ``state`` verdict protocol, the complete set A_unsafe(q) of the decision's admissible control
    actions the verifier flags (the paper's Cor. 1 verifier); ``None`` under the default ``executed`` protocol."""
    proposal: tuple[float, ...] | None = None
    """π_0's logits as the model first proposed, before the controller's masks made it re-plan (``logits`` are the
    re-planned ones then; the same as ``logits`` when it did not re-plan); ``None`` when the caller did not record
    it, and ``logits`` stand for it. What z_C reads: the model's own wish, not the route the masks pushed it to."""

    @property
    def violated(self) -> bool:
        return bool(self.verdicts)


@runtime_checkable
class WorldAdapter(Protocol):
    """A world as agents see it (module docstring). The household world and the commons arena implement it."""

    card: WorldCard

    def decision(self, observation: Any, info: Mapping[str, Any], *, t: int) -> Decision:
        """The decision the environment's latest observation and ``info`` pose (``t``: the run's decision count)."""
        ...

    def command(self, decision: Decision, action: Action) -> Any:
        """The environment action that executes ``action`` (an admissible action or the fallback a⊥)."""
        ...

    def verdicts(self, info: Mapping[str, Any]) -> tuple[Verdict, ...]:
        """The verifier's verdicts on the action just executed, read from the step's ``info``."""
        ...

    def punishments(self, info: Mapping[str, Any]) -> tuple[Punishment, ...]:
        """The punishments this agent received at the step just taken, with provenance."""
        ...

    def check(self, context: Mapping[str, Value], action: Action) -> tuple[Verdict, ...]:
        """The world's deterministic verifier on (q, a): the rules taking ``action`` in ``context`` breaks."""
        ...

    @property
    def norm_verifier(self) -> NormVerifier | None:
        """The world's norm verifier for punishments (None for a world without reputation)."""
        ...

    @property
    def judge(self) -> SemanticJudge | None:
        """The world's semantic judge of text outputs (None: deterministic handlers only)."""
        ...


def read_rules(path: str | Path) -> tuple[Rule, ...]:
    """A core schema file: rules of the patch DSL, one per line; blank lines and ``#`` comments are skipped.

    A missing or unreadable file is a ``ConfigError`` naming it; a line that does not parse is a ``DSLSyntaxError``
    naming the file, its line and the column in that line (``line``/``column`` are the file's)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read the rule file {path}: {exc}; expected a UTF-8 text file of DSL rules"
        ) from None
    rules = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if text and not text.startswith("#"):
            try:
                rules.append(parse_rule(text))
            except DSLSyntaxError as exc:
                column = exc.column + len(line) - len(line.lstrip())
                reason = str(exc).split(": ", 1)[-1]
                raise DSLSyntaxError(
                    f"{reason} (rule file {path})",
                    text=line,
                    line=number,
                    column=column,
                    expected=exc.expected,
                ) from None
    return tuple(rules)


VERDICT_PROTOCOLS = ("executed", "state")
"""What the world's verifier tells every method after each executed action (docs/protocol.md):
``executed`` — the verdicts on the executed action only (violated rule ids and the rules' text; punishments);
``state`` — also the complete unsafe set A_unsafe(q) of the state the agent was in (``Feedback.unsafe``)."""

ORACLES = ("none", "counterfactual")
"""``counterfactual``: every method may also ask the verifier about (q, a) before executing — the what-if oracle
(scars' counterfactual extraction; every method's pre-execution shield). Off by default."""


class ProtocolError(ScarsError, RuntimeError):
    """A method asked the world for a verdict the information protocol in force does not allow."""


class _Turn:
    """Whose turn it is, process-wide: a method's (its calls from the decision step: ``method_turn``) or the
    experiment's; and whether the protocol's oracle is answering (``ProtocolWorld.check`` with the counterfactual
    oracle on). A plain global, not a context variable: a thread the method starts sees the same turn."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.method = 0
        self.oracle = 0


_TURN = _Turn()


class method_turn:  # noqa: N801 - used as ``with method_turn():``, like the context-manager function it was
    """The block in which a method runs (window, govern, observe, begin/end of an episode): the world's verifier
    answers only through the protocol's view while it lasts (``verifier_access``). A class rather than a
    generator-based context manager: a shield enters it at every step (a fifth of the cost)."""

    __slots__ = ()

    def __enter__(self) -> None:
        with _TURN.lock:
            _TURN.method += 1

    def __exit__(self, *exc: object) -> None:
        with _TURN.lock:
            _TURN.method -= 1


def verifier_access(what: str) -> None:
    """Called by every world's verifier entry point: during a method's turn, only the protocol's oracle may ask
    (``ProtocolError`` otherwise — a method that reached the plain adapter, its environment or its rule engine by
    an attribute, a closure or ``gc`` gets no verdict from it)."""
    if _TURN.method and not _TURN.oracle:
        raise ProtocolError(
            f"the world's verifier was asked about {what!r} during a method's turn, not through the information "
            "protocol's view: only the verdicts in Feedback (and, with --oracle counterfactual, the view's check) "
            "reach a method"
        )


class ProtocolWorld:
    """The world as a method sees it under the information protocol: a ``WorldAdapter`` that forwards everything
    except the verifier oracle (``check``), which answers only when the counterfactual oracle is on — otherwise it
    raises ``ProtocolError`` — and counts every question. The experiment keeps the plain adapter for its own
    measurements (exposure, the ``state`` protocol's unsafe set), so ``verifier_calls`` counts only what the method
    asked."""

    def __init__(self, world: WorldAdapter, *, oracle: str = "none") -> None:
        if oracle not in ORACLES:
            raise ConfigError(f"oracle = {oracle!r}; expected one of {', '.join(ORACLES)}")
        self._world = world
        self.card = world.card
        self.oracle = oracle
        self.verifier_calls = 0

    @property
    def norm_verifier(self) -> NormVerifier | None:
        return self._world.norm_verifier

    @property
    def judge(self) -> SemanticJudge | None:
        return self._world.judge

    def decision(self, observation: Any, info: Mapping[str, Any], *, t: int) -> Decision:
        return self._world.decision(observation, info, t=t)

    def command(self, decision: Decision, action: Action) -> Any:
        return self._world.command(decision, action)

    def verdicts(self, info: Mapping[str, Any]) -> tuple[Verdict, ...]:
        return self._world.verdicts(info)

    def punishments(self, info: Mapping[str, Any]) -> tuple[Punishment, ...]:
        return self._world.punishments(info)

    def check(self, context: Mapping[str, Value], action: Action) -> tuple[Verdict, ...]:
        if self.oracle != "counterfactual":
            raise ProtocolError(
                f"the verifier was asked about {action.text or action.name!r} before or without executing it; "
                "the information protocol in force allows only the verdicts in Feedback (--oracle counterfactual "
                "opens the what-if oracle for every method)"
            )
        self.verifier_calls += 1
        with _TURN.lock:
            _TURN.oracle += 1
        try:
            return self._world.check(context, action)
        finally:
            with _TURN.lock:
                _TURN.oracle -= 1
