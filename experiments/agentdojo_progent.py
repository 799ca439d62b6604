"""A Progent-style static privilege policy on AgentDojo (issue 42, item 3; docs/runtime.md, "On AgentDojo").

Progent (Shi et al., 2025) puts a developer-written privilege policy in front of an agent's tool calls: per tool,
allow or forbid, with conditions on the arguments, written from the task domain. Here the policy of each AgentDojo
suite is a rule file of the patch DSL (``agentdojo_policies/<suite>.dsl``), hand-written — never learned — and given
to the gate as its read-only core schema H: a call is allowed exactly when no rule fires. The files were written
*blind*: from the suites' tools, user tasks and the user's own data, without opening the injection tasks (the
protocol, and the commit that fixed the rules before anything was measured, are in docs/runtime.md).

**What the DSL could not say, and what this module adds.** A list argument (an email's recipients, an event's
participants) reaches the gate as its elements joined by ``", "`` (the adapter's context mapping), and the DSL has no
"every element of" predicate. :class:`ElementwiseGate` decides such a call once per element: view k gives every list
argument its k-th element (its last one when it is shorter; absent when empty), so each element of each list is seen
by the rules on its own, and the call is allowed only when every view is. A rule on a list parameter therefore reads
one element, and no rule should relate two list parameters (their elements are paired by position only). Everything
else is the DSL as it is: an allow-list is a conjunction of ``!=`` (there is no negated set membership), and
``action.p == action.p`` (true only when the argument is given) keeps an optional argument that was left out from
counting as a value outside the list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scars.agents.runtime import open_gate
from scars.agents.runtime.adapters.agentdojo import AgentDojoGate, _list_params
from scars.agents.runtime.gate import GateDecision
from scars.envs.api import read_rules
from scars.synthesis.dsl import Rule
from scars.synthesis.errors import ConfigError

POLICY_DIR = Path(__file__).with_name("agentdojo_policies")
"""The rule files, one per suite (``banking.dsl``, ``slack.dsl``, ``travel.dsl``, ``workspace.dsl``)."""
POLICY_SUITES: tuple[str, ...] = ("banking", "slack", "travel", "workspace")


def policy_file(suite: str) -> Path:
    """The rule file of ``suite``, or ``ConfigError`` naming the suites that have one."""
    if suite not in POLICY_SUITES:
        raise ConfigError(
            f"no Progent-style policy for the suite {suite!r}; expected one of {', '.join(POLICY_SUITES)}"
        )
    return POLICY_DIR / f"{suite}.dsl"


def policy_rules(suite: str) -> tuple[Rule, ...]:
    """The policy of ``suite`` as DSL rules (``read_rules``: a line that does not parse names the file and line)."""
    return read_rules(policy_file(suite))


def element_views(kwargs: Mapping[str, Any], lists: frozenset[str]) -> list[dict[str, Any]]:
    """The calls :class:`ElementwiseGate` decides for one call (module docstring): one per position of the longest
    list argument, each list argument cut to one element (its last when shorter; ``None`` when empty or absent)."""
    present = {k: list(v) for k, v in kwargs.items() if k in lists and isinstance(v, list | tuple)}
    views = []
    for k in range(max((len(v) for v in present.values()), default=1) or 1):
        view = dict(kwargs)
        for key, values in present.items():
            view[key] = [values[min(k, len(values) - 1)]] if values else None
        views.append(view)
    return views


class ElementwiseGate(AgentDojoGate):
    """An :class:`AgentDojoGate` that decides a call with list arguments element by element (module docstring)."""

    def __init__(self, gate: Any, suite: Any) -> None:
        super().__init__(gate, suite)
        self.lists = {f.name: _list_params(f) for f in suite.tools}

    def decide(self, function: str, kwargs: Mapping[str, Any], context: Mapping[str, Any]) -> GateDecision:
        decision = None
        for view in element_views(kwargs, self.lists.get(function, frozenset())):
            decision = super().decide(function, view, context)
            if not decision.allowed:
                return decision
        assert decision is not None  # element_views returns at least one view
        return decision


def open_policy_gate(suite: Any, ledger: str | Path) -> ElementwiseGate:
    """The policy of ``suite`` (an AgentDojo ``TaskSuite``) behind a gate whose ledger is ``ledger``: the rules are its
    core schema H; nothing is ever reported to it, so it learns nothing (a static policy)."""
    gate = open_gate(ledger, core=policy_rules(suite.name), name=f"agentdojo-progent:{suite.name}")
    return ElementwiseGate(gate, suite)


__all__: Sequence[str] = (
    "POLICY_DIR",
    "POLICY_SUITES",
    "ElementwiseGate",
    "element_views",
    "open_policy_gate",
    "policy_file",
    "policy_rules",
)
