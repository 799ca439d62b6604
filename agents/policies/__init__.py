"""Policy backends behind one interface: the embedded simulated LM (default), HuggingFace, OpenAI-compatible."""

from agents.policies.base import ContextItem, Policy, PolicyInput, build_prompt, render_window, sample_action
from agents.policies.embedded import SimulatedLM, SimulatedLMConfig

__all__ = [
    "ContextItem",
    "Policy",
    "PolicyInput",
    "SimulatedLM",
    "SimulatedLMConfig",
    "build_prompt",
    "render_window",
    "sample_action",
]
