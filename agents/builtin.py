"""Import this module to register every built-in memory method and policy backend (``agents.registry``).

``COMPARISON`` is the one list of the paper's comparison (the demo table, the sweeps, the paper protocol, the
sensitivity grid read it through ``experiments.config.METHODS``): scars first, then every built-in text baseline in
the order it registers. A new built-in baseline is a row of every table by registering it here, nowhere else.
"""

import scars.agents.memory  # noqa: F401  (the text baselines)
import scars.agents.policies  # noqa: F401  (embedded, hf, openai)
import scars.agents.scars_agent  # noqa: F401  (scars)
from scars.agents.registry import METHODS

# built in = registered by this package's own modules (whatever imported them first; a user's method registers from
# its own module and is not a row of the paper's comparison)
_builtin = tuple(name for name in METHODS.names() if METHODS.get(name).__module__.startswith("scars.agents."))
COMPARISON: tuple[str, ...] = ("scars", *(name for name in _builtin if name != "scars"))
"""The built-in methods of the paper's comparison: scars, then the text baselines."""
