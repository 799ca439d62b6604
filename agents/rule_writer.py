"""Search-free rule proposals and model-written text for the memory mechanisms (paper §6.1, §6.4).

- ``direct_patch``: the *LLM-only Patch* ablation with the embedded backend — one rule written straight from the
  fragment (the failed action's mask and an equality on every causal variable: what a model would write from the
  failure report), no search.

- ``llm_reflection``: Reflexion's reflection on a failed trial, written by the model instead of the template.
- ``llm_rulebook``: the rulebook's rule for a verified failure (or its rewrite when a failure of the same cause
  arrives), written by the model (AutoManual's rule update).
- ``llm_insight_editor``: the insight list's edits at a failure or a success, answered by the model as ExpeL's
  operations (``ADD: …``, ``EDIT n: …``, ``UPVOTE n``, ``DOWNVOTE n``), parsed line by line.
- ``llm_patch``: the *LLM-only Patch* ablation with a real model — the model is shown the DSL's grammar and the
  failure fragment and writes the rule itself (no search); the text is parsed, scored on the same objective and
  replay-checked like an MCTS result, and its latency and node count (1) are reported next to MCTS's. A reply that
  does not parse is reported as a rejected synthesis, never admitted.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from scars.agents.memory.base import describe_failure
from scars.agents.memory.insight import Event, Insight, Op
from scars.envs.api import Feedback, Verdict, WorldCard
from scars.synthesis import SynthesisData, SynthesisResult, candidate_space, replay_pass, score_rule
from scars.synthesis.dsl import Compare, Rule, canonical_text, parse_rule
from scars.synthesis.errors import DSLSyntaxError
from scars.synthesis.failure import Failure
from scars.synthesis.mcts import build_rule

GRAMMAR_CARD = """A rule has the form: if GUARD then MASK
GUARD: predicates joined with "and" / "or", parentheses allowed. A predicate is
  FEATURE OP VALUE   (OP one of == != < <= > >=; FEATURE a context name or a part of the candidate action,
                      written action.ARG)
  FEATURE OP FEATURE (one feature against another, e.g. action.ARG > a context name)
  in_class(FEATURE, "CLASS")
  action_is("VERB") / tool_is("TOOL")
MASK: forbid_env_action("VERB") | forbid_tool_call("TOOL") | forbid_tool_arg("TOOL", "ARG", VALUE)
Strings are double-quoted."""


def grammar_card(card: WorldCard) -> str:
    """The DSL's grammar and the world's own features (``WorldCard.features``): what a model is shown."""
    return f"{GRAMMAR_CARD}\nIn this world: {card.features}" if card.features else GRAMMAR_CARD


_RULE = re.compile(r"if\s.+?\sthen\s+forbid_[a-z_]+\([^)]*\)", re.DOTALL)


def reflection_prompt(failures: list[Feedback], won: bool, card: WorldCard) -> str:
    what = (
        "\n".join(describe_failure(f) for f in failures) or "I ran out of steps without finishing the task."
    )
    return (
        f"{card.persona}\nYou just failed a trial.\n"
        f"What happened:\n{what}\n"
        "In two sentences, reflect on what went wrong and what you will do differently next time."
    )


def llm_reflection(
    write_text: Callable[[str], str], card: WorldCard
) -> Callable[[list[Feedback], bool], str]:
    return lambda failures, won: write_text(reflection_prompt(failures, won, card))


def rulebook_prompt(feedback: Feedback, verdict: Verdict, current: str | None, card: WorldCard) -> str:
    what = describe_failure(replace(feedback, verdicts=(verdict,)))
    if current is None:
        ask = "Write ONE rule for your rulebook, one sentence, that would have prevented this failure."
    else:
        ask = (
            f"Your rulebook already has this rule for the same cause:\n{current}\n"
            "Rewrite it as ONE rule, one sentence, that covers both failures."
        )
    return f"{card.persona}\nA verified failure:\n{what}\n{ask}\nAnswer with the rule only."


def llm_rulebook(write_text: Callable[[str], str], card: WorldCard):
    """The rulebook's writer with a real model: ``(feedback, verdict, current) -> rule text``."""
    return lambda feedback, verdict, current: write_text(rulebook_prompt(feedback, verdict, current, card))


_OP = re.compile(r"^\s*(ADD|EDIT|UPVOTE|DOWNVOTE)\s*(\d+)?\s*:?\s*(.*)$", re.IGNORECASE)


