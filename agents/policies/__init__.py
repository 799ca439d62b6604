"""Policy backends behind one interface: the embedded simulated LM (default), HuggingFace, OpenAI-compatible.

Each registers a factory in ``agents.registry.BACKENDS``; a factory reads the run's settings by name.
"""

from collections.abc import Mapping
from typing import Any

from scars.agents.policies.base import (
    POLICY_MODES,
    CommandWriter,
    ContextItem,
    Generation,
    Policy,
    PolicyInput,
    Replanner,
    build_prompt,
    generation_logits,
    render_window,
    sample_action,
)
from scars.agents.policies.embedded import SimulatedLM, SimulatedLMConfig
from scars.agents.registry import register_backend


@register_backend("embedded")
def make_embedded(settings: Mapping[str, Any]) -> SimulatedLM:
    return SimulatedLM(
        SimulatedLMConfig(
            compliance=settings.get("compliance", 1.0),
            temperature=settings.get("temperature", 0.7),
            influence_gain=settings.get("influence_gain", 12.0),
            replan_competence=settings.get("replan_competence", 1.0),
        )
    )


@register_backend("hf")
def make_hf(settings: Mapping[str, Any]) -> Policy:
    from scars.agents.policies.hf import HFPolicy

    return HFPolicy.from_pretrained(
        settings["model_path"], device=settings.get("device", "cpu"), dtype=settings.get("dtype", "auto")
    )


@register_backend("openai")
def make_openai(settings: Mapping[str, Any]) -> Policy:
    from scars.agents.policies.openai_server import OpenAICompatiblePolicy

    return OpenAICompatiblePolicy(
        settings["server_url"],
        settings["server_model"],
        policy_mode=settings.get("policy_mode", "score"),
        api_key=settings.get("api_key", ""),
        choice_param=settings.get("choice_param", "auto"),
        timeout=float(settings.get("server_timeout", 60.0)),
    )


__all__ = [
    "POLICY_MODES",
    "CommandWriter",
    "ContextItem",
    "Generation",
    "generation_logits",
    "Policy",
    "PolicyInput",
    "Replanner",
    "SimulatedLM",
    "SimulatedLMConfig",
    "build_prompt",
    "render_window",
    "sample_action",
]
