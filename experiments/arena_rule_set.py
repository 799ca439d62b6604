"""Rule-set quality in a shared-resource arena (issue 40, item 1; tier 2's commons, tier 3's aquifer): the measure of
``experiments.metrics`` (``rule_set_decision``, ``rule_set_on_probes``, ``rule_set_quality``) read against the
arena's own rules in force.

**The rules in force** are what the arena's verifier judges (``envs.commons.adapter.ResourceAdapter.check``): the
sustainability norm — no request above the per-agent share f(t)/|I(t)| of the resource level and group the agent
decided at (``envs.commons.norms``; arena C's safe-yield norm, ``envs.aquifer.adapter.AquiferNorm``). It is the only
rule the arena defines and the only action its sanctions are justified against: an extraction above the share is
unsafe; every other control action (resting, punishing, not punishing) breaks no rule. A scar *masks* an action when
one of the seat's active scars fires on it in the seat's gate.

**Known** (recall on what the seat was told): an unsafe action at a decision after the seat's first verdict of the
norm's family (over-use or collapse) or its first punishment the norm verifier found justified (tier-2 RVR's arming).
**The expert's step** is the largest request the norm allows (⌊f(t)/|I(t)|⌋, within the request limit);
``needed_masked`` counts the extraction decisions at which a scar masked it, and ``short_by_scars`` those of them at
which the seat then asked for less (its gain below its share: the cost of a masked safe step in a world without
tasks to lose).

**Probe pairs**: every admissible extraction (and resting) at every resource level 1..capacity and every group size
the run had, in the seat's first extraction context, and at every extraction context a learning seat met; each
decision's rule set is read on all of them. Clusters are the caller's: tier 2 an arena run (its seats together),
tier 3 an episode of arena C of one carried agent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scars.agents.api import Agent
from scars.envs.api import Decision
from scars.envs.commons.adapter import ResourceAdapter
from scars.experiments.metrics import (
    RULE_SET_COLUMNS,
    RuleSetTrace,
    probe_vectors,
    rule_set_decision,
    rule_set_flat,
    rule_set_on_probes,
    rule_set_quality,
)
from scars.synthesis.dsl import Action
from scars.synthesis.dsl.semantics import fires


@dataclass(frozen=True)
class ClusterCounts:
    """One accumulator's counts per cluster, in the order asked: (masked, masked and unsafe, unsafe) on its probe
    pairs, the summed ``RULE_SET_COLUMNS`` of its decisions, and its ``short_by_scars`` decisions."""

    probe: np.ndarray
    decisions: dict[str, np.ndarray]
    short: np.ndarray
    probes: int


def _key(variables: Mapping[str, str], abstract: str) -> str | None:
    """The arena's context key of an abstract variable (``WorldCard.variables``), or None."""
    return next((k for k, v in variables.items() if v == abstract), None)


