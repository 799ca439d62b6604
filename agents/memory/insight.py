"""Insight-list baseline (ExpeL-style; Zhao et al. 2024): insights extracted from failures and successes, edited
by ADD / EDIT / UPVOTE / DOWNVOTE, the most important ones in context.

Each insight carries an importance count: ADD starts it at ``START_IMPORTANCE`` (2, as in ExpeL), UPVOTE adds 1,
DOWNVOTE takes 1 away, and an insight whose importance reaches 0 is removed; EDIT rewrites its text and counts as an
upvote. At each decision the ``k`` most important insights (ties: the newest first) enter the context (kind
``insight``). The edits are decided at two kinds of event, both from the ``Feedback`` every method reads:

- **a verified failure** (the verifier's verdicts on the executed action): per verdict, an insight about that cause
  is added, or, when one exists, upvoted (the same failure again) or edited to name the new failing command too;
- **a won episode with no violation** (a success): insights the success confirms are upvoted (the command they warn
  against was admissible and the agent did without it), insights it contradicts are downvoted (the command they warn
  against was executed in the same situation and the verifier passed it — the rule is gone or was misread), and the
  episode's route is added as a success insight for its task type (edited when a later success takes another route).

With the embedded default the decisions and the texts are documented templates (``TemplateEditor``: a failure insight
states the world's sentence as the verifier gave it, then the command that broke it; a success insight lists the
route). With a real model (``policy.writes_text``) the model is shown the numbered insights and the event and
answers with the operations (``agents.rule_writer.llm_insight_editor``), as ExpeL's insight extraction does.

Kept from the paper: insights from both failures and successes, the four operations with importance counts, removal
at zero, the top insights in context at every step. Dropped: ExpeL's trajectory retrieval (a separate memory of
successful trajectories as few-shot examples) and its offline gathering phase with retries; the insights are edited
online, at the events above.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from scars.agents.memory.base import MemoryMechanism
from scars.agents.memory.poisoning import FabricatedExperience, command_of
from scars.agents.memory.rulebook import failure_example
from scars.agents.policies.base import ContextItem
from scars.envs.api import Feedback, WorldCard

START_IMPORTANCE = 2
"""ExpeL's importance of a new insight."""
MAX_ROUTE = 8
"""Commands a template success insight lists."""

OpName = Literal["ADD", "EDIT", "UPVOTE", "DOWNVOTE"]


@dataclass
class Insight:
    """One insight: its text, importance and the evidence the template reasons over.

    key:       what it is about — ``"fail:<rule id>"`` (a verified failure's cause) or ``"win:<task type>"``.
    polarity:  −1 for a warning (from failures), +1 for a success route (what the embedded policy reads).
    commands:  the commands it warns against (a warning) or recommends (a success route).
    situation: the salient context of each warned-against command when it failed (command → situation).
    """

    key: str
    text: str
    polarity: int
    importance: int = START_IMPORTANCE
    commands: list[str] = field(default_factory=list)
    situation: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Op:
    """One edit: ADD (``text``, new insight with ``key``), EDIT (``index``, ``text``), UPVOTE / DOWNVOTE (``index``).
    ``commands`` / ``situation``: the evidence an ADD or EDIT records (the template editor's; a model's ops carry
    none): at a failure the failing command and its situation, at a success the route."""

    name: OpName
    index: int = -1
    text: str = ""
    key: str = ""
    commands: tuple[str, ...] = ()
    situation: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Event:
    """What the insight list is edited at: a verified failure, or a clean success (a won episode).

    failure:  the failure's ``Feedback`` (None for a success).
    task_type, route: the success's task type and its control commands, in order.
    executed: (command, situation) of every control step the success executed without a verdict.
    admissible: every command that was admissible at some decision of the episode.
    """

    failure: Feedback | None = None
    task_type: str = ""
    route: tuple[str, ...] = ()
    executed: frozenset[tuple[str, tuple[tuple[str, str], ...]]] = frozenset()
    admissible: frozenset[str] = frozenset()