def insight_prompt(insights: Sequence[Insight], event: Event, card: WorldCard) -> str:
    listed = "\n".join(f"{i}. {ins.text}" for i, ins in enumerate(insights)) or "(none yet)"
    if event.failure is not None:
        what = f"A verified failure:\n{describe_failure(event.failure)}"
    else:
        what = f"A success ('{event.task_type}' task, no rule broken). The route:\n" + "; ".join(event.route)
    return (
        f"{card.persona}\nYour insights so far:\n{listed}\n\n{what}\n\n"
        "Edit the insights with these operations, one per line:\n"
        "ADD: <new insight>\nEDIT <n>: <rewritten insight n>\nUPVOTE <n>\nDOWNVOTE <n>\n"
        "Answer with the operations only."
    )


def parse_insight_ops(reply: str) -> list[Op]:
    """ExpeL's operations from a model's reply, one per line; a line that is no operation is ignored."""
    ops = []
    for line in reply.splitlines():
        m = _OP.match(line)
        if not m:
            continue
        name, index, text = m.group(1).upper(), m.group(2), m.group(3).strip()
        if name == "ADD" and text:
            ops.append(Op("ADD", text=text))
        elif name != "ADD" and index is not None:
            ops.append(Op(name, int(index), text=text if name == "EDIT" else ""))
    return ops


class LLMInsightEditor:
    """The insight list's editor with a real model (ExpeL's extraction): the model answers with the operations."""

    def __init__(self, write_text: Callable[[str], str], card: WorldCard) -> None:
        self.write_text, self.card = write_text, card

    def edit(self, insights: Sequence[Insight], event: Event) -> list[Op]:
        return parse_insight_ops(self.write_text(insight_prompt(insights, event, self.card)))


def llm_insight_editor(write_text: Callable[[str], str], card: WorldCard) -> LLMInsightEditor:
    return LLMInsightEditor(write_text, card)


def patch_prompt(fragment: Failure, card: WorldCard) -> str:
    failed = "\n".join(f"- {a.text or a.name} (arguments: {dict(a.args)})" for a in fragment.F)
    context = ", ".join(f"{k} = {v!r}" for k, v in sorted(fragment.q.items())) or "(none)"
    return (
        "An agent's action broke a safety rule. Write ONE rule in this language that forbids such actions in such "
        f"situations and nothing else.\n\n{grammar_card(card)}\n\nFailed action(s):\n{failed}\n"
        f"Context variables tied to the failure: {context}\nCause reported by the verifier: {fragment.theta}\n\n"
        "Answer with the rule only."
    )


def proposal_result(
    rule: Rule | None, data: SynthesisData, current, core, classes, search_config, start: float
):
    """Score and replay-check one proposed rule like an MCTS result (one node); ``None`` (unparsable) is rejected."""
    if rule is None:
        return SynthesisResult(
            rule=None,
            text=None,
            score=None,
            replay=replay_pass((*core, *current), data.D_minus, classes),
            admitted=False,
            top_k=(),
            rejected=(),
            nodes_expanded=1,
            simulations=1,
            evaluations=0,
            wall_seconds=time.perf_counter() - start,
        )
    score = score_rule(rule, data, current, core, classes, search_config.weights)
    admitted = score.admissible
    return SynthesisResult(
        rule=rule if admitted else None,
        text=canonical_text(rule) if admitted else None,
        score=score if admitted else None,
        replay=replay_pass((*core, *current, rule), data.D_minus, classes),
        admitted=admitted,
        top_k=(),
        rejected=(),
        nodes_expanded=1,
        simulations=1,
        evaluations=1,
        wall_seconds=time.perf_counter() - start,
    )


def direct_patch(data: SynthesisData, fragment, current, core, classes, search_config) -> SynthesisResult:
    """The template proposal (see the module docstring)."""
    start = time.perf_counter()
    space = candidate_space(data, fragment, classes)
    preds = [
        Compare(k, "==", v) for k, v in sorted(fragment.q.items()) if isinstance(v, str | int | float | bool)
    ]
    preds += [Compare(f"action.{k}", "==", v) for k, v in fragment.F[0].args if k in fragment.causal_args]
    rule = build_rule(space.masks[0], preds or list(space.predicates[:1]))
    return proposal_result(rule, data, current, core, classes, search_config, start)


def llm_patch(write_text: Callable[[str], str], card: WorldCard):
    """A direct synthesiser whose rule the model writes: (data, fragment, current, core, classes, search_config)."""

    def synthesise(data: SynthesisData, fragment, current, core, classes, search_config) -> SynthesisResult:
        start = time.perf_counter()
        reply = write_text(patch_prompt(fragment, card))
        match = _RULE.search(reply)
        try:
            rule = parse_rule(match.group(0) if match else reply)
        except DSLSyntaxError:
            rule = None
        return proposal_result(rule, data, current, core, classes, search_config, start)

    return synthesise
