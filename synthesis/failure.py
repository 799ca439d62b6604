"""The one shape of a verified failure: ``Failure(q, F, θ, source)`` (paper §4.1; SPEC §4).

A failure travels from the monitor that saw it to storm control (its temporary mask), to fragment extraction (which
cuts q down to the causal variables and returns another ``Failure``), to the synthesiser (D⁻), to the merge's
coverage constraints (one requirement per failed action), to the ledger (``failure_observed`` payload) and into a
scar's evidence — always this type, or its JSON form ``to_json()``.

- ``q``: the context the failed action was taken in. As observed, the whole context; after extraction
  (``synthesis.fragments.extract_fragment``), only the variables causally tied to the failure.
- ``F``: the failed control action first, then the admissible actions the verifier also flags as equivalent.
- ``theta``: the attributed cause (a rule id of the world's verifier, or a verifier event name).
- ``source``: where it happened (world, episode, step) and which verifier certified it.
- ``causal_args``, ``safe_counterfactuals``, ``quantities`` and ``allowed`` are filled by extraction (empty on an
  observed failure).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from scars.synthesis.dsl.ast import Action, Value
from scars.synthesis.errors import ConfigError


def freeze_context(context: Mapping[str, Value]) -> Mapping[str, Value]:
    """A read-only copy of a context, so frozen records cannot be changed through a shared dict."""
    return MappingProxyType(dict(context))


@dataclass(frozen=True, slots=True)
class FailureSource:
    """Where a failure happened and who certified it: world (name and version), episode, step, verifier id."""

    world: str = ""
    episode: int = 0
    step: int = 0
    verifier_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "world": self.world,
            "episode": self.episode,
            "step": self.step,
            "verifier_id": self.verifier_id,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FailureSource:
        return cls(
            str(d.get("world", "")),
            int(d.get("episode", 0)),
            int(d.get("step", 0)),
            str(d.get("verifier_id", "")),
        )


@dataclass(frozen=True)
class Failure:
    """A verified failure E = (q, F, θ) with its source (module docstring)."""

    q: Mapping[str, Value] = field(hash=False)
    F: tuple[Action, ...]
    theta: str
    source: FailureSource = FailureSource()
    causal_args: frozenset[str] = frozenset()
    safe_counterfactuals: tuple[tuple[Mapping[str, Value], Action], ...] = field(
        default=(), hash=False, compare=False
    )
    """The verifier's answers to the extraction's what-if questions that came back *safe*: (q', a') pairs that
    differ from the failure in one causal variable or argument. They are evidence too: a scar that fires on one
    of them forbids behaviour the verifier certified as allowed (see ``synthesis.objective.ObjectiveEvaluator``)."""
    failing_counterfactuals: tuple[tuple[Mapping[str, Value], Action], ...] = field(
        default=(), hash=False, compare=False
    )
    """The what-ifs that came back *still failing* (one causal variable changed to another observed value and the
    verifier still flags it): more instances of the same failure, which a scar must cover too (they join D⁻)."""
    quantities: frozenset[str] = frozenset()
    """Context variables the verdict's text named as the quantity a numeric argument of the action was judged
    against ("a request above the sustainable share"): the attributed condition is the relation between the two
    (``synthesis.mcts`` offers it in place of literal thresholds on either). Filled by extraction."""
    presumed_safe: tuple[tuple[Mapping[str, Value], Action], ...] = field(
        default=(), hash=False, compare=False
    )
    """Presumptions (``synthesis.fragments.presumptions``): actions the agent met but never tried, in the failure's
    context, presumed safe until its own evidence says otherwise. Unlike certified-safe what-ifs they are no veto:
    the objective charges a fixed cost per presumption a candidate fires on (``ObjectiveWeights.presumption``), so
    they pick the narrowest of equally cheap rules and give way to a generalisation the failures support."""
    presumption_weights: tuple[float, ...] = field(default=(), hash=False, compare=False)
    """Per presumption, the share of the full presumption cost it carries (empty: 1 each)."""
    allowed: tuple[tuple[str, Value], ...] = ()
    """Context variables the verdict's text stated a condition on through the world's glossary ("only with empty
    hands"), each with the value under which the action is allowed: the attributed condition is ``variable !=
    value`` (``synthesis.mcts`` offers it in place of literal predicates on the variable). Filled by extraction."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "q", freeze_context(self.q))
        object.__setattr__(self, "F", tuple(self.F))
        if not self.F:
            raise ConfigError("a failure needs at least one failed action F")
        for a in self.F:
            if not isinstance(a, Action):
                raise ConfigError(f"failed actions must be synthesis.dsl Actions, got {type(a).__name__}")
        object.__setattr__(self, "causal_args", frozenset(self.causal_args))
        object.__setattr__(self, "quantities", frozenset(self.quantities))
        object.__setattr__(self, "allowed", tuple(sorted(self.allowed)))

    def __reduce__(self):
        # The read-only context view does not pickle; ship plain dicts (Ray moves failures between processes).
        return (
            Failure,
            (
                dict(self.q),
                self.F,
                self.theta,
                self.source,
                self.causal_args,
                tuple((dict(q), a) for q, a in self.safe_counterfactuals),
                tuple((dict(q), a) for q, a in self.failing_counterfactuals),
                self.quantities,
                tuple((dict(q), a) for q, a in self.presumed_safe),
                self.presumption_weights,
                self.allowed,
            ),
        )

    @property
    def id(self) -> str:
        """``world:episode:step`` (``episode:step`` without a world): the failure's coverage id in the merge."""
        s = self.source
        return f"{s.world}:{s.episode}:{s.step}" if s.world else f"{s.episode}:{s.step}"

    @property
    def action(self) -> Action:
        """The failed action itself (the first of F)."""
        return self.F[0]

    def to_json(self) -> dict[str, Any]:
        """The JSON form stored in the ledger and in a scar's evidence (safe counterfactuals are derived data and
        are not stored)."""
        return {
            "q": dict(self.q),
            "F": [a.to_dict() for a in self.F],
            "theta": self.theta,
            "source": self.source.to_json(),
            "causal_args": sorted(self.causal_args),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Failure:
        try:
            return cls(
                q=dict(d["q"]),
                F=tuple(Action.from_dict(a) for a in d["F"]),
                theta=str(d["theta"]),
                source=FailureSource.from_json(d.get("source", {})),
                causal_args=frozenset(d.get("causal_args", ())),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"not a failure record ({exc!r}): {dict(d)!r:.200}") from exc
