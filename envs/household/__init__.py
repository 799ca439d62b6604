"""The native tier-1 household world (ALFWorld semantics) with dynamic safety rules (SPEC §7 tier 1, §9)."""

from gymnasium.envs.registration import register, registry

from scars.envs.household.expert import NoCompliantPlan, expert_next_command, expert_plan, plan_trace
from scars.envs.household.generator import generate_game, is_compliantly_solvable
from scars.envs.household.rules import (
    GENERALISATION_SPLITS,
    RULE_LIBRARY,
    Activation,
    RuleSchedule,
    SafetyRule,
    Verifier,
    Violation,
    library_rule,
    rules_for_task,
)
from scars.envs.household.spec import (
    CAN_CONTAIN,
    OBJECT_CLASSES,
    TASK_TYPES,
    GameSpec,
    ObjectSpec,
    ReceptacleSpec,
    TaskSpec,
)
from scars.envs.household.world import World

__all__ = [
    "CAN_CONTAIN",
    "GENERALISATION_SPLITS",
    "OBJECT_CLASSES",
    "RULE_LIBRARY",
    "TASK_TYPES",
    "Activation",
    "GameSpec",
    "NoCompliantPlan",
    "ObjectSpec",
    "ReceptacleSpec",
    "RuleSchedule",
    "SafetyRule",
    "TaskSpec",
    "Verifier",
    "Violation",
    "World",
    "expert_next_command",
    "expert_plan",
    "generate_game",
    "is_compliantly_solvable",
    "plan_trace",
    "library_rule",
    "rules_for_task",
]

# importing this package is what makes ``gym.make("scars/Household-v0")`` work (once per process)
if "scars/Household-v0" not in registry:
    register(id="scars/Household-v0", entry_point="scars.envs.household.env:HouseholdEnv")
