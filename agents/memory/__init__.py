"""Memory mechanisms: the five text baselines of paper §6.1 (the scars agent lives in ``agents.scars_agent``)."""

from agents.memory.base import Governed, MemoryMechanism, StepOutcome, Violation
from agents.memory.rag import RAGMemory
from agents.memory.reflexion import Reflexion
from agents.memory.scg_mem import SCGMemory
from agents.memory.static_persona import StaticPersona
from agents.memory.voyager import SkillLibrary

BASELINES = {
    "static_persona": StaticPersona,
    "rag": RAGMemory,
    "reflexion": Reflexion,
    "scg_mem": SCGMemory,
    "voyager": SkillLibrary,
}

__all__ = [
    "BASELINES",
    "Governed",
    "MemoryMechanism",
    "RAGMemory",
    "Reflexion",
    "SCGMemory",
    "SkillLibrary",
    "StaticPersona",
    "StepOutcome",
    "Violation",
]
