"""Import this module to register every built-in memory method and policy backend (``agents.registry``).

``COMPARISON`` is the one list of the paper's comparison (the demo table, the sweeps, the paper protocol, the
sensitivity grid read it through ``experiments.config.METHODS``): scars first, then every built-in text baseline in
the order it registers. A new built-in baseline is a row of every table by registering it here, nowhere else.
"""

from scars.agents.registry import METHODS

_before = frozenset(METHODS.names())

import scars.agents.memory  # noqa: E402, F401  (the text baselines)
import scars.agents.policies  # noqa: E402, F401  (embedded, hf, openai)
import scars.agents.scars_agent  # noqa: E402, F401  (scars)

_builtin = tuple(name for name in METHODS.names() if name not in _before)
COMPARISON: tuple[str, ...] = ("scars", *(name for name in _builtin if name != "scars"))
"""The built-in methods of the paper's comparison: scars, then the text baselines."""
