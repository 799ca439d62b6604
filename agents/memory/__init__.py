"""Memory mechanisms: the text baselines — the five of paper §6.1, the rulebook (AutoManual-style) and the insight
list (ExpeL-style) — (the scars agent lives in ``agents.scars_agent``).

Each registers a factory in ``agents.registry.METHODS`` under its name.
"""

from scars.agents.memory.base import MemoryMechanism
from scars.agents.memory.insight import InsightList
from scars.agents.memory.rag import RAGMemory
from scars.agents.memory.reflexion import Reflexion
from scars.agents.memory.rulebook import Rulebook
from scars.agents.memory.scg_mem import SCGMemory
from scars.agents.memory.static_persona import StaticPersona
from scars.agents.memory.voyager import SkillLibrary
from scars.agents.registry import MethodSpec, register_method


def _embedder(spec: MethodSpec):
    from scars.agents.text import make_embedder

    return make_embedder(spec.settings.get("embedder", "hashing"))


@register_method("static_persona")
def make_static_persona(spec: MethodSpec) -> StaticPersona:
    return StaticPersona(spec.world.card)


@register_method("rag")
def make_rag(spec: MethodSpec) -> RAGMemory:
    return RAGMemory(spec.world.card, embedder=_embedder(spec))


@register_method("reflexion")
def make_reflexion(spec: MethodSpec) -> Reflexion:
    """With a real model the model writes the reflections, as in the paper; the embedded backend uses a template."""
    if spec.policy.writes_text:
        from scars.agents.rule_writer import llm_reflection

        return Reflexion(spec.world.card, reflect=llm_reflection(spec.policy.write_text, spec.world.card))
    return Reflexion(spec.world.card)


@register_method("scg_mem")
def make_scg_mem(spec: MethodSpec) -> SCGMemory:
    return SCGMemory(spec.world.card)


@register_method("voyager")
def make_voyager(spec: MethodSpec) -> SkillLibrary:
    return SkillLibrary(spec.world.card, embedder=_embedder(spec))


@register_method("rulebook")
def make_rulebook(spec: MethodSpec) -> Rulebook:
    """With a real model the model writes each rule (and its rewrite on a merge); the embedded backend a template."""
    if spec.policy.writes_text:
        from scars.agents.rule_writer import llm_rulebook

        return Rulebook(spec.world.card, write=llm_rulebook(spec.policy.write_text, spec.world.card))
    return Rulebook(spec.world.card)


@register_method("insight")
def make_insight(spec: MethodSpec) -> InsightList:
    """With a real model the model answers each event with ExpeL's operations; the embedded backend a template."""
    if spec.policy.writes_text:
        from scars.agents.rule_writer import llm_insight_editor

        return InsightList(
            spec.world.card, editor=llm_insight_editor(spec.policy.write_text, spec.world.card)
        )
    return InsightList(spec.world.card)


__all__ = [
    "InsightList",
    "MemoryMechanism",
    "RAGMemory",
    "Reflexion",
    "Rulebook",
    "SCGMemory",
    "SkillLibrary",
    "StaticPersona",
]
