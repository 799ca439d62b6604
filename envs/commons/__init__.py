"""Tier-2 world: a GovSim-style commons arena with peer punishment and karma (SPEC §7 tier 2, §9).

``from scars.envs.commons import commons_v0; env = commons_v0.parallel_env(scenario="fishery", arena="A")``.
"""

from scars.envs.commons import commons_v0

__all__ = ["commons_v0"]
