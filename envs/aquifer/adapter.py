"""Arena C as one farm sees it: ``AquiferAdapter`` implements ``envs.api.WorldAdapter`` (tier 3).

One adapter per seat of the ``aquifer_v0`` ParallelEnv: it reads that farm's ``info`` into a ``Decision`` (arena C's
flat DSL context, the stage's admissible actions, a text observation in C's wording), maps a DSL action back to the
env's action space, and reports the fines this farm received, with provenance, as ``envs.api.Punishment`` s. The
world's verifier is the safe-yield norm (``AquiferNorm``: no draw above the safe yield per farm, the same kind of
norm as the commons' sustainability norm, on C's dynamics and names); it is also the norm verifier TrustGate asks.

Its card declares C's abstract vocabulary (``CLASSES``, ``VARIABLES``): ``pump`` is an ``extraction`` tool and
``fine`` a ``sanction``; ``aquifer_level`` is the ``resource_level``, ``action.volume`` the ``extraction_amount`` —
the same abstract names the commons card uses, so a scar learned with class predicates in A or B grounds here
(``envs.vocabulary.ground``), and one learned on ``harvest`` does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scars.envs.api import Punishment, WorldCard, read_rules
from scars.envs.aquifer.aquifer_v0 import AquiferParallelEnv
from scars.envs.commons.adapter import ResourceAdapter, Surface
from scars.envs.commons.dynamics import DynamicsConfig, sustainable_share
from scars.synthesis.dsl import Action, Value

CORE_SCHEMA_FILE = Path(__file__).with_name("core_schema.dsl")
CLASSES: Mapping[str, frozenset[str]] = {
    "extraction": frozenset({"pump"}),
    "sanction": frozenset({"fine"}),
}
"""The abstract classes of arena C's tools."""
VARIABLES: Mapping[str, str] = {
    "aquifer_level": "resource_level",
    "aquifer_capacity": "resource_capacity",
    "safe_yield": "group_safe_yield",
    "safe_yield_share": "fair_share",
    "max_draw": "max_extraction",
    "num_farms": "group_size",
    "quota": "agreed_limit",
    "has_quota": "has_agreed_limit",
    "dried_up": "resource_collapsed",
    "own_draw": "own_extraction",
    "own_pumped": "own_yield",
    "standing": "reputation",
    "standing_drop": "reputation_drop",
    "times_fined": "times_sanctioned",
    "action.volume": "extraction_amount",
    "action.farm": "sanction_target",
}
"""The abstract variable each of arena C's context keys and action arguments is."""
_CONTEXT_EXTRAS = ("admissible_actions", "fines", "messages", "water_report", "pumping_report")


def context_of(info: Mapping[str, Any]) -> dict[str, Value]:
    """The flat DSL context q inside one farm's ``info`` (drops the non-scalar extras)."""
    return {k: v for k, v in info.items() if k not in _CONTEXT_EXTRAS}


SURFACE = Surface(
    stage="stage",
    extraction_stage="pumping",
    level="aquifer_level",
    group="num_farms",
    share="safe_yield_share",
    own_request="own_draw",
    collapsed="dried_up",
    tool="pump",
    amount="volume",
    records="fines",
    collapse_verdict=("aquifer_dry", "the aquifer ran dry after an over-draw"),
    over_verdict=("over_draw", "a draw above the safe yield per farm"),
)
"""Arena C's names for what every shared-resource arena has (``envs.commons.adapter.Surface``)."""


@dataclass(frozen=True)
class AquiferNorm:
    """The safe-yield norm: in a season that starts at level h, no farm draws more than safe_yield(h) / |I(t)|."""

    dynamics: DynamicsConfig
    verifier_id: str = "aquifer.safe_yield.v0"

    def share(self, level: int, group_size: int) -> float:
        return sustainable_share(level, self.dynamics, group_size)

    def judge(self, punished_action: Action, context: Mapping[str, Any]) -> bool:
        """TrustGate's protocol: did the fined draw, taken at ``context["level_before"]`` in a group of
        ``context["group_size"]``, exceed the safe share?"""
        volume = punished_action.arg("volume")
        level = context.get("level_before")
        if not isinstance(volume, int | float) or not isinstance(level, int | float):
            return False
        return volume > self.share(int(level), int(context["group_size"]))


class AquiferAdapter(ResourceAdapter):
    """``WorldAdapter`` for one farm ``agent`` of an ``aquifer_v0`` env (module docstring)."""

    surface = SURFACE
    task = "Irrigate your farm without drying out the shared aquifer."

    def __init__(self, env: AquiferParallelEnv, agent: str, *, overuse_verdicts: bool = False) -> None:
        """``overuse_verdicts``: the verifier also reports a draw above the safe share on the step that executed it;
        by default only a dry-up the farm's over-draw took part in is a verdict."""
        if agent not in env.possible_agents:
            raise ValueError(f"agent {agent!r} is not a farm of this aquifer; farms: {env.possible_agents}")
        norms = AquiferNorm(env.dynamics)
        card = WorldCard(
            name="aquifer",
            version="v0",
            persona=(
                f"You run one of {env.dynamics.num_agents} farms that irrigate from the same aquifer. Pump what "
                "your crops need, do not let the wells run dry, and deal fairly with the other farms."
            ),
            verifier_id=norms.verifier_id,
            core=read_rules(CORE_SCHEMA_FILE),
            classes=CLASSES,
            variables=VARIABLES,
            salient_keys=("stage", "aquifer_level", "season"),
            schema_args=("volume", "farm"),
            passive_actions=("idle", "waive", "speak"),
            bookkeeping=("episode", "season", "num_seasons", "basin"),
            features=(
                "FEATURE is a context name such as aquifer_level, safe_yield_share, standing or quota, or a part "
                'of the tool call such as action.volume or action.farm. Example: if tool_is("pump") and '
                'aquifer_level < 15 then forbid_tool_call("pump")'
            ),
        )
        super().__init__(
            env, agent, norms, card, seats=env.dynamics.num_agents, overuse_verdicts=overuse_verdicts
        )

    def context(self, info: Mapping[str, Any]) -> dict[str, Value]:
        return context_of(info)

    def describe(self, q: Mapping[str, Value], info: Mapping[str, Any]) -> str:
        text = (
            f"Season {q['season']} of {q['num_seasons']}, {q['stage']} stage. The aquifer stores "
            f"{q['aquifer_level']} of {q['aquifer_capacity']} megalitres; a safe draw is {q['safe_yield_share']:g} "
            "megalitres per farm."
        )
        report = info.get("pumping_report", "")
        return f"{text} {report}" if report else text

    def punishment(self, record: Mapping[str, Any]) -> Punishment:
        level = record["level_before"]
        return Punishment(
            punisher=str(record["fined_by"]),
            target=str(record["farm"]),
            when=int(record["season"]),
            punished_action=Action.tool("pump", volume=record["fined_draw"]),
            context={
                "season": record["season"],
                "target": record["farm"],
                "level_before": level,
                "aquifer_level": level,
                "group_size": record["farms"],
            },
            karma_drop=float(record["standing_drop"]),
            roots=frozenset({str(record["root"])}),
        )
