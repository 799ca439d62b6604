"""What the scars agent has recorded of its run: its recorded steps, its verified failures, the values it has met.

Fragment extraction, D_t and narrowing's presumptions all read this record: the recorded steps (a window of the
newest ``history`` steps; older ones survive only as ledger evidence), every verified failure of the run (the merge
keeps them covered; each is replaced by its fragment once attributed, ``owe``), and the values met per context
variable and action argument (the realistic what-if values of extraction, ``alternatives``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Sequence
from typing import Any

from scars.synthesis import RecordedStep
from scars.synthesis.dsl import Action
from scars.synthesis.failure import Failure
from scars.synthesis.fragments import Experience


class RunRecord:
    """The recorded steps (``history``: how many are kept), verified failures and met values of one scars agent
    (``bookkeeping``: the world's bookkeeping variables, whose values are not what-if values)."""

    def __init__(self, *, history: int, bookkeeping: Collection[str]) -> None:
        self.history: deque[RecordedStep] = deque(maxlen=history)
        self.failures: list[Failure] = []  # every verified failure of the run (the merge keeps them covered)
        self.bookkeeping = bookkeeping
        self._met: dict[str, dict] = {}  # values met per context variable / action argument (what-if values)
        # admissible actions, and tuples of them, whose arguments are met already, by identity (a world hands out one
        # object per action, often in a new tuple per decision; the entry keeps it alive)
        self._met_actions: dict[int, Action | tuple[Action, ...]] = {}
        self._met_keep = 4 * history  # kept alive about as long as the history keeps their steps
        self._met_last: dict[str, Any] = {}  # per context variable, the value object noted last (``_meet``)

    # ---------------------------------------------------------------------------------- recording
    def record(self, step: RecordedStep) -> None:
        """An executed step: recorded, and its values met."""
        self.history.append(step)
        self._meet(step)

    def _meet(self, record: RecordedStep) -> None:
        met, last = self._met, self._met_last
        bookkeeping = self.bookkeeping
        for k, v in record.context.items():
            # the very string or bool noted last for this variable: noting it again changes nothing
            if last.get(k) is v or k in bookkeeping:
                continue
            _note_met(met, k, v)
            if v.__class__ is str or v.__class__ is bool:
                last[k] = v
        known = self._met_actions
        if len(known) >= self._met_keep:
            known.clear()
        actions = record.actions
        if known.get(id(actions)) is actions:
            return  # this very tuple's actions are met already (a learner's view hands one out per admissible set)
        known[id(actions)] = actions
        for a in actions:
            if known.get(id(a)) is a:
                continue  # every value of this very action is met already (a value met again keeps its place)
            known[id(a)] = a
            for k, v in a.args:
                _note_met(met, k, v)

    def owe(self, fragment: Failure) -> None:
        """The merge owes coverage of the failure as attributed (the fragment a scar's evidence carries and Prop. 1
        replays), not of the whole context it was observed in: a scar firing on that context through a variable
        the attribution ruled out would let the merge retire the scar that does cover the fragment."""
        for i in range(len(self.failures) - 1, -1, -1):
            if self.failures[i].id == fragment.id and self.failures[i].action == fragment.action:
                self.failures[i] = fragment
                return

    # ---------------------------------------------------------------------------------- reading
    def recorded(self, failure: Failure) -> RecordedStep | None:
        """The recorded step of a failure (None once it left the history window)."""
        at = (failure.source.episode, failure.source.step)
        return next((s for s in reversed(self.history) if s.violated and s.step_id == at), None)

    def newest(self, theta: str) -> Failure | None:
        """The newest verified failure of a told rule."""
        return next((f for f in reversed(self.failures) if f.theta == theta), None)

    def first_at(self, theta: str) -> tuple[int, int] | None:
        """(episode, step) of the first verified failure of a told rule."""
        for f in self.failures:
            if f.theta == theta:
                return (f.source.episode, f.source.step)
        return None

    def recorded_failures(self, theta: str) -> list[tuple]:
        """The told rule's failures still recorded, as (context, executed action)."""
        own = {(f.source.episode, f.source.step) for f in self.failures if f.theta == theta}
        return [(s.context, s.chosen_action) for s in self.history if s.violated and s.step_id in own]

    def alternatives(self, per_key: int = 24) -> dict[str, list]:
        """Values the agent has itself met for each context variable and action argument (its recorded steps,
        gathered as they are recorded): realistic what-if values for fragment extraction (e.g. empty hands)."""
        return {k: list(values.values())[-per_key:] for k, values in self._met.items()}

    def experience(self, failure: Failure, since: tuple[int, int]) -> Experience:
        """What the agent executed and met, for attribution from experience (``synthesis.fragments.Experience``):
        the failures of the same told rule, the admissible control actions of its recorded steps, and its executed
        successes of the failed action's kind, strong from ``since`` on (the rule's first verified failure)."""
        failures = tuple((f.q, f.action) for f in self.failures if f.theta == failure.theta)
        key = (failure.action.kind, failure.action.name)
        met: dict[tuple, Action] = {}
        successes = []
        for s in self.history:
            for a in s.actions:
                if a.is_control:
                    met.setdefault((a.kind, a.name, a.args), a)
            a = s.chosen_action
            if not s.violated and (a.kind, a.name) == key:
                successes.append((s.context, a, s.step_id >= since))
        varied = frozenset(k for k, values in self._met.items() if len(values) >= 2)
        return Experience(failures, tuple(met.values()), varied, tuple(successes), since)

    def steps_for(self, fragment: Failure) -> Sequence[RecordedStep]:
        """The recorded steps a synthesis from experience learns from: one synthesis answers for one told rule, so
        the failures of other rules (of the same kind of action) are theirs to cover and are left out of its D⁻ —
        unless that leaves the rule no failure of its own (a punished step is recorded at the punishment's step:
        the whole history then stands, the failure being the punished action's)."""
        own = {(f.source.episode, f.source.step) for f in self.failures if f.theta == fragment.theta}
        other = {(f.source.episode, f.source.step) for f in self.failures if f.theta != fragment.theta}
        mine = [s for s in self.history if not (s.violated and s.step_id in other and s.step_id not in own)]
        keys = {(a.kind, a.name) for a in fragment.F}
        if any(s.violated and (s.chosen_action.kind, s.chosen_action.name) in keys for s in mine):
            return mine
        return self.history


def _note_met(met: dict[str, dict], name: str, value: Any) -> None:
    """``value`` met for ``name``, in first-met order; values of different types are different values (1, 1.0 and
    True), so a value is filed under (its type's name, itself) — a string under itself, the common case, which needs
    no new key and is not re-filed when met again (the same string)."""
    seen = met.get(name)
    if seen is None:
        seen = met[name] = {}
    if value.__class__ is str:
        if value not in seen:
            seen[value] = value
    else:  # the newest of equal values is kept (as 0.0 and -0.0 are equal)
        seen[(type(value).__name__, value)] = value
