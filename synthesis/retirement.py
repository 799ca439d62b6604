"""Scope retirement and revocation by counter-evidence (paper §4.4–§4.5, §7.1; SPEC §5).

Scars are persistent but not immortal: their online activation depends on the validity scope ρ_i, and
counter-evidence can revoke them. This module decides *which* scars leave the control plane and why; it is
pure (frozen inputs, a frozen decision). ``agents.runtime.equilibration`` writes the decision to the ledger, where the
evidence stays: retiring a rule is not forgetting the failure (§7.1).

Two operators:

* **Scope retirement** (ρ_i → ∅). A scar learned under world version v stops applying when the world reports
  another version; a scar with ``expires_at_step`` / ``expires_at_episode`` stops applying at that step /
  episode (inclusive, as ``agents.runtime.scar.Scope.expired`` reads it). A scar without a version applies in
  every version.
* **Revocation by counter-evidence.** A recorded success (q, a*) refutes σ_i when σ_i fires on it (σ_i would
  have masked a*) and the verifier confirmed a* was safe at q. Only verified successes count: an unverified
  "success" is a claim, not evidence (seed 002: storage is not support). Successes recorded under a world
  version other than the scar's scope do not refute it (the rule may still be right where it applies).
  ``min_counter_evidence`` distinct refuting pairs are required (default 1: one verified counter-example
  contradicts a hard mask).

When a scar is both out of scope and refuted, it is retired for scope, not revoked: the scope change already
explains why it no longer fits, and a retirement does not brand the rule as wrong where it did apply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from scars.synthesis.dsl.ast import Action, Rule
from scars.synthesis.dsl.printer import to_text
from scars.synthesis.dsl.semantics import Classes, Context, fires
from scars.synthesis.errors import ConfigError

RetireKind = Literal["env_version", "step_expiry", "episode_expiry"]


@dataclass(frozen=True, slots=True)
class ScopedRule:
    """What retirement reads of a scar: its id, control plane and validity scope ρ (SPEC §1)."""

    scar_id: str
    rule: Rule
    env_version: str | None = None
    expires_at_step: int | None = None
    expires_at_episode: int | None = None


class _ScarLike(Protocol):
    @property
    def id(self) -> str: ...

    rule: Rule
    scope: Any


def scoped(scar: _ScarLike) -> ScopedRule:
    """Read a ``ScopedRule`` from a scar (anything with ``id``, ``rule`` and a ``scope`` carrying ρ's fields)."""
    scope = scar.scope
    return ScopedRule(
        scar_id=scar.id,
        rule=scar.rule,
        env_version=scope.env_version,
        expires_at_step=scope.expires_at_step,
        expires_at_episode=scope.expires_at_episode,
    )


@dataclass(frozen=True, slots=True)
class VerifiedSuccess:
    """A recorded success (q, a*) and the verifier's verdict on it.

    safe:         the verifier confirmed a* broke no rule at q (deterministic handlers first, SPEC §3).
    verifier_id:  which verifier said so (kept in the revocation's counter-evidence).
    evidence_id:  where the success is recorded (episode/step, ledger event id …).
    env_version:  the world version at the time; None = unknown (then it can refute any scar).
    """

    context: Mapping[str, Any]
    action: Action
    safe: bool
    verifier_id: str = ""
    evidence_id: str = ""
    env_version: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "q": dict(self.context),
            "a": self.action.to_dict(),
            "safe": self.safe,
            "verifier_id": self.verifier_id,
            "evidence_id": self.evidence_id,
            "env_version": self.env_version,
        }


@dataclass(frozen=True, slots=True)
class Retirement:
    scar_id: str
    kind: RetireKind
    reason: str


@dataclass(frozen=True, slots=True)
class Revocation:
    scar_id: str
    reason: str
    counter_evidence: tuple[VerifiedSuccess, ...]


@dataclass(frozen=True, slots=True)
class RetirementDecision:
    """Which scars leave the control plane and why. Each scar appears at most once."""

    retire: tuple[Retirement, ...] = ()
    revoke: tuple[Revocation, ...] = ()
    kept: tuple[str, ...] = field(default=())

    @property
    def retire_ids(self) -> frozenset[str]:
        return frozenset(r.scar_id for r in self.retire)

    @property
    def revoke_ids(self) -> frozenset[str]:
        return frozenset(r.scar_id for r in self.revoke)

    @property
    def unloaded_ids(self) -> frozenset[str]:
        return self.retire_ids | self.revoke_ids


