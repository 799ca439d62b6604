"""Scars: the dual-plane patch σ = (σ^ctrl, σ^audit) of the paper (§1, §3.1; SPEC §1).

- Control plane σ^ctrl = (g, m): the rule's guard over (q, a) and its action mask. Enforced online by
  ``agents.runtime.control.ControlPlane``.
- Audit plane σ^audit = (e, p, ρ): the raw conflict evidence e (failure fragments as JSON-able dicts), the
  provenance p (where and how the scar was made) and the validity scope ρ (environment version, confidence,
  expiry). It is stored offline (``agents.runtime.ledger``) and never read in the decision path.

A scar's id is a content address of its control plane only: the first 16 hex digits of the SHA-256 of the
rule's canonical text (``synthesis.dsl.canonical_text``). Two scars that enforce the same thing share an id
whatever their evidence, so the ledger can tell a re-admission from a new scar, and the id is the same in every
process and on every machine.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scars.synthesis.dsl import ActionMask, Guard, Rule, canonical, canonical_text, parse_rule
from scars.synthesis.errors import ConfigError, LedgerIntegrityError

SCAR_ID_HEX = 16  # 64 bits of SHA-256: collisions are negligible for the scar counts a run produces


def canonical_json(obj: Any) -> str:
    """The one canonical JSON serialisation of the runtime (sort_keys, compact separators, no NaN/inf).

    Everything that is hashed (scar ids aside, which hash the DSL text) goes through this function so that a
    hash computed in one process is reproduced in any other.
    """
    try:
        text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ConfigError(
            f"value is not canonical-JSON serialisable ({exc}): {obj!r:.200}; "
            "allowed are dicts with string keys, lists, strings, finite numbers, booleans and null"
        ) from None
    if not text.isascii():
        try:
            text.encode("utf-8")
        except (
            UnicodeEncodeError
        ) as exc:  # a lone surrogate: not a character, so it cannot be hashed or stored
            raise ConfigError(
                f"value holds a lone surrogate {text[exc.start]!r} (not a Unicode character): {obj!r:.200}; "
                "allowed are strings of Unicode characters"
            ) from None
    return text


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def scar_id_of(rule: Rule) -> str:
    """The content address of a control plane: sha256(canonical_text(rule))[:16]."""
    return sha256_hex(canonical_text(rule))[:SCAR_ID_HEX]


def evidence_item_hash(item: Mapping[str, Any]) -> str:
    """Hash of one evidence item; the ledger uses it to tell new evidence from evidence already seen."""
    return sha256_hex(canonical_json(item))


@dataclass(frozen=True, slots=True)
class Provenance:
    """p_i of the audit plane (SPEC §1): where the scar came from and how it was made.

    Timestamps are microseconds since the Unix epoch (UTC); the ledger adds its own transaction time when the
    scar is admitted. ``synthesiser_settings`` holds sorted (name, value) pairs so the record stays frozen.
    """

    source_episode: int | None = None
    source_step: int | None = None
    verifier_id: str = ""
    synthesiser: str = ""
    synthesiser_settings: tuple[tuple[str, Any], ...] = ()
    seed: int | None = None
    observed_at_us: int | None = None  # when the failure was observed
    synthesised_at_us: int | None = None  # when the synthesiser returned the rule

    def __post_init__(self) -> None:
        for name in ("source_episode", "source_step", "seed", "observed_at_us", "synthesised_at_us"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"Provenance.{name} must be an int or None, got {value!r}")
        if isinstance(self.synthesiser_settings, Mapping):
            object.__setattr__(self, "synthesiser_settings", tuple(sorted(self.synthesiser_settings.items())))
        canonical_json(dict(self.synthesiser_settings))  # JSON-able, or a ConfigError naming the value

    def to_json(self) -> dict[str, Any]:
        return {
            "source_episode": self.source_episode,
            "source_step": self.source_step,
            "verifier_id": self.verifier_id,
            "synthesiser": self.synthesiser,
            "synthesiser_settings": dict(self.synthesiser_settings),
            "seed": self.seed,
            "observed_at_us": self.observed_at_us,
            "synthesised_at_us": self.synthesised_at_us,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Provenance:
        return cls(
            source_episode=d.get("source_episode"),
            source_step=d.get("source_step"),
            verifier_id=d.get("verifier_id", ""),
            synthesiser=d.get("synthesiser", ""),
            synthesiser_settings=tuple(sorted(dict(d.get("synthesiser_settings", {})).items())),
            seed=d.get("seed"),
            observed_at_us=d.get("observed_at_us"),
            synthesised_at_us=d.get("synthesised_at_us"),
        )


@dataclass(frozen=True, slots=True)
class Scope:
    """ρ_i of the audit plane (SPEC §1, §5): where the scar is valid.

    env_version:        the world version the scar was learned in; None = any version.
    confidence:         in [0, 1].
    expires_at_step:    the scar stops applying at this step (inclusive); None = never.
    expires_at_episode: the scar stops applying at this episode (inclusive); None = never.
    """

    env_version: str | None = None
    confidence: float = 1.0
    expires_at_step: int | None = None
    expires_at_episode: int | None = None

    def __post_init__(self) -> None:
        if self.env_version is not None and not isinstance(self.env_version, str):
            raise ConfigError(f"Scope.env_version must be a string or None, got {self.env_version!r}")
        c = self.confidence
        if isinstance(c, bool) or not isinstance(c, int | float) or math.isnan(c) or not 0.0 <= c <= 1.0:
            raise ConfigError(f"Scope.confidence must be a number in [0, 1], got {c!r}")
        for name in ("expires_at_step", "expires_at_episode"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigError(f"Scope.{name} must be a non-negative int or None, got {value!r}")

    def expired(
        self, *, step: int | None = None, episode: int | None = None, env_version: str | None = None
    ) -> bool:
        """ρ → ∅ (SPEC §5): past its step or episode expiry, or learned in another world version."""
        if step is not None and self.expires_at_step is not None and step >= self.expires_at_step:
            return True
        if episode is not None and self.expires_at_episode is not None and episode >= self.expires_at_episode:
            return True
        return env_version is not None and self.env_version is not None and env_version != self.env_version

    def to_json(self) -> dict[str, Any]:
        return {
            "env_version": self.env_version,
            "confidence": self.confidence,
            "expires_at_step": self.expires_at_step,
            "expires_at_episode": self.expires_at_episode,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Scope:
        unknown = set(d) - {"env_version", "confidence", "expires_at_step", "expires_at_episode"}
        if unknown:
            raise ConfigError(
                f"unknown Scope field(s) {sorted(unknown)}; allowed: env_version, confidence, "
                "expires_at_step, expires_at_episode"
            )
        return cls(
            env_version=d.get("env_version"),
            confidence=d.get("confidence", 1.0),
            expires_at_step=d.get("expires_at_step"),
            expires_at_episode=d.get("expires_at_episode"),
        )


@dataclass(frozen=True, slots=True)
class Scar:
    """σ = (σ^ctrl, σ^audit): a rule (guard, mask) plus evidence, provenance and scope (SPEC §1).

    The rule is kept in canonical form (``synthesis.dsl.canonical``), whatever form it was given in.

    ``evidence`` is a tuple of JSON-able dicts (failure fragments). Equality compares every field; the hash
    uses the id and the evidence hash, since dicts themselves cannot be hashed.
    """

    rule: Rule
    evidence: tuple[Mapping[str, Any], ...] = ()
    provenance: Provenance = field(default_factory=Provenance)
    scope: Scope = field(default_factory=Scope)

    def __post_init__(self) -> None:
        if not isinstance(self.rule, Rule):
            raise ConfigError(f"Scar.rule must be a synthesis.dsl Rule, got {type(self.rule).__name__}")
        # stored in canonical form so that a scar read back from its JSON (or the ledger) compares equal
        object.__setattr__(self, "rule", canonical(self.rule))
        if isinstance(self.evidence, Mapping):
            raise ConfigError("Scar.evidence must be a tuple of dicts, got a single dict; wrap it in a tuple")
        evidence = tuple(self.evidence)
        for item in evidence:
            if not isinstance(item, Mapping):
                raise ConfigError(f"each evidence item must be a dict, got {item!r:.200}")
            canonical_json(item)
        object.__setattr__(self, "evidence", evidence)

    def __hash__(self) -> int:
        return hash((self.id, self.evidence_hash))

    @property
    def id(self) -> str:
        return scar_id_of(self.rule)

    @property
    def guard(self) -> Guard:
        return self.rule.guard

    @property
    def mask(self) -> ActionMask:
        return self.rule.mask

    @property
    def control_text(self) -> str:
        """The canonical text of the control plane, the preimage of the id."""
        return canonical_text(self.rule)

    @property
    def evidence_hashes(self) -> tuple[str, ...]:
        return tuple(evidence_item_hash(item) for item in self.evidence)

    @property
    def evidence_hash(self) -> str:
        return sha256_hex(canonical_json(list(self.evidence)))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "rule": self.control_text,
            "evidence": [dict(item) for item in self.evidence],
            "provenance": self.provenance.to_json(),
            "scope": self.scope.to_json(),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Scar:
        """Inverse of ``to_json``. If the stored id does not match the rule text, the record was altered."""
        scar = cls(
            rule=parse_rule(d["rule"]),
            evidence=tuple(d.get("evidence", ())),
            provenance=Provenance.from_json(d.get("provenance", {})),
            scope=Scope.from_json(d.get("scope", {})),
        )
        if "id" in d and d["id"] != scar.id:
            raise LedgerIntegrityError(
                f"scar record claims id {d['id']!r} but its rule {d['rule']!r} hashes to {scar.id!r}"
            )
        return scar
