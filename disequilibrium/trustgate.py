"""z_R = TrustGate(ΔR_t⁻, NormVerifier): gated negative social feedback (paper §3.2, §6.2; seed 002).

A reputation (karma) drop counts toward z_R only when two checks pass:

1. **Norm check.** The ``NormVerifier`` confirms that the punished action really broke a norm. Punishing a correct,
   sustainable harvest is noise (or an attack), not evidence that the agent must change.
2. **Source independence.** Following seed 002 (typed provenance: "corroboration needs independent roots"), every
   punishment carries the set of roots it traces back to — by default the punisher's coalition id when the arena
   scripted it as part of a colluding group, else the punisher itself. Punishments whose root sets overlap,
   directly or through a chain of overlaps, form one cluster and count ONCE (with the largest drop in the cluster).
   Every punishment has a non-empty root set (seed 002: Indep needs non-empty, disjoint root sets): when the arena
   gives none, the punisher's coalition or the punisher itself is the root.

Normaliser: z_R = min(1, counted_drop / ``saturating_drop``). The default ``saturating_drop`` = 4.0 is the drop when
every other member of a five-agent GovSim group independently punishes once at unit severity;
``TrustGateConfig.for_group(num_agents, severity)`` sets it to (num_agents − 1)·severity for another arena (the
commons arena's default severity is 10 karma). With the gate off (``TrustGateConfig(enabled=False)``) the
raw drop — every punishment, justified or not, from any source — is normalised the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from scars.envs.api import NormVerifier, Punishment
from scars.synthesis.errors import ConfigError


@dataclass(frozen=True, slots=True)
class TrustGateConfig:
    """enabled: the whole gate (both checks). verify_norms / require_independence switch one check each."""

    enabled: bool = True
    verify_norms: bool = True
    require_independence: bool = True
    saturating_drop: float = 4.0

    @classmethod
    def for_group(cls, num_agents: int, severity: float, **kwargs: Any) -> TrustGateConfig:
        """The normaliser for a group: z_R = 1 when every other member independently punishes once at
        ``severity`` (e.g. ``envs.commons``' ``punishment_severity``): saturating_drop = (num_agents − 1)·severity."""
        if num_agents < 2 or not severity > 0:
            raise ConfigError(
                f"for_group needs num_agents ≥ 2 and severity > 0, got {num_agents!r}, {severity!r}"
            )
        return cls(saturating_drop=(num_agents - 1) * float(severity), **kwargs)

    def __post_init__(self) -> None:
        if not self.saturating_drop > 0:
            raise ConfigError(
                f"saturating_drop must be > 0 (the drop that maps to z_R = 1), got {self.saturating_drop!r}"
            )


@dataclass(frozen=True, slots=True)
class TrustGateResult:
    """z_R and the accounting behind it (which punishments were rejected, how they were clustered)."""

    z_r: float
    raw_drop: float
    counted_drop: float
    n_punishments: int
    rejected_by_norm: tuple[Punishment, ...]
    clusters: tuple[tuple[Punishment, ...], ...]

    @property
    def n_independent(self) -> int:
        return len(self.clusters)


def _root_clusters(punishments: Sequence[Punishment]) -> list[list[Punishment]]:
    """Group punishments whose root sets overlap (transitively) — union-find over shared roots, order-stable."""
    parent = list(range(len(punishments)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, p in enumerate(punishments):
        for root in sorted(p.effective_roots):
            if root in owner:
                a, b = find(i), find(owner[root])
                if a != b:
                    parent[max(a, b)] = min(a, b)
            else:
                owner[root] = i
    groups: dict[int, list[Punishment]] = {}
    for i, p in enumerate(punishments):
        groups.setdefault(find(i), []).append(p)
    return [groups[k] for k in sorted(groups)]


class TrustGate:
    """Computes z_R for one target agent from the punishments it received in a window."""

    def __init__(
        self, norm_verifier: NormVerifier | None, config: TrustGateConfig = TrustGateConfig()
    ) -> None:
        if config.enabled and config.verify_norms and norm_verifier is None:
            raise ConfigError(
                "TrustGate with verify_norms=True needs a NormVerifier; pass one or disable the check"
            )
        if norm_verifier is not None and not isinstance(norm_verifier, NormVerifier):
            raise ConfigError(
                f"norm_verifier must implement judge(punished_action, context) -> bool, got {norm_verifier!r}"
            )
        self.norm_verifier = norm_verifier
        self.config = config

    def evaluate(self, punishments: Iterable[Punishment], target: str | None = None) -> TrustGateResult:
        """z_R for ``target`` (all punishments if ``None``); punishments aimed at other agents are ignored."""
        received = tuple(p for p in punishments if target is None or p.target == target)
        raw = float(sum(p.karma_drop for p in received))
        cfg = self.config
        if not cfg.enabled:
            clusters = tuple((p,) for p in received)
            return TrustGateResult(self._normalise(raw), raw, raw, len(received), (), clusters)

        justified: list[Punishment] = []
        rejected_norm: list[Punishment] = []
        for p in received:
            if cfg.verify_norms and not self.norm_verifier.judge(p.punished_action, p.context):  # type: ignore[union-attr]
                rejected_norm.append(p)
            else:
                justified.append(p)

        if cfg.require_independence:
            clusters = tuple(tuple(c) for c in _root_clusters(justified))
            # A cluster of non-independent sources counts once: its single largest drop.
            counted = float(sum(max(p.karma_drop for p in c) for c in clusters))
        else:
            clusters = tuple((p,) for p in justified)
            counted = float(sum(p.karma_drop for p in justified))
        return TrustGateResult(
            self._normalise(counted), raw, counted, len(received), tuple(rejected_norm), clusters
        )

    def _normalise(self, drop: float) -> float:
        return float(min(1.0, drop / self.config.saturating_drop))
