"""Named scenarios and arenas of the commons world, as frozen data in read-only registries (SPEC §7 tier 2).

A *scenario* is GovSim's wording of the same dynamics (fishery, pasture, pollution: Piatti et al. 2024 run all three
on one model; ``groundwater`` is the wording of arena C, ``envs.aquifer``, which also renames every surface name).
An *arena* is the social setting the paper's tier 2 compares:

- ``A``: peer punishment is on (a punishment lowers the target's karma);
- ``B``: no immediate punishment (the punishment phase does not exist; karma never moves) — the counterfactual
  social transfer target of paper §6.2;
- ``malicious``: arena A with a majority coalition that punishes a target's correct, sustainable harvest
  (the anti-collusion test of paper §6.2).

Configuration is data, kept apart from the machinery (Melting Pot's substrate/scenario split).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from scars.envs.commons.dynamics import CommonsConfigError


@dataclass(frozen=True)
class Scenario:
    """How the pool and its harvest are worded. Templates use ``str.format`` fields named in each docstring."""

    name: str
    place: str
    """Where the resource lives (``lake``)."""
    role: str
    """What an agent is called (``fisherman``)."""
    unit: str
    """The harvest unit, plural (``tons of fish``)."""
    pool_text: str
    """The pool's state after a harvest (the mayor's report) and outside the harvest. Fields: ``amount``,
    ``capacity``."""
    before_harvest_text: str
    """GovSim's pool sentence at harvest time, before anyone takes (``tons_in_lake`` and its siblings in GovSim's
    scenario environments). Fields: ``amount``."""
    harvest_text: str
    """The surface form of one harvest request. Fields: ``amount``."""
    report_text: str
    """The mayor's line for one agent. Fields: ``agent``, ``amount``."""
    caught_text: str
    """GovSim's harvest report to one agent after the harvest (its own request and catch). Fields: ``agent``,
    ``wanted``, ``caught``."""
    universalization_text: str
    """GovSim's universalization line. Fields: ``threshold`` (⌊f(t)/|I|⌋)."""


@dataclass(frozen=True)
class Arena:
    """The social rules of one arena."""

    name: str
    description: str
    punishment: bool
    """Is there a punishment phase (does punishing lower karma)?"""
    default_population: str
    """The population spec the CLI uses when none is given (see ``envs.commons.populations``)."""
    coalition_root: str | None = None
    """The provenance root shared by the malicious coalition (``None``: every agent is its own root)."""


_SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            name="fishery",
            place="lake",
            role="fisherman",
            unit="tons of fish",
            pool_text="The lake holds {amount} tons of fish (capacity {capacity}).",
            before_harvest_text="Before everyone fishes, there are {amount} tons of fish in the lake.",
            harvest_text="catch {amount} tons of fish",
            report_text="{agent} caught {amount} tons of fish.",
            caught_text="{agent} wanted to catch {wanted} tons of fish, and caught {caught} tons.",
            universalization_text=(
                "Given the current situation, if everyone fishes more than {threshold} tons, the lake population "
                "will shrink next month."
            ),
        ),
        Scenario(
            name="pasture",
            place="pasture",
            role="shepherd",
            unit="hectares of grass",
            pool_text="The pasture has {amount} hectares of grass (capacity {capacity}).",
            before_harvest_text=(
                "Before the shepherds take their flocks of sheep to the pasture, there are {amount} hectares of grass "
                "available."
            ),
            harvest_text="graze {amount} flocks of sheep, consuming {amount} hectares of grass",
            report_text="{agent}'s sheep grazed {amount} hectares of grass.",
            caught_text="{agent} took {caught} flocks of sheep to the pasture, thus consuming {caught} hectares of grass.",
            universalization_text=(
                "Given the current situation, if each shepherd take more than {threshold} flocks of sheep to the "
                "pasture, consuming {threshold} hectares of grass, the available grass in the pasture will decrease "
                "next month"
            ),
        ),
        Scenario(
            name="pollution",
            place="river",
            role="factory owner",
            unit="% of unpolluted water",
            pool_text="The river is {amount}% unpolluted (at most {capacity}%).",
            before_harvest_text="Before the factory owners start production for the month, the river is {amount}% unpolluted.",
            harvest_text="produce {amount} widgets, consuming {amount}% of unpolluted water",
            report_text="{agent} produced {amount} widgets, consuming {amount}% of unpolluted water.",
            caught_text="{agent} produced {caught} widgets, thus consuming {caught}% of unpolluted water in the river.",
            universalization_text=(
                "Given the current situation, if each factory owner produces more than {threshold} widgets, consuming "
                "{threshold}% of unpolluted water, the unpolluted water in the river will decrease next month."
            ),
        ),
        Scenario(
            name="groundwater",
            place="aquifer",
            role="farmer",
            unit="megalitres of groundwater",
            pool_text="The aquifer stores {amount} megalitres of groundwater (capacity {capacity}).",
            before_harvest_text="Before every farm pumps, the aquifer stores {amount} megalitres of groundwater.",
            harvest_text="pump {amount} megalitres of groundwater for irrigation",
            report_text="{agent} pumped {amount} megalitres.",
            caught_text="{agent} wanted to pump {wanted} megalitres, and pumped {caught} megalitres.",
            universalization_text=(
                "Given the current situation, if every farm pumps more than {threshold} megalitres, the aquifer "
                "will hold less next season."
            ),
        ),
    )
}

_ARENAS: dict[str, Arena] = {
    a.name: a
    for a in (
        Arena(
            name="A",
            description="peer punishment on: each agent may punish others, lowering their karma",
            punishment=True,
            default_population="coop:3,greedy:1,noisy:1",
        ),
        Arena(
            name="B",
            description="no immediate punishment: no punishment phase, karma never changes",
            punishment=False,
            default_population="coop:3,greedy:1,noisy:1",
        ),
        Arena(
            name="malicious",
            description="arena A where a colluding majority punishes a target's sustainable harvest",
            punishment=True,
            default_population="coop:2,malicious:3",
            coalition_root="coalition_0",
        ),
    )
}

SCENARIOS: Mapping[str, Scenario] = MappingProxyType(_SCENARIOS)
ARENAS: Mapping[str, Arena] = MappingProxyType(_ARENAS)


class UnknownScenarioError(CommonsConfigError):
    """A scenario or arena name that is not in the registry."""


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise UnknownScenarioError(
            f"unknown scenario {name!r}; allowed: {', '.join(sorted(SCENARIOS))}"
        ) from None


def get_arena(name: str) -> Arena:
    try:
        return ARENAS[name]
    except KeyError:
        raise UnknownScenarioError(f"unknown arena {name!r}; allowed: {', '.join(ARENAS)}") from None
