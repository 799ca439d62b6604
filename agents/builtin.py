"""Import this module to register every built-in memory method and policy backend (``agents.registry``)."""

import scars.agents.memory  # noqa: F401  (the five text baselines)
import scars.agents.policies  # noqa: F401  (embedded, hf, openai)
import scars.agents.scars_agent  # noqa: F401  (scars)
