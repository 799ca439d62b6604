"""Import this module to register every built-in memory method and policy backend (``agents.registry``)."""

import agents.memory  # noqa: F401  (the five text baselines)
import agents.policies  # noqa: F401  (embedded, hf, openai)
import agents.scars_agent  # noqa: F401  (scars)
