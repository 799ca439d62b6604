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

from envs.api import Decision, NormVerifier, Punishment, SemanticJudge, Verdict, WorldCard, read_rules
from envs.aquifer.aquifer_v0 import AquiferParallelEnv
from envs.commons.dynamics import DynamicsConfig, sustainable_catch
from synthesis.dsl import Action, Value

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


@dataclass(frozen=True)
class AquiferNorm:
    """The safe-yield norm: in a season that starts at level h, no farm draws more than safe_yield(h) / |I|."""

    dynamics: DynamicsConfig
    verifier_id: str = "aquifer.safe_yield.v0"

    def share(self, level: int) -> float:
        return sustainable_catch(level, self.dynamics) / self.dynamics.num_agents

    def judge(self, punished_action: Action, context: Mapping[str, Any]) -> bool:
        """TrustGate's protocol: did the fined draw, taken at ``context["level_before"]``, exceed the safe share?"""
        volume = punished_action.arg("volume")
        level = context.get("level_before")
        if not isinstance(volume, int | float) or not isinstance(level, int | float):
            return False
        return volume > self.share(int(level))


class AquiferAdapter:
    """``WorldAdapter`` for one farm ``agent`` of an ``aquifer_v0`` env (module docstring)."""

    def __init__(self, env: AquiferParallelEnv, agent: str, *, overuse_verdicts: bool = False) -> None:
        """``overuse_verdicts``: the verifier also reports a draw above the safe share on the step that executed it;
        by default only a dry-up the farm's over-draw took part in is a verdict."""
        if agent not in env.possible_agents:
            raise ValueError(f"agent {agent!r} is not a farm of this aquifer; farms: {env.possible_agents}")
        self.env, self.agent = env, agent
        self.norms = AquiferNorm(env.dynamics)
        self.card = WorldCard(
            name="aquifer",
            version="v0",
            persona=(
                f"You run one of {env.dynamics.num_agents} farms that irrigate from the same aquifer. Pump what "
                "your crops need, do not let the wells run dry, and deal fairly with the other farms."
            ),
            verifier_id=self.norms.verifier_id,
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
        self.overuse_verdicts = overuse_verdicts
        self.episode = 0
        self._seen: set[tuple[str, str, int]] = set()
        self._level_at_pumping: int | None = None
        self._executed_stage = ""

    def reset(self, episode: int) -> None:
        """A new episode (after ``env.reset``): fines are reported afresh, the episode is numbered ``episode``."""
        self.episode = int(episode)
        self._seen.clear()
        self._level_at_pumping = None
        self._executed_stage = ""

    @property
    def norm_verifier(self) -> NormVerifier | None:
        return self.norms

    @property
    def judge(self) -> SemanticJudge | None:
        return None

    def decision(self, observation: Any, info: Mapping[str, Any], *, t: int) -> Decision:
        q = context_of(info)
        if q["stage"] == "pumping":
            self._level_at_pumping = int(q["aquifer_level"])
        text = (
            f"Season {q['season']} of {q['num_seasons']}, {q['stage']} stage. The aquifer stores "
            f"{q['aquifer_level']} of {q['aquifer_capacity']} megalitres; a safe draw is {q['safe_yield_share']:g} "
            "megalitres per farm."
        )
        report = info.get("pumping_report", "")
        if report:
            text += f" {report}"
        return Decision(
            observation=text,
            task="Irrigate your farm without drying out the shared aquifer.",
            task_type=str(q["stage"]),
            context=q,
            actions=tuple(Action.from_dict(d) for d in info["admissible_actions"]),
            t=t,
            episode=self.episode,
            step=t,
        )

    def command(self, decision: Decision, action: Action) -> dict[str, Any]:
        self._executed_stage = str(decision.context["stage"])
        return self.env.to_env_action(action.to_dict())

    def verdicts(self, info: Mapping[str, Any]) -> tuple[Verdict, ...]:
        """The verifier on the action just executed: only a draw is judged — a dry-up it took part in (a draw above
        the safe share in the season the aquifer ran dry) and, with ``overuse_verdicts``, any draw above it."""
        q = context_of(info)
        level = self._level_at_pumping
        if self._executed_stage != "pumping" or level is None:
            return ()
        over = int(q.get("own_draw", 0)) > self.norms.share(level)
        if over and q.get("dried_up"):
            return (Verdict("aquifer_dry", "the aquifer ran dry after an over-draw", self.norms.verifier_id),)
        if over and self.overuse_verdicts:
            return (Verdict("over_draw", "a draw above the safe yield per farm", self.norms.verifier_id),)
        return ()

    def punishments(self, info: Mapping[str, Any]) -> tuple[Punishment, ...]:
        out = []
        for record in info.get("fines", ()):
            key = (str(record["fined_by"]), str(record["farm"]), int(record["season"]))
            if record["farm"] == self.agent and key not in self._seen:
                self._seen.add(key)
                level = record["level_before"]
                out.append(
                    Punishment(
                        punisher=str(record["fined_by"]),
                        target=str(record["farm"]),
                        when=int(record["season"]),
                        punished_action=Action.tool("pump", volume=record["fined_draw"]),
                        context={
                            "season": record["season"],
                            "target": record["farm"],
                            "level_before": level,
                            "aquifer_level": level,
                        },
                        karma_drop=float(record["standing_drop"]),
                        roots=frozenset({str(record["root"])}),
                    )
                )
        return tuple(out)

    def check(self, context: Mapping[str, Value], action: Action) -> tuple[Verdict, ...]:
        """The safe-yield norm on a draw at the context's aquifer level."""
        if action.kind != "tool" or action.name != "pump" or "aquifer_level" not in context:
            return ()
        level, volume = context["aquifer_level"], action.arg("volume")
        if not isinstance(level, int | float) or not isinstance(volume, int | float):
            return ()
        if volume > self.norms.share(int(level)):
            return (Verdict("over_draw", "a draw above the safe yield per farm", self.norms.verifier_id),)
        return ()