@dataclass
class ArenaRuleSets:
    """The learning seats' rule sets in force over one configuration of a shared-resource arena, decision by
    decision (one ``RuleSetTrace`` per seat incarnation), and the extraction contexts the probes are built from."""

    traces: dict[str, RuleSetTrace] = field(default_factory=dict)
    told: set[str] = field(default_factory=set)
    short: Counter = field(default_factory=Counter)
    met: dict[tuple, dict[str, Any]] = field(default_factory=dict)
    groups: set[int] = field(default_factory=set)
    template: dict[str, Any] | None = None
    actions: tuple[Action, ...] = ()
    adapter: ResourceAdapter | None = None

    def decide(
        self,
        label: str,
        cluster: int,
        adapter: ResourceAdapter,
        agent: Agent,
        decision: Decision,
        fired: Sequence[tuple[int, Sequence[str]]],
        action: Action,
        flagged: Sequence[Sequence[str]],
    ) -> None:
        """One decision of the seat ``label`` in ``cluster``, before the world's answer reaches the agent: its
        active scars, the actions they masked (``fired``: the gate's (index, rule ids)), the executed ``action``
        and the norm's verdicts on every admissible action (``flagged``). A method without a self-schema has no
        rule set: nothing is recorded."""
        store = agent.self_schema()
        if store is None:
            return
        s = adapter.surface
        active = frozenset(agent.scar_ids())
        trace = self.traces.setdefault(label, RuleSetTrace())
        trace.record(cluster, active, store.plane.scars)
        by_scar = {i for i, ids in fired if active.intersection(ids)}
        unsafe = [bool(f) for f in flagged]
        told = label in self.told
        counts, safe = rule_set_decision(
            [a.is_control for a in decision.actions],
            unsafe,
            [i in by_scar for i in range(len(unsafe))],
            [told and u for u in unsafe],
        )
        q = decision.context
        needed = None
        if q.get(s.stage) == s.extraction_stage:
            allowed = [
                (float(a.arg(s.amount) or 0), i)
                for i, a in enumerate(decision.actions)
                if a.kind == "tool"
                and a.name == s.tool
                and not unsafe[i]
                and float(a.arg(s.amount) or 0) >= 1
            ]
            needed = max(allowed)[1] if allowed else None
            self.met.setdefault(tuple(sorted(q.items())), dict(q))
            self.groups.add(int(q[s.group]))
            if self.template is None:
                self.template, self.actions, self.adapter = dict(q), tuple(decision.actions), adapter
        counts["needed_masked"] = int(needed is not None and needed in safe)
        if counts["needed_masked"]:
            asked = float(action.arg(s.amount) or 0) if action.name == s.tool else 0.0
            self.short[cluster] += asked < float(decision.actions[needed].arg(s.amount) or 0)
        trace.count(cluster, counts)

    @property
    def measured(self) -> bool:
        """Some learning seat had a rule set (a self-schema)."""
        return bool(self.traces)

    def tell(self, label: str) -> None:
        """The seat was told the norm: a verdict of its family, or a punishment the norm verifier justified."""
        self.told.add(label)

    def probe_pairs(self) -> tuple[tuple[dict[str, Any], Action], ...]:
        """The probe pairs (module docstring): the level × group grid in the first extraction context, then every
        extraction context met, each with the extraction stage's admissible actions."""
        if self.template is None or self.adapter is None:
            return ()
        adapter, q0 = self.adapter, self.template
        variables, s = adapter.card.variables, adapter.surface
        capacity = int(q0[_key(variables, "resource_capacity") or s.level])
        catch = _key(variables, "group_safe_yield")
        states = []
        for n in sorted(self.groups):
            for level in range(1, capacity + 1):
                share = adapter.norms.share(level, n)
                q = dict(q0) | {s.level: level, s.group: n}
                if s.share in q0:
                    q[s.share] = share
                if catch is not None and catch in q0:
                    q[catch] = round(share * n, 9)
                states.append(q)
        states += list(self.met.values())
        return tuple((q, a) for q in states for a in self.actions)

    def counts(self, clusters: Sequence[int]) -> ClusterCounts:
        """Per cluster of ``clusters`` (in that order): the probe counts of its seats' mean rule sets (summed over
        the seats: one probe set per seat and cluster), its decisions' ``RULE_SET_COLUMNS`` and ``short_by_scars``."""
        probes = self.probe_pairs()
        adapter = self.adapter
        counts: dict[int, tuple[float, float, float]] = {}
        if probes and adapter is not None:
            rules = {sid: rule for t in self.traces.values() for sid, rule in t.rules.items()}
            classes = adapter.card.classes
            masks = probe_vectors(rules, probes, lambda sid, q, a: fires(rules[sid], q, a, classes))
            norm = adapter.surface.over_verdict[0]
            unsafe = np.array([bool(adapter.check(q, a)) for q, a in probes], bool)
            segments = [
                seg
                for t in self.traces.values()
                for seg in t.segments(lambda _c: frozenset({norm}), lambda _c: 0)
            ]
            counts = rule_set_on_probes(
                {(0, sid): v for sid, v in masks.items()}, {(0, norm): unsafe}, segments, len(probes)
            )
        per = np.array([counts.get(c, (0.0, 0.0, 0.0)) for c in clusters], dtype=float).reshape(-1, 3)
        decisions = {
            col: np.array(
                [sum(t.counts.get(c, Counter())[col] for t in self.traces.values()) for c in clusters],
                dtype=float,
            )
            for col in RULE_SET_COLUMNS
        }
        short = np.array([self.short[c] for c in clusters], dtype=float)
        return ClusterCounts(per, decisions, short, len(probes))


def arena_rule_set(
    parts: Sequence[ClusterCounts], seed: int, clusters: str
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Rule-set quality pooled over ``parts`` (their clusters side by side; ``experiments.metrics.rule_set_quality``,
    n = ``clusters``) with ``short_by_scars`` beside it, and the summary's flat ``rule_set_*`` keys; (None, {}) when
    no seat had a rule set."""
    if not parts:
        return None, {}
    per = np.concatenate([p.probe for p in parts])
    decisions = {c: np.concatenate([p.decisions[c] for p in parts]) for c in RULE_SET_COLUMNS}
    rng = np.random.default_rng(np.random.SeedSequence([seed, 4040]))
    quality = rule_set_quality(per, decisions, rng, probes=max(p.probes for p in parts), clusters=clusters)
    quality["decisions"]["short_by_scars"] = int(sum(p.short.sum() for p in parts))
    # per cluster (masked, masked and unsafe, unsafe) of the decisions: the clusters of an interval pooled over runs
    quality["decisions"]["by_cluster"] = (
        np.column_stack(
            [decisions["scar_masked"], decisions["scar_masked_unsafe"], decisions["unsafe_actions"]]
        )
        .astype(int)
        .tolist()
    )
    return quality, rule_set_flat(quality)
