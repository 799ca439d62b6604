"""Arena C of tier 3: farms pumping a shared aquifer (SPEC §7 tier 3) — unrelated to arenas A/B on the surface.

``from scars.envs.aquifer import aquifer_v0; env = aquifer_v0.parallel_env()``; ``envs.aquifer.adapter.AquiferAdapter`` is
its ``envs.api.WorldAdapter``.
"""

from scars.envs.aquifer import aquifer_v0

__all__ = ["aquifer_v0"]
