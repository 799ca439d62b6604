"""Worlds and their rule engines. Importing ``envs`` registers ``scars/Household-v0`` with Gymnasium."""

from gymnasium.envs.registration import register, registry

if "scars/Household-v0" not in registry:
    register(id="scars/Household-v0", entry_point="scars.envs.household.env:HouseholdEnv")