def scope_retirement(
    scar: ScopedRule, *, env_version: str | None = None, step: int | None = None, episode: int | None = None
) -> Retirement | None:
    """ρ_i → ∅? The first reason that applies, in the order version, step, episode; None = still in scope."""
    if env_version is not None and scar.env_version is not None and env_version != scar.env_version:
        return Retirement(
            scar.scar_id,
            "env_version",
            f"world version is now {env_version!r}; the scar's scope is version {scar.env_version!r}",
        )
    if step is not None and scar.expires_at_step is not None and step >= scar.expires_at_step:
        return Retirement(
            scar.scar_id, "step_expiry", f"step {step} reached the scope's expiry step {scar.expires_at_step}"
        )
    if episode is not None and scar.expires_at_episode is not None and episode >= scar.expires_at_episode:
        return Retirement(
            scar.scar_id,
            "episode_expiry",
            f"episode {episode} reached the scope's expiry episode {scar.expires_at_episode}",
        )
    return None


def counter_evidence(
    scar: ScopedRule, successes: Iterable[VerifiedSuccess], classes: Classes | None = None
) -> tuple[VerifiedSuccess, ...]:
    """The verified-safe successes σ_i would have masked, one per distinct (q, a*), in recorded order."""
    found: list[VerifiedSuccess] = []
    seen: set[tuple[tuple[tuple[str, Any], ...], Action]] = set()
    for s in successes:
        if not s.safe or not s.action.is_control:
            continue
        if s.env_version is not None and scar.env_version is not None and s.env_version != scar.env_version:
            continue
        q: Context = s.context
        if not fires(scar.rule, q, s.action, classes):
            continue
        key = (tuple(sorted(q.items(), key=lambda kv: kv[0])), s.action)
        try:
            if key in seen:
                continue
            seen.add(key)
        except TypeError:  # an unhashable context value: count every record
            pass
        found.append(s)
    return tuple(found)


def decide_retirement(
    scars: Iterable[ScopedRule],
    *,
    env_version: str | None = None,
    step: int | None = None,
    episode: int | None = None,
    successes: Iterable[VerifiedSuccess] = (),
    classes: Classes | None = None,
    min_counter_evidence: int = 1,
) -> RetirementDecision:
    """Scope pruning and revocation over the active scars (paper §4.5). Pure: nothing is written anywhere.

    env_version / step / episode:  where the world is now (None = not checked).
    successes:                     recorded successes with the verifier's verdicts (D⁺ with verification).
    min_counter_evidence:          distinct verified-safe pairs a scar must mask before it is revoked.
    """
    if (
        isinstance(min_counter_evidence, bool)
        or not isinstance(min_counter_evidence, int)
        or min_counter_evidence < 1
    ):
        raise ConfigError(f"min_counter_evidence = {min_counter_evidence!r}; expected an integer >= 1")
    successes = tuple(successes)
    retire: list[Retirement] = []
    revoke: list[Revocation] = []
    kept: list[str] = []
    seen: set[str] = set()
    for scar in scars:
        if scar.scar_id in seen:
            raise ConfigError(f"scar {scar.scar_id!r} listed twice; each active scar is decided once")
        seen.add(scar.scar_id)
        expired = scope_retirement(scar, env_version=env_version, step=step, episode=episode)
        if expired is not None:
            retire.append(expired)
            continue
        refuting = counter_evidence(scar, successes, classes)
        if len(refuting) >= min_counter_evidence:
            first = refuting[0]
            revoke.append(
                Revocation(
                    scar.scar_id,
                    f"{len(refuting)} verified-safe success(es) masked by `{to_text(scar.rule)}`, first "
                    f"{first.action.text or first.action.name!r} ({first.evidence_id or 'unrecorded'}, verifier "
                    f"{first.verifier_id or 'unnamed'})",
                    refuting,
                )
            )
            continue
        kept.append(scar.scar_id)
    return RetirementDecision(tuple(retire), tuple(revoke), tuple(kept))
