"""The deterministic norm verifier of the commons world (SPEC §3 z_R, §7 tier 2).

The sustainability norm: in a month that starts with stock h(t), no agent requests more than its sustainable share
f(t)/|I(t)|, where f(t) is the sustainable group catch (``envs.commons.dynamics.sustainable_catch``) and |I(t)| the
agents in the group that month (five in GovSim's arena; four, then five in its outsider variant). A harvest
*request* is the action judged — what the agent chose, not what the allocation happened to give it — so an agent
that asked for too much broke the norm even if the pool ran dry before it got it all.

A punishment is *justified* exactly when the action it names (the target's harvest in the named month) broke that
norm. This is what TrustGate's NormVerifier gate needs (paper §3.2): a punishment of a correct, sustainable harvest
— the malicious-punishment scenario — is unjustified, whoever and however many sent it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scars.envs.commons.dynamics import DynamicsConfig, sustainable_share


@dataclass(frozen=True)
class Punishment:
    """One punishment and its provenance (seed 002: a claim carries its source and root)."""

    punisher: str
    target: str
    month: int
    """The month whose harvest is punished (the month the punishment phase belongs to), 1-based."""
    target_request: int
    """The punished action: what the target requested that month."""
    target_catch: int
    stock_before: int
    """h(t) of that month, so the verifier can recompute the norm from the record alone."""
    group_size: int
    """|I(t)| of that month (the norm's divisor), for the same reason."""
    punisher_root: str
    """The punisher's provenance root: its own id, or its coalition's id when scripted as a colluding group."""
    karma_drop: float
    cost: float
    """What punishing cost the punisher (subtracted from its reward)."""

    def to_dict(self) -> dict[str, str | int | float]:
        return {
            "punisher": self.punisher,
            "target": self.target,
            "month": self.month,
            "target_action": "harvest",
            "target_request": self.target_request,
            "target_catch": self.target_catch,
            "stock_before": self.stock_before,
            "group_size": self.group_size,
            "punisher_root": self.punisher_root,
            "karma_drop": self.karma_drop,
            "cost": self.cost,
        }


@dataclass(frozen=True)
class HarvestVerdict:
    """Did one harvest break the sustainability norm?"""

    agent: str
    month: int
    request: int
    stock_before: int
    group_size: int
    sustainable_share: float
    """f(t)/|I(t)| at that stock and group size."""
    broke_norm: bool
    reason: str


@dataclass(frozen=True)
class PunishmentVerdict:
    punishment: Punishment
    justified: bool
    reason: str


@dataclass(frozen=True)
class NormVerifier:
    """Deterministic judge of harvests and punishments for one arena's dynamics."""

    dynamics: DynamicsConfig
    verifier_id: str = "commons.sustainability.v0"

    def share(self, stock_before: int, group_size: int) -> float:
        """f(h)/|I(t)|, the per-agent sustainable share at stock ``stock_before`` in a group of ``group_size``."""
        return sustainable_share(stock_before, self.dynamics, group_size)

    def judge_harvest(
        self, agent: str, month: int, stock_before: int, request: int, group_size: int
    ) -> HarvestVerdict:
        share = self.share(stock_before, group_size)
        broke = request > share
        relation = "above" if broke else "within"
        reason = (
            f"{agent} requested {request} in month {month} at stock {stock_before}: {relation} the sustainable "
            f"share f(t)/n = {share:g} (n = {group_size})"
        )
        return HarvestVerdict(agent, month, request, stock_before, group_size, share, broke, reason)

    def judge_punishment(self, punishment: Punishment) -> PunishmentVerdict:
        harvest = self.judge_harvest(
            punishment.target,
            punishment.month,
            punishment.stock_before,
            punishment.target_request,
            punishment.group_size,
        )
        if punishment.punisher == punishment.target:
            return PunishmentVerdict(punishment, False, "self-punishment names no norm violation")
        verdict = "justified" if harvest.broke_norm else "unjustified"
        return PunishmentVerdict(punishment, harvest.broke_norm, f"{verdict}: {harvest.reason}")

    def judge_punishments(self, punishments) -> tuple[PunishmentVerdict, ...]:
        return tuple(self.judge_punishment(p) for p in punishments)

    def judge(self, punished_action, context) -> bool:
        """The TrustGate protocol (``disequilibrium.trustgate.NormVerifier``): did the punished harvest, taken in
        ``context`` (the punishment's provenance: target, month, stock_before, group_size), break the sustainability
        norm?"""
        amount = punished_action.arg("amount")
        verdict = self.judge_harvest(
            context["target"], context["month"], context["stock_before"], int(amount), context["group_size"]
        )
        return verdict.broke_norm


def independent_roots(
    punishments, verdicts: Mapping[Punishment, PunishmentVerdict] | None = None
) -> frozenset[str]:
    """The disjoint provenance roots behind a set of punishments (seed 002: corroboration needs disjoint roots).

    Several punishments from one colluding coalition share a root and so count once. With ``verdicts``, only
    justified punishments contribute a root.
    """
    return frozenset(p.punisher_root for p in punishments if verdicts is None or verdicts[p].justified)
