"""Worlds and their rule engines: ``api`` (the world interface every agent sees) and the worlds ``household``
(tier 1), ``commons`` (tier 2) and ``aquifer`` (tier 3's arena C).

Importing ``scars.envs`` loads no simulator (the public scars-runtime library reads ``scars.envs.api`` only);
importing ``scars.envs.household`` registers ``scars/Household-v0`` with Gymnasium, as ``import minigrid`` registers
MiniGrid's — ``gym.make("scars.envs.household:scars/Household-v0")`` does both in one call.
"""