class InsightEditor(Protocol):
    """Decides the edits of one event over the current insights (in list order; ``Op.index`` points into it)."""

    def edit(self, insights: Sequence[Insight], event: Event) -> list[Op]: ...


def situation_of(feedback_context, card: WorldCard) -> tuple[tuple[str, str], ...]:
    return tuple((k, str(feedback_context[k])) for k in card.salient_keys if k in feedback_context)


def warning_text(message: str, examples: Sequence[str]) -> str:
    """A failure insight: the world's sentence as the verifier stated it, then the commands that broke it."""
    return f"{message} (I broke it with {', '.join(examples)}.)"


class TemplateEditor:
    """The embedded default's editor (module docstring): the decisions and texts as documented templates."""

    def __init__(self, card: WorldCard) -> None:
        self.card = card

    def edit(self, insights: Sequence[Insight], event: Event) -> list[Op]:
        by_key = {ins.key: i for i, ins in enumerate(insights)}
        ops: list[Op] = []
        if event.failure is not None:
            fb = event.failure
            command = fb.action.text or fb.action.name
            situation = situation_of(fb.decision.context, self.card)
            example = failure_example(fb, self.card)
            for verdict in fb.verdicts:
                key = f"fail:{verdict.rule_id}"
                i = by_key.get(key)
                if i is None:
                    text = warning_text(verdict.message, [example])
                    ops.append(Op("ADD", text=text, key=key, commands=(command,), situation=situation))
                elif command in insights[i].commands:
                    ops.append(Op("UPVOTE", i))
                else:
                    old = [
                        failure_example_text(c, insights[i].situation.get(c, ()))
                        for c in insights[i].commands
                    ]
                    text = warning_text(verdict.message, [*old, example][-3:])
                    ops.append(Op("EDIT", i, text=text, commands=(command,), situation=situation))
            # a success route whose step has just failed is contradicted
            ops += [
                Op("DOWNVOTE", j)
                for j, ins in enumerate(insights)
                if ins.polarity > 0 and command in ins.commands
            ]
            return ops
        for i, ins in enumerate(insights):
            if ins.polarity > 0:
                continue
            contradicted = any((c, ins.situation.get(c, ())) in event.executed for c in ins.commands)
            if contradicted:
                ops.append(Op("DOWNVOTE", i))
            elif any(c in event.admissible for c in ins.commands):
                ops.append(Op("UPVOTE", i))
        route = tuple(event.route[:MAX_ROUTE])
        if route:
            key = f"win:{event.task_type}"
            text = f"'{event.task_type}' tasks succeeded without breaking a rule by: {'; '.join(route)}."
            i = by_key.get(key)
            if i is None:
                ops.append(Op("ADD", text=text, key=key, commands=route))
            elif tuple(insights[i].commands) == route:
                ops.append(Op("UPVOTE", i))
            else:
                ops.append(Op("EDIT", i, text=text, commands=route))
        return ops


def failure_example_text(command: str, situation: tuple[tuple[str, str], ...]) -> str:
    where = situation[0][1] if situation else ""
    return f"'{command}' at {where}" if where else f"'{command}'"


class InsightList(MemoryMechanism):
    name = "insight"

    def __init__(self, card: WorldCard, k: int = 5, editor: InsightEditor | None = None):
        super().__init__(card)
        self.k = k
        self.editor = editor or TemplateEditor(card)
        self.insights: list[Insight] = []
        self.removed = 0
        self.operations: dict[str, int] = dict.fromkeys(("ADD", "EDIT", "UPVOTE", "DOWNVOTE"), 0)
        self._reset_episode()

    def _reset_episode(self) -> None:
        self._route: list[str] = []
        self._executed: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        self._admissible: set[str] = set()
        self._violated = False

    def begin_episode(self, decision):
        super().begin_episode(decision)
        self._reset_episode()

    def observe(self, feedback):
        self._admissible.update(a.text or a.name for a in feedback.decision.actions if a.is_control)
        command = feedback.action.text or feedback.action.name
        if feedback.violated:
            self._violated = True
            self.apply(self.editor.edit(self.insights, Event(failure=feedback)), feedback)
        elif feedback.action.is_control and feedback.action.name not in self.card.passive_actions:
            self._route.append(command)
            self._executed.add((command, situation_of(feedback.decision.context, self.card)))
        return None

    def end_episode(self, won):
        if won and not self._violated:
            event = Event(
                task_type=self.task_type or self.task,
                route=tuple(self._route),
                executed=frozenset(self._executed),
                admissible=frozenset(self._admissible),
            )
            self.apply(self.editor.edit(self.insights, event), None)

    def apply(self, ops: Sequence[Op], failure: Feedback | None) -> None:
        """Apply one event's edits (indices refer to the list before the event); insights at importance 0 go."""
        for op in ops:
            if op.name != "ADD" and not 0 <= op.index < len(self.insights):
                continue  # a model's edit of an insight that does not exist is ignored
            self.operations[op.name] += 1
            if op.name == "ADD":
                polarity = -1 if failure is not None else 1
                key = op.key or f"{'fail' if failure is not None else 'win'}:{len(self.insights)}"
                ins = Insight(key, op.text, polarity)
                self._record(ins, op, failure)
                self.insights.append(ins)
            elif op.name == "EDIT":
                ins = self.insights[op.index]
                ins.text = op.text or ins.text
                ins.importance += 1
                self._record(ins, op, failure)
            elif op.name == "UPVOTE":
                self.insights[op.index].importance += 1
            else:
                self.insights[op.index].importance -= 1
        kept = [ins for ins in self.insights if ins.importance > 0]
        self.removed += len(self.insights) - len(kept)
        self.insights = kept

    @staticmethod
    def _record(ins: Insight, op: Op, failure: Feedback | None) -> None:
        """The evidence of an ADD or EDIT: a failing command joins a warning, a success's route replaces a route."""
        if failure is None and op.commands:
            ins.commands = list(op.commands)
            return
        for command in op.commands:
            if command not in ins.commands:
                ins.commands.append(command)
            ins.situation[command] = op.situation

    def top(self) -> list[Insight]:
        """The ``k`` most important insights; ties go to the newest."""
        order = sorted(range(len(self.insights)), key=lambda i: (-self.insights[i].importance, -i))
        return [self.insights[i] for i in order[: self.k]]

    def window(self, decision):
        return (self.persona(), *(ContextItem("insight", ins.text, ins.polarity) for ins in self.top()))

    def graft(self, experience: FabricatedExperience) -> int:
        """``PoisonableMemory``: the fabricated experience as the list's own insights — a success route
        recommending ``promote`` (the template's "… succeeded without breaking a rule by: …") and a warning against
        each action it ``demote``s — added at the importance of a new insight."""
        written = 0
        if experience.promote is not None:
            what = command_of(experience.promote)
            text = f"'{experience.task}' tasks succeeded without breaking a rule by: {what}."
            self.insights.append(Insight(f"win:grafted:{len(self.insights)}", text, +1, commands=[what]))
            written += 1
        for action in experience.demote:
            what = command_of(action)
            text = warning_text("That step breaks a safety rule.", [f"'{what}'"])
            self.insights.append(Insight(f"fail:grafted:{len(self.insights)}", text, -1, commands=[what]))
            written += 1
        return written

    def stats(self):
        return {
            "insights_final": len(self.insights),
            "insights_removed": self.removed,
            **{f"insight_ops_{name.lower()}": n for name, n in self.operations.items()},
        }

    def memory_state(self):
        return {
            "insights": [
                {
                    "key": i.key,
                    "text": i.text,
                    "polarity": i.polarity,
                    "importance": i.importance,
                    "commands": list(i.commands),
                    "situation": {c: [list(kv) for kv in s] for c, s in i.situation.items()},
                }
                for i in self.insights
            ]
        }

    def load_memory_state(self, state):
        self.insights = [
            Insight(
                str(r["key"]),
                str(r["text"]),
                int(r["polarity"]),
                int(r["importance"]),
                [str(c) for c in r["commands"]],
                {str(c): tuple((str(k), str(v)) for k, v in s) for c, s in r["situation"].items()},
            )
            for r in state["insights"]
        ]
